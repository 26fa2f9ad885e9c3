"""Official-equivalent estimate: what the official MM-Vet judge (``gpt-4-0613``, shut down on 2026-10-23) would
have given a run graded by another judge. An ESTIMATE, never the official MM-Vet metric.

It rests on one judge check (`mmvet_core.successors.judgecheck`): the judge's check at its endpoint with the official prompt,
which grows as the judge grades more reference sets and is named by its id and date wherever an estimate is shown.
The check keeps every (candidate grade, official grade) pair of its reference models; `mmvet_core.successors.calibration`
learns from them the official grade expected given the judge's grade (per grade value, refined per capability),
corrects the run sample by sample, aggregates the official way and gives the interval (correction uncertainty,
per-sample scatter, model-to-model variation from leave-one-model-out; bounds within [0, 100]). docs/estimates.md
explains the method with a worked example.

Two labels say what an estimate stands on:

* **in-sample**: the run's answers are those of one of the check's reference models (at least `IN_SAMPLE_SHARE`
  of them word for word): that model is left out of the correction, so the estimate is not circular, and the
  label says so;
* **extrapolated**: the estimate lies outside the range of the references' official totals; its interval is
  widened by the drift the leave-one-model-out predictions of the outermost references show.

No estimate is given for imported grades, a run of the official judge itself, another prompt than the official
one, another benchmark than MM-Vet v1, the keyword baseline, a judge without a check of this server's at this
endpoint (made with its own key, or by the host's CLI: `judgecheck.run_check`; a visitor's own check never makes
one), a run graded with a visitor's key at the server's own endpoint (`VISITOR_KEY_AT_SERVER`), or when the check
does not allow one (`JudgeCheckResult.correctable`: incomplete, fewer than three reference models, or no
closer to the official grades than keyword matching even corrected).

Everything here is pure but `stored_equivalent` (and its callers given a store), which keeps the one estimate per
check and graded answers that every surface reads.
"""
from __future__ import annotations

import csv
import hashlib
import io
import json
import math
import time
from dataclasses import asdict, dataclass, field

import numpy as np

from ..scores.graded import OFFICIAL_JUDGES
from .judgecheck import JudgeCheckResult, answer_traits, origin_text, prediction_hash

#: How the number is named wherever it is shown.
LABEL = "official-equivalent estimate"
DISCLAIMER = "an estimate, not the official MM-Vet metric"
#: A run is in-sample when at least this share of its answers are word for word a reference model's.
IN_SAMPLE_SHARE = 0.9
IN_SAMPLE = "in-sample"
EXTRAPOLATED = "extrapolated"
UNLIKE = "unlike the references"
#: At most this many reasons are named in the label (every one is in `Equivalence.unlike`).
UNLIKE_SHOWN = 3


@dataclass
class EquivalentColumn:
    """One column (total or a capability): the run's own score with its judge, and the estimate with its interval
    and what the interval is made of (standard deviations in points; `floor`: the leave-one-out error the
    half-width may not undercut; `widened`: added for extrapolation)."""

    name: str
    score: float
    estimate: float
    low: float
    high: float
    scatter_sd: float = 0.0
    correction_sd: float = 0.0
    model_sd: float = 0.0
    floor: float = 0.0
    widened: float = 0.0


