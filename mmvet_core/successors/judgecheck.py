"""Check a judge before trusting it: grade reference predictions that have real official GPT-4-0613 grades.

Its size (over 600 lines) has a reason: the check is one pipeline — reference sets, pairing with the official
grades, the assessment and its report, the stored check that grows — whose parts share one record; the numerical
parts live apart (`calibration`, `stats`, `equivalence`).

The reference sets are data (``assets/reference/references.json``, provenance in ``assets/reference/SOURCES.md``):
each is a model's MM-Vet v1 predictions with one or more real grade files of the official evaluator. A candidate
judge grades them (up to 218 judge calls per set, plus the official re-asks when it answers something unparsable)
with the **official prompt**, and `assess_judge` reports, per column (total and each capability):

* Δ̄ of the candidate to the official grades (the per-sample mean of the official runs), pooled over the sets;
* beside it GPT-4-0613's own run-to-run Δ̄ (the least one can expect) and the keyword baseline's Δ̄ (what a judge
  that reads nothing achieves);
* the **shift**: how far the candidate moves the score (candidate − official, points), per reference model and
  pooled (the mean over the models), each with its 95 % **paired bootstrap** interval: the questions are
  resampled (seeded, reproducible), the same draw for the candidate and the official grades and for every
  reference model, and every column is recomputed in each draw;
* across the reference models: the rank agreement of the candidate's totals with the official totals (Kendall's
  tau-b) and whether the shift depends on the model's level (least-squares slope of the shift on the official
  total, with its bootstrap interval). With two or three models both are weak evidence, and the report says so;
* a verdict read from the interval (close / drifts / cannot tell);
* the per-grade correction behind official-equivalent estimates (`mmvet_core.successors.calibration`): every (candidate
  grade, official grade) pair is kept with the check, and each reference model's official total is predicted from
  a correction fit on the other models (leave-one-model-out); whether estimates may be made and, if not, why.

A check grows: one check per (endpoint, judge, prompt) holds every reference set the judge has graded there, so a
later check with fewer sets grades those (answers already stored are reused) and keeps the others
(`run_judge_check`); the check an estimate rests on is named by its id and date.

`assess_judge` is pure; `run_judge_check` grades through the store (answers are cached: a second check of the same
judge costs nothing) and is the only part that calls the judge.

**Nobody else's grades enter a check** (issue 33). A check is made only of the judge's own answers to the reference
prompts: its grading runs are its own (no owner, a fingerprint in a namespace no visitor's run can have: never a
run found by name), a human override is never read, and a grade file never enters. Every check records who made
it (`CheckScope`): this server with its own key (``host``: the check every estimate and the successor board rest
on), or a visitor with their own key (``visitor``: a check of its own, under another fingerprint, seen by that
visitor only; their answers are cached under their key, `judge.answer_scope`, so they never reach the server's
check and the server's answers never reach them). A check stored before scopes existed is trusted by nothing.
"""
from __future__ import annotations

import hashlib
import json
import math
import re
import time
from dataclasses import asdict, dataclass, field, fields, replace
from itertools import combinations
from pathlib import Path
from typing import Callable, Sequence

import numpy as np

from ..scores.aggregate import aggregate_scores
from ..inputs.benchmark import ASSETS_DIR, Benchmark, load_bundled_v1
from ..scores.export import load_official_grades
from ..judging.judge import JudgeSettings, check_settings, keyword_score
from ..scores.terminal import REPORT_WIDTH, fit_lines
from ..scores.stats import (DEFAULT_RESAMPLES, DEFAULT_SEED, column_mean_draws, draw_counts, kendall_tau,
                            percentile_interval, slope_draws)

REFERENCE_DIR = ASSETS_DIR / "reference"
MANIFEST_NAME = "references.json"
#: A judge is "close" when its Δ̄ to the official grades is at most this (the paper: GPT-4 vs humans 0.042, every
#: other LLM ≥ 0.137) or twice GPT-4's own run-to-run Δ̄, whichever is larger ...
CLOSE_DELTA = 0.05
#: ... and the 95 % interval of its total shift lies within ± this many points, and no capability's interval lies
#: wholly beyond ± `CLOSE_CAP_SHIFT`. A total interval wholly beyond ± `CLOSE_TOTAL_SHIFT` drifts; an interval
#: across the bound cannot tell.
CLOSE_TOTAL_SHIFT = 2.0
CLOSE_CAP_SHIFT = 4.0
#: The shift "depends on the model's level" when the slope of the shift on the official total has a 95 % interval
#: that excludes 0 and at least this size: between two models 20 points apart the shift then differs by 2 points
#: (the `CLOSE_TOTAL_SHIFT` bound) or more, so one constant correction would be wrong by that much.
LEVEL_SLOPE = 0.1
#: With fewer reference models than this, the rank agreement and the level dependence are weak evidence.
FEW_REFERENCES = 5
#: An official-equivalent estimate needs at least this many reference models in the check (its interval uses
#: their leave-one-model-out errors).
MIN_MODELS = 3
#: Who made a check: this server with its own key, or a visitor with theirs (see `CheckScope`).
HOST, VISITOR = "host", "visitor"
#: The owner of a check's grading runs: none (no visitor session has an empty owner, so none can act on them).
CHECK_RUN_OWNER = ""


@dataclass(frozen=True)
class CheckScope:
    """Who makes a check, and so where it is stored and who sees it: ``host`` (this server's own key, or the
    host's CLI: the server's check of the judge) or ``visitor`` (a visitor's own key: `owner_hash` names the
    visitor who alone sees it, `answers` the cache scope of their key, `judge.answer_scope`)."""

    kind: str = HOST
    owner_hash: str = ""
    answers: str = ""

    @property
    def verified(self) -> bool:
        return self.kind == HOST


HOST_SCOPE = CheckScope()


def visitor_scope(owner: str, answers: str) -> CheckScope:
    """The scope of a visitor's check with their own key (`answers`: `judge.answer_scope` of that key)."""
    return CheckScope(VISITOR, check_owner_hash(owner), answers)


def check_owner_hash(owner: str) -> str:
    """What a visitor's check keeps of its owner: a hash of the owner token (never the token)."""
    return hashlib.sha256(f"mmvet-check-owner:{owner or ''}".encode("utf-8")).hexdigest()


def check_fingerprint(settings: JudgeSettings, scope: CheckScope = HOST_SCOPE) -> str:
    """The stored identity of a check: the judge's check settings' fingerprint for the server's check (what
    runs and leaderboard entries name), else that fingerprint scoped by the visitor and their key (no visitor's
    check can share the server's identity, nor another visitor's)."""
    fp = check_settings(settings).fingerprint()
    if scope.kind == HOST:
        return fp
    ident = "\n".join([fp, scope.kind, scope.owner_hash, scope.answers])
    return hashlib.sha256(ident.encode("utf-8")).hexdigest()[:16]


@dataclass(frozen=True)
class ReferenceSource:
    """One entry of the reference manifest: where a reference set's files are and where they come from."""

    model: str
    predictions: str                     # file name in the reference folder
    grades: tuple[str, ...]              # official grade files; their runs are pooled
    official_total: float                # official aggregation of the pooled runs, one decimal (pinned in tests)
    default: bool                        # part of the default check
    source: dict                         # repository, commit, path, licence


