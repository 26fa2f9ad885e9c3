"""The official MM-Vet judge prompts, how they are filled, and how the judge's answer is parsed (all pure).

The prompt texts are data files in ``mmvet_core/prompts/``, byte-identical to the official evaluators'. Filling
and parsing follow the official scripts exactly (see ``tests/data/README.md`` and the official evaluator):

- v1: ``prompt + "\\n" + " | ".join([question, gt, prediction, ""])``; retry suffix
  ``"\\nPredict the correctness of the answer (digit): "``.
- v2: ``prompt + "| " + " | ".join([question, gt, prediction, ""])`` with newlines as ``<br>`` and image-name
  segments of the question as ``<image>``; retry suffix ``"\\n\\nPredict the correctness of the answer (digit): "``.
"""
from __future__ import annotations

import hashlib
import math
from functools import lru_cache
from pathlib import Path

PROMPTS_DIR = Path(__file__).resolve().parent / "prompts"
PROMPT_FILES = {"v1": "mmvet-v1-judge-prompt.txt", "v2": "mmvet-v2-judge-prompt.txt"}
RETRY_SUFFIX = {"v1": "\nPredict the correctness of the answer (digit): ",
                "v2": "\n\nPredict the correctness of the answer (digit): "}
#: Temperatures of the official retries after an unparsable answer (the first call is at 0.0).
RETRY_TEMPERATURES = (0.0, 0.5, 1.0, 1.5, 2.0)
#: The official v2 test for an image-name segment of a question (``q.endswith((".jpg", "jpeg", ".png"))``), kept
#: verbatim: any other test changes some prompts (".gif", "X.PNG", "a.png " stay text officially).
_IMAGE_SUFFIXES = (".jpg", "jpeg", ".png")


@lru_cache(maxsize=None)
def load_prompt(version: str) -> str:
    """The official few-shot judge prompt for ``"v1"`` or ``"v2"``, exactly as shipped."""
    if version not in PROMPT_FILES:
        raise ValueError(f"unknown MM-Vet version {version!r}; expected one of {sorted(PROMPT_FILES)}")
    return (PROMPTS_DIR / PROMPT_FILES[version]).read_bytes().decode("utf-8")


def prompt_version_id(version: str) -> str:
    """A short id of the prompt text (recorded with grades): ``mmvet-v1@<sha256[:12]>``."""
    digest = hashlib.sha256(load_prompt(version).encode("utf-8")).hexdigest()[:12]
    return f"mmvet-{version}@{digest}"


def _spaced_ground_truth(answer: str) -> str:
    return answer.replace("<AND>", " <AND> ").replace("<OR>", " <OR> ")


def _v2_question(question: str) -> str:
    segments = question.split("<IMG>")
    return "".join("<image>" if seg.endswith(_IMAGE_SUFFIXES) else seg for seg in segments)


def render_prompt(version: str, question: str, answer: str, prediction: str, *, retry: bool = False) -> str:
    """The user message the official evaluator sends for one sample (`retry` adds the official suffix).

    >>> render_prompt("v1", "1+1?", "2<OR>two", "2").endswith("\\n1+1? | 2 <OR> two | 2 | ")
    True
    """
    template = load_prompt(version)
    gt = _spaced_ground_truth(answer)
    if version == "v1":
        text = template + "\n" + " | ".join([question, gt, prediction, ""])
    else:
        fields = [_v2_question(question), gt, prediction]
        fields = [f.replace("\n", "<br>") for f in fields]
        text = template + "| " + " | ".join(fields + [""])
    return text + RETRY_SUFFIX[version] if retry else text


def parse_score(content: str | None) -> float | None:
    """The official parse: first space-separated token as a float, valid only within [0, 1]; else None.

    One named difference: Python's ``float`` accepts ``"nan"``, which the official script would keep as a score
    and which poisons every average; we treat it as unparsable.

    >>> parse_score("0.8"), parse_score("1.0 because"), parse_score(" 0.5"), parse_score("1.5"), parse_score("nan")
    (0.8, 1.0, None, None, None)
    """
    if content is None:
        return None
    token = content.split(" ")[0].strip()
    try:
        score = float(token)
    except ValueError:
        return None
    if math.isnan(score) or score > 1.0 or score < 0.0:
        return None
    return score
