"""The rank engine of the leaderboard: paired-bootstrap rank ranges per rank group, kept up to date entry by entry
(numpy only; the rule itself is `mmvet_core.board.entries`'s docstring).

Three things keep a large group cheap:

* **Identical grades count once.** Entries whose per-sample scores are the same (1,600 copies of one run) are
  one *grade set* with a multiplicity: they are never significantly different from each other and have the
  same relation to everyone else, so ranks over grade sets, weighted by multiplicity, equal the ranks over
  entries. The work depends on the number of distinct grade sets, bounded by `MAX_GRADE_SETS` per group.
* **Incremental.** A group keeps every grade set's draw totals and the matrix "j significantly better than i";
  adding one grade set compares its draws with every other's (R × d comparisons: milliseconds at d = 1,600),
  removing one drops a row and a column.
* **Pruned cold builds.** Building a group from scratch decides most pairs with Cantelli's inequality on the
  draws' own mean and covariance (computed as ``S · cov(counts) · Sᵀ``, not from the R × d draw totals: ~8×
  fewer operations) and counts draws only for the pairs it cannot settle; the answer equals counting every pair.
"""
from __future__ import annotations

from functools import lru_cache
from typing import Mapping

import numpy as np

from ..scores.stats import draw_counts

#: Per-sample means are ranked in units of 1e-6: draw totals are then sums of integers, exact in float64 (below
#: 2^53 for any benchmark size allowed), so a tie is a tie whichever order BLAS adds in, and a grade set added
#: incrementally gets the very ranks a full build gives it.
QUANTUM = 1e6
#: Distinct grade sets a rank group ranks at most (entries past it are listed, unranked, "group full").
MAX_GRADE_SETS = 2000
#: Cantelli's inequality on the draws' own mean μ and sd σ of T_j − T_i decides most pairs without counting:
#: μ > 6.5 σ  ⇒ at most σ²/(σ²+μ²) < 2.4 % of the draws have T_j − T_i ≤ 0 (significant);
#: μ < −0.2 σ ⇒ at least μ²/(σ²+μ²) > 3.8 % of them do (not significant). The others are counted.
SURE_BETTER, SURE_NOT = 6.5, -0.2