def load_manifest(directory: Path = REFERENCE_DIR) -> list[ReferenceSource]:
    """The reference sets listed in ``references.json`` of `directory`, in manifest order. Raises `ValueError`
    naming the entry when one is malformed or names a file that is missing."""
    data = json.loads((directory / MANIFEST_NAME).read_text(encoding="utf-8"))
    out = []
    for i, e in enumerate(data.get("references", [])):
        try:
            src = ReferenceSource(str(e["model"]), str(e["predictions"]), tuple(str(g) for g in e["grades"]),
                                  float(e["official_total"]), bool(e.get("default", False)), dict(e["source"]))
        except (KeyError, TypeError, ValueError) as err:
            raise ValueError(f"{MANIFEST_NAME}: entry {i} is malformed ({err!r})") from None
        for name in (src.predictions, *src.grades):
            if not (directory / name).is_file() or Path(name).name != name:
                raise ValueError(f"{MANIFEST_NAME}: {src.model} names {name!r}, which is not in {directory.name}/")
        out.append(src)
    return out


def select_sources(sources: list[ReferenceSource], which: str | Sequence[str] | None = None) -> list[ReferenceSource]:
    """The sets a check uses: None or "default" → those marked default; "all" → every set; else the named ones
    (a comma-separated string or a list), in manifest order. Raises `ValueError` for an unknown name."""
    if which is None or which == "default":
        return [s for s in sources if s.default]
    if which == "all":
        return list(sources)
    names = [n.strip() for n in (which.split(",") if isinstance(which, str) else which) if n.strip()]
    known = {s.model for s in sources}
    unknown = [n for n in names if n not in known]
    if unknown or not names:
        raise ValueError(f"unknown reference set(s) {', '.join(unknown) or '(none given)'}; known: "
                         f"{', '.join(sorted(known))}, or 'default' / 'all'")
    return [s for s in sources if s.model in names]


@dataclass
class Reference:
    """One reference model: its predictions and the official per-run grades (sample id -> scores)."""

    model: str
    predictions: dict[str, str]
    official: dict[str, list[float | None]]
    official_total: float | None = None
    source: dict = field(default_factory=dict)


def load_references(directory: Path = REFERENCE_DIR, which: str | Sequence[str] | None = None) -> list[Reference]:
    """The reference sets of the manifest (`which` as for `select_sources`: the default ones unless told)."""
    refs = []
    for src in select_sources(load_manifest(directory), which):
        predictions = json.loads((directory / src.predictions).read_text(encoding="utf-8"))
        runs: dict[str, list[float | None]] = {}
        for name in src.grades:
            for sid, scores in load_official_grades(directory / name).scores.items():
                runs.setdefault(sid, []).extend(scores)
        refs.append(Reference(src.model, predictions, runs, src.official_total, dict(src.source)))
    return refs


def references_key(refs: list[Reference]) -> str:
    """The identity of a set of references (stored with a check): their names, sorted, joined by '+'."""
    return "+".join(sorted(r.model for r in refs))


def call_count(benchmark: Benchmark | None = None, refs: list[Reference] | None = None) -> int:
    """Judge calls of one check at one run when every answer parses: one per sample per reference set (218 each).
    """
    benchmark = benchmark or load_bundled_v1()
    refs = refs if refs is not None else load_references()
    return len(benchmark) * len(refs)


def distinct_prompts(benchmark: Benchmark | None = None, refs: list[Reference] | None = None) -> int:
    """How many of those calls have distinct prompts: models that answer a question word for word alike make one
    prompt, asked once (its answer is reused from the store); LLaVA-1.5 13b and 7b share 27, so their first check
    makes 409 calls."""
    benchmark = benchmark or load_bundled_v1()
    refs = refs if refs is not None else load_references()
    return len({(sid, ref.predictions.get(sid, "")) for ref in refs for sid in benchmark.ids})


def format_shift(point: float | None, interval: Sequence[float] | None = None) -> str:
    """``+7.4 [+6.1, +8.7]`` (the point alone when there is no interval; ``n/a`` when undefined).

    >>> format_shift(7.43, (6.06, 8.71)), format_shift(-0.04, None), format_shift(None)
    ('+7.4 [+6.1, +8.7]', '-0.0', 'n/a')
    """
    if point is None or (isinstance(point, float) and math.isnan(point)):
        return "n/a"
    if not interval or any(v is None or math.isnan(v) for v in interval):
        return f"{point:+.1f}"
    return f"{point:+.1f} [{interval[0]:+.1f}, {interval[1]:+.1f}]"


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
    shift_interval: list[float] | None = None                  # 95 % paired bootstrap interval of `shift`
    shift_intervals: dict[str, list[float]] = field(default_factory=dict)   # per model


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
    verdict_kind: str = ""          # "close", "drifts" or "unclear"
    tau: float | None = None        # Kendall tau-b of candidate vs official totals across the models
    slope: float | None = None      # shift vs official total (points of shift per point of level)
    slope_interval: list[float] | None = None
    level_dependent: bool = False
    level_note: str = ""            # the two statistics above in plain words
    correctable: bool = False       # whether `equivalence` may correct this judge's scores
    correction_note: str = ""       # why not, or the caveats when it may
    references: str = ""            # `references_key`
    resamples: int = DEFAULT_RESAMPLES
    seed: int = DEFAULT_SEED
    # the per-grade correction behind official-equivalent estimates (`mmvet_core.successors.calibration`):
    pairs: dict = field(default_factory=dict)     # model -> {"ids", "candidate", "official", "official_total",
    #                                               "pred_hash"}: every (candidate grade, official grade) pair
    lomo: dict | None = None        # `calibration.LomoTable.to_dict()`: leave-one-model-out predictions
    calibration: dict = field(default_factory=dict)   # `calibration.correction_summary`: pairs behind each part
    check_id: str = ""              # the stored check's id (set when read from the store)
    unchanged: bool = False         # this check added nothing to the stored one (which is returned)
    coarse_note: str = ""           # a coarse judge (0 / 0.5 / 1): why its intervals cannot be narrowed, if so
    origin: dict = field(default_factory=dict)    # an imported check: where it comes from and how it was verified
    #                                               (`checkshare`); empty for a check made here

    def lomo_table(self):
        """The leave-one-model-out table (`calibration.LomoTable`) of `lomo`, or None when the check has none."""
        from .calibration import LomoTable

        return LomoTable.from_dict(self.lomo)

    @property
    def total(self) -> CheckColumn:
        return self.columns[0]

    def column(self, name: str) -> CheckColumn | None:
        return next((c for c in self.columns if c.name == name), None)

    def to_dict(self) -> dict:
        return asdict(self)

    @classmethod
    def from_dict(cls, data: dict) -> "JudgeCheckResult":
        """Read a stored result (older results, without intervals, read with the new fields at their defaults)."""
        known = {f.name for f in fields(cls)}
        data = {k: v for k, v in data.items() if k in known}
        col_fields = {f.name for f in fields(CheckColumn)}
        data["columns"] = [CheckColumn(**{k: v for k, v in c.items() if k in col_fields}) for c in data["columns"]]
        return cls(**data)


