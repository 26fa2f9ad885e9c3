"""Comparing grade sets: the paper's evaluator study (§4.4–4.5, Tables 6–8) and model-vs-model tests (pure).

A **grade set** (`ScoreSet`) is anything graded on one benchmark: a run in the store, an official grade JSON, an
imported graded file, a combination of sets, or human scores. Per sample its score is the mean over its runs.
`compare_sets` reports, for every set against the first (the reference), over the samples every set graded:

* **Δ̄**, the paper's Table 6 measure: the mean absolute difference of per-sample scores (0 = identical, 1 = as far
  apart as possible), overall, per capability and per capability integration;
* the score difference **B − A** of every column with a paired bootstrap interval over samples (`stats`);
* **agreement**: the share of samples with equal scores and within 0.1, and the Pearson correlation;
* the **noise floor** of a set with several runs: Δ̄ between its own runs (mean over pairs of runs), which is how
  far a judge is from itself and so the least Δ̄ one can hope for against it;
* the samples that disagree most, with both sides' judge answers.

Sets on different benchmarks (another MM-Vet version, or the same ids with other questions) are refused, and so is
a comparison without a common sample; the result always says how many samples were compared.
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field
from itertools import combinations

import numpy as np

from .aggregate import aggregate_scores
from ..inputs.benchmark import Benchmark
from .stats import (DEFAULT_LEVEL, DEFAULT_RESAMPLES, DEFAULT_SEED, bootstrap_many, column_membership,
                    draw_counts)

#: Two per-sample scores closer than this are "equal" (scores are multiples of 0.1 or their means).
EQUAL_TOL = 1e-9
#: The paper's scale is in steps of 0.1: "within 0.1" is one step apart at most.
WITHIN = 0.1


class CompareError(ValueError):
    """Sets that cannot be compared (different benchmarks, no common sample, fewer than two sets)."""


@dataclass
class ScoreSet:
    """One grade set, as compared: per-sample scores (one per run, ``None`` = not graded) and their evidence.

    `kind` is ``run``, ``grade-file``, ``combined`` or ``human``; `version` the MM-Vet version of its ids
    (``v1``/``v2``); `questions` maps ids to (question, ground truth) when the set knows its benchmark's text (a
    run does), so that two sets whose ids mean different questions are refused. `contents` holds the judge's
    answers per run; `predictions` the graded answers when known. `note` says why the numbers are not the official
    MM-Vet metric (None when they are, or when unknown)."""

    name: str
    kind: str
    version: str
    scores: dict[str, list[float | None]]
    judge: str = ""
    source: str = ""
    contents: dict[str, list[str | None]] = field(default_factory=dict)
    predictions: dict[str, str] = field(default_factory=dict)
    questions: dict[str, tuple[str, str]] = field(default_factory=dict)
    note: str | None = None

    @property
    def n_runs(self) -> int:
        return max((len(v) for v in self.scores.values()), default=0)

    def sample_scores(self) -> dict[str, float]:
        """Sample id -> mean of its graded runs (samples with no graded run are left out)."""
        out = {}
        for sid, runs in self.scores.items():
            graded = [float(s) for s in runs if s is not None and not math.isnan(float(s))]
            if graded:
                out[sid] = sum(graded) / len(graded)
        return out


def version_of_ids(ids) -> str | None:
    """``v1``/``v2`` from ids like ``v1_0``; None when they are mixed or not MM-Vet ids.

    >>> version_of_ids(["v1_0", "v1_5"]), version_of_ids(["v2_0"]), version_of_ids(["v1_0", "v2_0"])
    ('v1', 'v2', None)
    """
    prefixes = {str(i).split("_", 1)[0] for i in ids}
    return prefixes.pop() if len(prefixes) == 1 else None


# --------------------------------------------------------------------------------------------------------------
# Result records


@dataclass
class Column:
    """A column of the tables: ``total``, a capability or an integration, with its common-sample count."""

    kind: str          # total, capability, integration
    name: str
    n: int


@dataclass
class ColumnScore:
    """One set's score in one column: the score (percent, unrounded), its bootstrap interval over samples, the
    official mean and ``std`` over runs (rounded like the official CSV) and the noise floor (Δ̄ run to run)."""

    score: float | None
    low: float | None
    high: float | None
    official: float | None
    std: float | None
    noise_floor: float | None


@dataclass
class SetReport:
    name: str
    kind: str
    judge: str
    source: str
    n_runs: int
    n_graded: int           # samples with at least one graded run
    note: str | None
    columns: list[ColumnScore]

    @property
    def noise_floor(self) -> float | None:
        return self.columns[0].noise_floor


@dataclass
class ColumnDiff:
    """One set against the reference in one column: Δ̄ and the difference B − A with its paired interval."""

    delta_bar: float | None
    diff: float | None
    low: float | None
    high: float | None


@dataclass
class Disagreement:
    id: str
    capabilities: str
    reference: float
    other: float
    question: str
    ground_truth: str
    reference_answers: list[str | None]
    other_answers: list[str | None]
    reference_prediction: str | None
    other_prediction: str | None

    @property
    def gap(self) -> float:
        return abs(self.other - self.reference)


@dataclass
class PairReport:
    reference: str
    other: str
    columns: list[ColumnDiff]
    equal: float
    within: float
    correlation: float | None
    disagreements: list[Disagreement]

    @property
    def delta_bar(self) -> float:
        return self.columns[0].delta_bar  # type: ignore[return-value]


@dataclass
class Comparison:
    """Everything `compare_sets` found; `to_dict` is the JSON export, `rows`/`sample_rows` the CSV ones."""

    benchmark: str
    version: str
    n_common: int
    ids: list[str]
    columns: list[Column]
    sets: list[SetReport]
    pairs: list[PairReport]
    excluded: dict[str, int]
    resamples: int
    seed: int
    level: float
    sample_scores: list[dict[str, float]]
    #: per set (human sets excepted: they annotate a few samples by design), the benchmark's ids it has no grade
    #: for: such a set is partial, and is compared on the samples every set graded.
    missing: dict[str, list[str]] = field(default_factory=dict)

    def to_dict(self) -> dict:
        return {
            "benchmark": self.benchmark, "version": self.version, "n_common": self.n_common,
            "bootstrap": {"resamples": self.resamples, "seed": self.seed, "level": self.level},
            "excluded_samples": self.excluded, "missing_samples": self.missing,
            "columns": [vars(c) for c in self.columns],
            "sets": [{"name": s.name, "kind": s.kind, "judge": s.judge, "source": s.source, "n_runs": s.n_runs,
                      "n_graded": s.n_graded, "note": s.note,
                      "scores": {c.name: _clean(vars(v)) for c, v in zip(self.columns, s.columns)}}
                     for s in self.sets],
            "pairs": [{"reference": p.reference, "other": p.other, "delta_bar": _num(p.delta_bar),
                       "equal": p.equal, "within_0.1": p.within, "correlation": _num(p.correlation),
                       "columns": {c.name: _clean(vars(v)) for c, v in zip(self.columns, p.columns)},
                       "disagreements": [{**vars(d), "gap": d.gap} for d in p.disagreements]}
                      for p in self.pairs],
            "samples": [{"id": sid, **{s.name: row[s.name] for s in self.sets}}
                        for sid, row in zip(self.ids, self.sample_scores)],
        }

    CSV_HEADER = ["set", "kind", "column", "n", "score", "ci_low", "ci_high", "official", "std",
                  "noise_floor", "delta_bar_vs_ref", "diff_vs_ref", "diff_ci_low", "diff_ci_high"]

    def rows(self) -> list[list]:
        """One row per (set, column): its score with interval, official mean / std, noise floor and, for every
        set but the reference, Δ̄ and B − A with its interval against the reference."""
        out = []
        for k, s in enumerate(self.sets):
            pair = self.pairs[k - 1] if k else None
            for j, (col, v) in enumerate(zip(self.columns, s.columns)):
                d = pair.columns[j] if pair else None
                out.append([s.name, col.kind, col.name, col.n, _r(v.score), _r(v.low), _r(v.high), v.official,
                            v.std, _r(v.noise_floor, 4), _r(d.delta_bar, 4) if d else "",
                            _r(d.diff) if d else "", _r(d.low) if d else "", _r(d.high) if d else ""])
        return out

    def sample_rows(self) -> tuple[list[str], list[list]]:
        header = ["id", *[s.name for s in self.sets]]
        return header, [[sid, *[_r(row[s.name], 4) for s in self.sets]]
                        for sid, row in zip(self.ids, self.sample_scores)]


def _num(x):
    return None if x is None or (isinstance(x, float) and math.isnan(x)) else float(x)


def _clean(d: dict) -> dict:
    return {k: _num(v) if isinstance(v, (float, np.floating)) or v is None else v for k, v in d.items()}


def _r(x, digits: int = 2):
    return "" if x is None or (isinstance(x, float) and math.isnan(x)) else round(float(x), digits)


# --------------------------------------------------------------------------------------------------------------
# The comparison


def check_comparable(benchmark: Benchmark, sets: list[ScoreSet]) -> list[str]:
    """The ids every set graded, in benchmark order. Raises `CompareError` when fewer than two sets are given,
    a set is on another MM-Vet version or its questions differ from the benchmark's, or no sample is common."""
    if len(sets) < 2:
        raise CompareError("compare needs at least two grade sets (the first is the reference)")
    for s in sets:
        if s.version != benchmark.version:
            raise CompareError(f"{s.name} is graded on MM-Vet {s.version}, not on {benchmark.name} "
                               f"({benchmark.version}): sets on different benchmarks cannot be compared")
        differ = [sid for sid, (q, a) in s.questions.items()
                  if sid in benchmark.samples and (benchmark.samples[sid].question, benchmark.samples[sid].answer)
                  != (q, a)]
        if differ:
            raise CompareError(f"{s.name} was graded on another benchmark: {len(differ)} of its ids have other "
                               f"questions or answers (e.g. {differ[0]})")
    graded = [s.sample_scores() for s in sets]
    common = [sid for sid in benchmark.ids if all(sid in g for g in graded)]
    if not common:
        raise CompareError("no sample is graded in every set: nothing to compare ("
                           + ", ".join(f"{s.name}: {len(g)} graded" for s, g in zip(sets, graded)) + ")")
    return common


