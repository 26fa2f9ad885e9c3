"""Grade calibration: what the official judge (``gpt-4-0613``) would have given, learned per grade from reference
pairs. Pure numpy; the judge check (`mmvet_core.successors.judgecheck`) provides the pairs, `mmvet_core.successors.equivalence` names and
shows the result.

**The pairs.** A judge check has the candidate judge grade reference predictions that carry real official grades:
for every reference model *m* and sample *i*, a pair (candidate grade c, official grade o) — o is the per-sample mean
of the official runs.

**The correction** is the expected official grade given the candidate's grade, f(c) = E[o | c], estimated per grade
value and refined per capability where the pairs support it, by shrinking each level toward the one above it:

* pooled, per grade value c: ``f0(c) = (Σ o + K·line(c)) / (n + K)`` — the mean official grade of the pairs whose
  candidate grade is c, pulled toward a least-squares line o ≈ a + b·c by K pseudo-pairs (a grade value the
  references never produced gets the line);
* per capability group g (a sample's rarest capability: math, then spat, gen, know, ocr, rec), per grade:
  ``f1(g, c) = (Σ_g o + K·f0(c)) / (n_g + K)``;
* per capability integration t (the sample's exact set of capabilities), per grade:
  ``f2(t, c) = (Σ_t o + K·f1(g(t), c)) / (n_t + K)``.

A run graded by the candidate judge is then corrected sample by sample, run by run (f2 of the sample's
integration and its grade) and aggregated the official way: a column (total, capability) is 100 × the mean of its
samples, per run, then the mean over runs. A judge that is shifted, capped, compressed or biased on one capability is
thus correctable, as long as its grades keep the information (two official grades that a judge maps to one value
are averaged in the proportion the references show).

**The interval** of an estimate combines, as variances of the column's number:

* the per-sample scatter of official grades around the correction (the residual variance of the references'
  pairs at that grade value), summed over the run's samples;
* the correction's own uncertainty: the correction is refit on `resamples` bootstrap draws that resample the
  reference models and the questions together (seeded), and the estimate's spread over the draws is taken;
* the model-to-model variation measured by leave-one-model-out (`leave_one_model_out`): each reference model's
  official total predicted from a correction fit on the others; what its errors show beyond the scatter and beyond
  the correction's own uncertainty (which those errors already hold: `model_beyond_correction`) is added.

The half-width is the 95 % Student-t quantile (M − 1 degrees of freedom for M reference models: the spread is
estimated from M leave-one-out errors) times the standard deviation of that sum, never less than the largest
leave-one-out error of the column, widened beyond the references' range of official totals by the drift the
leave-one-out predictions of the outermost models show (`LomoTable.drift`), and the bounds are clipped to [0, 100]. The estimate targets the number the official evaluator
would have printed for this run's answers: the run's own sampling error over questions is not part of it (the
questions are the benchmark's, not a sample).

Its size (over 600 lines) has a reason: the correction, its leave-one-model-out error and the estimate built on
both share one set of strata and pairs; the check that supplies the pairs and the naming of results live apart.
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Mapping, Sequence

import numpy as np

#: Pseudo-pairs each level of the correction borrows from the level above (a grade value seen in fewer pairs
#: leans on the coarser level).
SHRINK = 5.0
#: Grades are binned to this many decimals (judges answer on a 0.1 grid; a multi-run mean falls between).
DECIMALS = 3
#: Rarest first: a sample's capability group is the first of its capabilities in this order (benchmark counts:
#: math 26, spat 75, gen 80, know 84, ocr 96, rec 150).
GROUP_ORDER = ("math", "spat", "gen", "know", "ocr", "rec")
#: Two-sided 95 %.
Z95 = 1.959963984540054
#: Two-sided 95 % quantiles of Student's t by degrees of freedom (1..30); beyond, `Z95`. The interval's spread is
#: estimated from the reference models' leave-one-out errors, so with M models it has about M − 1 degrees of freedom.
T95 = (12.706, 4.303, 3.182, 2.776, 2.571, 2.447, 2.365, 2.306, 2.262, 2.228, 2.201, 2.179, 2.160, 2.145, 2.131,
       2.120, 2.110, 2.101, 2.093, 2.086, 2.080, 2.074, 2.069, 2.064, 2.060, 2.056, 2.052, 2.048, 2.045, 2.042)


def t95(df: int) -> float:
    """The two-sided 95 % Student-t quantile for `df` degrees of freedom (`Z95` beyond 30; 12.706 below 1).

    >>> t95(5), t95(100)
    (2.571, 1.959963984540054)
    """
    return T95[min(max(df, 1), 30) - 1] if df <= 30 else Z95
#: Beyond the references' range an interval widens by at least this share of the distance (points per point).
MIN_DRIFT = 0.05
#: Leave-one-model-out errors of models this far (points) outside the others' range measure the extrapolation drift.
EDGE_POINTS = 0.5
DEFAULT_RESAMPLES = 1000
DEFAULT_SEED = 0


@dataclass
class PairSet:
    """The reference pairs of a check, in benchmark order: ``candidate[m, i]`` and ``official[m, i]`` (NaN where
    missing) for model ``models[m]`` and sample ``ids[i]``; `official_totals` the official aggregation of each
    model (one decimal, as published)."""

    models: list[str]
    ids: list[str]
    candidate: np.ndarray
    official: np.ndarray
    official_totals: list[float]

    def without(self, models: Sequence[str]) -> "PairSet":
        keep = [j for j, m in enumerate(self.models) if m not in set(models)]
        return PairSet([self.models[j] for j in keep], self.ids, self.candidate[keep], self.official[keep],
                       [self.official_totals[j] for j in keep])

    @classmethod
    def from_dict(cls, data: Mapping, ids: Sequence[str]) -> "PairSet":
        """From a check's stored ``pairs`` ({model: {"ids", "candidate", "official", "official_total"}}), aligned on
        `ids` (samples a model lacks are NaN)."""
        models, cand, off, totals = [], [], [], []
        for model, entry in data.items():
            where = {sid: k for k, sid in enumerate(entry["ids"])}
            cand.append([_num(entry["candidate"][where[s]]) if s in where else math.nan for s in ids])
            off.append([_num(entry["official"][where[s]]) if s in where else math.nan for s in ids])
            models.append(model)
            totals.append(_num(entry.get("official_total")))
        shape = (len(models), len(ids))
        return cls(models, list(ids), np.array(cand, dtype=float).reshape(shape),
                   np.array(off, dtype=float).reshape(shape), totals)


def _num(x) -> float:
    return math.nan if x is None else float(x)


@dataclass(frozen=True)
class Strata:
    """Where each sample sits in the correction: its capability integration and that integration's group."""

    integration: np.ndarray          # N: integration index per sample
    group_of: np.ndarray             # T: group index per integration
    integrations: list[str]
    groups: list[str]
    members: np.ndarray              # N × k: total, then each capability (columns)
    columns: list[str]


