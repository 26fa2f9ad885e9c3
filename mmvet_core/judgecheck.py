"""Check a judge before trusting it: grade reference predictions that have real official GPT-4-0613 grades.

The bundled references (``assets/reference/``) are LLaVA-1.5 13b and 7b's MM-Vet outputs with four real runs of
the official evaluator each (a 1-run and a 3-run grade file). A candidate judge grades both (436 judge calls at one
run, plus the official re-asks when it answers something unparsable) with the **official prompt**, and
`assess_judge` reports, per capability:

* Δ̄ of the candidate to the official grades (the per-sample mean of the four runs), pooled over both models;
* beside it GPT-4-0613's own run-to-run Δ̄ (the least one can expect) and the keyword baseline's Δ̄ (what a judge
  that reads nothing achieves);
* how far the candidate moves the total and each capability score (candidate − official, points, mean of the two
  models), and a plain verdict.

`assess_judge` is pure; `run_judge_check` grades through the store (answers are cached: a second check of the same
judge costs nothing) and is the only part that calls the judge.
"""
from __future__ import annotations

import json
import math
import time
from dataclasses import asdict, dataclass, field, replace
from itertools import combinations
from pathlib import Path
from typing import Callable

import numpy as np

from .aggregate import aggregate_scores
from .benchmark import ASSETS_DIR, Benchmark, load_bundled_v1
from .export import load_official_grades
from .judge import JudgeSettings, keyword_score

REFERENCE_DIR = ASSETS_DIR / "reference"
#: model -> (predictions file, official grade files whose runs are pooled)
REFERENCES: dict[str, tuple[str, tuple[str, ...]]] = {
    "llava-v1.5-13b": ("llava-v1.5-13b.json", ("llava-v1.5-13b_gpt-4-grade-1runs.json",
                                               "llava-v1.5-13b_gpt-4-grade-3runs.json")),
    "llava-v1.5-7b": ("llava-v1.5-7b.json", ("llava-v1.5-7b_gpt-4-grade-1runs.json",
                                             "llava-v1.5-7b_gpt-4-grade-3runs.json")),
}
#: A judge is "close" when its Δ̄ to the official grades is at most this (the paper: GPT-4 vs humans 0.042, every
#: other LLM ≥ 0.137) or twice GPT-4's own run-to-run Δ̄, whichever is larger ...
CLOSE_DELTA = 0.05
#: ... and it moves the total by less than this many points and no capability by more than `CLOSE_CAP_SHIFT`.
CLOSE_TOTAL_SHIFT = 2.0
CLOSE_CAP_SHIFT = 4.0


@dataclass
class Reference:
    """One reference model: its predictions and the official per-run grades (sample id -> scores)."""

    model: str
    predictions: dict[str, str]
    official: dict[str, list[float | None]]


def load_references(directory: Path = REFERENCE_DIR) -> list[Reference]:
    """The bundled reference models (see ``assets/README.md``)."""
    refs = []
    for model, (preds_file, grade_files) in REFERENCES.items():
        predictions = json.loads((directory / preds_file).read_text(encoding="utf-8"))
        runs: dict[str, list[float | None]] = {}
        for name in grade_files:
            for sid, scores in load_official_grades(directory / name).scores.items():
                runs.setdefault(sid, []).extend(scores)
        refs.append(Reference(model, predictions, runs))
    return refs


def call_count(benchmark: Benchmark | None = None, refs: list[Reference] | None = None) -> int:
    """Judge calls of one check at one run when every answer parses: one per sample per reference model (436)."""
    benchmark = benchmark or load_bundled_v1()
    refs = refs if refs is not None else load_references()
    return len(benchmark) * len(refs)


def distinct_prompts(benchmark: Benchmark | None = None, refs: list[Reference] | None = None) -> int:
    """How many of those calls have distinct prompts: the two models answer 27 questions word for word alike, and
    an identical prompt is asked once (its answer is reused from the store), so a first check makes 409 calls."""
    benchmark = benchmark or load_bundled_v1()
    refs = refs if refs is not None else load_references()
    return len({(sid, ref.predictions.get(sid, "")) for ref in refs for sid in benchmark.ids})