def _membership(benchmark: Benchmark, ids: list[str]) -> tuple[list[Column], np.ndarray]:
    kinds, member = column_membership(benchmark, ids)
    sizes = member.sum(axis=0)
    return [Column(kind, name, int(sizes[j])) for j, (kind, name) in enumerate(kinds)], member


def _masked_mean(values: np.ndarray, member: np.ndarray) -> np.ndarray:
    """Mean of `values` (n) over each column's members (n × k): k values, NaN for an empty column."""
    sizes = member.sum(axis=0)
    sums = values @ member.astype(np.float64)
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.where(sizes > 0, sums / np.where(sizes > 0, sizes, 1), np.nan)


def noise_floor(s: ScoreSet, ids: list[str], member: np.ndarray) -> np.ndarray | None:
    """Δ̄ of a set with itself: per column, the mean over pairs of runs of the mean |run i − run j| over the
    samples graded in both. None for a set with fewer than two runs."""
    if s.n_runs < 2:
        return None
    per_pair = []
    for i, j in combinations(range(s.n_runs), 2):
        a = np.array([_run(s, sid, i) for sid in ids], dtype=np.float64)
        b = np.array([_run(s, sid, j) for sid in ids], dtype=np.float64)
        ok = np.isfinite(a) & np.isfinite(b)
        if not ok.any():
            continue
        per_pair.append(_masked_mean(np.abs(a - b)[ok], member[ok]))
    return np.nanmean(np.array(per_pair), axis=0) if per_pair else None


