"""What the app shows of a run, as plain data (pure; no Gradio): progress, score tables, sample rows, details.

Untrusted text (predictions, questions, ground truths, judge answers) is returned as plain strings only; the UI
puts it in text components, never in Markdown or HTML.
"""
from __future__ import annotations

import html
import time
from dataclasses import dataclass
from functools import lru_cache

from ..inputs.benchmark import CAPABILITY_LABELS, Benchmark, Sample, axis_label
from ..scores.graded import missing_ids, missing_text
from ..judging.grading import GRADED
from ..inputs.images import load_display_image
from .lifecycle import RunView, sample_flags
from ..scores.stats import format_interval, score_intervals

SAMPLE_COLUMNS = ["id", "score", "runs", "question", "model's answer", "capabilities", "flags"]
CAPABILITY_COLUMNS = ["capability", "score", "95% interval", "± std", "samples"]
INTEGRATION_COLUMNS = ["integration", "score", "95% interval", "± std", "samples"]
#: How the samples table can be ordered (the filter's choices).
SORT_ORDER, SORT_WORST, SORT_BEST = "benchmark order", "worst first", "best first"
SORTS = [SORT_ORDER, SORT_WORST, SORT_BEST]
SHORT_TEXT = 70             # characters of a question or answer shown in the samples table
#: Where the images of MM-Vet come from when the benchmark in use has none (the bundled v1 metadata).
IMAGES_NOTE = ("No image here: the bundled MM-Vet v1 holds the questions and answers only. To see the images, "
               "pick *Benchmark → Upload* and give the official `mm-vet.zip` "
               "(https://github.com/yuweihao/MM-Vet/releases), or a hub dataset such as `whyu/mm-vet`.")


def _fmt(x: float | None, digits: int = 1) -> str:
    return "—" if x is None else f"{x:.{digits}f}"


@dataclass
class Progress:
    done: int
    errored: int
    total: int
    status: str
    message: str
    eta_seconds: float | None
    note: str = ""          # e.g. waiting for the judge's rate limit

    @property
    def fraction(self) -> float:
        return self.done / self.total if self.total else 0.0

    def text(self) -> str:
        eta = "" if self.eta_seconds is None else f" · ETA {self.eta_seconds:.0f} s"
        err = f" · {self.errored} errored" if self.errored else ""
        # the outcome's message says why a run stopped or failed; a finished run's ("436 grades") repeats the counts
        msg = f" · {self.message}" if self.message and self.status not in ("running", "done") else ""
        note = f" · {self.note}" if self.note else ""
        return f"{self.status}: {self.done} / {self.total} grades{err}{eta}{msg}{note}"

    def html(self) -> str:
        """A progress bar; everything interpolated is ours or escaped."""
        pct = round(100 * self.fraction, 1)
        return (f'<div id="progress-box"><progress max="100" value="{pct}" style="width:100%"></progress>'
                f'<div id="progress-text">{html.escape(self.text())}</div></div>')


#: No ETA before the pace is known: a run's first answers arrive in one burst (every call in flight answers at
#: once), so a rate needs this many grades made over at least this many seconds.
ETA_MIN_GRADES = 20
ETA_MIN_SECONDS = 5.0


def progress_of(view: RunView, now: float | None = None) -> Progress:
    """Progress of a run. `eta_seconds` is None until the pace is known (`ETA_MIN_GRADES` grades over
    `ETA_MIN_SECONDS`), and when the estimate has run out (a stalled run has no "ETA 0 s")."""
    done = view.n_graded
    errored = sum(g.status == "error" for g in view.grades.values())
    eta = None
    if view.run.status == "running" and done:
        stamps = sorted(g.updated_at for g in view.grades.values() if g.status in GRADED and g.updated_at > 0)
        if len(stamps) >= ETA_MIN_GRADES and stamps[-1] - stamps[0] >= ETA_MIN_SECONDS:
            rate = (len(stamps) - 1) / (stamps[-1] - stamps[0])
            left = (view.n_expected - done) / rate - ((now or time.time()) - stamps[-1])
            eta = left if left >= 1.0 else None
    return Progress(done, errored, view.n_expected, view.run.status, view.run.message, eta)


