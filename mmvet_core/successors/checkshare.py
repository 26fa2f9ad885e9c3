"""Checks that travel between hosts (issue 30): export a judge check as a dataset folder, import one and verify it
before trusting it.

**Export** (`export_check`) writes a folder ``datasets.load_dataset`` reads (``check.jsonl`` plus a dataset card,
like the leaderboard's export): one row per reference prompt (reference model, sample) with the prediction that
was graded, the filled prompt's sha256, every judge answer and grade of the check, and on every row the facts of
the check: the judge model, its endpoint's *kind* (never a key, never a host name of a private endpoint), the
prompt's id and hash, the check's date, the tool's version and the exporting host's name.

**Import** (`import_check`) never takes the export's word for anything but the judge's grades: each row must be a
bundled reference set's prediction of that sample (the same text, so the same prompt), the prompt must be the one
this tool grades with, and the check's assessment is recomputed here from the grades (`judgecheck.assess_judge`).
Then it is **verified**: a seeded random share of the check's distinct prompts (`VERIFY_SHARE`, at least
`VERIFY_MIN` of them) is graded again by the importer's own judge at its own endpoint, and the check is accepted
only if those grades agree with the exported ones as closely as a judge agrees with itself (`verify_rule`). The
answers paid for during verification are stored like every answer. An import without a key is stored
*unverified*, and every estimate resting on it says so (`judgecheck.origin_text`).

The verification rule, from measured run-to-run agreement (docs/estimates.md §7): between two runs of the official
evaluator on the same answers, GPT-4-0613's grades differ by Δ̄ = 0.0064 (llava-v1.5-7b, 3 runs) and 0.0114
(llava-v1.5-13b), per-sample |difference| standard deviation 0.066, and 2.7 % of the samples differ by more than
0.1 (the 13b file, the less consistent of the two). An import is accepted when, on its n re-graded prompts, both
hold: the mean |difference| is at most 0.0114 + 3 × 0.066 / √n, and the share of prompts more than 0.1 apart
is within the one-sided 99 % binomial bound of 2.7 %. A judge that agrees with its own export as a judge agrees
with itself passes; a tenth of the grades changed (Δ̄ about 0.05-0.09) is refused.
"""
from __future__ import annotations

import hashlib
import json
import math
import time
from dataclasses import dataclass, field
from pathlib import Path
from urllib.parse import urlparse

import numpy as np

from .. import __version__
from ..inputs.benchmark import load_bundled_v1
from ..judging.judge import JudgeSettings
from .judgecheck import (JudgeCheckResult, assess_judge, check_prompt_id, check_settings, current_check,
                         load_references)

EXPORT_FILE = "check.jsonl"
FORMAT = "mmvet-judge-check/1"
#: Verification: the share of the check's distinct prompts re-graded by the importer, and the least number.
VERIFY_SHARE = 0.05
VERIFY_MIN = 60
#: The pick's seed: drawn anew for every import unless given (an exporter who knew which prompts are re-graded
#: could change the others), and printed.
VERIFY_SEED = None
#: GPT-4-0613's run-to-run agreement, measured on the official multi-run grade files (module docstring).
SELF_DELTA_BAR = 0.0114
SELF_DELTA_SD = 0.066
SELF_FAR_SHARE = 0.027
FAR = 0.1
#: The export's rows and fields are bounded (a hostile folder cannot make the import read without end).
MAX_ROWS = 20_000
MAX_TEXT = 100_000

CARD = """---
license: cc-by-nc-4.0
configs:
- config_name: default
  data_files: {file}
---

# MM-Vet judge check: {judge}

A judge check exported by MM-Vet Grader {version} ({format}): the judge `{judge}` ({endpoint_kind}) graded
{n_models} reference models' MM-Vet v1 answers ({n_rows} prompts) with the official prompt ({prompt}) on {date}
at {host}. Each row holds the prediction graded, the filled prompt's sha256, the judge's answers and grades.

Import it with `python -m mmvet_core judge-check --judge-model JUDGE --import FOLDER`: the importer verifies it by
grading a share of the prompts again with its own judge before using it for official-equivalent estimates.
MM-Vet (Yu et al., ICML 2024) content is licensed CC BY-NC 4.0.
"""