def _run(s: ScoreSet, sid: str, i: int) -> float:
    runs = s.scores.get(sid) or []
    v = runs[i] if i < len(runs) else None
    return float("nan") if v is None else float(v)


def compare_sets(benchmark: Benchmark, sets: list[ScoreSet], *, resamples: int = DEFAULT_RESAMPLES,
                 seed: int = DEFAULT_SEED, level: float = DEFAULT_LEVEL, top: int = 10,
                 complete_only: bool = False) -> Comparison:
    """Compare every set with the first (the reference) over the samples all of them graded.

    `benchmark` gives the capabilities (restrict it with `Benchmark.subset` to compare on a subset). Bootstrap
    intervals use `resamples` draws from `seed` (the same draws for every set, so intervals are paired).
    `top` disagreeing samples are listed per pair. A set (other than human scores) lacking grades for some of the
    benchmark's samples is partial: its missing ids are reported (`Comparison.missing`), or with `complete_only`
    refused. Raises `CompareError` (see `check_comparable`).
    """
    ids = check_comparable(benchmark, sets)
    missing = {}
    for s in sets:
        graded = s.sample_scores()
        lacking = [sid for sid in benchmark.ids if sid not in graded]
        if lacking and s.kind != "human":
            missing[s.name] = lacking
    if missing and complete_only:
        name, lacking = next(iter(missing.items()))
        raise CompareError(f"{name} is partial: {_missing_text(lacking, benchmark)}; --complete-only refuses "
                           "incomplete grade sets (without it they are compared on the samples every set graded)")
    # columns are those of the common samples (a capability nobody graded has no score to compare)
    common_bench = benchmark.subset(ids, benchmark.subset_name or "common")
    columns, member = _membership(common_bench, ids)
    per_sample = [s.sample_scores() for s in sets]
    vectors = [np.array([g[sid] for sid in ids], dtype=np.float64) for g in per_sample]
    counts = draw_counts(len(ids), resamples, seed)
    # every set's scores and every B − A on the same draws, in one product (paired by construction)
    intervals = bootstrap_many(vectors + [v - vectors[0] for v in vectors[1:]], member, counts=counts, level=level)

    reports = []
    for s, vec, graded, ci in zip(sets, vectors, per_sample, intervals):
        official = aggregate_scores(common_bench, {sid: s.scores[sid] for sid in ids}, s.n_runs)
        off_cols = [official.total, *official.capabilities, *official.integrations]
        floor = noise_floor(s, ids, member)
        cols = [ColumnScore(_num(ci.point[j]), _num(ci.low[j]), _num(ci.high[j]), off_cols[j].mean,
                            off_cols[j].std if s.n_runs > 1 else None,
                            None if floor is None else _num(floor[j]))
                for j in range(len(columns))]
        reports.append(SetReport(s.name, s.kind, s.judge, s.source, s.n_runs, len(graded), s.note, cols))

    ref, ref_vec = sets[0], vectors[0]
    pairs = []
    for s, vec, diff in zip(sets[1:], vectors[1:], intervals[len(sets):]):
        delta = _masked_mean(np.abs(vec - ref_vec), member)
        cols = [ColumnDiff(_num(delta[j]), _num(diff.point[j]), _num(diff.low[j]), _num(diff.high[j]))
                for j in range(len(columns))]
        gaps = np.abs(vec - ref_vec)
        corr = None
        if len(ids) > 1 and np.std(vec) > 0 and np.std(ref_vec) > 0:
            corr = float(np.corrcoef(ref_vec, vec)[0, 1])
        order = sorted(range(len(ids)), key=lambda i: (-gaps[i], i))[:top]
        worst = [_disagreement(benchmark, ref, s, ids[i], ref_vec[i], vec[i]) for i in order if gaps[i] > EQUAL_TOL]
        pairs.append(PairReport(ref.name, s.name, cols, float(np.mean(gaps <= EQUAL_TOL)),
                                float(np.mean(gaps <= WITHIN + EQUAL_TOL)), corr, worst))

    excluded = {s.name: len(g) - len(ids) for s, g in zip(sets, per_sample)}
    samples = [{s.name: float(v[i]) for s, v in zip(sets, vectors)} for i in range(len(ids))]
    return Comparison(benchmark.name, benchmark.version, len(ids), ids, columns, reports, pairs, excluded,
                      counts.shape[0], seed, level, samples, missing)