def make_strata(capabilities: Mapping[str, Sequence[str]], ids: Sequence[str],
                capability_names: Sequence[str]) -> Strata:
    """Strata of the samples `ids` (`capabilities`: sample id -> its capabilities); `capability_names` are the
    benchmark's columns in order. A capability outside `GROUP_ORDER` (another benchmark) ranks after them."""
    order = {c: k for k, c in enumerate(GROUP_ORDER)}
    integ_names: list[str] = []
    groups: list[str] = []
    group_of: list[int] = []
    integ = []
    for sid in ids:
        caps = sorted(capabilities[sid], key=lambda c: (order.get(c, len(order)), c))
        name = "_".join(sorted(caps))
        if name not in integ_names:
            integ_names.append(name)
            g = caps[0] if caps else ""
            if g not in groups:
                groups.append(g)
            group_of.append(groups.index(g))
        integ.append(integ_names.index(name))
    members = np.array([[True] + [c in capabilities[sid] for c in capability_names] for sid in ids], dtype=bool)
    return Strata(np.array(integ, dtype=np.int64), np.array(group_of, dtype=np.int64), integ_names, groups,
                  members.reshape(len(ids), 1 + len(capability_names)), ["total", *capability_names])


def strata_of(benchmark) -> Strata:
    """The strata of a `benchmark.Benchmark`'s samples (its capabilities as columns)."""
    return make_strata({sid: s.capabilities for sid, s in benchmark.samples.items()}, benchmark.ids,
                       benchmark.capabilities)