def _mean_runs(runs: list[float | None]) -> float | None:
    graded = [float(v) for v in runs if v is not None]
    return sum(graded) / len(graded) if graded else None


def _self_delta(runs: list[float | None]) -> float | None:
    graded = [float(v) for v in runs if v is not None]
    pairs = list(combinations(graded, 2))
    return sum(abs(a - b) for a, b in pairs) / len(pairs) if pairs else None


def _pair(lo, hi) -> list[float] | None:
    lo, hi = float(lo), float(hi)
    return None if math.isnan(lo) or math.isnan(hi) else [lo, hi]


def assess_judge(benchmark: Benchmark, refs: list[Reference], candidate: dict[str, dict[str, list[float | None]]],
                 judge: dict, *, resamples: int = DEFAULT_RESAMPLES, seed: int = DEFAULT_SEED) -> JudgeCheckResult:
    """Compare a candidate judge's grades (model -> sample id -> per-run scores) with the official ones.

    Only samples the candidate graded count (a stopped check is assessed on what it graded and says so). Every
    shift carries its paired bootstrap interval: `resamples` draws of the benchmark's questions from `seed`, the
    same draws for every reference model. Raises `ValueError` when the candidate graded nothing."""
    caps = benchmark.capabilities
    names = ["total", *caps]
    ids = benchmark.ids
    member_all = np.array([[True] + [c in benchmark.samples[sid].capabilities for c in caps] for sid in ids])
    counts = draw_counts(len(ids), resamples, seed)
    cand_v, off_v, self_v, base_v, member_rows = [], [], [], [], []
    scores: dict[str, dict[str, dict[str, float | None]]] = {}
    per_model: dict[str, dict[str, float]] = {}
    points: dict[str, np.ndarray] = {}          # model -> k shifts
    boots: dict[str, np.ndarray] = {}           # model -> R × k shifts
    off_boot: dict[str, np.ndarray] = {}        # model -> R official totals
    for ref in refs:
        graded = {sid: _mean_runs(candidate.get(ref.model, {}).get(sid) or []) for sid in ids}
        official = {sid: _mean_runs(ref.official.get(sid, [])) for sid in ids}
        mask = np.array([graded[sid] is not None and official[sid] is not None for sid in ids])
        if not mask.any():
            continue
        sub = [sid for sid, ok in zip(ids, mask) if ok]
        for sid in sub:
            cand_v.append(graded[sid])
            off_v.append(official[sid])
            self_v.append(_self_delta(ref.official[sid]))
            base_v.append(keyword_score(benchmark.samples[sid].answer, ref.predictions.get(sid, "")))
            member_rows.append(member_all[ids.index(sid)])
        c = np.array([graded[sid] if ok else 0.0 for sid, ok in zip(ids, mask)])
        o = np.array([official[sid] if ok else 0.0 for sid, ok in zip(ids, mask)])
        member = member_all & mask[:, None]
        points[ref.model] = column_mean_draws(np.ones((1, len(ids))), c - o, member)[0]
        boots[ref.model] = column_mean_draws(counts, c - o, member)
        off_boot[ref.model] = column_mean_draws(counts, o, member[:, :1])[:, 0]
        cand_scores = aggregate_scores(benchmark.subset(sub, "check"), {sid: [graded[sid]] for sid in sub}, 1)
        off_scores = aggregate_scores(benchmark.subset(sub, "check"), {sid: [official[sid]] for sid in sub}, 1)
        cand = {"total": cand_scores.total.per_run[0], **{x.name: x.per_run[0] for x in cand_scores.capabilities}}
        off = {"total": off_scores.total.per_run[0], **{x.name: x.per_run[0] for x in off_scores.capabilities}}
        scores[ref.model] = {"candidate": cand, "official": off}
        first = len(cand_v) - len(sub)
        cv, ov = np.array(cand_v[first:]), np.array(off_v[first:])
        selfs = [v for v in self_v[first:] if v is not None]
        lo, hi = percentile_interval(boots[ref.model][:, 0])
        per_model[ref.model] = {"n": len(sub), "delta_bar": float(np.mean(np.abs(cv - ov))),
                                "gpt4_self": float(np.mean(selfs)) if selfs else math.nan,
                                "baseline": float(np.mean(np.abs(np.array(base_v[first:]) - ov))),
                                "shift": float(points[ref.model][0]), "shift_low": lo, "shift_high": hi,
                                "official_total": float(off["total"]), "candidate_total": float(cand["total"])}
    if not cand_v:
        raise ValueError("the candidate judge graded no reference sample: nothing to assess")
    models = list(points)
    member = np.array(member_rows, dtype=bool)
    cand_a, off_a, base_a = np.array(cand_v), np.array(off_v), np.array(base_v)
    self_a = np.array([np.nan if v is None else v for v in self_v])
    stacked = np.stack([boots[m] for m in models])                  # M × R × k
    with np.errstate(invalid="ignore"), _quiet():
        pooled_boot = np.nanmean(stacked, axis=0)                       # R × k
    pooled_low, pooled_high = percentile_interval(pooled_boot)
    columns = []
    for j, name in enumerate(names):
        m = member[:, j]
        if not m.any():
            continue
        model_shifts = {model: float(points[model][j]) for model in models if not math.isnan(points[model][j])}
        model_ints = {}
        for model in model_shifts:
            pair = _pair(*percentile_interval(boots[model][:, j]))
            if pair:
                model_ints[model] = pair
        columns.append(CheckColumn(
            name=name, n=int(m.sum()),
            delta_bar=float(np.mean(np.abs(cand_a[m] - off_a[m]))),
            gpt4_self=float(np.nanmean(self_a[m])) if np.isfinite(self_a[m]).any() else math.nan,
            baseline=float(np.mean(np.abs(base_a[m] - off_a[m]))),
            shift=float(np.mean(list(model_shifts.values()))) if model_shifts else math.nan,
            shifts=model_shifts, shift_interval=_pair(pooled_low[j], pooled_high[j]), shift_intervals=model_ints))
    n_expected = len(benchmark) * len(refs)
    result = JudgeCheckResult(judge=judge, models=[r.model for r in refs], n_graded=len(cand_v),
                              n_expected=n_expected, columns=columns, scores=scores, verdict="", close=False,
                              per_model=per_model, created_at=time.time(), references=references_key(refs),
                              resamples=int(resamples), seed=int(seed))
    _assess_levels(result, models, per_model, boots, off_boot)
    result.verdict, result.verdict_kind = _verdict(columns)
    result.close = result.verdict_kind == "close"
    result.pairs = make_pairs(benchmark, [r for r in refs if r.model in per_model], candidate,
                              {m: round(v["official_total"], 1) for m, v in per_model.items()})
    calibrate(result, benchmark)
    return result


def prediction_hash(text) -> str:
    """A short fingerprint of a prediction (an estimate's in-sample test compares a run's answers with the
    references' without keeping their text)."""
    return hashlib.sha256(str(text).encode("utf-8")).hexdigest()[:10]