def _missing_text(missing: list[str], benchmark: Benchmark) -> str:
    from .graded import missing_text
    return missing_text(missing, benchmark)


def _disagreement(benchmark: Benchmark, a: ScoreSet, b: ScoreSet, sid: str, sa: float, sb: float) -> Disagreement:
    sample = benchmark.samples[sid]
    return Disagreement(sid, ",".join(sample.capabilities), float(sa), float(sb), sample.question, sample.answer,
                        list(a.contents.get(sid, [])), list(b.contents.get(sid, [])),
                        a.predictions.get(sid), b.predictions.get(sid))


# --------------------------------------------------------------------------------------------------------------
# Combining sets (Table 7)


def combine_sets(sets: list[ScoreSet], name: str | None = None) -> ScoreSet:
    """A set whose per-sample score is the mean of the sets' per-sample scores (paper Table 7), on the samples
    every set graded. When every set has the same number of runs k, run i of the result is the mean of the sets'
    run i (so the official ``std`` over runs stays meaningful); otherwise the result has one run holding the mean.

    Raises `CompareError` for fewer than two sets, mixed MM-Vet versions or no common sample."""
    if len(sets) < 2:
        raise CompareError("combine needs at least two grade sets")
    versions = {s.version for s in sets}
    if len(versions) > 1:
        raise CompareError(f"sets on different benchmarks cannot be combined ({', '.join(sorted(versions))})")
    per_sample = [s.sample_scores() for s in sets]
    common = [sid for sid in sets[0].scores if all(sid in g for g in per_sample)]
    if not common:
        raise CompareError("no sample is graded in every set: nothing to combine")
    k = sets[0].n_runs
    per_run = all(s.n_runs == k for s in sets) and all(
        len(s.scores[sid]) == k and None not in s.scores[sid] for s in sets for sid in common)
    if per_run:
        scores = {sid: [sum(float(s.scores[sid][i]) for s in sets) / len(sets) for i in range(k)] for sid in common}
    else:
        scores = {sid: [sum(g[sid] for g in per_sample) / len(sets)] for sid in common}
    label = name or " + ".join(s.name for s in sets)
    contents = {sid: [f"{v:.4g}" for v in vals] for sid, vals in scores.items()}
    judge = "combined(" + "+".join(s.judge or s.name for s in sets) + ")"
    return ScoreSet(label, "combined", versions.pop(), scores, judge=judge,
                    source=" + ".join(s.source or s.name for s in sets), contents=contents,
                    note="combined judges (mean of several grade sets; paper Table 7): not the official MM-Vet metric")