@dataclass
class CheckColumn:
    """One column (total or a capability) of the check, pooled over the reference models."""

    name: str
    n: int                          # graded (sample, model) pairs
    delta_bar: float                # candidate vs official
    gpt4_self: float                # official runs against each other (mean over pairs of runs)
    baseline: float                 # keyword baseline vs official
    shift: float                    # candidate − official score, points, mean over the models
    shifts: dict[str, float] = field(default_factory=dict)     # per model


@dataclass
class JudgeCheckResult:
    judge: dict                     # JudgeSettings.to_dict() (never a key)
    models: list[str]
    n_graded: int
    n_expected: int
    columns: list[CheckColumn]
    scores: dict[str, dict[str, dict[str, float | None]]]   # model -> {"candidate"/"official": {column: score}}
    verdict: str
    close: bool
    per_model: dict[str, dict[str, float]] = field(default_factory=dict)   # model -> total's Δ̄s and shift
    run_ids: dict[str, str] = field(default_factory=dict)
    calls: int = 0
    cached: int = 0
    created_at: float = 0.0
    message: str = ""               # why grading stopped early (a rejected key, ...), when it did

    @property
    def total(self) -> CheckColumn:
        return self.columns[0]

    def to_dict(self) -> dict:
        return asdict(self)

    @classmethod
    def from_dict(cls, data: dict) -> "JudgeCheckResult":
        data = dict(data)
        data["columns"] = [CheckColumn(**c) for c in data["columns"]]
        return cls(**data)


def _mean_runs(runs: list[float | None]) -> float | None:
    graded = [float(v) for v in runs if v is not None]
    return sum(graded) / len(graded) if graded else None


def _self_delta(runs: list[float | None]) -> float | None:
    graded = [float(v) for v in runs if v is not None]
    pairs = list(combinations(graded, 2))
    return sum(abs(a - b) for a, b in pairs) / len(pairs) if pairs else None


