"""Official-equivalent estimate: a run's score corrected by its judge's measured shift. An ESTIMATE, never the
official MM-Vet metric (which needs ``gpt-4-0613``, shut down on 2026-10-23).

Method. A judge check (`mmvet_core.judgecheck`) grades reference predictions that have real official grades and
measures, per column (total and each capability), the judge's **shift**: candidate − official score in points,
pooled over the reference models, with its 95 % paired bootstrap interval. For a run graded by that judge with the
official prompt on MM-Vet v1, the estimate of what the official judge would have given is::

    estimate = run score − shift

Its interval combines two independent uncertainties: the run's sampling error over the questions (its 95 %
bootstrap interval, `mmvet_core.stats.score_intervals`) and the shift's interval. Each side's distance from its
point is added in quadrature, side by side (asymmetric intervals stay asymmetric)::

    low  = estimate − √((score − score_low)² + (shift_high − shift)²)
    high = estimate + √((score_high − score)² + (shift − shift_low)²)

Assumptions: the shift is the same for every model (it does not depend on the model's level: the check tests
this, weakly with few reference models), the same for the run's questions as for all 218, and the check and the
run used the same judge, endpoint, token limit and prompt. Limits: the reference models are LLaVA-1.5-level
(totals about 31–36); a model far outside that range gets an extrapolation. No estimate is given when the check
says it cannot be carried (`JudgeCheckResult.correctable`: incomplete check, judge no closer than keyword
matching, a total shift beyond ±10 points, or a shift that depends on the model's level), for a run with another
prompt or benchmark version, for a run of the official judge itself and for imported grades.

Everything here is pure: the caller finds the run's intervals and the stored check.
"""
from __future__ import annotations

import csv
import io
import math
from dataclasses import asdict, dataclass, field

from .graded import OFFICIAL_JUDGES
from .judgecheck import JudgeCheckResult, format_shift
from .stats import IntervalRow, score_intervals

#: How the number is named wherever it is shown.
LABEL = "official-equivalent estimate"
DISCLAIMER = "an estimate, not the official MM-Vet metric"


@dataclass
class EquivalentColumn:
    """One column: the run's own score, the judge's shift and the corrected estimate, each with its interval."""

    name: str
    score: float
    score_low: float | None
    score_high: float | None
    shift: float
    shift_low: float | None
    shift_high: float | None
    estimate: float
    low: float
    high: float


@dataclass
class Equivalence:
    """The estimate of one run (`available` False: `reason` says why there is none)."""

    available: bool
    reason: str
    judge: str = ""
    check_created_at: float = 0.0
    references: list[str] = field(default_factory=list)
    columns: list[EquivalentColumn] = field(default_factory=list)

    @property
    def total(self) -> EquivalentColumn | None:
        return self.columns[0] if self.columns and self.columns[0].name == "total" else None

    def csv_text(self) -> str:
        """`make_equivalent_csv_text` of this estimate (the file `runs.export_run` writes beside the official
        files, given the estimate)."""
        return make_equivalent_csv_text(self)

    def to_dict(self) -> dict:
        return {"label": LABEL, "disclaimer": DISCLAIMER, **asdict(self)}


def combine_interval(score: float, score_low: float | None, score_high: float | None, shift: float,
                     shift_low: float | None, shift_high: float | None) -> tuple[float, float, float]:
    """(estimate, low, high) of ``score − shift`` from both intervals, side by side in quadrature (a missing
    bound counts as no uncertainty on that side).

    >>> combine_interval(40.0, 37.0, 43.0, 7.0, 3.0, 11.0)
    (33.0, 28.0, 38.0)
    """
    estimate = score - shift
    down = math.hypot(score - (score if score_low is None else score_low),
                      (shift if shift_high is None else shift_high) - shift)
    up = math.hypot((score if score_high is None else score_high) - score,
                    shift - (shift if shift_low is None else shift_low))
    return estimate, estimate - down, estimate + up


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
    if check is None:
        if provider == "baseline":
            return ("the keyword baseline has no stored judge check (`python -m mmvet_core judge-check --baseline`), "
                    "and reads no better than keywords anyway")
        return (f"no judge check of {model} at this endpoint is stored: run `python -m mmvet_core judge-check "
                f"--judge-model {model}` (or Check this judge in the app)")
    if not check.correctable:
        return check.correction_note or "the judge check does not allow a correction"
    return None