#: A refusal: an empty answer, or a short one that declines ("I don't know", "I'm sorry, I cannot ...").
_REFUSAL = re.compile(r"\b(i\s+(do\s*n[o']?t|don'?t)\s+know|i'?m\s+sorry|i\s+am\s+sorry|i\s+(cannot|can'?t|am\s+unable|"
                      r"'m\s+unable|am\s+not\s+able)|unable\s+to\s+(determine|answer|tell|provide)|as\s+an\s+ai|"
                      r"cannot\s+be\s+determined|not\s+possible\s+to\s+(determine|tell)|no\s+answer|"
                      r"sorry,?\s+(but\s+)?i)\b", re.IGNORECASE)
REFUSAL_CHARS = 200


def is_refusal(text) -> bool:
    """True for an empty answer or a short one (at most `REFUSAL_CHARS` characters) that declines to answer.

    >>> is_refusal(""), is_refusal("  I don't know."), is_refusal("I'm sorry, I cannot help"), is_refusal("Paris")
    (True, True, True, False)
    """
    text = str(text or "").strip()
    return not text or (len(text) <= REFUSAL_CHARS and _REFUSAL.search(text) is not None)


def answer_traits(predictions: dict) -> dict[str, list[int]]:
    """Per sample id: [1 if the answer is a refusal or empty else 0, its length in characters] (what the trait
    profile of a run reads; a leaderboard entry keeps these, not the answers)."""
    return {sid: [int(is_refusal(p)), len(str(p or ""))] for sid, p in predictions.items()}


def make_pairs(benchmark: Benchmark, refs: list[Reference], candidate: dict,
               totals: dict[str, float] | None = None) -> dict:
    """Every (candidate grade, official grade) pair of the check, per reference model, in benchmark order: the
    candidate's per-sample mean over its runs (None when not graded), the official per-sample mean, the model's
    official total (the manifest's, else `totals`) and its predictions' hashes. Stored with the check: estimates
    are computed from it."""
    out = {}
    for ref in refs:
        ids = [sid for sid in benchmark.ids if sid in ref.official]
        cand = [_mean_runs(candidate.get(ref.model, {}).get(sid) or []) for sid in ids]
        out[ref.model] = {"ids": ids,
                          "candidate": [None if c is None else round(float(c), 6) for c in cand],
                          "official": [_mean_runs(ref.official[sid]) for sid in ids],
                          "official_total": (ref.official_total if ref.official_total is not None
                                             else (totals or {}).get(ref.model)),
                          "pred_hash": [prediction_hash(ref.predictions.get(sid, "")) for sid in ids],
                          "keyword": [round(keyword_score(benchmark.samples[sid].answer, ref.predictions.get(sid, "")),
                                            6) for sid in ids],
                          "refused": [int(is_refusal(ref.predictions.get(sid, ""))) for sid in ids],
                          "length": [len(str(ref.predictions.get(sid, ""))) for sid in ids]}
    return out


def check_pairs(result: JudgeCheckResult, benchmark: Benchmark):
    """(`calibration.PairSet`, `calibration.Strata`) of a check's pairs on `benchmark`'s samples."""
    from .calibration import PairSet, strata_of

    return PairSet.from_dict(result.pairs, benchmark.ids), strata_of(benchmark)


def calibrate(result: JudgeCheckResult, benchmark: Benchmark) -> None:
    """Fill the check's leave-one-model-out table, the correction's pair counts and whether estimates may be made
    (`correctable`, `correction_note`)."""
    from .calibration import PairSet, correction_summary, leave_one_model_out

    if result.pairs:
        pairs, strata = check_pairs(result, benchmark)
        lomo = leave_one_model_out(pairs, strata)
        result.lomo = lomo.to_dict()
        result.calibration = correction_summary(pairs, strata)
        # the bar to clear: keyword matching's grades, corrected the same way (a conditional mean is judged by
        # its squared error, so the candidate is compared with a baseline that had the same chance)
        keyword = PairSet.from_dict({m: {**e, "candidate": e.get("keyword") or [None] * len(e["ids"])}
                                     for m, e in result.pairs.items()}, benchmark.ids)
        result.calibration["rmse"] = lomo.rmse
        result.calibration["keyword_rmse"] = leave_one_model_out(keyword, strata).rmse
    result.correctable, result.correction_note = _correctability(result)
    result.coarse_note = coarse_note(result)


class _quiet:
    """Silence numpy's "mean of empty slice" (a column absent from every model in a draw stays NaN)."""

    def __enter__(self):
        import warnings
        self._w = warnings.catch_warnings()
        self._w.__enter__()
        warnings.simplefilter("ignore", category=RuntimeWarning)

    def __exit__(self, *exc):
        self._w.__exit__(*exc)


def _assess_levels(result: JudgeCheckResult, models: list[str], per_model: dict, boots: dict, off_boot: dict) -> None:
    """Rank agreement and level dependence across the reference models, in numbers and plain words."""
    n = len(models)
    official = [per_model[m]["official_total"] for m in models]
    cand = [per_model[m]["candidate_total"] for m in models]
    weak = (f" With {n} reference models this is weak evidence (at least {FEW_REFERENCES} are needed to say much)."
            if n < FEW_REFERENCES else "")
    if n < 2:
        result.level_note = ("One reference model only: the rank agreement and whether the shift depends on the "
                             "model's level cannot be measured.")
        return
    result.tau = kendall_tau(official, cand)
    tau_text = ("the official totals are tied: rank agreement undefined" if result.tau is None else
                f"rank agreement with the official totals, Kendall τ = {result.tau:+.2f} over {n} models"
                + (" (the candidate orders them as the official judge does)" if result.tau == 1.0 else
                   " (the candidate reverses the official order)" if result.tau == -1.0 else ""))
    x = np.array(official)
    if np.ptp(x) == 0:
        result.level_note = f"{tau_text[0].upper()}{tau_text[1:]}. The official totals are equal: the slope of " \
                            f"the shift on the level is undefined.{weak}"
        return
    shift_pts = np.array([per_model[m]["shift"] for m in models])
    result.slope = float(slope_draws(x, shift_pts))
    draws = slope_draws(np.stack([off_boot[m] for m in models], axis=1), np.stack([boots[m][:, 0] for m in models],
                                                                                   axis=1))
    result.slope_interval = _pair(*percentile_interval(draws))
    lo, hi = result.slope_interval or [math.nan, math.nan]
    excludes_zero = lo > 0 or hi < 0
    result.level_dependent = bool(excludes_zero and abs(result.slope) >= LEVEL_SLOPE)
    span = f"{min(official):.1f} to {max(official):.1f}"
    per10 = 10 * result.slope
    slope_text = (f"slope of the shift on the official total {result.slope:+.3f} "
                  f"[{lo:+.3f}, {hi:+.3f}] (the shift changes by {per10:+.1f} points per 10 points of model level, "
                  f"official totals {span})")
    if result.level_dependent:
        level = (f"The shift depends on the model's level: {slope_text}; a constant shift would not fit models "
                 "of different levels (the per-grade correction of the estimates assumes none).")
    elif excludes_zero:
        level = (f"The shift varies a little with the model's level ({slope_text}), less than {LEVEL_SLOPE * 10:.0f} "
                 "point per 10 points.")
    else:
        level = f"No dependence of the shift on the model's level was found ({slope_text}; the interval holds 0)."
    result.level_note = f"{tau_text[0].upper()}{tau_text[1:]}. {level}{weak}"