def assess_judge(benchmark: Benchmark, refs: list[Reference], candidate: dict[str, dict[str, list[float | None]]],
                 judge: dict) -> JudgeCheckResult:
    """Compare a candidate judge's grades (model -> sample id -> per-run scores) with the official ones.

    Only samples the candidate graded count (a stopped check is assessed on what it graded and says so).
    Raises `ValueError` when the candidate graded nothing."""
    caps = benchmark.capabilities
    names = ["total", *caps]
    cand_v, off_v, self_v, base_v, member_rows = [], [], [], [], []
    scores: dict[str, dict[str, dict[str, float | None]]] = {}
    shifts: dict[str, dict[str, float]] = {}
    per_model: dict[str, dict[str, float]] = {}
    for ref in refs:
        graded = {sid: _mean_runs(candidate.get(ref.model, {}).get(sid) or []) for sid in benchmark.ids}
        ids = [sid for sid in benchmark.ids if graded[sid] is not None and _mean_runs(ref.official.get(sid, []))
               is not None]
        if not ids:
            continue
        full = np.array([[True] + [c in benchmark.samples[sid].capabilities for c in caps] for sid in ids])
        for sid, row in zip(ids, full):
            cand_v.append(graded[sid])
            off_v.append(_mean_runs(ref.official[sid]))
            self_v.append(_self_delta(ref.official[sid]))
            base_v.append(keyword_score(benchmark.samples[sid].answer, ref.predictions.get(sid, "")))
            member_rows.append(row)
        cand_scores = aggregate_scores(benchmark.subset(ids, "check"), {sid: [graded[sid]] for sid in ids}, 1)
        off_scores = aggregate_scores(benchmark.subset(ids, "check"), {sid: [_mean_runs(ref.official[sid])]
                                                                       for sid in ids}, 1)
        cand = {"total": cand_scores.total.per_run[0], **{c.name: c.per_run[0] for c in cand_scores.capabilities}}
        off = {"total": off_scores.total.per_run[0], **{c.name: c.per_run[0] for c in off_scores.capabilities}}
        scores[ref.model] = {"candidate": cand, "official": off}
        first = len(cand_v) - len(ids)
        c, o = np.array(cand_v[first:]), np.array(off_v[first:])
        selfs = [v for v in self_v[first:] if v is not None]
        per_model[ref.model] = {"n": len(ids), "delta_bar": float(np.mean(np.abs(c - o))),
                                "gpt4_self": float(np.mean(selfs)) if selfs else math.nan,
                                "baseline": float(np.mean(np.abs(np.array(base_v[first:]) - o))),
                                "shift": cand["total"] - off["total"]}
        shifts[ref.model] = {k: cand[k] - off[k] for k in cand if cand.get(k) is not None and off.get(k) is not None}
    if not cand_v:
        raise ValueError("the candidate judge graded no reference sample: nothing to assess")
    member = np.array(member_rows, dtype=bool)
    cand_a, off_a, base_a = np.array(cand_v), np.array(off_v), np.array(base_v)
    self_a = np.array([np.nan if v is None else v for v in self_v])
    columns = []
    for j, name in enumerate(names):
        m = member[:, j]
        if not m.any():
            continue
        model_shifts = {model: s[name] for model, s in shifts.items() if name in s}
        columns.append(CheckColumn(
            name=name, n=int(m.sum()),
            delta_bar=float(np.mean(np.abs(cand_a[m] - off_a[m]))),
            gpt4_self=float(np.nanmean(self_a[m])) if np.isfinite(self_a[m]).any() else math.nan,
            baseline=float(np.mean(np.abs(base_a[m] - off_a[m]))),
            shift=float(np.mean(list(model_shifts.values()))) if model_shifts else math.nan,
            shifts=model_shifts))
    verdict, close = _verdict(columns)
    n_expected = len(benchmark) * len(refs)
    return JudgeCheckResult(judge=judge, models=[r.model for r in refs], n_graded=len(cand_v),
                            n_expected=n_expected, columns=columns, scores=scores, verdict=verdict, close=close,
                            per_model=per_model, created_at=time.time())


def _verdict(columns: list[CheckColumn]) -> tuple[str, bool]:
    total = columns[0]
    caps = [c for c in columns[1:] if not math.isnan(c.shift)]
    worst = max(caps, key=lambda c: abs(c.shift), default=None)
    limit = max(CLOSE_DELTA, 2 * total.gpt4_self if not math.isnan(total.gpt4_self) else 0.0)
    close = (total.delta_bar <= limit and abs(total.shift) < CLOSE_TOTAL_SHIFT
             and (worst is None or abs(worst.shift) <= CLOSE_CAP_SHIFT))
    base = (f"Δ̄ {total.delta_bar:.3f} to the official grades (GPT-4-0613 against itself {total.gpt4_self:.3f}, "
            f"keyword baseline {total.baseline:.3f}); total shifted by {total.shift:+.1f} points")
    if close:
        return f"Close to the official judge: {base}.", True
    parts = [f"Drifts from the official judge: {base}"]
    if worst is not None and abs(worst.shift) > CLOSE_CAP_SHIFT:
        parts.append(f"drifts by about {abs(worst.shift):.0f} points on {worst.name} ({worst.shift:+.1f})")
    if total.delta_bar >= total.baseline:
        parts.append("no closer to the official grades than keyword matching")
    return "; ".join(parts) + ". Its scores are not comparable with published MM-Vet numbers.", False