def estimate_equivalent(rows: list[IntervalRow], check: JudgeCheckResult | None, *, run_judge: dict,
                        benchmark_version: str = "v1") -> Equivalence:
    """The official-equivalent estimate of a run from its column intervals (`stats.score_intervals`) and its
    judge's stored check: total and each capability present in both. Pure; never raises for a missing check
    (the result says why there is no estimate)."""
    reason = unavailable_reason(run_judge, benchmark_version, check)
    judge = str(run_judge.get("model", "?"))
    if reason is not None:
        return Equivalence(False, reason, judge)
    assert check is not None
    columns = []
    for r in rows:
        if r.kind not in ("total", "capability"):
            continue
        col = check.column(r.name)
        if col is None or math.isnan(col.shift):
            continue
        lo, hi = col.shift_interval or (None, None)
        est, elo, ehi = combine_interval(r.score, r.low, r.high, col.shift, lo, hi)
        columns.append(EquivalentColumn(r.name, r.score, r.low, r.high, col.shift, lo, hi, est, elo, ehi))
    if not columns or columns[0].name != "total":
        return Equivalence(False, "nothing graded yet", judge)
    return Equivalence(True, check.correction_note, judge, check.created_at, list(check.models), columns)



def estimate_run(view, check: JudgeCheckResult | None) -> Equivalence:
    """The official-equivalent estimate of a run (`runs.RunView`: its judge, benchmark version and effective
    scores) from its judge's stored check (`judgecheck.run_check`), or the reason there is none. Pure: the caller
    reads the check; a view is taken as it is (finished or not)."""
    judge = view.run.judge
    reason = unavailable_reason(judge, view.benchmark.version, check)
    if reason is not None:          # said before any bootstrap is computed
        return Equivalence(False, reason, str(judge.get("model", "?")))
    rows = score_intervals(view.benchmark, view.effective_scores()) if view.n_graded else []
    return estimate_equivalent(rows, check, run_judge=judge, benchmark_version=view.benchmark.version)

def format_equivalent_line(eq: Equivalence) -> str:
    """The one-line summary (CLI, run card): the estimate and its interval, labelled, or why there is none.

    >>> col = EquivalentColumn("total", 38.4, 32.0, 44.9, 7.5, 6.9, 8.0, 30.9, 24.5, 37.4)
    >>> format_equivalent_line(Equivalence(True, "", "judge-b", 0.0, ["a", "b"], [col]))
    'official-equivalent estimate: 30.9 [24.5, 37.4] (38.4 graded by judge-b, corrected by its measured shift +7.5 [+6.9, +8.0] on 2 reference models; an estimate, not the official MM-Vet metric)'
    """
    t = eq.total
    if not eq.available or t is None:
        return f"{LABEL}: none ({eq.reason})"
    return (f"{LABEL}: {t.estimate:.1f} [{t.low:.1f}, {t.high:.1f}] ({t.score:.1f} graded by {eq.judge}, corrected "
            f"by its measured shift {format_shift(t.shift, (t.shift_low, t.shift_high) if t.shift_low is not None else None)}"
            f" on {len(eq.references)} reference models; {DISCLAIMER})")


def format_capability_line(eq: Equivalence) -> str:
    """``rec 31.0 [25.1, 37.2]  ocr ...`` (empty without an estimate)."""
    if not eq.available:
        return ""
    return "  ".join(f"{c.name} {c.estimate:.1f} [{c.low:.1f}, {c.high:.1f}]" for c in eq.columns[1:])


def hover_text(eq: Equivalence, column: str) -> str:
    """The radar's hover line of one capability (empty without an estimate)."""
    c = next((c for c in eq.columns if c.name == column), None) if eq.available else None
    return "" if c is None else f"{LABEL}: {c.estimate:.1f} [{c.low:.1f}, {c.high:.1f}] ({DISCLAIMER})"


EQUIVALENT_HEADER = ["column", "score", "score_ci_low", "score_ci_high", "judge_shift", "shift_ci_low",
                     "shift_ci_high", "official_equivalent_estimate", "estimate_ci_low", "estimate_ci_high", "note"]


def make_equivalent_csv_text(eq: Equivalence) -> str:
    """The separate export file (``*-official-equivalent-estimate.csv``): one row per column, every number
    labelled as an estimate; without an estimate a single row says why."""
    buffer = io.StringIO()
    writer = csv.writer(buffer, lineterminator="\n")
    writer.writerow(EQUIVALENT_HEADER)
    note = f"{LABEL} ({DISCLAIMER}); judge {eq.judge}; reference models {'+'.join(eq.references)}"
    if not eq.available:
        writer.writerow(["total", "", "", "", "", "", "", "", "", "", f"no {LABEL}: {eq.reason}"])
        return buffer.getvalue()
    for c in eq.columns:
        writer.writerow([c.name, _one(c.score), _one(c.score_low), _one(c.score_high), _signed(c.shift),
                         _signed(c.shift_low), _signed(c.shift_high), _one(c.estimate), _one(c.low), _one(c.high),
                         note])
    return buffer.getvalue()


def _one(x: float | None) -> str:
    return "" if x is None else f"{x:.1f}"


def _signed(x: float | None) -> str:
    return "" if x is None else f"{x:+.1f}"