@dataclass
class Correction:
    """A fitted correction (D fits at once, D = 1 for the point fit): ``f[d, t, b]`` the expected official grade of
    a sample of integration t graded ``values[b]``; ``var[b]`` the residual variance of official grades at that value
    (point fit only); the pair counts behind each level."""

    values: np.ndarray
    f: np.ndarray
    var: np.ndarray | None = None
    n_pooled: np.ndarray | None = None
    n_group: np.ndarray | None = None
    n_integration: np.ndarray | None = None


def grade_bins(*arrays: np.ndarray) -> np.ndarray:
    """The sorted distinct grade values (rounded to `DECIMALS`) of the finite entries of `arrays`."""
    vals = [np.round(a[np.isfinite(a)], DECIMALS) for a in arrays]
    return np.unique(np.concatenate(vals)) if vals else np.zeros(0)


def bin_index(values: np.ndarray, grades: np.ndarray) -> np.ndarray:
    """Index of each grade's value (rounded to `DECIMALS`) in `values`, -1 for NaN or a value not in `values`."""
    g = np.round(np.asarray(grades, dtype=float), DECIMALS)
    finite = np.isfinite(g)
    if len(values) == 0:
        return np.full(g.shape, -1, dtype=np.int64)
    gg = np.where(finite, g, values[0])
    idx = np.clip(np.searchsorted(values, gg), 0, len(values) - 1)
    return np.where(finite & (values[idx] == gg), idx, -1)


def _lean(total: np.ndarray, count: np.ndarray, prior: np.ndarray, shrink: float) -> np.ndarray:
    """``(total + shrink·prior) / (count + shrink)``: a mean of `count` values leaning on `prior` by `shrink`
    pseudo-values; the prior itself where there is nothing (also with `shrink` 0)."""
    prior = np.broadcast_to(prior, np.broadcast_shapes(np.shape(total), np.shape(prior)))
    den = count + shrink
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.where(den > 0, (total + shrink * prior) / np.where(den > 0, den, 1.0), prior)


def fit_correction(pairs: PairSet, strata: Strata, values: np.ndarray, weights: np.ndarray | None = None,
                   shrink: float = SHRINK) -> Correction:
    """Fit the correction on `pairs` with per-pair `weights` (D × M × N; None: every pair once). Returns D fits;
    with `weights` None also the residual variance and the pair counts."""
    M, N = pairs.candidate.shape
    nb, T = len(values), len(strata.integrations)
    G = len(strata.groups)
    point = weights is None
    W = np.ones((1, M, N)) if point else np.asarray(weights, dtype=float)
    D = W.shape[0]
    bins = bin_index(values, pairs.candidate)
    valid = (bins >= 0) & np.isfinite(pairs.official)
    off = np.where(valid, pairs.official, 0.0)
    w = W * valid[None]
    cell = strata.integration[None, :] * nb + np.maximum(bins, 0)           # M × N
    flat = (np.arange(D)[:, None, None] * (T * nb) + cell[None]).ravel()
    S2 = np.bincount(flat, weights=(w * off[None]).ravel(), minlength=D * T * nb).reshape(D, T, nb)
    N2 = np.bincount(flat, weights=w.ravel(), minlength=D * T * nb).reshape(D, T, nb)
    to_group = np.zeros((T, G))
    to_group[np.arange(T), strata.group_of] = 1.0
    S1, N1 = np.einsum("dtb,tg->dgb", S2, to_group), np.einsum("dtb,tg->dgb", N2, to_group)
    S0, N0 = S2.sum(axis=1), N2.sum(axis=1)
    # the least-squares line o ≈ a + b·c of each fit (its fallback for grade values it has few or no pairs of)
    c = values[None, :]
    sw, swc, swcc = N0.sum(1), (N0 * c).sum(1), (N0 * c * c).sum(1)
    swo, swco = S0.sum(1), (S0 * c).sum(1)
    det = sw * swcc - swc ** 2
    with np.errstate(invalid="ignore", divide="ignore"):
        slope = np.where(det > 1e-12, (sw * swco - swc * swo) / np.where(det > 1e-12, det, 1.0), 0.0)
        intercept = np.where(sw > 0, (swo - slope * swc) / np.where(sw > 0, sw, 1.0), 0.0)
    line = np.clip(intercept[:, None] + slope[:, None] * c, 0.0, 1.0)
    f0 = _lean(S0, N0, line, shrink)
    f1 = _lean(S1, N1, f0[:, None, :], shrink)
    f2 = np.clip(_lean(S2, N2, f1[:, strata.group_of, :], shrink), 0.0, 1.0)
    corr = Correction(values, f2)
    if point:
        resid = np.where(valid, pairs.official - f2[0][strata.integration[None, :], np.maximum(bins, 0)], 0.0)
        sq = np.bincount(np.maximum(bins, 0).ravel(), weights=(resid ** 2 * valid).ravel(), minlength=nb)
        n = np.bincount(np.maximum(bins, 0).ravel(), weights=valid.ravel().astype(float), minlength=nb)
        overall = float(sq.sum() / n.sum()) if n.sum() else 0.0
        corr.var = _lean(sq, n, np.full(nb, overall), shrink)
        corr.n_pooled, corr.n_group, corr.n_integration = N0[0], N1[0], N2[0]
    return corr