def total_text(view: RunView) -> str:
    """The total as a user should read it. Complete: the official mean ± std over the judge runs. Partial (mid-run
    or stopped): the mean over the grades made so far with how much is graded, and a spread only over the judge
    runs that are complete (a spread of incomplete runs compares different samples)."""
    s = view.scores
    if s.total.mean is None:
        return "Total: — (nothing graded yet)"
    metric = view.metric_note
    if view.run.judge.get("provider") == "baseline" or (metric or "").startswith(f"judge {view.judge_text}:"):
        note = f" · {metric}"            # the note names the judge already (once is enough)
    else:
        note = f" · judge {view.judge_text}" + (f" · {metric}" if metric else " · official MM-Vet metric")
    if not s.complete:
        missing = ""
        if view.run.judge.get("provider") == "imported":      # a grade file lacking samples: name them
            if ids := missing_ids(view.effective_scores(), view.benchmark, view.run.n_runs):
                missing = f" · {missing_text(ids, view.benchmark)}"
        return _partial_total(view) + missing + note
    spread = f" ± {_fmt(s.total.std)}" if s.n_runs > 1 else ""
    ci = intervals(view).get(("total", "total"))
    interval = f" · 95% interval over samples {ci}" if ci else ""
    return f"Total: {_fmt(s.total.mean)}{spread} over {s.n_runs} run(s){note}{interval}"


def _partial_total(view: RunView) -> str:
    effective = view.effective_scores()
    ids = view.benchmark.ids
    got = [x for sid in ids for x in effective[sid] if x is not None]
    expected = len(ids) * view.run.n_runs
    mean = 100 * sum(got) / len(got) if got else None
    # the judge's grades, as the progress bar counts them (a sample scored by hand fills its runs at once: counted
    # apart, or "over 251 of 436" would sit beside "205 / 436")
    by_hand = sum(sid in view.overrides for sid in ids)
    hand = f" and {by_hand} sample{'s' if by_hand > 1 else ''} scored by hand" if by_hand else ""
    text = f"So far: {_fmt(mean)} over {view.n_graded} of {expected} grades{hand} (partial, not a final score)"
    runs = view.scores.total.per_run
    complete = [r for i, r in enumerate(runs) if r is not None
                and all(effective[sid][i] is not None for sid in ids)]
    if complete:
        import numpy as np
        arr = np.array(complete, dtype=np.float64)
        spread = f" ± {_fmt(float(np.round(arr.std(), 1)))}" if len(complete) > 1 else ""
        text += f" · {len(complete)} of {view.run.n_runs} run(s) complete: {_fmt(float(np.round(arr.mean(), 1)))}" \
                f"{spread}"
    return text


@lru_cache(maxsize=64)
def _cached_intervals(key: tuple) -> dict[tuple[str, str], str]:
    samples, scores = key
    bench = Benchmark(name="run", version="v1", samples={sid: Sample(id=sid, question="", answer="",
                                                                     capabilities=caps)
                                                         for sid, caps in samples})
    return {(r.kind, r.name): format_interval(r.low, r.high)
            for r in score_intervals(bench, {sid: list(v) for sid, v in scores})}


def intervals(view: RunView) -> dict[tuple[str, str], str]:
    """``{(kind, column): "[low, high]"}``: the 95% bootstrap interval over samples of every column of a complete
    run (seeded, so the same run always shows the same interval); empty while the run is not complete. Memoised
    on the scores: the page refreshes every second."""
    if not view.scores.complete:
        return {}
    eff = view.effective_scores()
    key = (tuple((sid, tuple(view.benchmark.samples[sid].capabilities)) for sid in view.benchmark.ids),
           tuple((sid, tuple(eff[sid])) for sid in view.benchmark.ids))
    return _cached_intervals(key)


def shows_spread(view: RunView) -> bool:
    """Whether the tables have a "± std" column: over 2+ judge runs of a complete run only (one run has no
    spread, and a spread of incomplete runs compares different samples)."""
    return view.run.n_runs > 1 and view.scores.complete


def table_columns(view: RunView, kind: str) -> list[str]:
    cols = CAPABILITY_COLUMNS if kind == "capability" else INTEGRATION_COLUMNS
    return cols if shows_spread(view) else [c for c in cols if c != "± std"]