class CheckShareError(ValueError):
    """An export or import that cannot be done, with the reason for the user."""


def endpoint_kind(judge: dict) -> str:
    """What kind of endpoint a check was made at, without its address: ``OpenAI API``, ``Azure OpenAI``,
    ``OpenAI-compatible endpoint (openrouter.ai)`` for a public host, ``OpenAI-compatible endpoint (private)``
    for a private or local one (its name is never exported).

    >>> endpoint_kind({"provider": "openai", "base_url": None})
    'OpenAI API'
    >>> endpoint_kind({"provider": "openai", "base_url": "http://127.0.0.1:8000/v1"})
    'OpenAI-compatible endpoint (private)'
    """
    if judge.get("provider") == "azure":
        return "Azure OpenAI"
    url = (judge.get("base_url") or "").strip()
    if not url:
        return "OpenAI API"
    host = (urlparse(url).hostname or "").lower()
    if host == "api.openai.com":
        return "OpenAI API"
    if _public_host(host):
        return f"OpenAI-compatible endpoint ({host})"
    return "OpenAI-compatible endpoint (private)"


def _public_host(host: str) -> bool:
    """A host name that is not an address, not local and not internal (a dotted name with a public suffix)."""
    import ipaddress

    if not host or "." not in host:
        return False
    try:
        ipaddress.ip_address(host)
        return False                         # an address is never exported, public or not
    except ValueError:
        pass
    return not host.endswith((".local", ".internal", ".lan", ".localhost", ".home", ".corp", ".intranet"))


def prompt_sha(sample, prediction: str) -> str:
    """The sha256 of the official v1 prompt filled with `prediction` for `sample` (what the judge was asked)."""
    from ..judging.prompt import render_prompt

    return hashlib.sha256(render_prompt("v1", sample.question, sample.answer, prediction).encode("utf-8")).hexdigest()


def _prompt_hash() -> str:
    return check_prompt_id().split(":", 1)[1]


def export_check(store, settings: JudgeSettings, out_dir: str | Path, *, host_name: str = "") -> tuple[Path, int]:
    """Write the current check of the judge `settings` describe to `out_dir` (`EXPORT_FILE` and ``README.md``).
    Returns (the JSONL path, rows written). Raises `CheckShareError` when there is no complete check."""
    check = current_check(store, settings)
    if check is None:
        raise CheckShareError(f"no judge check of {settings.model} at this endpoint is stored here: run "
                              f"`python -m mmvet_core judge-check --judge-model {settings.model}` first")
    if check.n_graded < check.n_expected:
        raise CheckShareError(f"the check of {settings.model} is incomplete ({check.n_graded} of "
                              f"{check.n_expected} reference grades): finish it before exporting it")
    if check.origin:
        raise CheckShareError(f"the check of {settings.model} here was imported ({check.origin.get('host')}): "
                              "export the original from its host")
    bench = load_bundled_v1()
    refs = {r.model: r for r in load_references(which="all")}
    answers = _check_answers(store, check)
    date = time.strftime("%Y-%m-%d", time.gmtime(check.created_at or time.time()))
    facts = {"format": FORMAT, "judge": settings.model, "endpoint_kind": endpoint_kind(check.judge),
             "max_tokens": int(check.judge.get("max_tokens") or 3), "prompt": check_prompt_id(),
             "prompt_sha256": _prompt_hash(), "check_id": check.check_id, "date": date,
             "tool_version": __version__, "host": host_name or "an unnamed host"}
    lines = []
    for model, entry in check.pairs.items():
        ref = refs.get(model)
        if ref is None:
            continue
        for sid, grade in zip(entry["ids"], entry["candidate"]):
            pred = ref.predictions.get(sid, "")
            contents, scores = answers.get((model, sid), ([], []))
            if not scores and grade is not None:
                scores = [grade]
            lines.append(json.dumps({**facts, "reference": model, "sample_id": sid, "prediction": pred,
                                     "prompt_sha": prompt_sha(bench.samples[sid], pred),
                                     "judge_answers": contents, "grades": scores}, ensure_ascii=False))
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    path = out / EXPORT_FILE
    path.write_text("".join(line + "\n" for line in lines), encoding="utf-8")
    (out / "README.md").write_text(CARD.format(file=EXPORT_FILE, n_models=len(check.pairs), n_rows=len(lines),
                                               version=__version__, **facts), encoding="utf-8")
    return path, len(lines)