def corrected_grades(corr: Correction, strata: Strata, grades: np.ndarray) -> np.ndarray:
    """The expected official grade of each graded sample (``grades``: R × N per-run grades, NaN where not graded):
    D × R × N (NaN where not graded)."""
    bins = bin_index(corr.values, grades)
    vals = corr.f[:, strata.integration[None, :], np.maximum(bins, 0)]          # D × R × N
    return np.where(bins[None] >= 0, vals, np.nan)


def _nanmean(values: np.ndarray, axis: int) -> np.ndarray:
    """`np.nanmean` without its warning for an all-NaN slice (an empty column: NaN, said by the caller)."""
    import warnings

    with warnings.catch_warnings():
        warnings.simplefilter("ignore", category=RuntimeWarning)
        return np.nanmean(values, axis=axis)


def column_scores(grades: np.ndarray, members: np.ndarray) -> np.ndarray:
    """The official aggregation of per-sample grades (... × R × N): 100 × the mean of each column's graded
    samples per run, then the mean over runs -> ... × k (NaN for an empty column)."""
    ok = np.isfinite(grades)
    g = np.where(ok, grades, 0.0)
    m = members.astype(float)
    with np.errstate(invalid="ignore", divide="ignore"):
        per_run = 100.0 * (g @ m) / (ok.astype(float) @ m)                     # ... × R × k
        return _nanmean(np.where(np.isfinite(per_run), per_run, np.nan), axis=-2)


@dataclass
class LomoRow:
    """Leave-one-model-out: the model's official scores predicted from a correction fit on the other models."""

    model: str
    official_total: float           # as published
    predicted: list[float]          # per column (total first)
    official: list[float]           # per column, the official aggregation of its grades
    error: list[float]              # predicted − official, points
    scatter_var: list[float]        # the per-sample scatter the correction predicts for that model, points²
    outside: float = 0.0            # how far its official total lies outside the other models' range (points)


@dataclass
class LomoTable:
    columns: list[str]
    rows: list[LomoRow] = field(default_factory=list)
    delta_bar: float = math.nan     # mean |corrected − official| per sample, each model corrected by the others
    rmse: float = math.nan          # root mean squared (corrected − official) per sample, likewise

    def errors(self, column: int = 0) -> np.ndarray:
        return np.array([r.error[column] for r in self.rows], dtype=float)

    def model_var(self, column: int = 0) -> float:
        """The model-to-model variance beyond the predicted scatter: mean over models of (error² − scatter),
        at least 0 (points²)."""
        if not self.rows:
            return 0.0
        v = np.array([r.error[column] ** 2 - r.scatter_var[column] for r in self.rows], dtype=float)
        v = v[np.isfinite(v)]
        return float(max(v.mean(), 0.0)) if v.size else 0.0

    def max_error(self, column: int = 0) -> float:
        """The largest |error| of the column over the reference models."""
        return max((abs(r.error[column]) for r in self.rows if math.isfinite(r.error[column])), default=0.0)

    def drift(self) -> float:
        """Points of total error per point of extrapolation, from the models outside the others' range (at least
        `MIN_DRIFT`)."""
        rates = [abs(r.error[0]) / r.outside for r in self.rows if r.outside > EDGE_POINTS]
        return max([MIN_DRIFT, *rates])

    def to_dict(self) -> dict:
        return {"columns": self.columns, "rows": [dict(r.__dict__) for r in self.rows], "delta_bar": self.delta_bar,
                "rmse": self.rmse}

    @classmethod
    def from_dict(cls, data: Mapping | None) -> "LomoTable | None":
        if not data:
            return None
        return cls(list(data["columns"]), [LomoRow(**r) for r in data["rows"]],
                   float(data.get("delta_bar", math.nan)), float(data.get("rmse", math.nan)))