def capability_rows(view: RunView) -> list[list]:
    ci, spread = intervals(view), shows_spread(view)
    return [[f"{CAPABILITY_LABELS.get(c.name, c.name)} ({c.name})", _fmt(c.mean), ci.get(("capability", c.name), "—"),
             *([_fmt(c.std)] if spread else []), c.n_samples] for c in view.scores.capabilities]


def integration_rows(view: RunView) -> list[list]:
    ci, spread = intervals(view), shows_spread(view)
    return [[f"{axis_label(c.name)} ({c.name})", _fmt(c.mean), ci.get(("integration", c.name), "—"),
             *([_fmt(c.std)] if spread else []), c.n_samples] for c in view.scores.integrations]


def filter_choices(benchmark: Benchmark) -> list[tuple[str, str]]:
    """(label, value) of the samples filter: every sample, each capability, then each integration that is not
    a capability on its own (an integration "rec" is the capability "rec" alone: listed once)."""
    caps = [(f"{CAPABILITY_LABELS.get(c, c)} ({c})", c) for c in benchmark.capabilities]
    ints = [(f"{axis_label(i)} only" if i in benchmark.capabilities else axis_label(i), f"int:{i}")
            for i in benchmark.integrations]
    return [("All samples", "all")] + caps + ints


def _short(text: str, limit: int = SHORT_TEXT) -> str:
    one_line = " ".join(str(text or "").split())
    return one_line if len(one_line) <= limit else one_line[:limit - 1].rstrip() + "…"


@dataclass
class SampleFilter:
    capability: str = "all"          # a capability code, "int:<integration>" (exactly it), or "all"
    min_score: float = 0.0
    max_score: float = 1.0
    flagged_only: bool = False
    graded_only: bool = True
    sort: str = SORT_ORDER


def sample_rows(view: RunView, flt: SampleFilter | None = None) -> list[list]:
    """One row per sample (`SAMPLE_COLUMNS`): id, mean score, per-run scores, the question and the model's answer
    (shortened), capabilities, flags; filtered and ordered by `flt`. Scores have two decimals everywhere."""
    flt = flt or SampleFilter()
    effective = view.effective_scores()
    rows, means = [], []
    for sid in view.benchmark.ids:
        sample = view.benchmark.samples[sid]
        wanted = flt.capability or "all"
        if wanted.startswith("int:"):
            if sample.integration != wanted[4:]:
                continue
        elif wanted != "all" and wanted not in sample.capabilities and wanted != sample.integration:
            continue
        scores = effective[sid]
        got = [x for x in scores if x is not None]
        flags = sample_flags(view, sid)      # an errored grade carries the "error" flag itself
        if flt.graded_only and not got and not flags:
            continue
        mean = sum(got) / len(got) if got else None
        if mean is not None and not (flt.min_score - 1e-9 <= mean <= flt.max_score + 1e-9):
            continue
        if mean is None and (flt.min_score > 0 or flt.max_score < 1):
            continue
        if flt.flagged_only and not flags:
            continue
        rows.append([sid, _fmt(mean, 2), " / ".join(_fmt(x, 2) for x in scores), _short(sample.question),
                     _short(view.run.predictions.get(sid, "")), ",".join(sample.capabilities), " ".join(flags)])
        means.append(mean)
    if flt.sort in (SORT_WORST, SORT_BEST):
        # ungraded samples last either way; ties keep the benchmark order
        order = sorted(range(len(rows)), key=lambda i: (means[i] is None,
                                                       (means[i] or 0.0) * (1 if flt.sort == SORT_WORST else -1)))
        rows = [rows[i] for i in order]
    return rows