@dataclass
class Equivalence:
    """The estimate of one run (`available` False: `reason` says why there is none)."""

    available: bool
    reason: str
    judge: str = ""
    check_id: str = ""
    check_created_at: float = 0.0
    references: list[str] = field(default_factory=list)        # the models the correction rests on
    reference_range: list[float] = field(default_factory=list)  # their official totals [low, high]
    label: str = ""                 # "", IN_SAMPLE or EXTRAPOLATED
    label_note: str = ""            # the label in words
    left_out: str = ""              # the reference left out of the correction (in-sample)
    pairs: int = 0                  # reference pairs the correction rests on
    columns: list[EquivalentColumn] = field(default_factory=list)
    unlike: list[str] = field(default_factory=list)             # why the run is unlike the references
    origin: str = ""                # where the check comes from, when imported (`judgecheck.origin_text`)
    basis: str = ""                 # `FILE_BASIS` for a grade file's judge, as the file records it

    @property
    def total(self) -> EquivalentColumn | None:
        return self.columns[0] if self.columns and self.columns[0].name == "total" else None

    @property
    def check_text(self) -> str:
        """``check 3f2a9c1b (2026-12-05; 6 reference models, official totals 21.6–60.9)``."""
        when = time.strftime("%Y-%m-%d", time.gmtime(self.check_created_at)) if self.check_created_at else "?"
        rng = (f", official totals {self.reference_range[0]:.1f}–{self.reference_range[1]:.1f}"
               if len(self.reference_range) == 2 else "")
        origin = f"; {self.origin}" if self.origin else ""
        return f"check {self.check_id[:8] or '?'} ({when}; {len(self.references)} reference models{rng}{origin})"

    def csv_text(self) -> str:
        """`make_equivalent_csv_text` of this estimate (the file `runs.export_run` writes beside the official
        files, given the estimate)."""
        return make_equivalent_csv_text(self)

    def to_dict(self) -> dict:
        return {"label_text": LABEL, "disclaimer": DISCLAIMER, **asdict(self), "check": self.check_text}

    @classmethod
    def from_dict(cls, data: dict) -> "Equivalence":
        """Read a stored estimate (`to_dict`; the derived keys are left out)."""
        known = {f for f in cls.__dataclass_fields__}
        out = cls(**{k: v for k, v in data.items() if k in known and k != "columns"})
        col = set(EquivalentColumn.__dataclass_fields__)
        out.columns = [EquivalentColumn(**{k: v for k, v in c.items() if k in col}) for c in data.get("columns") or []]
        return out

    def short(self) -> dict | None:
        """What a table cell or an API field shows: estimate, interval, label, check id (None without an estimate)."""
        t = self.total
        if not self.available or t is None:
            return None
        return {"estimate": round(t.estimate, 1), "low": round(t.low, 1), "high": round(t.high, 1),
                "label": self.label_with_reasons, "check": self.check_id, "check_text": self.check_text}

    @property
    def label_with_reasons(self) -> str:
        """The labels as a table cell shows them, the reasons a run is unlike the references included:
        ``extrapolated · unlike the references: refusals or empty answers 33 % (references 0–8 %)``."""
        parts = [x for x in self.label.split(", ") if x and x != UNLIKE]
        if self.unlike:
            parts.append(f"{UNLIKE}: {'; '.join(self.unlike[:UNLIKE_SHOWN])}")
        return " · ".join(parts)


#: Why a run graded with a visitor's own key at this server's own endpoint gets no estimate.
VISITOR_KEY_AT_SERVER = ("graded with a visitor's own key at this server's endpoint: the server's check rests on "
                         "what its own key gets there, which another key need not get (a gateway routes by key)")


def unavailable_reason(run_judge: dict, benchmark_version: str, check: JudgeCheckResult | None) -> str | None:
    """Why a run gets no estimate (None when it may have one). `run_judge`: the run's stored JudgeSettings dict."""
    provider = run_judge.get("provider")
    model = run_judge.get("model", "?")
    if provider == "imported":
        return "grades imported from a file: their judge is not one this server checked"
    if provider != "baseline" and model in OFFICIAL_JUDGES and run_judge.get("prompt_examples") is None:
        return "graded by the official judge itself: no correction applies"
    if run_judge.get("prompt_examples") is not None:
        return "graded with another prompt than the official one, which the judge check measures"
    if benchmark_version != "v1":
        return f"the judge check measures MM-Vet v1; this run is on {benchmark_version}"
    if provider == "baseline":
        return "the keyword baseline reads no judgement: its grades are not corrected into an estimate"
    if check is None:
        return (f"no check of {model} at this endpoint made by this server is stored (a visitor's own check makes "
                f"no estimate): the host runs `python -m mmvet_core judge-check --judge-model {model}` (or Check "
                "this judge in the app with the server's judge)")
    if not check.correctable:
        return check.correction_note or "the judge check does not allow a correction"
    return None


def in_sample_model(check: JudgeCheckResult, predictions: dict | None, *, hashes: dict | None = None) -> str | None:
    """The check's reference model whose answers the run's `predictions` repeat (at least `IN_SAMPLE_SHARE` of
    the reference's samples word for word), or None. `hashes`: the answers' `prediction_hash`es instead (a
    leaderboard entry keeps those, not the answers)."""
    if hashes is None and predictions:
        hashes = {sid: prediction_hash(p) for sid, p in predictions.items()}
    if not hashes:
        return None
    best, share = None, 0.0
    for model, entry in check.pairs.items():
        ref_hashes = entry.get("pred_hash") or []
        ids = entry.get("ids") or []
        if not ref_hashes:
            continue
        same = sum(1 for sid, h in zip(ids, ref_hashes) if hashes.get(sid) == h)
        if same / len(ref_hashes) > share:
            best, share = model, same / len(ref_hashes)
    return best if share >= IN_SAMPLE_SHARE else None