def _scatter_var(corr: Correction, grades: np.ndarray, members: np.ndarray) -> np.ndarray:
    """Points² per column: the sum of the per-sample residual variances at the run's grades over the column's
    samples, over its count², averaged over runs."""
    bins = bin_index(corr.values, grades)
    v = np.where(bins >= 0, corr.var[np.maximum(bins, 0)], 0.0)                  # R × N
    ok = (bins >= 0).astype(float)
    m = members.astype(float)
    with np.errstate(invalid="ignore", divide="ignore"):
        per_run = 1e4 * (v @ m) / (ok @ m) ** 2
    return _nanmean(np.where(np.isfinite(per_run), per_run, np.nan), axis=0)


def _lomo_fits(pairs: PairSet, strata: Strata, values: np.ndarray, shrink: float):
    """(model index, the correction fit without that model) for every model."""
    for j, model in enumerate(pairs.models):
        yield j, fit_correction(pairs.without([model]), strata, values, shrink=shrink)


def out_of_model_variance(pairs: PairSet, strata: Strata, values: np.ndarray, shrink: float = SHRINK) -> np.ndarray:
    """The per-sample scatter of official grades around the correction, per grade value, measured out of sample:
    each model's pairs against the correction fit without that model (in-sample residuals would understate it:
    two models that answered a question word for word alike can have different official grades for it). Shrunk
    toward the overall variance like the correction; NaN-free."""
    nb = len(values)
    sq, n = np.zeros(nb), np.zeros(nb)
    for j, corr in _lomo_fits(pairs, strata, values, shrink):
        g = pairs.candidate[j][None, :]
        f = corrected_grades(corr, strata, g)[0][0]
        ok = np.isfinite(f) & np.isfinite(pairs.official[j])
        b = bin_index(values, g[0])
        sq += np.bincount(b[ok], weights=(f[ok] - pairs.official[j][ok]) ** 2, minlength=nb)
        n += np.bincount(b[ok], minlength=nb)
    overall = float(sq.sum() / n.sum()) if n.sum() else 0.0
    return _lean(sq, n, np.full(nb, overall), shrink)


def leave_one_model_out(pairs: PairSet, strata: Strata, shrink: float = SHRINK) -> LomoTable:
    """For each reference model: fit on the others, predict its columns from its candidate grades, compare with
    its official columns. Needs at least two models (else an empty table). The scatter each prediction expects
    is the out-of-model scatter of the other models' pairs."""
    table = LomoTable(list(strata.columns))
    if len(pairs.models) < 2:
        return table
    values = grade_bins(pairs.candidate)
    abs_sum, sq_sum, abs_n = 0.0, 0.0, 0
    for j, corr in _lomo_fits(pairs, strata, values, shrink):
        model = pairs.models[j]
        rest = pairs.without([model])
        corr.var = out_of_model_variance(rest, strata, values, shrink) if len(rest.models) > 1 else corr.var
        g = pairs.candidate[j][None, :]
        fixed = corrected_grades(corr, strata, g)[0]
        pred = column_scores(fixed, strata.members)
        ok = np.isfinite(fixed[0]) & np.isfinite(pairs.official[j])
        abs_sum += float(np.abs(fixed[0][ok] - pairs.official[j][ok]).sum())
        sq_sum += float(((fixed[0][ok] - pairs.official[j][ok]) ** 2).sum())
        abs_n += int(ok.sum())
        off_grades = np.where(np.isfinite(g), pairs.official[j][None, :], np.nan)
        off = column_scores(off_grades, strata.members)
        others = [t for t in rest.official_totals if math.isfinite(t)]
        total = pairs.official_totals[j]
        outside = max(0.0, total - max(others), min(others) - total) if others else 0.0
        scatter = _scatter_var(corr, g, strata.members) if corr.var is not None else np.zeros(len(strata.columns))
        table.rows.append(LomoRow(model, float(total), [float(x) for x in pred], [float(x) for x in off],
                                  [float(a - b) for a, b in zip(pred, off)], [float(x) for x in scatter],
                                  float(outside)))
    table.delta_bar = abs_sum / abs_n if abs_n else math.nan
    table.rmse = math.sqrt(sq_sum / abs_n) if abs_n else math.nan
    return table