def _verdict(columns: list[CheckColumn]) -> tuple[str, str]:
    """(the verdict in words, its kind): read from the shift's interval, not its point."""
    total = columns[0]
    lo, hi = total.shift_interval or [total.shift, total.shift]
    caps = [c for c in columns[1:] if not math.isnan(c.shift)]

    def beyond(c: CheckColumn, bound: float) -> bool:         # the whole interval lies beyond ± bound
        a, b = c.shift_interval or [c.shift, c.shift]
        return a > bound or b < -bound

    drifting_caps = [c for c in caps if beyond(c, CLOSE_CAP_SHIFT)]
    worst = max(drifting_caps, key=lambda c: abs(c.shift), default=None)
    limit = max(CLOSE_DELTA, 2 * total.gpt4_self if not math.isnan(total.gpt4_self) else 0.0)
    close_delta = total.delta_bar <= limit
    inside = -CLOSE_TOTAL_SHIFT < lo and hi < CLOSE_TOTAL_SHIFT
    base = (f"Δ̄ {total.delta_bar:.3f} to the official grades (GPT-4-0613 against itself {total.gpt4_self:.3f}, "
            f"keyword baseline {total.baseline:.3f}); total shifted by {format_shift(total.shift, total.shift_interval)}"
            " points (95 % interval)")
    if close_delta and inside and worst is None:
        return f"Close to the official judge: {base}.", "close"
    if close_delta and worst is None and not beyond(total, CLOSE_TOTAL_SHIFT):
        return (f"Cannot tell yet: {base}; the interval reaches beyond ±{CLOSE_TOTAL_SHIFT:.0f} points. More "
                "reference sets (--references all) narrow it."), "unclear"
    parts = [f"Drifts from the official judge: {base}"]
    if worst is not None:
        parts.append(f"drifts by about {abs(worst.shift):.0f} points on {worst.name} "
                     f"({format_shift(worst.shift, worst.shift_interval)})")
    if total.delta_bar >= total.baseline:
        parts.append("no closer to the official grades than keyword matching")
    return "; ".join(parts) + ". Its scores are not comparable with published MM-Vet numbers.", "drifts"


def _correctability(result: JudgeCheckResult) -> tuple[bool, str]:
    """Whether this check may turn the judge's grades into official-equivalent estimates (see
    `mmvet_core.successors.calibration` and docs/estimates.md), with the reason when not, or what they rest on."""
    from .calibration import LomoTable

    if result.n_graded < result.n_expected:
        return False, ("the check is incomplete (" f"{result.n_graded} of {result.n_expected} reference grades): "
                       "finish it (rerun, answers already paid for are reused) before correcting scores")
    lomo = LomoTable.from_dict(result.lomo)
    if lomo is None or len(lomo.rows) < MIN_MODELS:
        return False, (f"the check has {len(result.pairs) or len(result.models)} reference model(s); at least "
                       f"{MIN_MODELS} are needed to measure how its correction carries to a model it never saw "
                       "(run it with more sets: they join this check)")
    rmse, keyword = result.calibration.get("rmse", math.nan), result.calibration.get("keyword_rmse", math.nan)
    if not rmse < keyword:
        return False, ("even corrected per grade, the judge is no closer to the official grades than keyword "
                       f"matching corrected the same way (rms error per sample {rmse:.3f} vs {keyword:.3f}): its "
                       "grades cannot be corrected")
    errors = lomo.errors(0)
    levels = [r.official_total for r in lomo.rows]
    n = result.calibration.get("pairs", 0)
    return True, (f"a per-grade correction learned from {n} reference pairs of {len(lomo.rows)} reference models "
                  f"(official totals {min(levels):.1f} to {max(levels):.1f}); each reference's official total, "
                  f"predicted from the others, is off by {float(np.sqrt(np.mean(errors ** 2))):.1f} points rms "
                  f"({float(np.max(np.abs(errors))):.1f} at most)")


def origin_text(result: JudgeCheckResult) -> str:
    """Where a check comes from, as an estimate names it: "" for a check made here, else ``imported: check 3f2a9c1b
    of host X, verified here on 62 prompts`` or ``imported: check … of host X, NOT verified here (unverified)``."""
    o = result.origin or {}
    if not o:
        return ""
    host = o.get("host") or "another host"
    of = f"check {str(o.get('check_id') or '?')[:8]} of {host}"
    if o.get("verified"):
        return f"imported: {of}, verified here on {o.get('verified_prompts', '?')} prompts"
    return f"imported: {of}, NOT verified here (unverified)"


#: A judge is coarse when at least this share of its grades are 0, 0.5 or 1 ...
COARSE_SHARE = 0.95
#: ... while at least this share of the official grades lie between those values.
COARSE_BETWEEN = 0.05
#: The widest interval an estimate should have (issue 30): a coarse judge whose references predict each other
#: worse than this allows is told why it cannot be narrowed.
TARGET_WIDTH = 6.0