def estimate_equivalent(benchmark, scores: dict[str, list[float | None]], check: JudgeCheckResult | None, *,
                        run_judge: dict, predictions: dict | None = None, benchmark_version: str = "v1",
                        resamples: int | None = None, seed: int = 0,
                        prediction_hashes: dict | None = None, traits: dict | None = None) -> Equivalence:
    """The official-equivalent estimate of a run (`scores`: sample id -> per-run grades, `benchmark` its benchmark)
    from its judge's check: total and each capability. Pure; never raises for a missing check (the result says why
    there is no estimate). `predictions`: the run's answers (for the in-sample label and the traits the correction
    assumes are like the references': refusals, length); `traits`: instead of the answers, their
    `judgecheck.answer_traits` (a leaderboard entry keeps those)."""
    from ..inputs.benchmark import load_bundled_v1
    from .calibration import DEFAULT_RESAMPLES, PairSet, estimate_run, leave_one_model_out, LomoTable, strata_of

    judge = str(run_judge.get("model", "?"))
    reason = unavailable_reason(run_judge, benchmark_version, check)
    if reason is not None:
        return Equivalence(False, reason, judge)
    assert check is not None
    ref_bench = load_bundled_v1()                  # the check's samples: the correction learns on all of them
    strata = strata_of(ref_bench)
    ids = ref_bench.ids
    n_runs = max((len(v) for v in scores.values()), default=0)
    grades = np.full((max(n_runs, 1), len(ids)), np.nan)
    for k, sid in enumerate(ids):
        for r, g in enumerate(scores.get(sid) or []):
            if g is not None and sid in benchmark.samples:
                grades[r, k] = float(g)
    if not np.isfinite(grades).any():
        return Equivalence(False, "nothing graded yet", judge)
    pairs = PairSet.from_dict(check.pairs, ids)
    left_out = in_sample_model(check, predictions, hashes=prediction_hashes)
    if left_out is not None:
        pairs = pairs.without([left_out])
        lomo = leave_one_model_out(pairs, strata)
    else:
        lomo = LomoTable.from_dict(check.lomo) or leave_one_model_out(pairs, strata)
    est = estimate_run(pairs, strata, grades, lomo, resamples=resamples or DEFAULT_RESAMPLES, seed=seed)
    cols = [EquivalentColumn(c.name, c.score, c.estimate, c.low, c.high, c.scatter_sd, c.correction_sd, c.model_sd,
                             c.floor, c.widened) for c in est.columns if c.name == "total"
            or c.name in benchmark.capabilities]
    if not cols or cols[0].name != "total":
        return Equivalence(False, "nothing graded yet", judge)
    lo, hi = est.range
    if traits is None and predictions:
        traits = answer_traits(predictions)
    unlike, widen = _unlike(check, pairs, strata, grades, traits, lomo, ids)
    for c in cols:
        w = widen.get(c.name, 0.0)
        if w > 0:
            c.low, c.high, c.widened = max(0.0, c.low - w), min(100.0, c.high + w), c.widened + w
    eq = Equivalence(True, check.correction_note, judge, check.check_id, check.created_at, list(pairs.models),
                     [lo, hi], pairs=est.pairs, columns=cols, left_out=left_out or "", unlike=unlike,
                     origin=origin_text(check))
    labels, notes = [], []
    if left_out is not None:
        labels.append(IN_SAMPLE)
        notes.append(f"in-sample: these answers are the check's reference {left_out}; it is left out of the "
                     f"correction, which rests on the other {len(pairs.models)}")
    elif est.extrapolated > 0:
        side = "above" if cols[0].estimate > hi else "below"
        labels.append(EXTRAPOLATED)
        notes.append(f"extrapolated: {est.extrapolated:.1f} points {side} the references' official totals "
                     f"({lo:.1f}–{hi:.1f}); the interval is widened by {est.columns[0].widened:.1f}")
    if unlike:
        labels.append(UNLIKE)
        more = f" and {len(unlike) - UNLIKE_SHOWN} more" if len(unlike) > UNLIKE_SHOWN else ""
        notes.append(f"{UNLIKE}: {'; '.join(unlike[:UNLIKE_SHOWN])}{more}; the interval is widened by "
                     f"{widen.get('total', 0.0):.1f} (what leave-one-model-out shows for such differences)")
    eq.label, eq.label_note = ", ".join(labels), "; ".join(notes)
    return eq