def model_beyond_correction(model_var: float, correction_sd: float) -> float:
    """The model-to-model variance (points²) an interval adds beyond the correction's own uncertainty.

    A leave-one-model-out error is the scatter of that model's samples, plus the error of a correction fit on the
    other models (which models, which of their pairs), plus that model's own departure from them. `model_var`
    (`LomoTable.model_var`) removes only the scatter, so it still holds the fit's error: the very term the bootstrap
    over models and questions measures as `correction_sd`. Adding both would count it twice; what the errors
    show beyond it is ``max(0, model_var − correction_sd²)``. The fit left out of each leave-one-out prediction rests
    on one model fewer, so its error is, if anything, larger than `correction_sd²`: the difference taken is no
    smaller than the model-to-model part (conservative).

    >>> model_beyond_correction(2.0, 0.5), model_beyond_correction(0.1, 0.5)
    (1.75, 0.0)
    """
    return max(0.0, float(model_var) - float(correction_sd) ** 2)


def resample_weights(n_models: int, n_samples: int, resamples: int, seed: int) -> np.ndarray:
    """D × M × N pair weights: in each draw the models and the questions are resampled with replacement (the
    same questions for every model), a pair's weight the product of the two counts."""
    rng = np.random.default_rng(seed)
    cm = rng.multinomial(n_models, [1.0 / n_models] * n_models, size=resamples).astype(float)
    cq = rng.multinomial(n_samples, [1.0 / n_samples] * n_samples, size=resamples).astype(float)
    return cm[:, :, None] * cq[:, None, :]


@dataclass
class ColumnEstimate:
    """One column of a calibrated estimate (points)."""

    name: str
    score: float                    # the run's own score with the candidate judge
    estimate: float
    low: float
    high: float
    scatter_sd: float
    correction_sd: float
    model_sd: float
    floor: float                    # the leave-one-out error the half-width may not undercut
    widened: float                  # added for extrapolation


@dataclass
class CalibratedEstimate:
    columns: list[ColumnEstimate]
    models: list[str]               # the reference models the correction rests on
    range: tuple[float, float]      # their official totals
    extrapolated: float             # points outside that range (0 inside)
    pairs: int                      # reference pairs the correction rests on