def _check_answers(store, check: JudgeCheckResult) -> dict[tuple[str, str], tuple[list, list]]:
    """(reference, sample) -> (the judge's answers, its grades) from the check's runs, where they are stored."""
    out: dict[tuple[str, str], tuple[list, list]] = {}
    for model, run_id in (check.run_ids or {}).items():
        try:
            rows = store.grades(run_id, evidence_for=None)
        except Exception:                   # a run removed since: the grades in the check's pairs stand
            continue
        per: dict[str, dict[int, tuple]] = {}
        for g in rows:
            if g.score is not None:
                per.setdefault(g.sample_id, {})[g.run_index] = (g.content, g.score)
        for sid, runs in per.items():
            ordered = [runs[k] for k in sorted(runs)]
            out[(model, sid)] = ([c for c, _ in ordered], [s for _, s in ordered])
    return out


# ---- import ----------------------------------------------------------------------------------------------------
@dataclass
class Verification:
    """The importer's re-grades of a sample of the check's prompts against the exported grades."""

    prompts: int                        # distinct prompts re-graded
    calls: int                          # judge calls made for it
    delta_bar: float                    # mean |importer − exported|
    far: int                            # prompts more than `FAR` apart
    max_delta_bar: float                # the rule's bounds for `prompts`
    max_far: int
    accepted: bool
    differing: list[str] = field(default_factory=list)     # "model/v1_12: 1.0 here, 0.0 exported", the first few

    def text(self) -> str:
        verdict = "agree as closely as a judge agrees with itself" if self.accepted else \
            "do NOT agree as closely as a judge agrees with itself"
        return (f"verification on {self.prompts} prompts ({self.calls} judge calls): the grades here and the "
                f"exported ones {verdict} (mean |difference| {self.delta_bar:.3f}, at most {self.max_delta_bar:.3f}; "
                f"{self.far} prompts more than {FAR:g} apart, at most {self.max_far})")


def verify_rule(n: int) -> tuple[float, int]:
    """(largest mean |difference|, largest count of prompts more than `FAR` apart) an import of `n` re-graded
    prompts may show (module docstring).

    >>> verify_rule(62)
    (0.0365, 5)
    """
    from math import comb

    max_dbar = round(SELF_DELTA_BAR + 3 * SELF_DELTA_SD / math.sqrt(max(n, 1)), 4)
    # the one-sided 99 % binomial bound: the least k with P(X > k) <= 1 %
    cdf, k = 0.0, 0
    while k <= n:
        cdf += comb(n, k) * SELF_FAR_SHARE ** k * (1 - SELF_FAR_SHARE) ** (n - k)
        if 1 - cdf <= 0.01:
            break
        k += 1
    return max_dbar, k