def _unlike(check: JudgeCheckResult, pairs, strata, grades, traits: dict | None, lomo, ids) -> tuple[list[str], dict]:
    """(the reasons the run is unlike the check's references, the widening per column in points): its trait
    profile (`calibration.trait_profile`) against the references', the widening the leave-one-model-out rate of
    each trait times the distance beyond the references' range (the largest over the traits)."""
    from .calibration import trait_profile, trait_rates, unlike_findings

    refs = []
    for model in pairs.models:
        refused, length = _reference_traits(check, model, ids)
        j = pairs.models.index(model)
        refs.append(trait_profile(strata.members, refused, length, pairs.candidate[j][None, :]))
    if not refs:
        return [], {}
    refused = np.full(len(ids), np.nan)
    length = np.full(len(ids), np.nan)
    graded = np.isfinite(grades).any(axis=0)
    for k, sid in enumerate(ids):
        t = (traits or {}).get(sid)
        if graded[k] and isinstance(t, (list, tuple)) and len(t) == 2:
            refused[k], length[k] = float(t[0]), float(t[1])
    run = trait_profile(strata.members & graded[:, None], refused, length, grades)
    ref_arr = np.stack(refs)
    counts = (strata.members & graded[:, None]).sum(axis=0)
    findings = unlike_findings(run, ref_arr, strata.columns, counts)
    if not findings:
        return [], {}
    rates = trait_rates(ref_arr, lomo, pairs.models)
    widen: dict[str, float] = {}
    for f in findings:
        widen[f.column] = max(widen.get(f.column, 0.0), rates[f.trait] * f.distance)
    # the total widens at least as much as the capability that moved most would move it (its share of samples)
    share = {c: counts[j] / max(counts[0], 1) for j, c in enumerate(strata.columns)}
    widen["total"] = max([widen.get("total", 0.0), *(w * share[c] for c, w in widen.items())])
    return [f.text() for f in findings], widen


def _reference_traits(check: JudgeCheckResult, model: str, ids) -> tuple[np.ndarray, np.ndarray]:
    """A reference's refusals and answer lengths on `ids` (NaN where unknown): from the check's pairs, or, for a
    check stored before they were kept, from the bundled reference set of that name."""
    entry = check.pairs.get(model) or {}
    refused, length = entry.get("refused"), entry.get("length")
    if refused is None or length is None:
        preds = _bundled_predictions().get(model)
        if preds is None:
            return np.full(len(ids), np.nan), np.full(len(ids), np.nan)
        traits = answer_traits(preds)
        return (np.array([traits[s][0] if s in traits else np.nan for s in ids], dtype=float),
                np.array([traits[s][1] if s in traits else np.nan for s in ids], dtype=float))
    where = {sid: k for k, sid in enumerate(entry.get("ids") or [])}
    return (np.array([float(refused[where[s]]) if s in where else np.nan for s in ids]),
            np.array([float(length[where[s]]) if s in where else np.nan for s in ids]))


_BUNDLED: dict = {}


def _bundled_predictions() -> dict:
    if not _BUNDLED:
        from .judgecheck import load_references

        _BUNDLED.update({r.model: r.predictions for r in load_references(which="all")})
    return _BUNDLED


def estimate_run(view, check: JudgeCheckResult | None, *, resamples: int | None = None,
                 store=None) -> Equivalence:
    """The official-equivalent estimate of a run (`runs.RunView`: its judge, benchmark, effective scores and
    answers) from its judge's check (`judgecheck.run_check`), or the reason there is none. The caller reads the
    check; a view is taken as it is (finished or not). With `store`, the one stored estimate of these grades under
    this check (`stored_equivalent`): every surface reads the same one."""
    judge = view.run.judge
    reason = unavailable_reason(judge, view.benchmark.version, check)
    if reason is not None:          # said before any bootstrap is computed
        return Equivalence(False, reason, str(judge.get("model", "?")))
    return stored_equivalent(store, view.benchmark, view.effective_scores(), check, run_judge=judge,
                             predictions=view.run.predictions, benchmark_version=view.benchmark.version,
                             resamples=resamples)


