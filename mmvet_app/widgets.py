"""What a run looks like on the page, as pure-ish helpers over the service's records: the run card's HTML, the
radar figures with their overlays, the progress bar, the samples filter. No layout, no handlers."""
from __future__ import annotations

import html
import time

from mmvet_core.runs import views
from mmvet_core.scores.charts import make_radar, paper_model_names, paper_series
from mmvet_core.runs.lifecycle import RunView
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
    if card.get("judge_shutdown_note"):      # "grades by judge-b cannot be re-run after 2026-12-11"
        rows.insert(1, ("Judge shutdown", card["judge_shutdown_note"]))
    if card["metric_note"]:
        rows.insert(1, ("Note", card["metric_note"]))
    if card.get("predictions_cut"):       # the storage cap: how many were cut, and their original length
        rows.insert(3, ("Predictions", card["predictions_cut"]))
    items = "".join(f"<dt>{e(k)}</dt><dd>{e(v)}</dd>" for k, v in rows)
    if card.get("official_equivalent_shown"):
        # the estimate, labelled as one (never the official metric), right under the judge
        caps = card.get("official_equivalent_capabilities") or ""
        label = card.get("official_equivalent_label") or ""      # in-sample, extrapolated: said before the number
        badge = f'<strong class="equivalent-label" id="card-equivalent-label">{e(label)}</strong> ' if label else ""
        items = (f'<dt>Official-equivalent (estimate)</dt><dd id="card-equivalent">{badge}{e(card["official_equivalent"])}'
                 + (f"<br><small>{e('per capability (estimates): ' + caps)}</small>" if caps else "") + "</dd>"
                 + items)
    return f'<div class="card"><h3 id="card-model">{e(card["model"])}</h3><dl>{items}</dl></div>'


def judge_note_html(text: str) -> str:
    """A note beside the judge fields or under Grade (the shutdown facts, the retired-judge message), escaped:
    model names come from the endpoint's list, which a visitor's endpoint writes."""
    return f'<div class="judge-note">{html.escape(text, quote=True)}</div>' if text else ""


def radar_figures(svc: GradingService, view: RunView, overlays: list[str], owner: str):
    """The two radars (core capabilities, capability integrations) of a run, with the chosen overlays: the
    paper's models (same benchmark and subset only) and the owner's other runs ("run:<id> ...")."""
    cap_axes = [c.name for c in view.scores.capabilities]
    int_axes = [c.name for c in view.scores.integrations]
    label = views.radar_label(view)
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
    for other in overlaid_runs(svc, overlays, owner):
        name = views.radar_label(other, this_run=False)
        caps.append((name, {c.name: c.mean for c in other.scores.capabilities}))
        ints.append((name, {c.name: c.mean for c in other.scores.integrations}))
    from mmvet_core.successors.equivalence import hover_text
    eq = svc.judges.equivalence(view)
    notes = {c: hover_text(eq, c) for c in cap_axes}            # the estimate in the hover, labelled
    return (make_radar(caps, cap_axes, "Core capabilities", notes=notes),
            make_radar(ints, int_axes, "Capability integrations"))


def overlay_choices(svc: GradingService, view: RunView, owner: str) -> list[str]:
    """The paper's models for this run's benchmark and subset, then the visitor's other runs."""
    paper = paper_model_names(view.benchmark.subset_name) \
        if view.benchmark.version == "v1" and view.benchmark.subset_name in (None, "bard") else []
    mine = [f"run:{r.id} {r.model}" for r in svc.reading.runs_of(owner) if r.id != view.run.id][:20]
    return paper + mine


def overlaid_runs(svc: GradingService, overlays: list[str], owner: str) -> list[RunView]:
    """The owner's own runs among the chosen overlays ("run:<id> ..."); anyone else's are ignored."""
    out = []
    for o in overlays or []:
        if o.startswith("run:"):
            other = svc.reading.view(o.split(":", 1)[1].split(" ")[0])
            if other is not None and other.run.owner == owner:
                out.append(other)
    return out


def overlay_warning(svc: GradingService, view: RunView, overlays: list[str], owner: str) -> str:
    """`views.overlay_note` for the chosen overlays: the paper's models over another judge's run, the owner's
    runs graded by another judge or prompt (or with overrides)."""
    paper = [o for o in overlays or [] if not o.startswith("run:")]
    return views.overlay_note(view, paper, overlaid_runs(svc, overlays, owner))


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
