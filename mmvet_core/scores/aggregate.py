"""Scores per capability, per capability integration and per run, with the official rounding (pure, no I/O).

The official evaluator (``mm-vet_evaluator.py``, ``export_result``) does, for each judge run ``i``:

* sum the sample scores ``grade["score"][i]`` per capability, per integration (the sample's exact capability
  set) and in total, as Python floats in sample order;
* divide each sum by the column's sample count and multiply by 100 (in that order: ``sum / n * 100``);

then, per column, takes the mean over runs and rounds it to one decimal with numpy (``round()`` on a
``np.float64`` is ``np.round``, which rounds ``x * 10`` half-to-even and can differ from Python's ``round`` on
floats: ``np.round(0.35, 1) == 0.4`` but ``round(0.35, 1) == 0.3``). ``std`` is the population standard
deviation (``np.std``) of the per-run totals, rounded the same way, and ``runs`` lists the per-run totals, each
rounded. `aggregate_scores` repeats exactly these operations so that a complete grade set gives the official
numbers to the digit.

Partial grade sets (live display while grading) are aggregated the same way over what is graded: each run's
column is computed over the samples graded *in that run*, and the column mean is taken over the runs that have
at least one graded sample for it. Such results are marked ``complete=False`` and are not official numbers.
"""
from __future__ import annotations

import math
from dataclasses import asdict, dataclass, field
from typing import Mapping, Sequence

import numpy as np

from mmvet_core.inputs.benchmark import Benchmark

#: The official evaluator's ``--decimal_places`` default.
DECIMALS = 1


def round_official(value: float | None, decimals: int = DECIMALS) -> float | None:
    """Round like the official evaluator (numpy: scale, round half to even, unscale); ``None`` stays ``None``.

    >>> round_official(0.35), round(0.35, 1)
    (0.4, 0.3)
    >>> round_official(None) is None
    True
    """
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return None
    return float(np.round(np.float64(value), decimals))


@dataclass
class ColumnScore:
    """One column of the official tables: a capability, an integration or ``total``.

    `mean` and `std` are rounded to one decimal (``None`` when no sample of the column is graded yet);
    `per_run` holds the unrounded per-run percentages (``None`` for a run with no graded sample of the column).
    `n_samples` is the column's sample count in the benchmark; `n_graded` how many of them have a score in every
    run.
    """

    name: str
    mean: float | None
    std: float | None
    per_run: list[float | None]
    n_samples: int
    n_graded: int = 0

    @property
    def runs(self) -> list[float | None]:
        """Per-run percentages, each rounded to one decimal like the official ``runs`` column."""
        return [round_official(v) for v in self.per_run]


@dataclass
class Scores:
    """Aggregated scores of one grade set over one benchmark (or subset).

    `capabilities` follow ``benchmark.capabilities`` (the paper's order), `integrations` follow
    ``benchmark.integrations`` (canonical names, by sample count). `complete` is true when every sample has a
    score for every one of the `n_runs` runs; only then are the numbers the official ones.
    """

    n_runs: int
    n_samples: int
    n_graded: int
    total: ColumnScore
    capabilities: list[ColumnScore]
    integrations: list[ColumnScore]
    complete: bool
    notes: list[str] = field(default_factory=list)
    #: Human overrides applied to these scores (0: the judge's grades only). With overrides the numbers are the
    #: run owner's corrected score, not the official metric; `judge_only_total` / `judge_only_std` keep the
    #: judge's own total beside it (None without overrides). Set by `runs.load_run_view`.
    n_overrides: int = 0
    judge_only_total: float | None = None
    judge_only_std: float | None = None

    @property
    def runs(self) -> list[float | None]:
        """Per-run totals rounded to one decimal (the official ``runs`` column)."""
        return self.total.runs

    @property
    def std(self) -> float | None:
        """Population std of the per-run totals, rounded (the official ``std`` column)."""
        return self.total.std

    def capability(self, name: str) -> ColumnScore:
        """The capability column called `name`; `KeyError` when the benchmark has no such capability."""
        return _find(self.capabilities, name, "capability")

    def integration(self, name: str) -> ColumnScore:
        """The integration column with canonical name `name`; `KeyError` when absent."""
        return _find(self.integrations, name, "integration")

    def to_dict(self) -> dict:
        """A JSON-able dict (plain floats / None) with every field plus the rounded ``runs``."""
        data = asdict(self)
        data["runs"] = self.runs
        for column in [data["total"], *data["capabilities"], *data["integrations"]]:
            column["runs"] = [round_official(v) for v in column["per_run"]]
        return data