def estimate_inputs(check: JudgeCheckResult, benchmark, scores: dict, *, run_judge: dict, benchmark_version: str,
                    prediction_hashes: dict, resamples: int | None, seed: int, traits: dict | None = None) -> str:
    """What an estimate is computed from, as a digest (the key of its stored copy beside its check's id): the
    grades per sample of the benchmark's samples, the answers' hashes, the judge's name, the benchmark version and
    the bootstrap's size and seed. A run and its leaderboard entry with the same grades have the same inputs."""
    rows = [[sid, [None if g is None else round(float(g), 6) for g in (scores.get(sid) or [])]]
            for sid in sorted(benchmark.samples)]
    ident = json.dumps([check.check_id, benchmark_version, str(run_judge.get("model", "?")), rows,
                        sorted((prediction_hashes or {}).items()), resamples or 0, seed,
                        sorted((k, list(v)) for k, v in (traits or {}).items())], ensure_ascii=False)
    return hashlib.sha256(ident.encode("utf-8")).hexdigest()


def stored_equivalent(store, benchmark, scores: dict[str, list[float | None]], check: JudgeCheckResult | None, *,
                      run_judge: dict, predictions: dict | None = None, benchmark_version: str = "v1",
                      resamples: int | None = None, seed: int = 0,
                      prediction_hashes: dict | None = None, traits: dict | None = None) -> Equivalence:
    """`estimate_equivalent`, stored once per (check, `estimate_inputs`) in `store` (`Store.put_estimate`: the
    first stored wins, so racing processes agree): the card, ``/status``, the leaderboard and MCP read this one
    estimate, never one each. Without a store (or a stored check id) it is computed as is."""
    if prediction_hashes is None and predictions:
        prediction_hashes = {sid: prediction_hash(p) for sid, p in predictions.items()}
    if traits is None and predictions:
        traits = answer_traits(predictions)       # what the unlike-the-references test reads
    reason = unavailable_reason(run_judge, benchmark_version, check)

    def compute() -> Equivalence:
        return estimate_equivalent(benchmark, scores, check, run_judge=run_judge, benchmark_version=benchmark_version,
                                   resamples=resamples, seed=seed, prediction_hashes=prediction_hashes, traits=traits)

    if store is None or reason is not None or not check.check_id:
        return compute()
    inputs = estimate_inputs(check, benchmark, scores, run_judge=run_judge, benchmark_version=benchmark_version,
                             prediction_hashes=prediction_hashes or {}, resamples=resamples, seed=seed,
                             traits=traits)
    stored = store.get_estimate(check.check_id, inputs)
    if stored is None:
        eq = compute()
        if not eq.available:
            return eq                    # "nothing graded yet": not worth a row
        stored = store.put_estimate(check.check_id, inputs, eq.to_dict())
    return Equivalence.from_dict(stored)


def estimate_keys(run, kind: str, trusted=None) -> dict:
    """What a successor entry keeps to find its official-equivalent estimate later (never the endpoint's address):
    the fingerprint of its judge's check, its answers' hashes (the in-sample test) and their traits (refused or
    not, length: the unlike-the-references test); nothing for a run graded with a visitor's key at one of the
    `trusted` endpoints (the server's own: its check rests on its own key)."""
    if kind != "successor" or run.judge.get("provider") in ("imported", "baseline") \
            or run.judge.get("prompt_examples") is not None:
        return {}
    from ..runs.provenance import VISITOR_CREDENTIAL, run_endpoints

    if run.judge.get("credential") == VISITOR_CREDENTIAL and set(run_endpoints(run.judge)) & set(trusted or ()):
        return {}                # a visitor's key at the server's own endpoint: the server's check is not theirs
    from ..judging.judge import JudgeSettings, check_settings

    settings = JudgeSettings(**{k: v for k, v in run.judge.items() if k in JudgeSettings.__dataclass_fields__})
    return {"judge_check_fingerprint": check_settings(settings).fingerprint(),
            "prediction_hashes": {sid: prediction_hash(p) for sid, p in run.predictions.items()},
            "answer_traits": answer_traits(run.predictions)}


