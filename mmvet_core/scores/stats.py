"""Bootstrap intervals over samples (pure numpy, seeded, vectorised).

A score of MM-Vet is 100 × the mean per-sample score over the samples of a column (the total, a capability, a
capability integration). How much that number would move with another draw of 218 questions is the sampling
error, which the official ``std`` (the spread of the per-run totals, i.e. judge noise) does not show. We estimate
it with the percentile bootstrap over samples: draw the samples with replacement `resamples` times, recompute
every column in each draw (a column's sample count changes from draw to draw: capability scores are recomputed,
not rescaled), and take the 2.5th and 97.5th percentiles.

Everything is one matrix product: `draw_counts` gives how often each sample was drawn in each resample (an
``R × n`` matrix); multiplied by the ``n × k`` matrices of column membership and member scores it yields every
column's sum and count in every resample at once (10,000 × 218 × 23 in a few tens of milliseconds).

A paired interval (the difference B − A of two grade sets on the same samples) uses the same draws for both sides,
so the question-to-question variation common to both cancels out.

>>> import numpy as np
>>> member = np.ones((4, 1), dtype=bool)
>>> ci = bootstrap_columns(np.array([0.0, 1.0, 0.0, 1.0]), member, resamples=2000, seed=0)
>>> float(ci.point[0]), bool(ci.low[0] < 50 < ci.high[0])
(50.0, True)
"""
from __future__ import annotations

import csv
import io
import math
from dataclasses import dataclass
from functools import lru_cache
from typing import Mapping, Sequence

import numpy as np

from .aggregate import aggregate_scores
from ..inputs.benchmark import Benchmark

#: Defaults: 10,000 resamples, a fixed seed (intervals are reproducible run to run), 95% intervals.
DEFAULT_RESAMPLES = 10_000
DEFAULT_SEED = 0
DEFAULT_LEVEL = 0.95


@dataclass
class ColumnIntervals:
    """Point estimates and percentile-bootstrap bounds for k columns (percent units; NaN where undefined).

    `defined` is the share of resamples in which the column had at least one sample (a column of one sample is
    missing from about a third of the draws; its interval is computed over the draws that have it)."""

    point: np.ndarray
    low: np.ndarray
    high: np.ndarray
    defined: np.ndarray
    resamples: int
    seed: int
    level: float


def draw_counts(n: int, resamples: int = DEFAULT_RESAMPLES, seed: int = DEFAULT_SEED) -> np.ndarray:
    """An ``resamples × n`` matrix: how many times each of `n` samples is drawn in each bootstrap resample.

    Each row is one draw of `n` indices with replacement from ``numpy.random.default_rng(seed)``, so the same
    `n`, `resamples` and `seed` always give the same matrix. It is drawn once per process and shared, read-only
    (every interval of a run's card, export and judge check draws the benchmark's 218 questions 10,000 times with
    the same seed: ≈ 30 ms each). Raises `ValueError` for ``n < 1`` or ``resamples < 1``.

    >>> draw_counts(3, 2, seed=1).sum(axis=1).tolist()
    [3.0, 3.0]
    """
    if n < 1 or resamples < 1:
        raise ValueError(f"need at least one sample and one resample (n={n}, resamples={resamples})")
    return _draw_counts(int(n), int(resamples), int(seed))


@lru_cache(maxsize=4)          # (10,000 × 218 draws: 17 MB each)
def _draw_counts(n: int, resamples: int, seed: int) -> np.ndarray:
    rng = np.random.default_rng(seed)
    idx = rng.integers(0, n, size=(resamples, n), dtype=np.int64)
    flat = (idx + (np.arange(resamples, dtype=np.int64) * n)[:, None]).ravel()
    counts = np.bincount(flat, minlength=resamples * n).reshape(resamples, n).astype(np.float64)
    counts.setflags(write=False)
    return counts