def estimate_run(pairs: PairSet, strata: Strata, grades: np.ndarray, lomo: LomoTable | None, *,
                 resamples: int = DEFAULT_RESAMPLES, seed: int = DEFAULT_SEED,
                 shrink: float = SHRINK) -> CalibratedEstimate:
    """The calibrated estimate of a run from its per-run grades (R × N, samples in `pairs.ids` order, NaN where not
    graded), with its interval (see the module docstring). `lomo`: the check's leave-one-model-out table (None:
    computed here)."""
    lomo = lomo if lomo is not None else leave_one_model_out(pairs, strata, shrink)
    values = grade_bins(pairs.candidate, grades)
    point = fit_correction(pairs, strata, values, shrink=shrink)
    if len(pairs.models) > 1:
        point.var = out_of_model_variance(pairs, strata, values, shrink)
    est = column_scores(corrected_grades(point, strata, grades)[0], strata.members)
    raw = column_scores(grades, strata.members)
    W = resample_weights(len(pairs.models), len(pairs.ids), resamples, seed)
    boot = column_scores(corrected_grades(fit_correction(pairs, strata, values, W, shrink), strata, grades),
                         strata.members)                                          # D × k
    import warnings

    with np.errstate(invalid="ignore"), warnings.catch_warnings():
        warnings.simplefilter("ignore", category=RuntimeWarning)
        corr_sd = np.nanstd(boot, axis=0)
    scatter = _scatter_var(point, grades, strata.members)
    totals = [t for t in pairs.official_totals if math.isfinite(t)]
    lo_ref, hi_ref = (min(totals), max(totals)) if totals else (math.nan, math.nan)
    outside = max(0.0, est[0] - hi_ref, lo_ref - est[0]) if totals else 0.0
    widen = lomo.drift() * outside if outside > 0 else 0.0
    columns = []
    for j, name in enumerate(strata.columns):
        if not math.isfinite(est[j]):
            continue
        j_lomo = lomo.columns.index(name) if name in lomo.columns else None
        model_var = lomo.model_var(j_lomo) if j_lomo is not None else 0.0
        floor = lomo.max_error(j_lomo) if j_lomo is not None else 0.0
        beyond = model_beyond_correction(model_var, float(corr_sd[j]))
        sd = math.sqrt(max(scatter[j], 0.0) + corr_sd[j] ** 2 + beyond)
        half = max(t95(len(lomo.rows) - 1) * sd, floor) + widen
        columns.append(ColumnEstimate(name, float(raw[j]), float(est[j]), float(max(0.0, est[j] - half)),
                                      float(min(100.0, est[j] + half)), math.sqrt(max(scatter[j], 0.0)),
                                      float(corr_sd[j]), math.sqrt(beyond), float(floor), float(widen)))
    n_pairs = int((np.isfinite(pairs.candidate) & np.isfinite(pairs.official)).sum())
    return CalibratedEstimate(columns, list(pairs.models), (lo_ref, hi_ref), float(outside), n_pairs)


def correction_summary(pairs: PairSet, strata: Strata, shrink: float = SHRINK) -> dict:
    """How many reference pairs each part of the correction rests on: pairs in all; per grade value (pooled);
    per capability group; per integration; and how many (integration, grade) cells have at least `shrink` pairs
    of their own (the others lean on the coarser level)."""
    values = grade_bins(pairs.candidate)
    corr = fit_correction(pairs, strata, values, shrink=shrink)
    n_int = corr.n_integration
    return {
        "pairs": int(n_int.sum()),
        "grade_values": {f"{v:g}": int(n) for v, n in zip(values, corr.n_pooled) if n},
        "groups": {g: int(corr.n_group[k].sum()) for k, g in enumerate(strata.groups)},
        "integrations": {t: int(n_int[k].sum()) for k, t in enumerate(strata.integrations)},
        "cells": int((n_int > 0).sum()),
        "cells_own": int((n_int >= shrink).sum()),
        "shrink": shrink,
    }


# ---- runs unlike the references (issue 30) ------------------------------------------------------------------
#: What the correction assumes is like the references, measured per column (total, each capability): the share
#: of refusals and empty answers, the answers' typical length (mean of log(1 + characters)) and the share of
#: grades that are exactly 0 or 1.
TRAITS = ("refusals", "length", "extreme")
#: Points of error per unit of a trait (a share, or log-length) an interval widens by at least, beyond the
#: references' range: a run a third of whose answers are of a kind no reference shows may be off by 0.1 per such
#: sample (3 points); answers e times longer than any reference's by 3 points.
MIN_TRAIT_RATE = {"refusals": 10.0, "length": 3.0, "extreme": 10.0}
#: A reference counts as outside the others' range on a trait (its leave-one-out error then measures the rate)
#: from this distance on.
TRAIT_EDGE = {"refusals": 0.02, "length": 0.1, "extreme": 0.03}
#: ... and no rate above this is taken from one reference (a reference just beyond the others would make it
#: unbounded).
MAX_TRAIT_RATE = 60.0