def entry_equivalence(store, entry, *, resamples: int | None = None) -> Equivalence:
    """The official-equivalent estimate of a leaderboard entry (`entries.BoardEntry`, a successor judge's):
    from its frozen scores and the server's current check of its judge (`estimate_keys`; an entry
    published before those keys were kept finds them from its run while the run is stored): the stored estimate
    its run's card shows too when the grades are the same (`stored_equivalent`)."""
    from ..inputs.benchmark import load_bundled_v1
    from .judgecheck import check_of_fingerprint

    meta = entry.meta
    judge = {"model": meta.get("judge", "?"), "provider": "openai", "prompt_examples": None}
    fingerprint, hashes = meta.get("judge_check_fingerprint"), meta.get("prediction_hashes")
    traits = meta.get("answer_traits")
    if not fingerprint or traits is None:
        run = store.get_run(entry.run_id) if entry.run_id else None
        keys = estimate_keys(run, str(meta.get("judge_kind"))) if run is not None else {}
        if not fingerprint:
            fingerprint, hashes = keys.get("judge_check_fingerprint"), keys.get("prediction_hashes")
        traits = keys.get("answer_traits") if traits is None else traits
    if not fingerprint:
        return Equivalence(False, "the entry does not say which judge check could correct it", judge["model"])
    check = check_of_fingerprint(store, fingerprint)
    version = str(meta.get("version", ""))
    reason = unavailable_reason(judge, version, check)
    if reason is not None:
        return Equivalence(False, reason, judge["model"])
    bench = load_bundled_v1()
    ids = [sid for sid in meta.get("sample_ids") or bench.ids if sid in bench.samples]
    return stored_equivalent(store, bench.subset(ids, meta.get("subset") or "entry"), entry.scores, check,
                             run_judge=judge, benchmark_version=version, resamples=resamples,
                             prediction_hashes=hashes or {}, traits=traits)


#: How an estimate of a grade file names what it rests on: the judge the file says graded it.
FILE_BASIS = "judge as recorded in the file"


def recorded_equivalence(store, benchmark, scores: dict, *, judge_counts: dict, prompt: str,
                         predictions: dict | None = None, resamples: int | None = None) -> Equivalence:
    """The official-equivalent estimate of grades someone already holds (a grade file: the MM-Vet Space's zip,
    an official grade JSON, lmms-eval's logs, VLMEvalKit's tables), from the check here of the judge the file
    records (`judgecheck.check_of_judge_model`), labelled `FILE_BASIS`. None of it is verified: the file's word for
    its judge is taken, and said. No estimate (and why) for a file graded with another prompt than the official
    one (no check here measures another prompt), by several judges, by an unnamed judge, by the official judge
    itself, or by a judge without a check here."""
    from ..scores.graded import PROMPT_LABELS, is_official_judge
    from .judgecheck import check_of_judge_model

    judges = [j for j in judge_counts if j and j != "unknown"]
    model = judges[0] if len(judges) == 1 else ""
    if prompt != "official":
        return Equivalence(False, f"the file was graded with {PROMPT_LABELS.get(prompt, prompt)}; the judge checks "
                                  "here measure the official prompt, so no check with that prompt exists here",
                           model or "?")
    if len(judges) != 1 or len(judge_counts) != 1:
        return Equivalence(False, "the file records several judges (or none): an estimate needs one judge",
                           model or "?")
    if is_official_judge(model):
        return Equivalence(False, "graded by the official judge itself: no correction applies", model)
    check = check_of_judge_model(store, model)
    if check is None:
        return Equivalence(False, f"no judge check of {model}, the judge as recorded in the file, is stored here: "
                                  f"run `python -m mmvet_core judge-check --judge-model {model}` or import one",
                           model)
    eq = stored_equivalent(store, benchmark, scores, check, run_judge={"model": model, "provider": "openai",
                                                                       "prompt_examples": None},
                           predictions=predictions or None, benchmark_version=benchmark.version,
                           resamples=resamples)
    eq.basis = FILE_BASIS
    return eq


def entry_estimate(store, entry, *, resamples: int | None = None) -> dict:
    """What a board row shows of an entry's estimate: `Equivalence.short()` (its numbers rounded once, there), or
    ``{"reason": …}`` when there is none. The same computation as a run card's (`estimate_run`, same resamples and
    seed), so the board and the card agree to the digit."""
    eq = entry_equivalence(store, entry, resamples=resamples)
    return eq.short() or {"reason": eq.reason}