def format_check(result: JudgeCheckResult) -> str:
    """The plain-text report the CLI prints."""
    judge = result.judge
    where = f" at {judge.get('base_url')}" if judge.get("base_url") else ""
    lines = [f"Judge check of {judge.get('model')}{where} (official prompt) on {', '.join(result.models)}: "
             f"{result.n_graded} of {result.n_expected} reference grades."]
    if result.message:
        lines.append(f"  {result.message}")
    if result.n_graded < result.n_expected:
        lines.append("  (incomplete: assessed on the grades made; rerun to finish without paying again)")
    lines.append("")
    lines.append(f"  {'column':<8}{'n':>5}{'Δ̄ judge':>10}{'Δ̄ GPT-4 self':>15}{'Δ̄ keyword':>12}{'shift':>8}"
                 + "".join(f"{m:>18}" for m in result.models))
    for c in result.columns:
        per_model = "".join(f"{c.shifts.get(m, math.nan):>+18.1f}" for m in result.models)
        lines.append(f"  {c.name:<8}{c.n:>5}{c.delta_bar:>10.3f}{c.gpt4_self:>15.3f}{c.baseline:>12.3f}"
                     f"{c.shift:>+8.1f}{per_model}")
    for model, m in result.per_model.items():
        lines.append(f"  {model}: {m['n']} samples, Δ̄ judge {m['delta_bar']:.3f}, GPT-4 self {m['gpt4_self']:.3f}, "
                     f"keyword {m['baseline']:.3f}, total shifted {m['shift']:+.1f}")
    lines.append("")
    lines.append("  Δ̄: mean absolute difference of per-sample scores to the official grades (0 = the same, 1 = "
                 "opposite); shift: candidate − official score in points (per model on the right).")
    lines.append("")
    lines.append(result.verdict)
    return "\n".join(lines)


def check_settings(settings: JudgeSettings) -> JudgeSettings:
    """The settings a check grades with: the candidate judge with the official prompt."""
    return replace(settings, prompt_examples=None)


async def run_judge_check(store, settings: JudgeSettings, api_key: str | None, *, concurrency: int = 16,
                          on_grade: Callable | None = None, stop=None, budget=None,
                          refs: list[Reference] | None = None, judge=None) -> JudgeCheckResult:
    """Grade every reference with the candidate judge (runs are stored and cached like any run: a repeated check
    costs nothing), assess it, store the result (`Store.put_judge_check`) and return it. `judge`: the judge to
    call (the app's, with its endpoint policy), else one made from `settings` and `api_key`."""
    from .grading import grade_run
    from .judge import make_judge
    from .runs import create_run, load_run_view

    settings = check_settings(settings)
    benchmark = load_bundled_v1()
    refs = refs if refs is not None else load_references()
    judge = judge if judge is not None else make_judge(settings, api_key)
    run_ids, calls, cached, message = {}, 0, 0, ""
    try:
        for ref in refs:
            run_id = create_run(store, benchmark=benchmark, spec="mmvet-v1", predictions=ref.predictions, n_runs=1,
                                settings=settings, model_name=f"judge-check {ref.model}",
                                results_format="reference", reuse=True)
            run_ids[ref.model] = run_id
            outcome = await grade_run(store, run_id, benchmark, judge, concurrency=concurrency, on_grade=on_grade,
                                      stop=stop, budget=budget)
            calls += outcome.stats.calls
            cached += outcome.stats.cached
            if outcome.status in ("failed", "stopped"):
                message = outcome.message
                break
    finally:
        await judge.aclose()
    candidate = {}
    for model, run_id in run_ids.items():
        view = load_run_view(store, run_id, evidence_for=None)
        candidate[model] = view.effective_scores()
    try:
        result = assess_judge(benchmark, refs, candidate, settings.to_dict())
    except ValueError as e:          # nothing graded: say why grading stopped
        raise ValueError(f"{e} ({message})" if message else str(e)) from None
    result.run_ids, result.calls, result.cached, result.message = run_ids, calls, cached, message
    store.put_judge_check(settings.fingerprint(), settings.to_dict(), result.to_dict())
    return result
