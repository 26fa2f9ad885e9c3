"""What a run looks like on the page, as pure-ish helpers over the service's records: the run card's HTML, the
radar figures with their overlays, the progress bar, the samples filter. No layout, no handlers."""
from __future__ import annotations

import html
import time

from mmvet_core import views
from mmvet_core.charts import make_radar, paper_model_names, paper_series
from mmvet_core.runs import RunView
from mmvet_core.service import GradingService


def card_html(card: dict) -> str:
    """The run card (every value escaped: model and file names come from visitors)."""
    e = lambda v: html.escape(str(v), quote=True)  # noqa: E731
    tokens = card["prompt_tokens"] + card["completion_tokens"]
    rows = [("Judge", f"{card['judge']} · {card['endpoint']}" + (" · Batch API" if card["mode"] == "Batch API"
                                                                 else "")),
            ("Benchmark", f"{card['benchmark']} ({card['version']}) · {card['subset']} · {card['n_samples']} "
                          f"samples"),
            ("Judge runs", card["runs"]), ("Prompt", card["prompt"]),
            ("Status", card["status"] + (f" — {card['message']}" if card["message"] else "")),
            ("Spent", f"{card['calls']} judge calls · {tokens:,} tokens"
                      + (f" · {card['cached_answers']} answers from the cache" if card["cached_answers"] else "")),
            ("Started", card["created"]), ("Tool", f"MM-Vet Grader {card['tool_version']}"),
            ("Run id", card["run_id"])]
    if card["metric_note"]:
        rows.insert(1, ("Note", card["metric_note"]))
    items = "".join(f"<dt>{e(k)}</dt><dd>{e(v)}</dd>" for k, v in rows)
    return f'<div class="card"><h3 id="card-model">{e(card["model"])}</h3><dl>{items}</dl></div>'


def radar_figures(svc: GradingService, view: RunView, overlays: list[str], owner: str):
    """The two radars (core capabilities, capability integrations) of a run, with the chosen overlays: the
    paper's models (same benchmark and subset only) and the owner's other runs ("run:<id> ...")."""
    cap_axes = [c.name for c in view.scores.capabilities]
    int_axes = [c.name for c in view.scores.integrations]
    label = f"{view.run.model_name} (this run{', NOT the official MM-Vet metric' if view.metric_note else ''})"
    caps = [(label, {c.name: c.mean for c in view.scores.capabilities})]
    ints = [(label, {c.name: c.mean for c in view.scores.integrations})]
    subset = view.benchmark.subset_name
    paper = [o for o in overlays or [] if not o.startswith("run:")]
    # the paper reports the full v1 set (Tables 2-3) and the Bard set (Tables 9-10) only
    if paper and view.benchmark.version == "v1" and subset in (None, "bard"):
        known = set(paper_model_names(subset))
        paper = [p for p in paper if p in known]
        caps += paper_series(paper, "capabilities", subset)
        ints += paper_series(paper, "integrations", subset)
    for o in overlays or []:
        if o.startswith("run:"):
            other = svc.view(o.split(":", 1)[1].split(" ")[0])
            if other is not None and other.run.owner == owner:
                name = f"{other.run.model_name} ({other.run.id[:6]}" \
                       f"{', NOT the official MM-Vet metric' if other.metric_note else ''})"
                caps.append((name, {c.name: c.mean for c in other.scores.capabilities}))
                ints.append((name, {c.name: c.mean for c in other.scores.integrations}))
    return (make_radar(caps, cap_axes, "Core capabilities"),
            make_radar(ints, int_axes, "Capability integrations"))


def overlay_choices(svc: GradingService, view: RunView, owner: str) -> list[str]:
    """The paper's models for this run's benchmark and subset, then the visitor's other runs."""
    paper = paper_model_names(view.benchmark.subset_name) \
        if view.benchmark.version == "v1" and view.benchmark.subset_name in (None, "bard") else []
    mine = [f"run:{r.id} {r.model}" for r in svc.runs_of(owner) if r.id != view.run.id][:20]
    return paper + mine


def overlay_warning(view: RunView, overlays: list[str]) -> str:
    """A warning when the paper's (GPT-4-graded) models are overlaid on a run graded by another judge."""
    paper = [o for o in overlays or [] if not o.startswith("run:")]
    if not paper:
        return ""
    judge = str(view.run.judge.get("model", ""))
    if view.run.judge.get("provider") == "baseline" or not judge.startswith("gpt-4"):
        return (f"⚠ The paper's scores were graded by GPT-4; this run's judge is {judge or 'unknown'}. "
                "The overlay is not a like-for-like comparison.")
    return ""


def sample_filter(capability: str, lo: float, hi: float, flagged: bool, order: str) -> views.SampleFilter:
    """The samples table's filter fields as a `SampleFilter` (scores clamped to 0-1, unknown orders refused)."""
    clamp = lambda x, default: min(1.0, max(0.0, float(default if x is None else x)))  # noqa: E731
    return views.SampleFilter(capability=capability or "all", min_score=clamp(lo, 0), max_score=clamp(hi, 1),
                              flagged_only=bool(flagged),
                              sort=order if order in views.SORTS else views.SORT_ORDER)


def count_text(view: RunView, rows: list) -> str:
    """"N of M samples shown" under the samples table."""
    return f"{len(rows)} of {len(view.benchmark)} samples shown" + \
        ("" if view.scores.complete else " (samples not graded yet are not listed)")


def progress_html(svc: GradingService, view: RunView) -> str:
    """The progress bar, with the time a rate-limited job resumes."""
    prog = views.progress_of(view)
    waiting = svc.jobs.waiting_until(view.run.id)
    if waiting and waiting > time.time():
        prog.note = ("waiting for the rate limit: the judge account's limit resets at "
                     f"{time.strftime('%H:%M:%S UTC', time.gmtime(waiting))}")
    return prog.html()