def _find(columns: list[ColumnScore], name: str, kind: str) -> ColumnScore:
    for column in columns:
        if column.name == name:
            return column
    raise KeyError(f"no {kind} column {name!r}; have {', '.join(c.name for c in columns)}")


def _as_score(value: object) -> float | None:
    """A usable score, or None for "not graded" (None or NaN)."""
    if value is None:
        return None
    score = float(value)  # type: ignore[arg-type]
    return None if math.isnan(score) else score


def _column(name: str, member_ids: list[str], run_scores: Mapping[str, list[float | None]], n_runs: int) -> ColumnScore:
    per_run: list[float | None] = []
    for i in range(n_runs):
        # Same operations, same order as the official script: Python-float running sum, then sum / n * 100.
        total, count = 0.0, 0
        for sid in member_ids:
            score = run_scores[sid][i]
            if score is not None:
                total += score
                count += 1
        per_run.append(float(np.float64(total) / count * 100) if count else None)
    graded_runs = [v for v in per_run if v is not None]
    if graded_runs:
        values = np.array(graded_runs, dtype=np.float64)
        mean, std = round_official(values.mean()), round_official(values.std())
    else:
        mean = std = None
    n_graded = sum(all(s is not None for s in run_scores[sid]) for sid in member_ids) if n_runs else 0
    return ColumnScore(name=name, mean=mean, std=std, per_run=per_run, n_samples=len(member_ids), n_graded=n_graded)


def aggregate_scores(benchmark: Benchmark, scores: Mapping[str, Sequence[float | None]],
                     n_runs: int | None = None) -> Scores:
    """Aggregate per-sample, per-run scores over `benchmark` the official way.

    `scores` maps sample id -> one score per judge run (``None`` = not graded yet or errored). Ids not in the
    benchmark are ignored (so a Bard-set benchmark aggregates only its 168 ids); benchmark samples missing from
    `scores` count as not graded. `n_runs` defaults to the longest score list among the benchmark's samples;
    scores beyond `n_runs` are ignored, like the official script does. With every sample scored in every run
    the result equals the official CSVs; otherwise it is a partial aggregation (see the module docstring) with
    ``complete=False``.

    Raises `ValueError` for a negative `n_runs` and `TypeError`/`ValueError` for a score that is not a number.
    """
    ids = benchmark.ids
    if n_runs is None:
        n_runs = max((len(scores.get(sid) or ()) for sid in ids), default=0)
    if n_runs < 0:
        raise ValueError(f"n_runs must be >= 0, got {n_runs}")

    run_scores: dict[str, list[float | None]] = {}
    for sid in ids:
        given = list(scores.get(sid) or ())[:n_runs]
        padded = given + [None] * (n_runs - len(given))
        run_scores[sid] = [_as_score(v) for v in padded]

    samples = benchmark.samples
    members: dict[str, list[str]] = {}          # integration -> its ids, in benchmark order (one pass)
    for sid in ids:
        members.setdefault(samples[sid].integration, []).append(sid)
    total = _column("total", ids, run_scores, n_runs)
    capabilities = [_column(cap, [sid for sid in ids if cap in samples[sid].capabilities], run_scores, n_runs)
                    for cap in benchmark.capabilities]
    integrations = [_column(name, members[name], run_scores, n_runs) for name in benchmark.integrations]

    complete = n_runs > 0 and total.n_graded == len(ids)
    notes: list[str] = []
    if not complete:
        notes.append(f"partial: {total.n_graded}/{len(ids)} samples graded in all {n_runs} run(s); "
                     "each run's columns are computed over the samples graded in that run")
    return Scores(n_runs=n_runs, n_samples=len(ids), n_graded=total.n_graded, total=total,
                  capabilities=capabilities, integrations=integrations, complete=complete, notes=notes)