def coarse_note(result: JudgeCheckResult) -> str:
    """For a judge that grades coarsely (`COARSE_SHARE` of its grades 0, 0.5 or 1 while official grades lie
    between): why its estimates' intervals cannot be narrowed to `TARGET_WIDTH` points with these references, in
    numbers (each of its grade values stands for several official grades, in proportions that differ from model
    to model; the leave-one-model-out errors that follow; the width they imply at least); "" for a judge that is
    not coarse, or whose references allow it."""
    from .calibration import LomoTable, t95

    cand, off, per_model = [], [], {}
    for model, entry in result.pairs.items():
        c = np.array([np.nan if v is None else float(v) for v in entry.get("candidate", [])])
        o = np.array([np.nan if v is None else float(v) for v in entry.get("official", [])])
        ok = np.isfinite(c) & np.isfinite(o)
        cand.append(c[ok])
        off.append(o[ok])
        per_model[model] = (c[ok], o[ok])
    if not cand:
        return ""
    c, o = np.concatenate(cand), np.concatenate(off)
    on_grid = np.isin(np.round(c, 3), (0.0, 0.5, 1.0))
    between = ~np.isin(np.round(o, 3), (0.0, 0.5, 1.0))
    if not c.size or on_grid.mean() < COARSE_SHARE or between.mean() < COARSE_BETWEEN:
        return ""
    lomo = LomoTable.from_dict(result.lomo)
    if lomo is None or len(lomo.rows) < 2:
        return ""
    errors = lomo.errors(0)
    scatter = float(np.mean([r.scatter_var[0] for r in lomo.rows]))
    model_var = lomo.model_var(0)
    df = len(lomo.rows) - 1
    t = t95(df)
    sd = math.sqrt(scatter + model_var)
    largest = float(np.max(np.abs(errors)))
    half = max(t * sd, largest)
    if 2 * half <= TARGET_WIDTH:
        return ""
    spreads = []
    for value in (0.0, 0.5, 1.0):
        means = {m: float(np.mean(oo[np.round(cc, 3) == value])) for m, (cc, oo) in per_model.items()
                 if (np.round(cc, 3) == value).sum() >= 5}
        if len(means) >= 2:
            lo_m, hi_m = min(means, key=means.get), max(means, key=means.get)
            spreads.append(f"behind its {value:g}: {means[lo_m]:.3f} ({lo_m}) to {means[hi_m]:.3f} ({hi_m})")
    signed = ", ".join(f"{r.model} {r.error[0]:+.1f}" for r in lomo.rows)
    need = math.sqrt(max(0.0, (TARGET_WIDTH / 2 / t) ** 2 - scatter))
    return (f"This judge grades coarsely: {on_grid.mean():.0%} of its grades are 0, 0.5 or 1, while "
            f"{between.mean():.0%} of the official grades lie between. Each of its grades stands for several "
            "official grades, in proportions that differ from model to model (the mean official grade "
            + "; ".join(spreads) + f"), so each reference predicted from the others is off by up to "
            f"{largest:.1f} points (rms {float(np.sqrt(np.mean(errors ** 2))):.1f}: {signed}). What dominates is "
            f"that model-to-model term, {math.sqrt(model_var):.2f} points (standard deviation of the errors beyond "
            f"the scatter), a bias of the model as a whole that does not average out over its samples; the "
            f"per-sample scatter, which does, is {math.sqrt(scatter):.2f} points. The interval's half-width is "
            f"the 95 % Student-t quantile with {df} degrees of freedom ({t:.3f}: the spread is estimated from "
            f"{len(lomo.rows)} leave-one-out errors) times the two terms' root sum of squares ({sd:.2f}), never less than "
            f"the largest error ({largest:.1f}): an estimate's 95 % interval is at least {2 * half:.1f} points wide "
            "(more beyond the references' official totals). These references cannot narrow it to "
            f"{TARGET_WIDTH:g} points: that needs a model-to-model term of at most {need:.2f} points with "
            f"{len(lomo.rows)} reference models (every error at most {TARGET_WIDTH / 2:g}), so reference models "
            "whose proportions agree, or many more of them (the quantile falls with each), or a judge that keeps "
            "the information (a finer scale, or several runs at a temperature, averaged). A per-question level "
            "of the correction and the answers' length or keyword match as covariates were measured not to "
            "reduce those errors (docs/estimates.md).")


def _three(x: float) -> str:
    return "n/a (one run)" if x is None or math.isnan(x) else f"{x:.3f}"


#: The report's tables (`check_tables`): per column (total and capabilities), per reference model.
COLUMN_HEADERS = ["column", "n", "Δ̄ judge", "Δ̄ GPT-4 self", "Δ̄ keyword", "shift [95% interval]"]
REFERENCE_HEADERS = ["reference", "official", "judge", "Δ̄", "GPT-4 Δ̄", "shift [95%]", "LOMO", "error"]
LEGEND = ("Δ̄: mean absolute difference of per-sample scores to the official grades (0 = the same, 1 = opposite); "
          "shift: candidate − official score in points, pooled (mean over the models) and per model, with its 95 % "
          "paired bootstrap interval over the questions ({resamples} resamples, seed {seed}). Per reference: its "
          "official total, the judge's total, Δ̄ of the judge and of GPT-4-0613 against itself; LOMO: its official "
          "total predicted by the per-grade correction fit on the other references (leave-one-model-out), and the "
          "error (predicted − official).")


@dataclass
class CheckTable:
    """One table of the report: headers and rows of cells already formatted (every number rounded once, here)."""

    headers: list[str]
    rows: list[list[str]]


def check_tables(result: JudgeCheckResult, *, wide: bool = False) -> dict[str, CheckTable]:
    """The report's numbers as tables, formatted once for the CLI and the app alike: ``columns`` (total and each
    capability: n, the three Δ̄ and the pooled shift), ``references`` (per reference model: official and candidate
    totals, Δ̄, GPT-4's own Δ̄, the total's shift, and the leave-one-model-out prediction and error when the check
    has them); `wide` adds ``per_model``: each column's shift per reference model (the CLI's ``--wide``)."""
    from .calibration import LomoTable

    columns = CheckTable(list(COLUMN_HEADERS), [
        [c.name, str(c.n), f"{c.delta_bar:.3f}", _three(c.gpt4_self), f"{c.baseline:.3f}",
         format_shift(c.shift, c.shift_interval)] for c in result.columns])
    lomo = LomoTable.from_dict(result.lomo)
    predicted = {r.model: r for r in lomo.rows} if lomo is not None else {}
    refs = []
    for model, m in result.per_model.items():
        interval = (m["shift_low"], m["shift_high"]) if "shift_low" in m else None
        r = predicted.get(model)
        refs.append([model, f"{m['official_total']:.1f}" if "official_total" in m else "",
                     f"{m['candidate_total']:.1f}" if "candidate_total" in m else "", f"{m['delta_bar']:.3f}",
                     _three(m["gpt4_self"]).replace(" (one run)", ""), format_shift(m["shift"], interval),
                     f"{r.predicted[0]:.1f}" if r else "", f"{r.error[0]:+.1f}" if r else ""])
    out = {"columns": columns, "references": CheckTable(list(REFERENCE_HEADERS), refs)}
    if wide:
        out["per_model"] = CheckTable(["column", *result.models], [
            [c.name, *(format_shift(c.shifts.get(m), c.shift_intervals.get(m)) for m in result.models)]
            for c in result.columns])
    return out


def check_headline(result: JudgeCheckResult) -> list[str]:
    """What the report says before its numbers: the judge, the references, how many grades, the check's id."""
    judge = result.judge
    where = f" at {judge.get('base_url')}" if judge.get("base_url") else ""
    lines = [f"Judge check of {judge.get('model')}{where} (official prompt): {result.n_graded} of "
             f"{result.n_expected} reference grades, {len(result.models)} reference models "
             f"({', '.join(result.models)})."]
    if result.check_id:
        when = time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime(result.created_at)) if result.created_at else "?"
        lines.append(f"Check {result.check_id} of {when}: this judge's check at this endpoint; it grows as the "
                     "judge grades more reference sets, and official-equivalent estimates name it.")
    if result.message:
        lines.append(result.message)
    if result.n_graded < result.n_expected:
        lines.append("(incomplete: assessed on the grades made; rerun to finish without paying again)")
    return lines


def estimates_line(result: JudgeCheckResult) -> str:
    """Whether official-equivalent estimates of this judge's runs are shown, and why (not)."""
    if result.correctable:
        return f"Official-equivalent estimates of this judge's runs: available (an estimate: {result.correction_note})."
    if result.correction_note:
        return f"Official-equivalent estimates of this judge's runs: not shown ({result.correction_note})."
    return ""