def format_equivalent_line(eq: Equivalence) -> str:
    """The summary (CLI, run card): the estimate and its interval, labelled, the check it rests on, and its label
    (in-sample, extrapolated) on a line of its own; or why there is none.

    >>> col = EquivalentColumn("total", 38.4, 30.9, 28.5, 33.4)
    >>> print(format_equivalent_line(Equivalence(True, "", "judge-b", "3f2a9c1bd0", 0.0, ["a", "b", "c"],
    ...                                          [21.6, 60.9], columns=[col])))
    official-equivalent estimate: 30.9 [28.5, 33.4] (38.4 graded by judge-b, corrected per grade by check 3f2a9c1b (?; 3 reference models, official totals 21.6–60.9); an estimate, not the official MM-Vet metric)
    """
    t = eq.total
    if not eq.available or t is None:
        return f"{LABEL}: none ({eq.reason})"
    basis = f" ({eq.basis})" if eq.basis else ""
    line = (f"{LABEL}: {t.estimate:.1f} [{t.low:.1f}, {t.high:.1f}] ({t.score:.1f} graded by {eq.judge}{basis}, "
            f"corrected per grade by {eq.check_text}; {DISCLAIMER})")
    return f"{line}\n{label_text(eq.label_note)}" if eq.label_note else line


def label_text(note: str) -> str:
    """The labels of a note in capitals, their reasons as they are: ``EXTRAPOLATED: …; UNLIKE THE REFERENCES: …``.
    """
    out = note
    for label in (IN_SAMPLE, EXTRAPOLATED, UNLIKE):
        out = out.replace(f"{label}:", f"{label.upper()}:")
    return out


def format_capability_items(eq: Equivalence) -> list[str]:
    """``["rec 31.0 [25.1, 37.2]", "ocr ...", ...]`` (empty without an estimate)."""
    if not eq.available:
        return []
    return [f"{c.name} {c.estimate:.1f} [{c.low:.1f}, {c.high:.1f}]" for c in eq.columns[1:]]


def format_capability_line(eq: Equivalence) -> str:
    """``rec 31.0 [25.1, 37.2]  ocr ...`` (empty without an estimate)."""
    return "  ".join(format_capability_items(eq))


def hover_text(eq: Equivalence, column: str) -> str:
    """The radar's hover line of one capability (empty without an estimate)."""
    c = next((c for c in eq.columns if c.name == column), None) if eq.available else None
    return "" if c is None else f"{LABEL}: {c.estimate:.1f} [{c.low:.1f}, {c.high:.1f}] ({DISCLAIMER})"


EQUIVALENT_HEADER = ["column", "score", "official_equivalent_estimate", "estimate_ci_low", "estimate_ci_high",
                     "scatter_sd", "correction_sd", "model_sd", "check_id", "label", "note"]


def make_equivalent_csv_text(eq: Equivalence) -> str:
    """The separate export file (``*-official-equivalent-estimate.csv``): one row per column, every number
    labelled as an estimate and naming its check; without an estimate a single row says why."""
    buffer = io.StringIO()
    writer = csv.writer(buffer, lineterminator="\n")
    writer.writerow(EQUIVALENT_HEADER)
    if not eq.available:
        writer.writerow(["total", "", "", "", "", "", "", "", "", "", f"no {LABEL}: {eq.reason}"])
        return buffer.getvalue()
    note = f"{LABEL} ({DISCLAIMER}); judge {eq.judge}; {eq.check_text}; reference models {'+'.join(eq.references)}"
    if eq.label_note:
        note += f"; {eq.label_note}"
    for c in eq.columns:
        writer.writerow([c.name, _one(c.score), _one(c.estimate), _one(c.low), _one(c.high), _two(c.scatter_sd),
                         _two(c.correction_sd), _two(c.model_sd), eq.check_id, eq.label, note])
    return buffer.getvalue()


def _one(x: float | None) -> str:
    return "" if x is None or (isinstance(x, float) and math.isnan(x)) else f"{x:.1f}"


def _two(x: float | None) -> str:
    return "" if x is None or (isinstance(x, float) and math.isnan(x)) else f"{x:.2f}"