def read_export(source: str | Path) -> list[dict]:
    """The rows of an exported check: a folder holding `EXPORT_FILE`, or a Hugging Face dataset name (read with
    ``datasets.load_dataset`` where the hub is reachable). Raises `CheckShareError` naming what is wrong (no such
    folder, the hub unreachable, a row that is not JSON, too many rows)."""
    path = Path(str(source))
    if path.is_dir():
        file = path / EXPORT_FILE
        if not file.is_file():
            raise CheckShareError(f"{path} holds no {EXPORT_FILE} (write one with `judge-check --export`)")
        if file.stat().st_size > MAX_ROWS * (MAX_TEXT // 10):
            raise CheckShareError(f"{file.name} is too large for a judge check")
        rows = []
        for n, line in enumerate(file.read_text(encoding="utf-8").splitlines(), 1):
            if not line.strip():
                continue
            if len(rows) >= MAX_ROWS:
                raise CheckShareError(f"{file.name}: more than {MAX_ROWS} rows: not a judge check")
            try:
                row = json.loads(line)
            except (json.JSONDecodeError, RecursionError):
                raise CheckShareError(f"{file.name} line {n}: not a JSON object") from None
            if not isinstance(row, dict):
                raise CheckShareError(f"{file.name} line {n}: not a JSON object")
            rows.append(row)
        return rows
    if path.exists() or str(source).startswith((".", "/", "~")) or str(source).count("/") != 1:
        raise CheckShareError(f"no exported check at {source} (a folder written by `judge-check --export`, or a "
                              "Hugging Face dataset name owner/name)")
    return _read_hub(str(source))


def _read_hub(name: str) -> list[dict]:
    try:
        import datasets
    except ImportError:
        raise CheckShareError("reading a check from the Hugging Face hub needs the `datasets` package") from None
    try:
        data = datasets.load_dataset(name, split="train")
    except Exception as e:               # offline, no such dataset, no access: said, never a traceback
        raise CheckShareError(f"cannot read the dataset {name} from the Hugging Face hub "
                              f"({type(e).__name__}: {str(e)[:200]}); download its folder and import that "
                              "instead") from None
    if len(data) > MAX_ROWS:
        raise CheckShareError(f"{name}: more than {MAX_ROWS} rows: not a judge check")
    return [dict(r) for r in data]


def parse_rows(rows: list[dict], judge_model: str) -> tuple[dict, dict[str, dict[str, list[float]]], dict]:
    """Check every row of an export and return (its facts, reference -> sample id -> grades, (reference, sample)
    -> the exported per-sample grade). Raises `CheckShareError` naming the first bad row and field: another format,
    judge or prompt than this tool's, a reference or sample this tool does not ship, a prediction that is not the
    bundled reference's (so not the prompt the official grades belong to), grades outside [0, 1]."""
    if not rows:
        raise CheckShareError("the export holds no rows")
    bench = load_bundled_v1()
    refs = {r.model: r for r in load_references(which="all")}
    facts = {k: rows[0].get(k) for k in ("format", "judge", "endpoint_kind", "max_tokens", "prompt",
                                         "prompt_sha256", "check_id", "date", "tool_version", "host")}
    if facts["format"] != FORMAT:
        raise CheckShareError(f"row 1, field format: {str(facts['format'])[:40]!r} is not {FORMAT}")
    if facts["judge"] != judge_model:
        raise CheckShareError(f"the export is a check of {str(facts['judge'])[:80]!r}, not of {judge_model!r}: "
                              "import it with --judge-model set to its judge")
    if facts["prompt_sha256"] != _prompt_hash() or facts["prompt"] != check_prompt_id():
        raise CheckShareError(f"the export's prompt ({str(facts['prompt'])[:80]}) is not the prompt this tool's "
                              f"checks grade with ({check_prompt_id()})")
    grades: dict[str, dict[str, list[float]]] = {}
    exported: dict[tuple[str, str], float] = {}
    for n, row in enumerate(rows, 1):
        for key in ("format", "judge", "prompt", "check_id"):
            if row.get(key) != facts[key]:
                raise CheckShareError(f"row {n}, field {key}: differs from row 1 (one check per export)")
        model, sid = row.get("reference"), row.get("sample_id")
        if model not in refs:
            raise CheckShareError(f"row {n}, field reference: {str(model)[:60]!r} is not a reference set of this "
                                  "tool")
        if sid not in bench.samples:
            raise CheckShareError(f"row {n}, field sample_id: {str(sid)[:40]!r} is not an MM-Vet v1 sample")
        pred = refs[model].predictions.get(sid)
        if row.get("prediction") != pred:
            raise CheckShareError(f"row {n}, field prediction: not {model}'s answer to {sid} as this tool ships "
                                  "it (the official grades belong to that answer)")
        if row.get("prompt_sha") != prompt_sha(bench.samples[sid], pred):
            raise CheckShareError(f"row {n}, field prompt_sha: not the sha256 of the official prompt filled with "
                                  "that answer")
        scores = row.get("grades")
        if (not isinstance(scores, list) or not 1 <= len(scores) <= 10
                or any(type(s) not in (int, float) or not 0.0 <= float(s) <= 1.0 for s in scores)):
            raise CheckShareError(f"row {n}, field grades: must be 1 to 10 grades in [0, 1]")
        answers = row.get("judge_answers")
        if not isinstance(answers, list) or any(a is not None and (not isinstance(a, str) or len(a) > MAX_TEXT)
                                                 for a in answers):
            raise CheckShareError(f"row {n}, field judge_answers: must be a list of texts")
        if sid in grades.get(model, {}):
            raise CheckShareError(f"row {n}: {model} / {sid} is on an earlier row already")
        grades.setdefault(model, {})[sid] = [float(s) for s in scores]
        exported[(model, sid)] = float(np.mean(scores))
    return facts, grades, exported


def sample_prompts(exported: dict[tuple[str, str], float], *, share: float = VERIFY_SHARE, least: int = VERIFY_MIN,
                   seed: int | None = VERIFY_SEED) -> list[tuple[str, str]]:
    """A seeded random share of the export's distinct prompts (at least `least`, at most all): one
    (reference, sample) per distinct prompt (references that answered a sample word for word alike share one)."""
    refs = {r.model: r for r in load_references(which="all")}
    distinct: dict[tuple[str, str], tuple[str, str]] = {}
    for model, sid in sorted(exported):
        distinct.setdefault((sid, refs[model].predictions.get(sid, "")), (model, sid))
    keys = sorted(distinct.values())
    n = min(len(keys), max(int(least), int(math.ceil(share * len(keys) - 1e-9))))
    rng = np.random.default_rng(seed)
    picked = rng.choice(len(keys), size=n, replace=False)
    return [keys[i] for i in sorted(picked)]


async def regrade(store, settings: JudgeSettings, judge, picked: list[tuple[str, str]], *,
                  concurrency: int = 16, budget=None) -> tuple[dict[tuple[str, str], float], int, str]:
    """Grade the picked (reference, sample) prompts with the importer's judge (through the store: every answer
    is kept, and an answer already stored costs nothing). Returns (grades, judge calls made, why grading stopped
    early or "")."""
    from ..judging.grading import grade_run
    from ..runs.lifecycle import create_run, load_run_view

    bench = load_bundled_v1()
    refs = {r.model: r for r in load_references(which="all")}
    by_model: dict[str, list[str]] = {}
    for model, sid in picked:
        by_model.setdefault(model, []).append(sid)
    out, calls, message = {}, 0, ""
    try:
        for model, ids in by_model.items():
            sub = bench.subset(ids, "check-import")
            run_id = create_run(store, benchmark=sub, spec="mmvet-v1", n_runs=1, settings=settings,
                                predictions={sid: refs[model].predictions[sid] for sid in ids},
                                model_name=f"judge-check import {model}", results_format="reference", reuse=True)
            outcome = await grade_run(store, run_id, sub, judge, concurrency=concurrency, budget=budget)
            calls += outcome.stats.calls
            view = load_run_view(store, run_id, evidence_for=None)
            for sid, scores in view.effective_scores().items():
                if scores and scores[0] is not None:
                    out[(model, sid)] = float(scores[0])
            if outcome.status in ("failed", "stopped"):
                message = outcome.message
                break
    finally:
        await judge.aclose()
    return out, calls, message


def verify(exported: dict[tuple[str, str], float], here: dict[tuple[str, str], float], picked, calls: int
           ) -> Verification:
    """Apply `verify_rule` to the importer's grades `here` of the `picked` prompts (a prompt it could not grade
    counts as not verified: the import is refused)."""
    diffs, differing = [], []
    for key in picked:
        if key not in here:
            continue
        d = abs(here[key] - exported[key])
        diffs.append(d)
        if d > FAR + 1e-9 and len(differing) < 5:
            differing.append(f"{key[0]}/{key[1]}: {here[key]:g} here, {exported[key]:g} exported")
    n = len(picked)
    max_dbar, max_far = verify_rule(n)
    dbar = float(np.mean(diffs)) if diffs else math.inf
    far = sum(d > FAR + 1e-9 for d in diffs)
    ok = len(diffs) == n and dbar <= max_dbar and far <= max_far
    return Verification(n, calls, dbar, far, max_dbar, max_far, ok, differing)


@dataclass
class ImportOutcome:
    result: JudgeCheckResult
    verification: Verification | None       # None: imported without verification (no key)
    facts: dict


def assess_export(facts: dict, grades: dict, settings: JudgeSettings, *, resamples: int, seed: int,
                  origin: dict) -> JudgeCheckResult:
    """The check recomputed here from the exported grades (never the export's own numbers), with its origin."""
    bench = load_bundled_v1()
    refs = [r for r in load_references(which="all") if r.model in grades]
    result = assess_judge(bench, refs, grades, check_settings(settings).to_dict(), resamples=resamples, seed=seed)
    result.origin = origin
    return result


def origin_of(facts: dict, verification: Verification | None) -> dict:
    """The record an imported check keeps of where it comes from (`judgecheck.origin_text` shows it)."""
    o = {"host": str(facts.get("host") or "an unnamed host")[:100], "check_id": str(facts.get("check_id"))[:40],
         "date": str(facts.get("date"))[:10], "endpoint_kind": str(facts.get("endpoint_kind"))[:100],
         "tool_version": str(facts.get("tool_version"))[:40], "imported_at": time.time(),
         "verified": bool(verification and verification.accepted)}
    if verification is not None:
        o.update(verified_prompts=verification.prompts, verify_delta_bar=round(verification.delta_bar, 4),
                 verify_far=verification.far)
    return o


async def import_check(store, settings: JudgeSettings, api_key: str | None, source: str | Path, *,
                       verify_prompts: bool = True, share: float = VERIFY_SHARE, least: int = VERIFY_MIN,
                       seed: int | None = VERIFY_SEED, resamples: int = 10_000, judge=None,
                       concurrency: int = 16, budget=None, scope=None) -> ImportOutcome:
    """Import an exported check (`read_export`) as the check of the judge `settings` describe at this endpoint:
    rows checked (`parse_rows`), then, with `verify_prompts`, a seeded share of its prompts graded again here
    (`regrade`) and the rule applied (`verify`); the check is recomputed from the grades and stored with its
    origin. Raises `CheckShareError` when the export is malformed or the verification refuses it (nothing is
    stored then but the answers the verification paid for). `seed`: the pick's (None: drawn now, never
    predictable by the exporter). `scope` (`judgecheck.CheckScope`): who imports it: the host (its CLI: the
    server's check of the judge, default) or a visitor (the page: a check that visitor alone sees, which makes no
    estimate for anybody, as any visitor's check)."""
    import secrets

    from ..judging.judge import make_judge
    from .judgecheck import HOST_SCOPE, check_fingerprint

    scope = HOST_SCOPE if scope is None else scope
    seed = secrets.randbelow(2 ** 31) if seed is None else seed

    settings = check_settings(settings)
    facts, grades, exported = parse_rows(read_export(source), settings.model)
    verification = None
    if verify_prompts:
        picked = sample_prompts(exported, share=share, least=least, seed=seed)
        judge = judge if judge is not None else make_judge(settings, api_key)
        here, calls, message = await regrade(store, settings, judge, picked, concurrency=concurrency, budget=budget)
        verification = verify(exported, here, picked, calls)
        if message and not verification.accepted:
            raise CheckShareError(f"the verification stopped: {message}; nothing was imported (the answers it "
                                  "got are stored: a retry does not pay for them again)")
        if not verification.accepted:
            shown = "; ".join(verification.differing)
            raise CheckShareError(f"refused: {verification.text()}" + (f" — for example {shown}" if shown else "")
                                  + ". The export is not this judge's check as it grades here (its grades were "
                                    "changed, or it is another judge or endpoint behind the same name); nothing "
                                    "was imported.")
    result = assess_export(facts, grades, settings, resamples=resamples, seed=0,
                           origin=origin_of(facts, verification))
    result.calls = verification.calls if verification else 0
    result.check_id = store.put_judge_check(check_fingerprint(settings, scope), settings.to_dict(), result.to_dict(),
                                            prompt=check_prompt_id(), refs=result.references, scope=scope.kind,
                                            owner_hash=scope.owner_hash)
    return ImportOutcome(result, verification, facts)