def sample_detail(view: RunView, sample_id: str) -> dict:
    """Everything about one sample: texts, per-run grades with every attempt, flags, override, and whether it has
    an image (`sample_image` gives it; no server path is ever part of the answer)."""
    sample = view.benchmark.samples[sample_id]
    runs = []
    for r in range(view.run.n_runs):
        g = view.grades.get((sample_id, r))
        runs.append({"run": r + 1, "status": g.status if g else "pending", "score": g.score if g else None,
                     "content": g.content if g else None, "judge_model": g.judge_model if g else None,
                     "error": g.error if g else None, "flags": g.flags if g else [],
                     "attempts": g.attempts if g else []})
    override = view.overrides.get(sample_id)
    return {"id": sample_id, "question": sample.question, "ground_truth": sample.answer,
            "prediction": view.run.predictions.get(sample_id, ""), "capabilities": list(sample.capabilities),
            "integration": sample.integration, "flags": sample_flags(view, sample_id), "runs": runs,
            "override": None if override is None else {"score": override[0], "reason": override[1]},
            "has_image": view.benchmark.image_path(sample_id) is not None}


def image_note(view: RunView, sample_id: str) -> str:
    """What to say where a sample's image would be: where the images come from when the benchmark has none."""
    if view.benchmark.images_dir is None:
        return IMAGES_NOTE
    return "" if view.benchmark.image_path(sample_id) is not None else "This sample's image is missing."


def sample_image(view: RunView, sample_id: str):
    """The sample's image decoded and re-encodable (`images.load_display_image`), or None. Never a server path:
    an uploaded file is never served as it was uploaded."""
    return load_display_image(view.benchmark.image_path(sample_id))


ATTEMPT_COLUMNS = ["run", "attempt", "temperature", "retry prompt", "raw answer", "parsed", "judge model",
                   "params sent", "cached"]


def attempt_rows(detail: dict) -> list[list]:
    rows = []
    for run in detail["runs"]:
        if not run["attempts"]:
            rows.append([run["run"], "", "", "", run["error"] or run["status"], "", "", "", ""])
        for i, a in enumerate(run["attempts"], 1):
            sent = ", ".join(f"{k}={v}" for k, v in (a.get("sent") or {}).items())
            rows.append([run["run"], i, a.get("temperature", ""), "yes" if a.get("retry_prompt") else "no",
                         "" if a.get("content") is None else str(a.get("content")),
                         _fmt(a.get("score"), 2), a.get("model") or "", sent,
                         "imported" if a.get("imported") else ("yes" if a.get("cached") else "no")])
    return rows


def overlay_note(view: RunView, paper: list[str], others: list[RunView]) -> str:
    """What to say under the radars when the overlaid series were not graded like this run: the paper's models
    (graded by GPT-4) over a run with another judge, or other runs graded by another judge or prompt than this
    run's. Empty when every overlay is like-for-like."""
    notes = []
    judge = str(view.run.judge.get("model", ""))
    baseline = view.run.judge.get("provider") == "baseline"
    # GPT-4 itself (gpt-4, its dated snapshots gpt-4-0314 / gpt-4-0613), not gpt-4o or gpt-4-turbo
    if paper and (baseline or not (judge == "gpt-4" or judge.startswith("gpt-4-0"))):
        notes.append(f"⚠ The paper's scores were graded by GPT-4; this run's judge is {judge or 'unknown'}. "
                     "The overlay is not a like-for-like comparison.")
    mine = (view.judge_text, view.judge_metric_note)
    for other in others:
        if (other.judge_text, other.judge_metric_note) != mine:
            notes.append(f"⚠ {other.run.model_name} ({other.run.id[:6]}) was graded by {other.judge_text}"
                         + (f" ({other.judge_metric_note})" if other.judge_metric_note else "")
                         + f", this run by {view.judge_text}: not a like-for-like comparison.")
        if other.n_overrides:
            notes.append(f"{other.run.model_name} ({other.run.id[:6]}): {other.metric_note}.")
    return "\n\n".join(notes)


def radar_label(view: RunView, this_run: bool = True) -> str:
    """A run's name in a radar legend: ``llava (this run, 2 human overrides, NOT the official MM-Vet metric)``
    (another run: its short id instead of "this run")."""
    parts = ["this run" if this_run else view.run.id[:6]]
    if view.n_overrides:
        parts.append(f"{view.n_overrides} human override{'s' if view.n_overrides > 1 else ''}")
    if view.metric_note:
        parts.append("NOT the official MM-Vet metric")
    return f"{view.run.model_name} ({', '.join(parts)})"