def _percentiles(values: np.ndarray, level: float) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Per column (axis 1) the lower and upper percentile over the finite entries (numpy's default linear
    interpolation, like ``np.percentile``), and the share of finite entries. One sort for all columns."""
    alpha = (1.0 - level) / 2.0
    finite = np.isfinite(values)
    n_finite = finite.sum(axis=0)
    ordered = np.sort(np.where(finite, values, np.inf), axis=0)     # undefined draws sort last
    cols = np.arange(values.shape[1])
    bounds = []
    for q in (alpha, 1.0 - alpha):
        pos = q * np.maximum(n_finite - 1, 0)
        lo = np.floor(pos).astype(np.int64)
        hi = np.minimum(lo + 1, np.maximum(n_finite - 1, 0))
        v_lo, v_hi = ordered[lo, cols], ordered[hi, cols]
        with np.errstate(invalid="ignore"):
            value = np.where(hi > lo, v_lo + (v_hi - v_lo) * (pos - lo), v_lo)
        bounds.append(np.where(n_finite > 0, value, np.nan))
    return bounds[0], bounds[1], n_finite / values.shape[0]


def _column_means(counts: np.ndarray, scores: np.ndarray, member: np.ndarray) -> np.ndarray:
    """100 × (draw-weighted sum of member scores) / (draw-weighted member count) for one or several score
    vectors at once (`scores` n or n × v): ``R × k`` (or ``R × v·k``, vector-major), NaN where a column is empty."""
    m = member.astype(np.float64)
    s = scores.reshape(len(scores), -1)
    weighted = np.concatenate([s[:, [i]] * m for i in range(s.shape[1])], axis=1)   # one product for all
    sums = counts @ weighted
    sizes = np.tile(counts @ m, s.shape[1])
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.where(sizes > 0, 100.0 * sums / np.where(sizes > 0, sizes, 1.0), np.nan)


def column_mean_draws(counts: np.ndarray, scores: np.ndarray, member: np.ndarray) -> np.ndarray:
    """Every column's score (percent) in every resample of `counts`: an ``R × k`` matrix, NaN where a column has
    no drawn member. The raw draws behind `bootstrap_columns`, for statistics built on several grade sets drawn
    together (`judgecheck` pools reference models resampled on the same questions).

    >>> column_mean_draws(np.array([[2.0, 0.0], [1.0, 1.0]]), np.array([1.0, 0.0]), np.ones((2, 1))).tolist()
    [[100.0], [50.0]]
    """
    return _column_means(np.asarray(counts, dtype=np.float64), np.asarray(scores, dtype=np.float64),
                         np.asarray(member, dtype=bool))


def percentile_interval(draws: np.ndarray, level: float = DEFAULT_LEVEL) -> tuple[np.ndarray, np.ndarray]:
    """Per column (axis 1) of an ``R × k`` matrix of draws, the percentile interval over its finite entries (NaN
    where none is finite); a 1-D array is one column and gives two floats.

    >>> lo, hi = percentile_interval(np.arange(101.0))
    >>> round(lo, 6), round(hi, 6)
    (2.5, 97.5)
    """
    values = np.asarray(draws, dtype=np.float64)
    if values.ndim == 1:
        low, high, _ = _percentiles(values[:, None], level)
        return float(low[0]), float(high[0])
    low, high, _ = _percentiles(values, level)
    return low, high


def kendall_tau(x: Sequence[float], y: Sequence[float]) -> float | None:
    """Kendall's tau-b rank agreement of two equally long sequences (1: same order, -1: reversed); ties count
    as neither agreeing nor disagreeing (tau-b's correction). None with fewer than two items or when one side is
    constant.

    >>> kendall_tau([1, 2, 3], [10, 20, 30]), kendall_tau([1, 2, 3], [3, 2, 1]), kendall_tau([1, 2], [5, 5])
    (1.0, -1.0, None)
    >>> round(kendall_tau([1, 2, 3, 4], [1, 3, 2, 4]), 3)
    0.667
    """
    if len(x) != len(y):
        raise ValueError("kendall_tau needs sequences of the same length")
    concordant = discordant = ties_x = ties_y = 0
    for i in range(len(x)):
        for j in range(i + 1, len(x)):
            dx, dy = x[i] - x[j], y[i] - y[j]
            if dx == 0 and dy == 0:
                continue
            if dx == 0:
                ties_x += 1
            elif dy == 0:
                ties_y += 1
            elif (dx > 0) == (dy > 0):
                concordant += 1
            else:
                discordant += 1
    n0 = concordant + discordant
    denom = math.sqrt((n0 + ties_x) * (n0 + ties_y))
    return None if denom == 0 else (concordant - discordant) / denom


def slope_draws(x: np.ndarray, y: np.ndarray) -> np.ndarray:
    """Least-squares slope of y on x along the last axis (one slope per row of ``R × m`` matrices, or one for two
    vectors); NaN where x does not vary.

    >>> float(slope_draws(np.array([30.0, 40.0]), np.array([5.0, 4.0])))
    -0.1
    """
    x = np.asarray(x, dtype=np.float64)
    y = np.asarray(y, dtype=np.float64)
    xc = x - x.mean(axis=-1, keepdims=True)
    yc = y - y.mean(axis=-1, keepdims=True)
    var = (xc * xc).sum(axis=-1)
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.where(var > 0, (xc * yc).sum(axis=-1) / np.where(var > 0, var, 1.0), np.nan)


def point_scores(scores: np.ndarray, member: np.ndarray) -> np.ndarray:
    """100 × mean member score per column (NaN for an empty column)."""
    return _column_means(np.ones((1, len(scores))), np.asarray(scores, dtype=np.float64), member)[0]


def bootstrap_many(vectors: list[np.ndarray], member: np.ndarray, *, counts: np.ndarray | None = None,
                   resamples: int = DEFAULT_RESAMPLES, seed: int = DEFAULT_SEED,
                   level: float = DEFAULT_LEVEL) -> list[ColumnIntervals]:
    """`bootstrap_columns` for several per-sample vectors on the same samples and the same draws, in one matrix
    product. A paired difference B − A is just the vector ``b − a`` (every column score is linear in the
    per-sample scores, and both sides have the same members in each draw)."""
    member = np.asarray(member, dtype=bool)
    stacked = np.column_stack([np.asarray(v, dtype=np.float64) for v in vectors])
    if counts is None:
        counts = draw_counts(stacked.shape[0], resamples, seed)
    k = member.shape[1]
    boot = _column_means(counts, stacked, member)
    low, high, defined = _percentiles(boot, level)
    point = _column_means(np.ones((1, stacked.shape[0])), stacked, member)[0]
    return [ColumnIntervals(point[i * k:(i + 1) * k], low[i * k:(i + 1) * k], high[i * k:(i + 1) * k],
                            defined[i * k:(i + 1) * k], counts.shape[0], seed, level) for i in range(len(vectors))]


def bootstrap_columns(scores: np.ndarray, member: np.ndarray, *, resamples: int = DEFAULT_RESAMPLES,
                      seed: int = DEFAULT_SEED, level: float = DEFAULT_LEVEL,
                      counts: np.ndarray | None = None) -> ColumnIntervals:
    """Percentile-bootstrap interval of every column score of one grade set.

    `scores` holds one per-sample score (in [0, 1]; the mean over the set's runs) per sample; `member` is an
    ``n × k`` boolean matrix (sample i belongs to column j). Returns the observed column scores (percent) and
    their `level` intervals. `counts` (from `draw_counts`) may be passed to reuse one set of draws.
    """
    return bootstrap_many([scores], member, counts=counts, resamples=resamples, seed=seed, level=level)[0]


def bootstrap_paired_difference(scores_a: np.ndarray, scores_b: np.ndarray, member: np.ndarray, *,
                                resamples: int = DEFAULT_RESAMPLES, seed: int = DEFAULT_SEED,
                                level: float = DEFAULT_LEVEL, counts: np.ndarray | None = None) -> ColumnIntervals:
    """Paired percentile-bootstrap interval of the column differences B − A (percentage points).

    Both sets are scored on the same samples (same order) and each resample draws the same samples for both,
    recomputing every column of each side before subtracting.
    """
    a = np.asarray(scores_a, dtype=np.float64)
    b = np.asarray(scores_b, dtype=np.float64)
    if a.shape != b.shape:
        raise ValueError(f"paired scores must have the same samples ({a.shape} vs {b.shape})")
    # B − A per column is 100 × Σ w(b − a) / Σ w over members: the interval of the per-sample differences
    return bootstrap_many([b - a], member, counts=counts, resamples=resamples, seed=seed, level=level)[0]


# --------------------------------------------------------------------------------------------------------------
# Error bars of one grade set's official columns


def column_membership(benchmark: Benchmark, ids: list[str]) -> tuple[list[tuple[str, str]], np.ndarray]:
    """The columns of the official tables over `ids` — ``("total", "total")``, then ``("capability", c)`` in the
    paper's order, then ``("integration", name)`` in canonical order, each only when one of `ids` belongs to it —
    and the ``len(ids) × k`` membership matrix."""
    samples = benchmark.samples
    caps = [c for c in benchmark.capabilities if any(c in samples[sid].capabilities for sid in ids)]
    present = {samples[sid].integration for sid in ids}
    ints = [name for name in benchmark.integrations if name in present]
    member = np.zeros((len(ids), 1 + len(caps) + len(ints)), dtype=bool)
    member[:, 0] = True
    for i, sid in enumerate(ids):
        for j, c in enumerate(caps):
            member[i, 1 + j] = c in samples[sid].capabilities
        member[i, 1 + len(caps) + ints.index(samples[sid].integration)] = True
    columns = [("total", "total")] + [("capability", c) for c in caps] + [("integration", n) for n in ints]
    return columns, member


def mean_over_runs(scores: Mapping[str, Sequence[float | None]], ids: Sequence[str]) -> dict[str, float]:
    """Sample id -> mean of its graded runs, for the ids of `ids` with at least one graded run."""
    out = {}
    for sid in ids:
        graded = [float(v) for v in (scores.get(sid) or ()) if v is not None and not math.isnan(float(v))]
        if graded:
            out[sid] = sum(graded) / len(graded)
    return out


@dataclass
class IntervalRow:
    """One column's score (percent, unrounded), the official number (mean over runs, rounded like the official
    CSV) and the bootstrap interval over samples."""

    kind: str
    name: str
    n: int
    score: float
    low: float | None
    high: float | None
    official: float | None = None


def score_intervals(benchmark: Benchmark, scores: Mapping[str, Sequence[float | None]], *,
                    resamples: int = DEFAULT_RESAMPLES, seed: int = DEFAULT_SEED,
                    level: float = DEFAULT_LEVEL) -> list[IntervalRow]:
    """Every column of a grade set (total, capabilities, integrations) with its bootstrap interval over samples.

    Per sample the score is the mean over its graded runs; samples with no graded run are left out (a partial run
    gets intervals over what is graded). Returns [] when nothing is graded. With every run complete the score is
    the official mean over runs, unrounded."""
    per_sample = mean_over_runs(scores, benchmark.ids)
    ids = [sid for sid in benchmark.ids if sid in per_sample]
    if not ids:
        return []
    columns, member = column_membership(benchmark, ids)
    ci = bootstrap_columns(np.array([per_sample[sid] for sid in ids]), member, resamples=resamples, seed=seed,
                           level=level)
    sizes = member.sum(axis=0)
    agg = aggregate_scores(benchmark, scores)
    official = {("total", "total"): agg.total.mean, **{("capability", c.name): c.mean for c in agg.capabilities},
                **{("integration", c.name): c.mean for c in agg.integrations}}
    return [IntervalRow(kind, name, int(sizes[j]), float(ci.point[j]), _finite(ci.low[j]), _finite(ci.high[j]),
                        official.get((kind, name)))
            for j, (kind, name) in enumerate(columns)]


def _finite(x) -> float | None:
    return float(x) if np.isfinite(x) else None


INTERVALS_HEADER = ["column", "kind", "n_samples", "score", "ci_low", "ci_high", "level", "resamples", "seed"]


def make_intervals_csv_text(rows: list[IntervalRow], *, level: float = DEFAULT_LEVEL,
                            resamples: int = DEFAULT_RESAMPLES, seed: int = DEFAULT_SEED) -> str:
    """The ``*-ci-95-*runs.csv`` beside the official CSVs: one row per column with its interval (one decimal)."""
    buffer = io.StringIO()
    writer = csv.writer(buffer, lineterminator="\n")
    writer.writerow(INTERVALS_HEADER)
    for r in rows:
        score = r.official if r.official is not None else r.score
        writer.writerow([r.name, r.kind, r.n, _one(score), _one(r.low), _one(r.high), level, resamples, seed])
    return buffer.getvalue()


def _one(x: float | None) -> str:
    return "" if x is None else f"{x:.1f}"


def format_interval(low: float | None, high: float | None) -> str:
    """``[30.7, 42.0]`` (empty when undefined).

    >>> format_interval(30.70, 42.04), format_interval(None, 1.0)
    ('[30.7, 42.0]', '')
    """
    return "" if low is None or high is None else f"[{low:.1f}, {high:.1f}]"