def make_combined_grade_json(combined: ScoreSet, parts: list[str]) -> dict:
    """The official grade-JSON shape of a combined set (usable by ``aggregate``, the app's viewer, ``compare``):
    ``model`` names the combination, ``content`` the combined score, plus ``combined_from`` (ignored by official
    readers)."""
    out = {}
    for sid, vals in combined.scores.items():
        out[sid] = {"model": [combined.judge] * len(vals), "content": combined.contents[sid],
                    "score": [float(v) for v in vals], "combined_from": parts}
    return out


# --------------------------------------------------------------------------------------------------------------
# Text report


def _fmt(x, digits: int = 1, sign: bool = False) -> str:
    if x is None or (isinstance(x, float) and math.isnan(x)):
        return "—"
    if round(x, digits) == 0:
        x = 0.0                                   # no "-0.0"
    return f"{x:+.{digits}f}" if sign else f"{x:.{digits}f}"


def _ci(lo, hi, digits: int = 1, sign: bool = False) -> str:
    return "" if lo is None or hi is None else f"[{_fmt(lo, digits, sign)}, {_fmt(hi, digits, sign)}]"


def format_report(cmp: Comparison, *, integrations: bool = True) -> str:
    """A readable plain-text report of a comparison (what the CLI prints)."""
    pct = int(round(cmp.level * 100))
    lines = [f"Compared {cmp.n_common} samples of {cmp.benchmark} ({cmp.version}) graded in every set; "
             f"{pct}% intervals: paired bootstrap over samples, {cmp.resamples:,} resamples, seed {cmp.seed}."]
    for name, lacking in cmp.missing.items():
        shown = ", ".join(lacking[:10]) + (f" … ({len(lacking)} in all)" if len(lacking) > 10 else "")
        lines.append(f"  PARTIAL: {name} has no grade for {len(lacking)} sample(s) of {cmp.benchmark} ({shown}); "
                     "compared on the samples every set graded (--complete-only refuses partial sets)")
    for s in cmp.sets:
        extra = cmp.excluded.get(s.name, 0)
        if extra:
            lines.append(f"  ({s.name}: {extra} graded sample(s) not in every set were left out)")
    lines.append("")
    lines.append("Sets (score [bootstrap interval over samples] ± std over runs; noise floor = Δ̄ run to run):")
    for k, s in enumerate(cmp.sets):
        t = s.columns[0]
        role = "reference" if k == 0 else f"set {k + 1}"
        std = f" ± {_fmt(t.std)}" if t.std is not None else ""
        floor = f", noise floor Δ̄ {_fmt(t.noise_floor, 3)}" if t.noise_floor is not None else ""
        # the set's name on one line, its numbers on the next: a long file name never splits them (100 columns)
        lines.append(f"  {role}: {s.name} [{s.kind}; judge {s.judge or '?'}; {s.n_runs} run(s)]:")
        lines.append(f"    total {_fmt(t.score)} {_ci(t.low, t.high)}{std}{floor}")
        if s.note:
            lines.append(f"      {s.note}")
    for p in cmp.pairs:
        lines.append("")
        t = p.columns[0]
        lines.append(f"{p.other} vs {p.reference}:")
        lines.append(f"  Δ̄ {_fmt(t.delta_bar, 3)} · B − A {_fmt(t.diff, 1, True)} {_ci(t.low, t.high, 1, True)} · "
                     f"equal {100 * p.equal:.0f}% · within 0.1 {100 * p.within:.0f}% · correlation "
                     f"{_fmt(p.correlation, 3)}")
        verdict = _difference_verdict(t.low, t.high)
        if verdict:
            lines.append(f"  {verdict}")
        lines.append(f"  {'column':<16}{'n':>5}{'A':>7}{'B':>7}{'B − A':>8}  {pct}% interval{'':>6}{'Δ̄':>7}")
        ref_cols = cmp.sets[0].columns
        other_cols = next(s for s in cmp.sets if s.name == p.other).columns
        for col, a, b, d in zip(cmp.columns, ref_cols, other_cols, p.columns):
            if col.kind == "integration" and not integrations:
                continue
            lines.append(f"  {col.name:<16}{col.n:>5}{_fmt(a.score):>7}{_fmt(b.score):>7}{_fmt(d.diff, 1, True):>8}"
                         f"  {_ci(d.low, d.high, 1, True):<18}{_fmt(d.delta_bar, 3):>7}")
        if p.disagreements:
            lines.append("  Most different samples (reference → other):")
            for d in p.disagreements[:5]:
                lines.append(f"    {d.id} [{d.capabilities}] {d.reference:.2f} → {d.other:.2f}")
    return "\n".join(lines)