def render_table(table: CheckTable, indent: str = "  ", width: int | None = REPORT_WIDTH) -> list[str]:
    """A table as text: the first column left-aligned, the others right-aligned, each as wide as its widest
    cell (two spaces between columns); names in the first column are cut (…) when the table would pass `width`."""
    widths = [max(len(str(x)) for x in [h, *(row[i] for row in table.rows)]) for i, h in enumerate(table.headers)]
    over = len(indent) + sum(widths) + 2 * (len(widths) - 1) - (width or 10 ** 6)
    if over > 0:
        widths[0] = max(len(table.headers[0]), widths[0] - over)
        table = CheckTable(table.headers, [[r[0] if len(r[0]) <= widths[0] else r[0][:widths[0] - 1] + "…", *r[1:]]
                                           for r in table.rows])

    def line(cells):
        first = f"{cells[0]:<{widths[0]}}"
        return (indent + first + "".join(f"  {c:>{w}}" for c, w in zip(cells[1:], widths[1:]))).rstrip()
    return [line(table.headers), *(line(r) for r in table.rows)]


def format_check(result: JudgeCheckResult, *, wide: bool = False, width: int | None = REPORT_WIDTH) -> str:
    """The plain-text report the CLI prints: the verdict first, then the tables of `check_tables` (the same
    numbers as the app's report), the correction and whether estimates are shown. Every line is at most `width`
    columns (prose wrapped, tables laid out to fit); `wide` adds the per-model shift table, which may be wider."""
    tables = check_tables(result, wide=wide)
    lines = [result.verdict, ""]
    lines += check_headline(result)
    lines += ["", "Per column (pooled over the reference models):", *render_table(tables["columns"]), ""]
    lines += ["Per reference model (total):", *render_table(tables["references"]), ""]
    if wide:
        lines += ["Shift per reference model (points, 95% interval):",
                  *render_table(tables["per_model"], width=None), ""]
    lines.append(LEGEND.format(resamples=result.resamples, seed=result.seed))
    if result.level_note:
        lines.append(result.level_note)
    lines.extend(format_correction(result))
    if result.coarse_note:
        lines += ["", result.coarse_note]
    tail = estimates_line(result)
    if tail:
        lines += ["", tail]
    if not wide:
        return "\n".join(fit_lines(lines, width))
    # the per-model table may pass the width (as asked); the prose around it is still wrapped
    return "\n".join(x for chunk in lines for x in (fit_lines([chunk], width) if not chunk.startswith("  ")
                                                     else [chunk]))


def format_correction(result: JudgeCheckResult) -> list[str]:
    """The report's part on the per-grade correction: what it rests on and its leave-one-model-out error (the
    predictions themselves are columns of the per-reference table)."""
    from .calibration import LomoTable

    lomo = LomoTable.from_dict(result.lomo)
    cal = result.calibration
    if lomo is None or not cal:
        return []
    lines = ["", f"Per-grade correction (official-equivalent estimates; docs/estimates.md): {cal['pairs']} reference "
                 f"pairs (candidate grade, official grade) of {len(result.pairs)} models; per capability group "
                 + ", ".join(f"{g} {n}" for g, n in cal["groups"].items())
                 + f"; {cal['cells_own']} of {cal['cells']} (capability integration, grade) cells rest on "
                 f"{cal['shrink']:g} or more pairs of their own, the others lean on their group and on all pairs."]
    if lomo.rows:
        outside = [f"{r.model} by {r.outside:.1f}" for r in sorted(lomo.rows, key=lambda r: r.official_total)
                   if r.outside > 0.5]
        e = lomo.errors(0)
        lines.append(f"Leave-one-model-out error of the total: rms {float(np.sqrt(np.mean(e ** 2))):.2f}, largest "
                     f"{float(np.max(np.abs(e))):.2f} points"
                     + (f" (outside the others' range: {', '.join(outside)})" if outside else "")
                     + f"; per sample, corrected grades are {lomo.delta_bar:.3f} from the official ones, rms "
                     f"{lomo.rmse:.3f} (keyword matching corrected the same way: rms "
                     f"{cal.get('keyword_rmse', math.nan):.3f}).")
    return lines


def check_prompt_id() -> str:
    """The prompt a check grades with, as stored beside it: the official v1 prompt and its text's sha256 prefix."""
    from ..judging.prompt import prompt_template

    return "mmvet-v1-official:" + hashlib.sha256(prompt_template("v1", None).encode("utf-8")).hexdigest()[:12]


def current_check(store, settings: JudgeSettings, scope: CheckScope = HOST_SCOPE) -> JudgeCheckResult | None:
    """The check of the judge `settings` describe (endpoint, model, token limit; the official prompt) made in
    `scope` (the server's, unless told): the stored check with the most reference models, the latest of those (a
    check grows, so that is the latest one; checks stored before checks grew may be smaller than an earlier one).
    Its `check_id` and `created_at` name it. None when there is none."""
    if settings.provider == "imported":
        return None
    return check_of_fingerprint(store, check_fingerprint(settings, scope))


def check_of_fingerprint(store, fingerprint: str) -> JudgeCheckResult | None:
    """`current_check` of the check stored under this fingerprint (`check_fingerprint`), made by the server
    (``host``: its own key, the host's CLI, or a check the host imported) or, under a visitor's own fingerprint,
    by that visitor. A check stored before checks recorded who made them (scope "") is never one (anybody could
    have made it), nor one of any other scope. Among them: a check made here first, then the one with the most
    reference models, then the latest."""
    prompt = check_prompt_id()
    best = None
    for entry in store.judge_checks():
        if entry.get("fingerprint") != fingerprint or entry.get("prompt", "") not in (prompt, "") \
                or entry.get("scope") not in (HOST, VISITOR):
            continue
        try:
            result = JudgeCheckResult.from_dict(entry["result"])
        except (KeyError, TypeError, ValueError):
            continue                          # a damaged entry is skipped, not a crash
        result.check_id = str(entry.get("id", ""))
        result.created_at = float(entry.get("created_at") or result.created_at or 0.0)
        # a check made here wins over an imported one (an import serves a judge this host has not checked, and
        # never rewrites the check made here)
        key = (not result.origin, len(result.models), result.created_at)
        if best is None or key > best[0]:
            best = (key, result)
    return None if best is None else best[1]


def check_of_judge_model(store, model: str) -> JudgeCheckResult | None:
    """The check here of the judge a grade file records (`model`, as its ``model`` / ``eval_model`` field says),
    at any endpoint, with the official prompt, made (or imported) by the host: a check of that model, or of the alias it is a dated version of
    (``gpt-4.1`` for ``gpt-4.1-2025-04-14``); a check made here first, then the most reference models, then the
    latest. None when there is none."""
    from ..scores.graded import judges_compatible

    prompt = check_prompt_id()
    best = None
    for entry in store.judge_checks():
        if entry.get("prompt", "") not in (prompt, "") or not entry.get("judge_model") \
                or entry.get("scope") != HOST:       # the server's checks only: never a visitor's
            continue
        if not judges_compatible(model, str(entry["judge_model"])):
            continue
        try:
            result = JudgeCheckResult.from_dict(entry["result"])
        except (KeyError, TypeError, ValueError):
            continue
        result.check_id = str(entry.get("id", ""))
        result.created_at = float(entry.get("created_at") or result.created_at or 0.0)
        key = (not result.origin, len(result.models), result.created_at)
        if best is None or key > best[0]:
            best = (key, result)
    return None if best is None else best[1]