@lru_cache(maxsize=8)
def _draws(n: int, resamples: int, seed: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(counts R × n, read-only as `draw_counts` shares it; their mean over draws n; their covariance n × n):
    shared by every group of n samples."""
    counts = draw_counts(n, resamples, seed)
    mean = counts.mean(axis=0)
    centred = counts - mean
    cov = centred.T @ centred / resamples
    return counts, mean, cov


def _compact(totals: np.ndarray) -> np.ndarray:
    """``totals.T`` (m × R, one entry's draws contiguous) as int32 when the whole totals fit (n × QUANTUM below
    2^31: up to 2,147 samples), else int64: exact either way, and int32 halves the memory each comparison reads."""
    by_entry = np.ascontiguousarray(totals.T)
    if by_entry.size and np.abs(by_entry).max() < 2**31 - 1:
        return by_entry.astype(np.int32)
    return by_entry.astype(np.int64)


def _not_ahead_counts(totals: np.ndarray, pairs: np.ndarray | None = None) -> np.ndarray:
    """``not_ahead[i, j]`` = number of draws (rows of `totals`, R × m) with ``T_j ≤ T_i``; only where `pairs`
    is True when given (elsewhere -1). For each i the draws of one contiguous run of entries, from the first to
    the last j asked, are compared (a slice, never a copy): entries sorted by mean make that run the band of
    undecided pairs; counting a pair that was not asked gives its exact count too."""
    m = totals.shape[1]
    by_entry = _compact(totals)
    out = np.full((m, m), -1, dtype=np.int64)
    for i in range(m):
        cols = np.arange(m) if pairs is None else np.flatnonzero(pairs[i])
        if len(cols):
            lo, hi = int(cols[0]), int(cols[-1]) + 1
            out[i, lo:hi] = np.count_nonzero(by_entry[lo:hi] <= by_entry[i], axis=1)
    if pairs is not None:
        out[~pairs] = -1
    return out


def better_matrix(scores: np.ndarray, *, resamples: int, seed: int, level: float,
                  prune: bool = True) -> tuple[np.ndarray, np.ndarray]:
    """(draw totals R × m, better m × m) for the ``m × n`` per-sample scores of one group: ``better[i, j]`` is
    True when j is significantly better than i (fewer than (1 − level)/2 of the draws have ``T_j − T_i ≤ 0``)."""
    scores = quantize(scores)
    m, n = scores.shape
    counts, mean_counts, cov_counts = _draws(n, resamples, seed)
    cut = (1.0 - level) / 2.0 * resamples
    if m < 2:
        return counts @ scores.T, np.zeros((m, m), dtype=bool)
    mean = scores @ mean_counts
    order = np.argsort(mean, kind="stable")                  # by mean: the undecided pairs of a row are a band
    back = np.argsort(order)
    s = scores[order]
    totals = counts @ s.T                                     # R × m: every entry's total (× n) in every draw
    if prune:
        cov = s @ cov_counts @ s.T
        var = np.diag(cov)
        sd = np.sqrt(np.maximum(var[:, None] + var[None, :] - 2.0 * cov, 0.0))
        gap = mean[order][None, :] - mean[order][:, None]     # gap[i, j]: mean of T_j − T_i over the draws
        eps = 1e-9 * max(1.0, float(np.abs(totals).max()))
        sure_better = gap > SURE_BETTER * sd + eps
        sure_not = gap < SURE_NOT * sd - eps
        not_ahead = _not_ahead_counts(totals, ~(sure_better | sure_not))
        better = np.where(sure_better, True, np.where(sure_not, False, (not_ahead >= 0) & (not_ahead < cut)))
    else:
        better = _not_ahead_counts(totals) < cut
    np.fill_diagonal(better, False)
    return totals[:, back], better[np.ix_(back, back)]


def quantize(scores) -> np.ndarray:
    """Scores in whole units of 1/`QUANTUM` (as float64): what every total is computed from."""
    return np.round(np.asarray(scores, dtype=np.float64) * QUANTUM)


def bounds_from(better: np.ndarray, mult: np.ndarray | None = None) -> list[tuple[int, int]]:
    """``[(best, worst)]`` per row of `better`, each grade set counting `mult` entries (1 each by default):
    best = 1 + entries significantly better, worst = entries − entries significantly worse."""
    m = better.shape[0]
    w = np.ones(m, dtype=np.int64) if mult is None else np.asarray(mult, dtype=np.int64)
    n_better = better.astype(np.int64) @ w                  # entries significantly better than i
    n_worse = better.T.astype(np.int64) @ w                 # entries i is significantly better than
    total = int(w.sum())
    return [(1 + int(n_better[i]), total - int(n_worse[i])) for i in range(m)]


class GroupRanks:
    """The ranks of one rank group over its distinct grade sets (``key -> per-sample mean vector``), kept up to
    date by `sync`. Not thread-safe: its owner serialises calls."""

    def __init__(self, n_samples: int, *, resamples: int, seed: int, level: float):
        self.n = n_samples
        self.resamples, self.seed, self.level = resamples, seed, level
        self.cut = (1.0 - level) / 2.0 * resamples
        self.keys: list[str] = []
        self.mult = np.zeros(0, dtype=np.int64)
        # grown by doubling, so that adding one grade set writes one row and one column (no copy of the rest)
        # capacity × R: each grade set's draw totals, whole numbers (`QUANTUM`), int32 when they fit (half the
        # memory each comparison reads)
        self._dtype = np.int32 if n_samples * QUANTUM < 2**31 - 1 else np.int64
        self._t = np.zeros((0, resamples), dtype=self._dtype)
        self._b = np.zeros((0, 0), dtype=bool)              # capacity × capacity: the `better` matrix
        self._bounds: dict[str, tuple[int, int]] | None = None    # until the group changes

    @property
    def totals(self) -> np.ndarray:
        """R × d: every grade set's total in every draw (a view)."""
        return self._t[:len(self.keys)].T

    @property
    def better(self) -> np.ndarray:
        """d × d: ``better[i, j]`` when grade set j is significantly better than i (a view)."""
        d = len(self.keys)
        return self._b[:d, :d]

    @property
    def size(self) -> int:
        """Entries ranked (grade sets × their multiplicity)."""
        return int(self.mult.sum())

    def build(self, vectors: Mapping[str, np.ndarray], mult: Mapping[str, int]) -> "GroupRanks":
        """Rank these grade sets from scratch (pruned); returns self."""
        self.keys = list(vectors)
        matrix = np.vstack([vectors[k] for k in self.keys]) if self.keys else np.zeros((0, self.n))
        totals, self._b = better_matrix(matrix, resamples=self.resamples, seed=self.seed, level=self.level)
        self._t = np.ascontiguousarray(totals.T).astype(self._dtype)
        self.mult = np.array([mult[k] for k in self.keys], dtype=np.int64)
        self._bounds = None
        return self

    def _grow(self, need: int) -> None:
        cap = self._t.shape[0]
        if need <= cap:
            return
        new_cap = max(need, 2 * cap, 16)
        t = np.zeros((new_cap, self.resamples), dtype=self._dtype)
        b = np.zeros((new_cap, new_cap), dtype=bool)
        t[:cap], b[:cap, :cap] = self._t, self._b
        self._t, self._b = t, b

    def _add(self, key: str, vector: np.ndarray) -> None:
        counts = _draws(self.n, self.resamples, self.seed)[0]
        t = (counts @ quantize(vector)).astype(self._dtype)      # this grade set's total in every draw
        d = len(self.keys)
        self._grow(d + 1)
        others = self._t[:d]                                      # d × R
        # j better than the new one: few draws with T_j <= T_new; the new one better than j: few with T_new <= T_j
        self._b[d, :d] = np.count_nonzero(others <= t, axis=1) < self.cut
        self._b[:d, d] = np.count_nonzero(t <= others, axis=1) < self.cut
        self._b[d, d] = False
        self._t[d] = t
        self.keys.append(key)
        self.mult = np.append(self.mult, 0)

    def _remove(self, keys: set[str]) -> None:
        d = len(self.keys)
        keep = np.array([k not in keys for k in self.keys], dtype=bool)
        self.keys = [k for k in self.keys if k not in keys]
        self._b = self._b[:d, :d][np.ix_(keep, keep)]
        self._t = self._t[:d][keep]
        self.mult = self.mult[keep]

    def copy(self) -> "GroupRanks":
        """An independent copy (a background thread extends it while this one keeps answering)."""
        d = len(self.keys)
        other = GroupRanks(self.n, resamples=self.resamples, seed=self.seed, level=self.level)
        other.keys, other.mult = list(self.keys), self.mult.copy()
        other._t, other._b = self._t[:d].copy(), self._b[:d, :d].copy()
        other._bounds = self._bounds
        return other

    def sync(self, vectors: Mapping[str, np.ndarray], mult: Mapping[str, int], *, max_adds: int) -> bool:
        """Make the group hold exactly the grade sets of `vectors` (with multiplicities `mult`): removed sets
        dropped (always: cheap), new ones compared with every other. When more than `max_adds` sets are new they
        are not added and it returns False: the group then ranks its other grade sets among themselves until
        the caller extends or rebuilds it (possibly elsewhere)."""
        have = set(self.keys)
        new = [k for k in vectors if k not in have]
        gone = have - set(vectors)
        if gone:
            self._remove(gone)
        if len(new) <= max_adds:
            for k in new:
                self._add(k, vectors[k])
        mult_now = np.array([mult[k] for k in self.keys], dtype=np.int64)
        if gone or (new and len(new) <= max_adds) or not np.array_equal(mult_now, self.mult):
            self.mult, self._bounds = mult_now, None
        return len(new) <= max_adds

    def extended(self, vectors: Mapping[str, np.ndarray], mult: Mapping[str, int]) -> "GroupRanks":
        """This group brought to `vectors` the cheaper way: a copy extended one grade set at a time (k new sets
        cost k × d draw comparisons) when the new sets are at most half the old ones, else a pruned build."""
        new = sum(1 for k in vectors if k not in set(self.keys))
        if self.keys and new <= max(1, len(self.keys) // 2):
            g = self.copy()
            g.sync(vectors, mult, max_adds=new)
            return g
        return GroupRanks(self.n, resamples=self.resamples, seed=self.seed, level=self.level).build(vectors, mult)

    def bounds(self) -> dict[str, tuple[int, int]]:
        """Grade set key -> (best, worst) over the group's entries (kept until the group changes)."""
        if self._bounds is None:
            self._bounds = dict(zip(self.keys, bounds_from(self.better, self.mult)))
        return self._bounds
