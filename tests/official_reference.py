"""Test oracle: the official MM-Vet v1 evaluator's grading loop and aggregation, re-implemented independently.

This module does not import `mmvet_core`. It repeats what ``mm-vet_evaluator.py`` (yuweihao/MM-Vet, v1) does,
written from its observable behaviour, so that parity tests compare our engine with the official method rather
than with itself:

* a synchronous ``openai.OpenAI`` client; for run ``j`` in ``range(num_run)``, every sample in metadata order
  (optionally only the Bard-set ids) is graded one call at a time;
* the user message is ``prompt + "\\n" + " | ".join([question, spaced ground truth, prediction, ""])`` with
  ``max_tokens=3`` and temperature 0.0;
* the score is ``float(content.split(" ")[0].strip())`` when it lies in [0, 1]; otherwise the same message plus
  ``"\\nPredict the correctness of the answer (digit): "`` is sent at temperature ``t`` (``t`` starts at 0.0 and
  grows by 0.5 *after* each such call); once ``try_time`` (1 + retries) exceeds 5 the score is 0.0 and that last
  answer is never parsed;
* the recorded ``content`` is the parsed token on success and the raw last answer on fallback; ``model`` is the
  ``model`` field of the last response.

Known quirk kept on purpose: Python's ``float`` accepts ``"nan"``, and NaN passes the official range check, so
the official script records a NaN score (our engine treats it as unparsable; see `mmvet_core.judging.prompt`).

Aggregation (``export_result``): per run, Python-float sums per capability, per exact capability *set* and in
total, in grade order; each divided by its sample count and multiplied by 100 with numpy; the mean over runs is
rounded with ``round(np.float64, 1)`` (numpy rounding); ``std`` is ``np.std`` of the per-run totals, rounded;
``runs`` are the per-run totals, each rounded.
"""
from __future__ import annotations

import json
from pathlib import Path

import numpy as np

SHARED_DATA = Path(__file__).resolve().parent / "data"
ASSETS = Path(__file__).resolve().parents[1] / "assets"
RETRY_TEXT = "\nPredict the correctness of the answer (digit): "
MAX_TRY_TIME = 5


def _first_existing(*paths: Path) -> Path:
    for p in paths:
        if p.is_file():
            return p
    raise FileNotFoundError(f"none of {[str(p) for p in paths]}")


def load_official_prompt() -> str:
    """The official v1 judge prompt, read from the shared data copy (independent of the package's copy)."""
    path = _first_existing(SHARED_DATA / "prompts" / "mmvet-v1-judge-prompt.txt",
                           Path(__file__).resolve().parents[1] / "mmvet_core" / "prompts" / "mmvet-v1-judge-prompt.txt")
    return path.read_bytes().decode("utf-8")


def load_official_metadata() -> dict:
    """The official ``mm-vet.json`` as a dict in file order."""
    path = _first_existing(SHARED_DATA / "mmvet-v1" / "mm-vet.json", ASSETS / "mm-vet.json")
    return json.loads(path.read_text(encoding="utf-8"))


def load_bard_set() -> list[str]:
    path = _first_existing(SHARED_DATA / "mmvet-v1" / "bard_set.json", ASSETS / "bard_set.json")
    return json.loads(path.read_text(encoding="utf-8"))


def official_question(prompt: str, line: dict, prediction: str) -> str:
    truth = line["answer"].replace("<AND>", " <AND> ").replace("<OR>", " <OR> ")
    return prompt + "\n" + " | ".join([line["question"], truth, prediction, ""])


def sample_by_question(metadata: dict, predictions: dict[str, str], prompt: str | None = None) -> dict[str, str]:
    """Official base question (the judge prompt without the retry text) -> sample id, to tell judge calls apart."""
    prompt = load_official_prompt() if prompt is None else prompt
    return {official_question(prompt, metadata[sid], pred): sid for sid, pred in predictions.items()}