def _difference_verdict(low, high) -> str:
    if low is None or high is None:
        return ""
    if low > 0:
        return "B is higher than A beyond sampling noise (the interval excludes 0)."
    if high < 0:
        return "B is lower than A beyond sampling noise (the interval excludes 0)."
    return "The difference is within sampling noise (the interval contains 0)."



# --------------------------------------------------------------------------------------------------------------
# Tables for the app (plain lists of strings and numbers; untrusted text stays plain text)

SUMMARY_COLUMNS = ["set", "kind", "judge", "runs", "samples", "total", "95% interval", "± std", "noise floor Δ̄",
                   "Δ̄ vs reference", "B − A", "B − A 95% interval", "equal", "within 0.1", "correlation"]
PAIR_COLUMNS = ["column", "n", "A", "B", "B − A", "95% interval", "Δ̄"]
DISAGREEMENT_COLUMNS = ["id", "capabilities", "A", "B", "gap", "question"]


def summary_rows(cmp: Comparison) -> list[list]:
    """One row per set: its total with interval and std, its noise floor and, but for the reference, its Δ̄,
    B − A with interval and agreement against the reference."""
    rows = []
    for k, s in enumerate(cmp.sets):
        t = s.columns[0]
        row = [s.name, "reference" if k == 0 else s.kind, s.judge, s.n_runs, s.n_graded, _fmt(t.score),
               _ci(t.low, t.high), _fmt(t.std) if t.std is not None else "", _fmt(t.noise_floor, 3)
               if t.noise_floor is not None else ""]
        if k:
            p = cmp.pairs[k - 1]
            d = p.columns[0]
            row += [_fmt(d.delta_bar, 3), _fmt(d.diff, 1, True), _ci(d.low, d.high, 1, True),
                    f"{100 * p.equal:.0f}%", f"{100 * p.within:.0f}%", _fmt(p.correlation, 3)]
        else:
            row += ["", "", "", "", "", ""]
        rows.append(row)
    return rows


def pair_rows(cmp: Comparison, index: int = 0) -> list[list]:
    """The column table of pair `index` (set index + 1 against the reference)."""
    p = cmp.pairs[index]
    a_cols = cmp.sets[0].columns
    b_cols = cmp.sets[index + 1].columns
    return [[col.name, col.n, _fmt(a.score), _fmt(b.score), _fmt(d.diff, 1, True), _ci(d.low, d.high, 1, True),
             _fmt(d.delta_bar, 3)] for col, a, b, d in zip(cmp.columns, a_cols, b_cols, p.columns)]


def disagreement_rows(cmp: Comparison, index: int = 0) -> list[list]:
    return [[d.id, d.capabilities, f"{d.reference:.2f}", f"{d.other:.2f}", f"{d.gap:.2f}", d.question]
            for d in cmp.pairs[index].disagreements]