def stored_check(store, settings: JudgeSettings, refs: list[Reference] | None = None,
                 scope: CheckScope = HOST_SCOPE) -> JudgeCheckResult | None:
    """The stored check of the judge `settings` describe in `scope`: `current_check`, or the latest check of
    exactly these reference sets when `refs` is given."""
    if refs is None:
        return current_check(store, settings, scope)
    if settings.provider == "imported":
        return None
    data = store.latest_judge_check(check_fingerprint(settings, scope), refs=references_key(refs))
    return None if data is None else JudgeCheckResult.from_dict(data)


def run_check(store, run_judge: dict) -> JudgeCheckResult | None:
    """The server's check of the judge a run was graded by (the settings stored with the run: `current_check`:
    a check this server made with its own key, or the host with the CLI), or None: imported grades and the
    keyword baseline (no judge to correct). A visitor's own check is never one. (A run graded with a visitor's
    key at the server's own endpoint gets none either: `service.judges.Judges.equivalence`.)"""
    if run_judge.get("provider") in ("imported", "baseline"):
        return None
    settings = JudgeSettings(**{k: v for k, v in run_judge.items() if k in JudgeSettings.__dataclass_fields__})
    return current_check(store, settings)


def grown_references(store, settings: JudgeSettings, refs: list[Reference],
                     scope: CheckScope = HOST_SCOPE) -> list[Reference]:
    """`refs` and every other reference set of the manifest the judge's current check (in `scope`) holds (a check
    grows: a later check with fewer sets keeps the others), in manifest order."""
    previous = current_check(store, settings, scope)
    held = set(previous.models) if previous is not None else set()
    wanted = {r.model for r in refs} | held
    if wanted == {r.model for r in refs}:
        return list(refs)
    by_name = {r.model: r for r in refs}
    return [by_name.get(r.model, r) for r in load_references(which="all") if r.model in wanted]


def _same_pairs(a: dict, b: dict) -> bool:
    """Same reference sets, same grades, same everything the correction reads (a check stored by an older
    version, with fewer fields per pair, is not the same: it is stored again)."""
    return set(a) == set(b) and all(a[m] == b[m] for m in a)


def check_run_fingerprint(check_fp: str, ref: Reference) -> str:
    """The fingerprint of a check's grading run of one reference set: in a namespace of its own (``judge-check:``;
    a visitor's run has a plain sha256, `runs.run_fingerprint`), so no run a visitor starts is ever found as a
    check's, whatever its name, answers and judge."""
    ident = json.dumps([check_fp, ref.model, sorted(ref.predictions.items())], ensure_ascii=False)
    return "judge-check:" + hashlib.sha256(ident.encode("utf-8")).hexdigest()


def check_grading_run(store, benchmark: Benchmark, settings: JudgeSettings, check_fp: str, ref: Reference) -> str:
    """The id of the check's own grading run of `ref` (made on first use, found again by its fingerprint and
    owner: `check_run_fingerprint`)."""
    from ..runs.lifecycle import benchmark_to_stored

    fp = check_run_fingerprint(check_fp, ref)
    existing = store.find_run(fp)
    if existing is not None and existing.owner == CHECK_RUN_OWNER and existing.fingerprint == fp:
        return existing.id
    return store.create_run(model_name=f"judge-check {ref.model}", benchmark=benchmark_to_stored(benchmark, "mmvet-v1"),
                            n_runs=1, judge=settings.to_dict(), predictions=dict(ref.predictions),
                            results_format="reference", owner=CHECK_RUN_OWNER, fingerprint=fp)


def judge_grades(view) -> dict[str, list[float | None]]:
    """The judge's own grades of a run (`runs.RunView`), sample id -> per-run scores: never an override (a human
    score is not the judge's answer) and never an imported grade."""
    from ..judging.grading import GRADED

    out: dict[str, list[float | None]] = {}
    for sid in view.benchmark.ids:
        row = []
        for r in range(view.run.n_runs):
            g = view.grades.get((sid, r))
            imported = g is not None and any(isinstance(a, dict) and a.get("imported") for a in g.attempts or [])
            row.append(g.score if g is not None and g.status in GRADED and not imported else None)
        out[sid] = row
    return out


async def run_judge_check(store, settings: JudgeSettings, api_key: str | None, *, concurrency: int = 16,
                          on_grade: Callable | None = None, stop=None, budget=None,
                          refs: list[Reference] | None = None, judge=None, scope: CheckScope = HOST_SCOPE,
                          resamples: int = DEFAULT_RESAMPLES, seed: int = DEFAULT_SEED) -> JudgeCheckResult:
    """Grade every reference with the candidate judge (in the check's own runs, `check_grading_run`; answers are
    cached: a repeated check costs nothing), assess the judge's own grades (`judge_grades`), store the result
    (`Store.put_judge_check`, under `check_fingerprint` in `scope`, the official prompt and the reference sets)
    and return it. `judge`: the judge to call (the app's, with its endpoint policy and its key's answer scope),
    else one made from `settings` and `api_key`; `scope`: who makes the check (the server, unless told).

    The check grows: the sets the judge's current check already holds are graded too (their answers are stored:
    no call) and assessed with `refs`. When that changes nothing (same sets, same grades), nothing new is stored:
    the current check is returned (``unchanged``), so estimates keep the check they name. `calls` counts the judge
    calls made, `cached` the grades that needed none (already in the check's runs, or answered from the store)."""
    from ..judging.grading import GRADED, grade_run
    from ..judging.judge import make_judge
    from ..runs.lifecycle import load_run_view

    settings = check_settings(settings)
    benchmark = load_bundled_v1()
    refs = refs if refs is not None else load_references()
    previous = current_check(store, settings, scope)
    refs = grown_references(store, settings, refs, scope)
    judge = judge if judge is not None else make_judge(settings, api_key, cache_scope=scope.answers)
    fingerprint = check_fingerprint(settings, scope)
    run_ids, calls, cached, message = {}, 0, 0, ""
    try:
        for ref in refs:
            run_id = check_grading_run(store, benchmark, settings, fingerprint, ref)
            run_ids[ref.model] = run_id
            cached += sum(n for status, n in store.count_grades(run_id).items() if status in GRADED)
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
        candidate[model] = judge_grades(load_run_view(store, run_id, evidence_for=None))
    try:
        result = assess_judge(benchmark, refs, candidate, settings.to_dict(), resamples=resamples, seed=seed)
    except ValueError as e:          # nothing graded: say why grading stopped
        raise ValueError(f"{e} ({message})" if message else str(e)) from None
    if previous is not None and not message and _same_pairs(previous.pairs, result.pairs):
        previous.calls, previous.cached, previous.unchanged = calls, cached, True
        previous.run_ids = run_ids
        return previous
    result.run_ids, result.calls, result.cached, result.message = run_ids, calls, cached, message
    result.check_id = store.put_judge_check(fingerprint, settings.to_dict(), result.to_dict(),
                                            prompt=check_prompt_id(), refs=result.references, scope=scope.kind,
                                            owner_hash=scope.owner_hash)
    return result