def _parse(content):
    """The official parse: returns (token, score) or raises; NaN is accepted, as in the official script."""
    token = content.split(" ")[0].strip()      # AttributeError for a None content: also a failed parse
    score = float(token)
    if score > 1.0 or score < 0.0:
        raise ValueError(f"out of range: {score}")
    return token, score


def grade_one(client, judge_model: str, prompt: str, line: dict, prediction: str) -> tuple[str, object, float]:
    """One sample, one run, the official way. Returns (response model, recorded content, score)."""
    def ask(text: str, temperature: float):
        return client.chat.completions.create(model=judge_model, max_tokens=3, temperature=temperature,
                                              messages=[{"role": "user", "content": text}])

    question = official_question(prompt, line, prediction)
    temperature = 0.0
    response = ask(question, temperature)
    content = response.choices[0].message.content
    try_time = 1
    while True:
        try:
            content, score = _parse(content)
            return response.model, content, score
        except (AttributeError, ValueError):
            response = ask(question + RETRY_TEXT, temperature)
            content = response.choices[0].message.content
            try_time += 1
            temperature += 0.5
            if try_time > MAX_TRY_TIME:
                return response.model, content, 0.0      # the last answer is never parsed


def grade_official(client, judge_model: str, metadata: dict, results: dict, num_run: int,
                   sub_set: list[str] | None = None, prompt: str | None = None) -> dict:
    """The official grading loop: ``{"v1_0": {"model": [...], "content": [...], "score": [...]}}``."""
    prompt = load_official_prompt() if prompt is None else prompt
    wanted = None if sub_set is None else set(sub_set)
    grades: dict[str, dict[str, list]] = {}
    for j in range(num_run):
        for sid, line in metadata.items():
            if wanted is not None and sid not in wanted:
                continue
            if sid in grades and len(grades[sid]["score"]) >= j + 1:
                continue
            model, content, score = grade_one(client, judge_model, prompt, line, results[sid])
            record = grades.setdefault(sid, {"model": [], "content": [], "score": []})
            record["model"].append(model)
            record["content"].append(content)
            record["score"].append(score)
    return grades


def aggregate_official(metadata: dict, grades: dict, num_run: int, sub_set: list[str] | None = None) -> dict:
    """The official aggregates.

    Returns ``{"cap": {cap: mean}, "cap_int": {frozenset(caps): mean}, "total": mean, "std": std,
    "runs": [per-run totals rounded]}``; means are rounded to one decimal like the official CSVs.
    """
    wanted = None if sub_set is None else set(sub_set)
    cap_count: dict[str, int] = {}
    set_count: dict[frozenset, int] = {}
    n = 0
    for sid, line in metadata.items():
        if wanted is not None and sid not in wanted:
            continue
        caps = frozenset(line["capability"])
        for c in caps:
            cap_count[c] = cap_count.get(c, 0) + 1
        set_count[caps] = set_count.get(caps, 0) + 1
        n += 1

    cap_sum = {c: [0.0] * num_run for c in cap_count}
    set_sum = {s: [0.0] * num_run for s in set_count}
    total_sum = [0.0] * num_run
    for sid, record in grades.items():           # grade order (metadata order when graded from scratch)
        if wanted is not None and sid not in wanted:
            continue
        caps = frozenset(metadata[sid]["capability"])
        for i in range(num_run):
            score = record["score"][i]
            for c in caps:
                cap_sum[c][i] += score
            set_sum[caps][i] += score
            total_sum[i] += score

    totals = np.array(total_sum) / n * 100
    return {
        "cap": {c: round(np.mean(np.array(v) / cap_count[c] * 100), 1) for c, v in cap_sum.items()},
        "cap_int": {s: round(np.mean(np.array(v) / set_count[s] * 100), 1) for s, v in set_sum.items()},
        "total": round(totals.mean(), 1),
        "std": round(totals.std(), 1),
        "runs": [float(x) for x in np.round(totals, 1)],
    }