def trait_profile(members: np.ndarray, refused: np.ndarray, length: np.ndarray, grades: np.ndarray) -> np.ndarray:
    """Per trait (`TRAITS`) and column: the share of the column's answers that are refusals or empty, the mean
    log(1 + characters) of its answers (NaN entries: answer unknown) and the share of its grades (``grades``:
    R × N) that are exactly 0 or 1 -> 3 × k (NaN where a column has nothing to measure)."""
    m = members.astype(float)
    out = np.full((len(TRAITS), members.shape[1]), np.nan)
    with np.errstate(invalid="ignore", divide="ignore"):
        for t, values in ((0, refused), (1, np.log1p(length))):
            ok = np.isfinite(values)
            out[t] = (np.where(ok, values, 0.0) @ m) / (ok.astype(float) @ m)
        g = np.asarray(grades, dtype=float)
        ok = np.isfinite(g)
        ext = ok & ((np.round(g, DECIMALS) == 0.0) | (np.round(g, DECIMALS) == 1.0))
        out[2] = (ext.astype(float).sum(0) @ m) / (ok.astype(float).sum(0) @ m)
    return out


@dataclass
class TraitFinding:
    """A run outside the references' range on one trait in one column."""

    trait: str
    column: str
    value: float
    low: float                      # the references' range
    high: float
    distance: float                 # beyond the range (trait units)

    def text(self) -> str:
        where = "" if self.column == "total" else f"on {self.column}, "
        if self.trait == "length":
            def chars(x):
                return f"{math.expm1(x):.0f}"
            return (f"{where}typical answer length {chars(self.value)} characters (references {chars(self.low)}–"
                    f"{chars(self.high)})")
        what = "refusals or empty answers" if self.trait == "refusals" else "grades of exactly 0 or 1"
        return f"{where}{what} {100 * self.value:.0f} % (references {100 * self.low:.0f}–{100 * self.high:.0f} %)"


def _trait_tolerance(trait: str, edge: float, n: float) -> float:
    """How far beyond the references' range a column of `n` samples may lie on `trait` and still be like them:
    2.5 standard errors of a share at the range's edge (at least 5 %) plus 5 points of share; for the length,
    2.5 / √n plus 0.2 of log-length (answers 22 % longer or shorter). Measured on the shipped references: none
    of them, left out, lies beyond the others by more than that on its total, and so the label is kept for runs
    that differ in kind (a third of the answers refused, answers several times longer)."""
    n = max(float(n), 1.0)
    if trait == "length":
        return 0.2 + 2.5 / math.sqrt(n)
    p = min(max(edge, 0.05), 0.95)
    return 0.05 + 2.5 * math.sqrt(p * (1 - p) / n)


def unlike_findings(run: np.ndarray, refs: np.ndarray, columns: Sequence[str], counts: Sequence[float]) -> list[TraitFinding]:
    """Where the run's trait profile (3 × k) lies outside the references' (M × 3 × k) range by more than chance
    (`counts`: samples per column), total first, then each capability."""
    out = []
    for t, trait in enumerate(TRAITS):
        for j, column in enumerate(columns):
            vals = refs[:, t, j][np.isfinite(refs[:, t, j])]
            v = run[t, j]
            if not vals.size or not math.isfinite(v):
                continue
            lo, hi = float(vals.min()), float(vals.max())
            dist = max(0.0, v - hi, lo - v)
            if dist > _trait_tolerance(trait, hi if v > hi else lo, counts[j]):
                out.append(TraitFinding(trait, column, float(v), lo, hi, float(dist)))
    return out


def trait_rates(refs: np.ndarray, lomo: "LomoTable", models: Sequence[str]) -> dict[str, float]:
    """Points of total error per unit of each trait, from the leave-one-model-out rows whose reference lies
    outside the other references' range on it (at least `MIN_TRAIT_RATE`, at most `MAX_TRAIT_RATE` each)."""
    by_model = {r.model: r for r in lomo.rows}
    rates = {}
    for t, trait in enumerate(TRAITS):
        found = [MIN_TRAIT_RATE[trait]]
        for m, model in enumerate(models):
            row = by_model.get(model)
            others = np.delete(refs[:, t, 0], m)
            others = others[np.isfinite(others)]
            if row is None or not others.size or not math.isfinite(refs[m, t, 0]):
                continue
            dist = max(0.0, refs[m, t, 0] - others.max(), others.min() - refs[m, t, 0])
            if dist >= TRAIT_EDGE[trait] and math.isfinite(row.error[0]):
                found.append(min(MAX_TRAIT_RATE, abs(row.error[0]) / dist))
        rates[trait] = float(max(found))
    return rates
