"""MM-Vet Grader: drop a model's results file, watch it graded live, inspect every grade, share a link.

A Hugging Face Space style Gradio Blocks app over `mmvet_core`. The rules (ownership, keys and endpoints, budgets,
what a start may do) live in `mmvet_core.service`; this file holds the layout and maps each event to one service
call. A visitor's mistake is a toast (`gr.Warning`) that leaves every other component as it was; the named API
endpoints (for scripts) call the same service and answer an error instead. Run `python app.py`. Configuration
comes from the environment only (see README "Configuration" and "Hosting a public Space").
"""
from __future__ import annotations

import functools
import html
import os
import secrets
import time
from pathlib import Path

import gradio as gr
from gradio.data_classes import FileData

from mmvet_core import views
from mmvet_core.benchmark import ASSETS_DIR
from mmvet_core.charts import make_radar, paper_model_names, paper_series
from mmvet_core.runs import RunView
from mmvet_core.service import (BENCH_BUNDLED, BENCH_HUB, BENCH_UPLOAD, JUDGE_BASELINE, JUDGE_HOST, JUDGE_OWN,
                                MODE_BATCH, MODE_LIVE, OPENAI_PUBLIC_URL, RUN_LIST_COLUMNS, SUBSETS,
                                BenchmarkChoice, GradingService, JudgeChoice, ServiceError, ServiceSettings)

__all__ = ["AppSettings", "BENCH_BUNDLED", "BENCH_HUB", "BENCH_UPLOAD", "JUDGE_BASELINE", "JUDGE_HOST", "JUDGE_OWN",
           "OPENAI_PUBLIC_URL", "build_demo", "launch_options"]

AppSettings = ServiceSettings          # the app's settings are the service's (read from the environment)
EXAMPLE_RESULTS = ASSETS_DIR / "examples" / "llava_llama2_13b_chat.json"
# Gradio 6.31 rebuilds a pandas summary of up to 10,000 recorded events after EVERY event, only for its
# /monitoring dashboard (off here); with scripts polling /status that was ~15% of the server's CPU under load.
os.environ.setdefault("GRADIO_ANALYTICS_CACHE_FREQUENCY", "1000")
# uvicorn (under Gradio) replaces the client address by X-Forwarded-For whenever the connection comes from
# 127.0.0.1: a client on the same machine (or behind a local proxy that forwards the header untouched) could then
# be anyone it likes. Our own `MMVET_TRUSTED_PROXY_HOPS` decides which forwarded entries count, on the real peer.
os.environ.setdefault("FORWARDED_ALLOW_IPS", "")
MODES = {"Live": MODE_LIVE, "Batch API (½ price, ≤ 24 h)": MODE_BATCH}
RADAR_EVERY_S = 5.0   # while a run streams in, the radar charts are redrawn at most this often per page
ATTRIBUTION = ("MM-Vet © Yu et al., *MM-Vet: Evaluating Large Multimodal Models for Integrated Capabilities* "
               "(ICML 2024), licensed [CC BY-NC 4.0](https://creativecommons.org/licenses/by-nc/4.0/). "
               "Scores follow the official evaluator (Apache-2.0).")
EMPTY_RESULTS = ("**No run open yet.** Drop a results file on the left (or load the official example) and click "
                 "**Grade**; progress and the score appear here. You can also reopen one of **My runs** below, "
                 "or open a grade file without any judge call.")
CSS = """
#run-card .card {border:1px solid var(--border-color-primary); border-radius:8px; padding:8px 12px;}
#run-card .card h3 {margin:0 0 4px 0;}
#run-card .card dl {display:grid; grid-template-columns:max-content 1fr; gap:2px 12px; margin:0; font-size:0.9em;}
#run-card .card dt {color:var(--body-text-color-subdued);}
#run-card .card dd {margin:0; overflow-wrap:anywhere;}
#results-file {min-height:0;}
"""
# the address carries the open run, so a reload or a server restart brings it back
SET_ADDRESS_JS = """(run) => { const u = new URL(window.location.href);
  if (run) { u.searchParams.set('run', run); } else { u.searchParams.delete('run'); }
  window.history.replaceState(null, '', u.toString()); return []; }"""
# set once the page's load event (owner token, ?run=) has been applied: scripts and tests wait for it
MARK_LOADED_JS = "() => { document.body.dataset.mmvetLoaded = '1'; return []; }"


def _esc(message: object) -> str:
    """Text for a toast: Gradio renders HTML in gr.Error/Warning/Info, and messages quote visitors' files."""
    return html.escape(str(message), quote=False)


def _file_path(f) -> str | None:
    if f is None:
        return None
    if isinstance(f, dict):
        return f.get("path")
    return f if isinstance(f, str) else getattr(f, "path", None) or getattr(f, "name", None)


def _visitor(svc: GradingService, request: gr.Request | None) -> str:
    if request is None:
        return svc.visitor(None, None)
    peer = request.client.host if request.client else None
    return svc.visitor(peer, request.headers.get("x-forwarded-for"))


def _base_url(request: gr.Request | None) -> str | None:
    if request is None:
        return None
    if getattr(request, "request", None) is not None:
        return str(request.request.base_url).rstrip("/")
    return f"http://{request.headers.get('host', 'localhost:7860')}"


def toasts(n_outputs: int):
    """Run a UI handler; a `ServiceError` becomes a warning toast and every output stays as it was (an exception
    in a Gradio handler would mark every output of the event with an "Error" badge)."""
    def deco(fn):
        @functools.wraps(fn)
        def wrapper(*args, **kwargs):
            try:
                return fn(*args, **kwargs)
            except ServiceError as e:
                gr.Warning(_esc(e))
                if n_outputs == 0:
                    return None
                return gr.skip() if n_outputs == 1 else tuple(gr.skip() for _ in range(n_outputs))
        return wrapper
    return deco


def api_errors(fn):
    """A named API endpoint: a `ServiceError` is answered as an error (its message escaped)."""
    @functools.wraps(fn)
    def wrapper(*args, **kwargs):
        try:
            return fn(*args, **kwargs)
        except ServiceError as e:
            raise gr.Error(_esc(e)) from None
    return wrapper


# --- what a run looks like ------------------------------------------------------------------------------------
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


def _radar_figures(svc: GradingService, view: RunView, overlays: list[str], owner: str):
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
    paper = [o for o in overlays or [] if not o.startswith("run:")]
    if not paper:
        return ""
    judge = str(view.run.judge.get("model", ""))
    if view.run.judge.get("provider") == "baseline" or not judge.startswith("gpt-4"):
        return (f"⚠ The paper's scores were graded by GPT-4; this run's judge is {judge or 'unknown'}. "
                "The overlay is not a like-for-like comparison.")
    return ""


def _filter(capability: str, lo: float, hi: float, flagged: bool, order: str) -> views.SampleFilter:
    clamp = lambda x, default: min(1.0, max(0.0, float(default if x is None else x)))  # noqa: E731
    return views.SampleFilter(capability=capability or "all", min_score=clamp(lo, 0), max_score=clamp(hi, 1),
                              flagged_only=bool(flagged),
                              sort=order if order in views.SORTS else views.SORT_ORDER)


def _count_text(view: RunView, rows: list) -> str:
    return f"{len(rows)} of {len(view.benchmark)} samples shown" + \
        ("" if view.scores.complete else " (samples not graded yet are not listed)")


def progress_html(svc: GradingService, view: RunView) -> str:
    prog = views.progress_of(view)
    waiting = svc.jobs.waiting_until(view.run.id)
    if waiting and waiting > time.time():
        prog.note = ("waiting for the rate limit: the judge account's limit resets at "
                     f"{time.strftime('%H:%M:%S UTC', time.gmtime(waiting))}")
    return prog.html()


# --- the app --------------------------------------------------------------------------------------------
def build_demo(settings: AppSettings | None = None) -> gr.Blocks:
    settings = settings or AppSettings.from_env()
    svc = GradingService(settings)
    default_judge = JUDGE_HOST if settings.host_key else JUDGE_BASELINE
    judge_choices = ([JUDGE_HOST] if settings.host_key else []) + [JUDGE_OWN, JUDGE_BASELINE]
    owner_secret = _owner_secret(settings.data_dir)

    # Gradio's own cache (uploads, re-encoded images) is swept: files older than the age go (README "Hosting")
    with gr.Blocks(title="MM-Vet Grader", delete_cache=settings.hosting.gradio_delete_cache()) as demo:
        demo.svc = svc  # for tests and the launcher
        _api_endpoints(svc)   # first: the scripts' endpoints keep their plain names (the page's events are private)
        owner_store = gr.BrowserState("", storage_key="mmvet-grader-owner", secret=owner_secret)
        owner = gr.Textbox(visible=False, elem_id="owner-token")
        run_state = gr.Textbox(visible=False, elem_id="run-id")

        gr.Markdown("## MM-Vet Grader\n<small>Grade a multimodal model's MM-Vet results with an LLM judge, exactly as "
                    "the official evaluator does: live progress, radar charts, every grade inspectable, a link to "
                    "share.</small>", elem_id="header")
        ro_note = gr.Markdown("**Shared run (read-only).** You can inspect every grade; only the person who "
                              "started this run can change it. Open the page without `?run=` to grade your own.",
                              visible=False, elem_id="read-only-note")
        with gr.Row():
            with gr.Column(scale=5, elem_id="setup-column") as setup_col:
                results_file = gr.File(label="1 · Results file (official JSON, LLaVA JSONL, lmms-eval logs, "
                                             "VLMEvalKit xlsx/tsv/csv)", elem_id="results-file", height=100,
                                       file_types=[".json", ".jsonl", ".xlsx", ".tsv", ".csv"])
                example_btn = gr.Button("…or load the official example (LLaVA-13B, LLaMA-2)", size="sm",
                                        elem_id="example-button")
                report = gr.Textbox(label="2 · What was found", lines=2, max_lines=8, interactive=False,
                                    elem_id="validation-report",
                                    placeholder="Drop a results file: its format and coverage show here.")
                with gr.Row(equal_height=True):
                    model_name = gr.Textbox(label="3 · Model name", elem_id="model-name", max_length=100,
                                            placeholder="taken from the file", scale=4)
                    # no minimum/maximum (Gradio would answer 9 with an error on every output): the service checks
                    runs = gr.Number(1, step=1, precision=0,
                                     label="Judge runs (paper: 5)", elem_id="runs", scale=2, min_width=100)
                    mode = gr.Dropdown(list(MODES), value=list(MODES)[0], label="Judge calls", elem_id="mode",
                                       visible=default_judge != JUDGE_BASELINE, scale=3, min_width=120)
                judge_choice = gr.Radio(judge_choices, value=default_judge, label="Judge", elem_id="judge-choice")
                own = default_judge == JUDGE_OWN      # these fields only apply to "My own key / endpoint"
                base_url = gr.Textbox(label="Base URL (OpenAI-compatible; empty = OpenAI)",
                                      placeholder="http://localhost:8000/v1", elem_id="base-url", visible=own)
                judge_model = gr.Textbox(value=settings.judge_model, label="Judge model",
                                         elem_id="judge-model", visible=own)
                api_key = gr.Textbox(label="API key (used for this run only, never stored)", type="password",
                                     elem_id="api-key", visible=own)
                with gr.Accordion("Benchmark: MM-Vet v1 (bundled), all samples", open=False,
                                  elem_id="benchmark-accordion") as bench_acc:
                    bench_choice = gr.Radio([BENCH_BUNDLED, BENCH_UPLOAD, BENCH_HUB], value=BENCH_BUNDLED,
                                            label="Benchmark", elem_id="benchmark-choice")
                    bench_file = gr.File(label="Official mm-vet.zip or metadata JSON", elem_id="benchmark-file",
                                         file_types=[".zip", ".json"], height=90)
                    hub_id = gr.Textbox(label="Hub dataset id", placeholder="whyu/mm-vet", elem_id="hub-id")
                    subset = gr.Radio(list(SUBSETS), value="All samples", label="Subset", elem_id="subset")
                estimate = gr.Textbox(label="Before you spend", interactive=False, lines=1, max_lines=3,
                                      elem_id="estimate", container=False, placeholder="Cost estimate")
                with gr.Row():
                    grade_btn = gr.Button("Grade", variant="primary", elem_id="grade-button", min_width=80)
                    stop_btn = gr.Button("Stop", variant="stop", elem_id="stop-button", min_width=80, interactive=False)
                    resume_btn = gr.Button("Resume", elem_id="resume-button", min_width=80, interactive=False)
                # after Grade: an optional step, and Grade stays in the first viewport
                with gr.Accordion("Check this judge first (is it close to the official GPT-4 judge?)", open=False,
                                  elem_id="judge-check-section", visible=default_judge != JUDGE_BASELINE) \
                        as check_section:
                    gr.Markdown("The judge grades two reference models' answers (LLaVA-1.5 13b and 7b, 436 calls at "
                                "most; stored answers are reused) whose official GPT-4-0613 grades are known, and the "
                                "report says how far it is from them, beside GPT-4's own run-to-run spread.")
                    check_btn = gr.Button("Check this judge", size="sm", elem_id="judge-check-button")
                    check_report = gr.Textbox(label="Judge check", lines=4, max_lines=30, interactive=False,
                                              elem_id="judge-check-report", buttons=["copy"])
            with gr.Column(scale=7, elem_id="results-column"):
                progress = gr.HTML(elem_id="progress")
                total = gr.Textbox(label="Score", interactive=False, elem_id="total-score",
                                   placeholder="The total appears here while the run grades.")
                empty_note = gr.Markdown(EMPTY_RESULTS, elem_id="empty-state")
                with gr.Column(visible=False, elem_id="run-panel") as run_panel:
                    run_card = gr.HTML(elem_id="run-card")
                    with gr.Row(visible=False, elem_id="owner-tools") as owner_tools:
                        rename_box = gr.Textbox(label="Rename this run's model", elem_id="rename-box",
                                                max_length=100, scale=3)
                        rename_btn = gr.Button("Rename", size="sm", elem_id="rename-button", scale=1)
                        delete_btn = gr.Button("Delete run", size="sm", variant="stop", elem_id="delete-button",
                                               scale=1)
                    share = gr.Textbox(label="Share link (read-only view for anyone who opens it)",
                                       interactive=False, elem_id="share-link", buttons=["copy"])
                    flags_box = gr.Textbox(label="Flags", interactive=False, elem_id="flag-counts")
                    overlays = gr.Dropdown(choices=[], multiselect=True, value=[],
                                           label="Overlay the paper's models (same benchmark and subset) or your "
                                                 "other runs", elem_id="overlays")
                    overlay_note = gr.Markdown("", elem_id="overlay-note")
                    with gr.Row():
                        # the 16 integration axes have long labels: that chart gets the wider share
                        radar_caps = gr.Plot(label="Core capabilities", show_label=False,
                                             elem_id="radar-capabilities", scale=2, min_width=300)
                        radar_ints = gr.Plot(label="Capability integrations", show_label=False,
                                             elem_id="radar-integrations", scale=3, min_width=340)
                    cap_table = gr.Dataframe(headers=views.CAPABILITY_COLUMNS, label="Capabilities",
                                             interactive=False, elem_id="capabilities-table", type="array",
                                             wrap=True)
                    int_table = gr.Dataframe(headers=views.INTEGRATION_COLUMNS, label="Capability integrations",
                                             interactive=False, elem_id="integrations-table", type="array",
                                             wrap=True)
                    downloads = gr.File(label="Downloads: official grade JSON, both CSVs, the run card (run.json) "
                                              "and a zip of all", file_count="multiple", interactive=False,
                                        elem_id="downloads", visible=False)

        with gr.Column(visible=False, elem_id="samples-section") as samples_section:
            gr.Markdown("## Samples\nClick a row to inspect it.")
            with gr.Row():
                f_cap = gr.Dropdown(["all"], value="all", label="Capability or integration",
                                    elem_id="filter-capability")
                # no minimum/maximum: Gradio refuses an out-of-range value with an error badge; `_filter` clamps
                f_min = gr.Number(0.0, step=0.1, label="Min score", elem_id="filter-min")
                f_max = gr.Number(1.0, step=0.1, label="Max score", elem_id="filter-max")
                f_flag = gr.Checkbox(False, label="Flagged only", elem_id="filter-flagged")
                f_sort = gr.Dropdown(views.SORTS, value=views.SORT_ORDER, label="Order", elem_id="filter-sort")
            sample_count = gr.Markdown("", elem_id="sample-count")
            samples = gr.Dataframe(headers=views.SAMPLE_COLUMNS, interactive=False, elem_id="samples-table",
                                   type="array", max_height=420, wrap=True,
                                   column_widths=["8%", "7%", "10%", "30%", "25%", "12%", "8%"])
            with gr.Group(elem_id="sample-detail"):
                d_id = gr.Textbox(label="Sample", interactive=False, elem_id="detail-id",
                                  placeholder="Click a row of the table above.")
                with gr.Row():
                    # shown only when the benchmark has images (the bundled v1 metadata has none)
                    d_image = gr.Image(label="Image", interactive=False, elem_id="detail-image", height=240,
                                       visible=False)
                    with gr.Column():
                        d_question = gr.Textbox(label="Question", interactive=False, elem_id="detail-question")
                        d_truth = gr.Textbox(label="Ground truth", interactive=False, elem_id="detail-truth")
                d_image_note = gr.Markdown("", elem_id="detail-image-note")
                d_pred = gr.Textbox(label="Model's answer", interactive=False, lines=3, elem_id="detail-prediction")
                d_flags = gr.Textbox(label="Flags", interactive=False, elem_id="detail-flags")
                d_attempts = gr.Dataframe(headers=views.ATTEMPT_COLUMNS, interactive=False, type="array",
                                          label="Judge answers (every run and attempt)", elem_id="detail-attempts")
            # outside the Group: inside one, Gradio draws the buttons as plain text
            with gr.Row(elem_id="override-row") as override_row:
                # a callable None: a plain None shows "0" in the browser (gradio issue #6728)
                # no minimum/maximum: Gradio would refuse an out-of-range value with an error on every output;
                # the service refuses it with a toast instead
                o_score = gr.Number(lambda: None, label="Override score (0-1)", step=0.1, placeholder="0 to 1",
                                    elem_id="override-score")
                o_reason = gr.Textbox(label="Reason", elem_id="override-reason")
                o_btn = gr.Button("Override", variant="primary", elem_id="override-button", interactive=False)
                o_clear = gr.Button("Clear override", elem_id="override-clear", interactive=False)

        with gr.Accordion("My runs", open=True, elem_id="my-runs"):
            gr.Markdown("Runs you start or open here are listed with their scores; click one to reopen it. "
                        "This list lives in this browser (no account needed).", elem_id="my-runs-note")
            runs_table = gr.Dataframe(headers=RUN_LIST_COLUMNS, interactive=False, type="array",
                                      elem_id="my-runs-table", max_height=300)
        with gr.Accordion("Open a grade file (no judge call)", open=False, elem_id="grade-file-section"):
            grade_json_file = gr.File(label="An official grade JSON, a VLMEvalKit graded table, a graded lmms-eval "
                                            "log", elem_id="grade-json-file", height=90,
                                      file_types=[".json", ".jsonl", ".xlsx", ".tsv", ".csv"])
        _compare_section(svc, owner)
        gr.Markdown(ATTRIBUTION)
        timer = gr.Timer(1.0, active=False)

        # ---- inputs as the service's records ----
        def bench_of(bench_c, bench_f, hub, sub) -> BenchmarkChoice:
            return BenchmarkChoice(bench_c or BENCH_BUNDLED, _file_path(bench_f), hub or "", sub or "All samples")

        def judge_of(judge_c, url="", model="", key="", mode_label=None) -> JudgeChoice:
            return JudgeChoice(judge_c or JUDGE_BASELINE, url or "", model or "", key or "",
                               MODES.get(mode_label, MODE_LIVE))

        # ---- setup ----
        @toasts(3)
        def check(results, bench_c, bench_f, hub, sub, n_runs, judge_c, model, mode_label, name_now):
            v = svc.validate(_file_path(results), bench_of(bench_c, bench_f, hub, sub), n_runs,
                             judge_of(judge_c, model=model, mode_label=mode_label))
            return v.report, v.estimate, (name_now or v.model_name) if v.model_name else gr.skip()

        check_inputs = [results_file, bench_choice, bench_file, hub_id, subset, runs, judge_choice, judge_model,
                        mode, model_name]
        check_outputs = [report, estimate, model_name]

        def new_file(results):
            """A new file: the previous file's report and name must not stay shown (the name comes from it)."""
            return "", "", ""

        results_file.upload(new_file, results_file, check_outputs, queue=False, api_visibility="private",
                            show_progress="hidden").then(check, check_inputs, check_outputs,
                                                         api_visibility="private")
        results_file.clear(new_file, results_file, check_outputs, queue=False, api_visibility="private")
        for comp in (bench_choice, bench_file, subset, runs, judge_choice, mode):
            comp.change(check, check_inputs, check_outputs, api_visibility="private")

        def bench_label(bench_c, sub):
            kind = {BENCH_BUNDLED: "MM-Vet v1 (bundled)", BENCH_UPLOAD: "uploaded", BENCH_HUB: "hub dataset"}
            return gr.Accordion(label=f"Benchmark: {kind.get(bench_c, bench_c)}, {sub.lower()}")

        for comp in (bench_choice, subset):
            comp.change(bench_label, [bench_choice, subset], bench_acc, api_visibility="private", queue=False)

        def own_judge_fields(choice):
            shown = choice == JUDGE_OWN
            return (gr.Textbox(visible=shown), gr.Textbox(visible=shown), gr.Textbox(visible=shown),
                    gr.Dropdown(visible=choice != JUDGE_BASELINE), gr.Accordion(visible=choice != JUDGE_BASELINE))

        judge_choice.change(own_judge_fields, judge_choice, [base_url, judge_model, api_key, mode, check_section],
                            queue=False, api_visibility="private")

        # ---- judge check ----
        check_timer = gr.Timer(1.0, active=False)

        @toasts(2)
        def check_judge(judge_c, url, model, key, owner_tok, request: gr.Request):
            message = svc.check_judge(judge_of(judge_c, url, model, key), owner_tok, _visitor(svc, request))
            gr.Info(_esc(message))
            return check_text(judge_c, url, model, key, owner_tok)

        def check_text(judge_c, url, model, key, owner_tok):
            text, running = svc.judge_check_text(judge_of(judge_c, url, model, key), owner_tok)
            return text, gr.Timer(active=running)

        check_inputs_j = [judge_choice, base_url, judge_model, api_key, owner]
        check_btn.click(check_judge, check_inputs_j, [check_report, check_timer], api_visibility="private")
        check_timer.tick(check_text, check_inputs_j, [check_report, check_timer], api_visibility="private",
                         show_progress="hidden")
        judge_choice.change(check_text, check_inputs_j, [check_report, check_timer], api_visibility="private")
        for box in (base_url, judge_model, api_key):     # (on blur: a base URL is checked when it is used)
            box.blur(check_text, check_inputs_j, [check_report, check_timer], api_visibility="private")

        example_btn.click(lambda: (str(EXAMPLE_RESULTS), "", "", ""), None, [results_file] + check_outputs,
                          api_visibility="private").then(check, check_inputs, check_outputs,
                                                         api_visibility="private")

        # ---- runs ----
        @toasts(2)
        def start(results, bench_c, bench_f, hub, sub, n_runs, judge_c, url, model, key, mode_label, name,
                  owner_tok, request: gr.Request):
            run_id, started = svc.start(_file_path(results), bench_of(bench_c, bench_f, hub, sub), n_runs,
                                        judge_of(judge_c, url, model, key, mode_label), owner=owner_tok,
                                        visitor=_visitor(svc, request), model_name=name or "")
            if not started:
                gr.Info("This job is already grading: showing its run (nothing is paid twice).")
            return run_id, gr.Timer(active=True)

        grade_btn.click(start, [results_file, bench_choice, bench_file, hub_id, subset, runs, judge_choice,
                                base_url, judge_model, api_key, mode, model_name, owner], [run_state, timer],
                        api_visibility="private")

        @toasts(0)
        def stop(run_id, owner_tok):
            gr.Info(svc.stop(run_id, owner_tok))

        stop_btn.click(stop, [run_state, owner], None, api_visibility="private")

        @toasts(1)
        def resume(run_id, judge_c, url, model, key, owner_tok, request: gr.Request):
            gr.Info(svc.resume(run_id, owner_tok, _visitor(svc, request), judge_of(judge_c, url, model, key)))
            return gr.Timer(active=True)

        resume_btn.click(resume, [run_state, judge_choice, base_url, judge_model, api_key, owner], [timer],
                         api_visibility="private")

        radar_sent: dict[str, float] = {}   # per session and run: when the radars were last sent mid-run

        def refresh(run_id, overlay_sel, cap_f, lo, hi, flagged, order, owner_tok, sample_id, radar_key=None,
                    opened=False):
            """Everything shown of the open run. `opened`: the run was just opened (menus, visibility, share
            link are set too); else a timer tick (those stay as they are)."""
            # Ask whether the job runs BEFORE reading the run: a job that ends while we read then still gets
            # one more tick, so the final state is always shown (else the timer stops on a stale "running").
            running = bool(run_id) and svc.jobs.is_running(run_id)
            view = svc.view(run_id) if run_id else None
            if view is None:
                return tuple(gr.skip() for _ in view_outputs[:-1]) + (gr.Timer(active=False),)
            view = svc.with_failure(view)
            # Mid-run timer ticks redraw the two plotly charts every RADAR_EVERY_S only: redrawing them every
            # second cost the browser as much CPU as the grading itself (bench/bench_app_e2e.py).
            now = time.monotonic()
            if running and radar_key is not None and now - radar_sent.get(radar_key, 0.0) < RADAR_EVERY_S:
                rc = ri = gr.skip()
            else:
                rc, ri = _radar_figures(svc, view, overlay_sel, owner_tok)
                if radar_key is not None:
                    if len(radar_sent) > 10_000:
                        radar_sent.clear()
                    radar_sent[radar_key] = now
            flags = view.flag_counts()
            flag_text = ", ".join(f"{k}: {v}" for k, v in sorted(flags.items())) or "none"
            files = svc.downloads(view) if not running and view.n_graded else None
            perms = svc.permissions(run_id, owner_tok)
            rows = views.sample_rows(view, _filter(cap_f, lo, hi, flagged, order))
            shown = _count_text(view, rows)
            live = (progress_html(svc, view), views.total_text(view), card_html(svc.card(view)),
                    f"Flagged samples — {flag_text}", rc, ri,
                    {"data": views.capability_rows(view), "headers": views.table_columns(view, "capability")},
                    {"data": views.integration_rows(view), "headers": views.table_columns(view, "integration")},
                    rows, shown, gr.File(value=files, visible=bool(files)),
                    gr.Button(interactive=perms.can_stop), gr.Button(interactive=perms.can_resume),
                    gr.Button(interactive=perms.can_override and bool(sample_id)),
                    gr.Button(interactive=perms.can_override and bool(sample_id)),
                    gr.skip() if running and not opened else runs_rows(owner_tok))
            if opened:
                extra = (gr.Column(visible=True), gr.Column(visible=True), gr.Markdown(visible=False),
                         gr.Dropdown(choices=overlay_choices(svc, view, owner_tok), value=[]),
                         gr.Dropdown(choices=views.filter_choices(view.benchmark), value="all"),
                         gr.Row(visible=perms.owner),
                         gr.Textbox(value=view.run.model_name), gr.Row(visible=perms.owner),
                         gr.Column(visible=perms.owner), gr.Markdown(visible=not perms.owner),
                         # the detail of another run's sample must not stay shown beside this run
                         "", gr.Image(value=None, visible=False), "", "", "", "", "", [])
            else:
                extra = tuple(gr.skip() for _ in open_outputs)
            return live + extra + (gr.Timer(active=running),)

        live_outputs = [progress, total, run_card, flags_box, radar_caps, radar_ints, cap_table, int_table, samples,
                        sample_count, downloads, stop_btn, resume_btn, o_btn, o_clear, runs_table]
        open_outputs = [run_panel, samples_section, empty_note, overlays, f_cap, owner_tools, rename_box,
                        override_row, setup_col, ro_note, d_id, d_image, d_question, d_truth, d_image_note, d_pred,
                        d_flags, d_attempts]
        view_outputs = live_outputs + open_outputs + [timer]
        view_inputs = [run_state, overlays, f_cap, f_min, f_max, f_flag, f_sort, owner, d_id]

        def tick(run_id, overlay_sel, cap_f, lo, hi, flagged, order, owner_tok, sample_id, request: gr.Request):
            key = f"{getattr(request, 'session_hash', None) or ''}:{run_id}"
            return refresh(run_id, overlay_sel, cap_f, lo, hi, flagged, order, owner_tok, sample_id, radar_key=key)

        def open_run(run_id, overlay_sel, cap_f, lo, hi, flagged, order, owner_tok, sample_id, request: gr.Request):
            return refresh(run_id, [], "all", lo, hi, flagged, order, owner_tok, "", opened=True)

        timer.tick(tick, view_inputs, view_outputs, api_visibility="private", show_progress="hidden")
        run_state.change(open_run, view_inputs, view_outputs, api_visibility="private", show_progress="hidden")
        run_state.change(None, run_state, None, js=SET_ADDRESS_JS, api_visibility="private")

        def share_of(run_id, request: gr.Request):
            return svc.share_url(run_id, _base_url(request)) if run_id else ""

        run_state.change(share_of, run_state, share, api_visibility="private", queue=False)

        def on_overlays(run_id, overlay_sel, cap_f, lo, hi, flagged, order, owner_tok, sample_id):
            view = svc.view(run_id) if run_id else None
            if view is None:
                return gr.skip(), gr.skip(), gr.skip()
            rc, ri = _radar_figures(svc, view, overlay_sel, owner_tok)
            return rc, ri, overlay_warning(view, overlay_sel)

        overlays.change(on_overlays, view_inputs, [radar_caps, radar_ints, overlay_note], api_visibility="private",
                        show_progress="hidden")

        def filter_rows(run_id, cap_f, lo, hi, flagged, order):
            view = svc.view(run_id) if run_id else None
            if view is None:
                return gr.skip(), gr.skip()
            rows = views.sample_rows(view, _filter(cap_f, lo, hi, flagged, order))
            return rows, _count_text(view, rows)

        for comp in (f_cap, f_min, f_max, f_flag, f_sort):
            comp.change(filter_rows, [run_state, f_cap, f_min, f_max, f_flag, f_sort], [samples, sample_count],
                        api_visibility="private")

        # ---- one sample ----
        def detail(run_id, sample_id, owner_tok):
            view = svc.view(run_id, evidence_for=sample_id) if run_id else None
            if view is None or sample_id not in view.benchmark.samples:
                raise ServiceError(f"No sample {sample_id!r} in this run.")
            d = views.sample_detail(view, sample_id)
            flags = " ".join(d["flags"]) or "none"
            if d["override"]:
                flags += f" — overridden by a person: {d['override']['score']} ({d['override']['reason']})"
            image = views.sample_image(view, sample_id)     # decoded and re-encoded: never the uploaded bytes
            note = "" if image is not None else views.image_note(view, sample_id)
            can = svc.permissions(run_id, owner_tok).can_override
            return (sample_id, gr.Image(value=image, visible=image is not None), d["question"],
                    d["ground_truth"], note or "", d["prediction"], flags, views.attempt_rows(d),
                    gr.Button(interactive=can), gr.Button(interactive=can))

        detail_outputs = [d_id, d_image, d_question, d_truth, d_image_note, d_pred, d_flags, d_attempts, o_btn,
                          o_clear]

        @toasts(len(detail_outputs))
        def select_row(run_id, owner_tok, evt: gr.SelectData):
            row = evt.row_value or []
            if not row:
                return tuple(gr.skip() for _ in detail_outputs)
            return detail(run_id, str(row[0]), owner_tok)

        samples.select(select_row, [run_state, owner], detail_outputs, api_visibility="private")

        @toasts(len(live_outputs) + len(detail_outputs))
        def override(run_id, sample_id, score, reason, owner_tok, overlay_sel, cap_f, lo, hi, flagged, order):
            message = svc.override(run_id, owner_tok, sample_id, score, reason)
            gr.Info(_esc(message))
            shown = refresh(run_id, overlay_sel, cap_f, lo, hi, flagged, order, owner_tok, sample_id)
            return shown[:len(live_outputs)] + detail(run_id, sample_id, owner_tok)

        @toasts(len(live_outputs) + len(detail_outputs))
        def clear_override(run_id, sample_id, owner_tok, overlay_sel, cap_f, lo, hi, flagged, order):
            message = svc.clear_override(run_id, owner_tok, sample_id)
            gr.Info(_esc(message))
            shown = refresh(run_id, overlay_sel, cap_f, lo, hi, flagged, order, owner_tok, sample_id)
            return shown[:len(live_outputs)] + detail(run_id, sample_id, owner_tok)

        filters = [overlays, f_cap, f_min, f_max, f_flag, f_sort]
        o_btn.click(override, [run_state, d_id, o_score, o_reason, owner] + filters, live_outputs + detail_outputs,
                    api_visibility="private")
        o_clear.click(clear_override, [run_state, d_id, owner] + filters, live_outputs + detail_outputs,
                      api_visibility="private")

        # ---- my runs ----
        def runs_rows(owner_tok):
            return [r.row() for r in svc.runs_of(owner_tok)]

        def pick_run(owner_tok, evt: gr.SelectData):
            row = evt.row_value or []
            return str(row[-1]) if row else gr.skip()

        runs_table.select(pick_run, [owner], run_state, api_visibility="private")

        @toasts(3)
        def rename(run_id, name, owner_tok):
            gr.Info(_esc(svc.rename(run_id, owner_tok, name)))
            view = svc.view(run_id)
            files = svc.downloads(view) if view.n_graded and not svc.jobs.is_running(run_id) else None
            return (card_html(svc.card(view)), runs_rows(owner_tok),
                    gr.File(value=files, visible=bool(files)) if files else gr.skip())

        rename_btn.click(rename, [run_state, rename_box, owner], [run_card, runs_table, downloads],
                         api_visibility="private")

        @toasts(2)
        def delete(run_id, owner_tok):
            gr.Info(_esc(svc.delete(run_id, owner_tok)))
            return "", runs_rows(owner_tok)

        delete_btn.click(delete, [run_state, owner], [run_state, runs_table], api_visibility="private",
                         js="(run, tok) => confirm('Delete this run and its grades? This cannot be undone.') "
                            "? [run, tok] : [null, tok]")

        def closed(run_id):
            """No run open (deleted): back to the empty state."""
            if run_id:
                return tuple(gr.skip() for _ in range(4))
            return gr.Column(visible=False), gr.Column(visible=False), gr.Markdown(visible=True), ""

        run_state.change(closed, run_state, [run_panel, samples_section, empty_note, total],
                         api_visibility="private", show_progress="hidden")

        @toasts(1)
        def view_grade_file(f, bench_c, bench_f, hub, sub, owner_tok):
            path = _file_path(f)
            if not path:
                return gr.skip()
            return svc.open_grade_file(path, bench_of(bench_c, bench_f, hub, sub), owner_tok)

        grade_json_file.upload(view_grade_file, [grade_json_file, bench_choice, bench_file, hub_id, subset, owner],
                               run_state, api_visibility="private")

        def on_load(stored_owner, request: gr.Request):
            tok = stored_owner or secrets.token_urlsafe(18)
            params = dict(request.query_params) if request else {}
            run_id = params.get("run", "")
            run = svc.store.get_run(run_id) if run_id else None
            if run_id and run is None:
                gr.Warning("This link's run does not exist (or was removed).")
            return tok, tok, run.id if run else "", runs_rows(tok)

        demo.load(on_load, [owner_store], [owner_store, owner, run_state, runs_table], api_visibility="private") \
            .then(None, None, None, js=MARK_LOADED_JS, api_visibility="private")
    return demo


def _api_endpoints(svc: GradingService) -> None:
    """The named endpoints scripts call (gradio_client): the same service calls as the page; an error is an error
    answer (a page's mistakes are toasts instead)."""
    def bench(bench_c, bench_f, hub, sub) -> BenchmarkChoice:
        return BenchmarkChoice(bench_c or BENCH_BUNDLED, _file_path(bench_f), hub or "", sub or "All samples")

    @api_errors
    def validate(results: FileData, bench_c: str = BENCH_BUNDLED, bench_f: FileData | None = None, hub: str = "",
                 sub: str = "All samples", n_runs: int = 1, judge_c: str = JUDGE_BASELINE, model: str = "",
                 mode: str = MODE_LIVE) -> dict:
        """What a results file holds against the benchmark, and what grading it would cost."""
        v = svc.validate(_file_path(results), bench(bench_c, bench_f, hub, sub), int(n_runs),
                         JudgeChoice(judge_c, model=model, mode=mode))
        return {"report": v.report, "estimate": v.estimate, "model_name": v.model_name}

    @api_errors
    def grade(results: FileData, bench_c: str = BENCH_BUNDLED, bench_f: FileData | None = None, hub: str = "",
              sub: str = "All samples", n_runs: int = 1, judge_c: str = JUDGE_BASELINE, url: str = "",
              model: str = "", key: str = "", owner_tok: str = "", model_name: str = "", mode: str = MODE_LIVE,
              request: gr.Request = None) -> dict:
        """Start grading (in the background); poll `status`. The same job started again while it runs returns
        the running run (``started: false``)."""
        run_id, started = svc.start(_file_path(results), bench(bench_c, bench_f, hub, sub), int(n_runs),
                                    JudgeChoice(judge_c, url, model, key, mode), owner=owner_tok,
                                    visitor=_visitor(svc, request), model_name=model_name)
        return {"run_id": run_id, "share_url": svc.share_url(run_id, _base_url(request)), "started": started}

    @api_errors
    def stop(run_id: str, owner_tok: str) -> str:
        """Stop a running run of yours (answers already paid for are stored)."""
        return svc.stop(run_id, owner_tok)

    @api_errors
    def resume(run_id: str, judge_c: str = JUDGE_HOST, url: str = "", model: str = "", key: str = "",
               owner_tok: str = "", request: gr.Request = None) -> str:
        """Grade what is missing of a run of yours."""
        return svc.resume(run_id, owner_tok, _visitor(svc, request), JudgeChoice(judge_c, url, model, key))

    @api_errors
    def override(run_id: str, sample_id: str, score: float, reason: str, owner_tok: str) -> dict:
        """Replace a sample's score by yours (with a reason); returns the run's status."""
        svc.override(run_id, owner_tok, sample_id, score, reason)
        return svc.status(run_id)

    @api_errors
    def clear_override(run_id: str, sample_id: str, owner_tok: str) -> dict:
        svc.clear_override(run_id, owner_tok, sample_id)
        return svc.status(run_id)

    @api_errors
    def view_grades(f: FileData, bench_c: str = BENCH_BUNDLED, bench_f: FileData | None = None, hub: str = "",
                    sub: str = "All samples", owner_tok: str = "", request: gr.Request = None) -> dict:
        """Store a grade file as a finished run (no judge call)."""
        run_id = svc.open_grade_file(_file_path(f), bench(bench_c, bench_f, hub, sub), owner_tok)
        return {"run_id": run_id, "share_url": svc.share_url(run_id, _base_url(request))}

    @api_errors
    def status(run_id: str) -> dict:
        """Progress, scores and run card of a run (what a script polls after grade)."""
        return svc.status(run_id)

    @api_errors
    def sample(run_id: str, sample_id: str) -> dict:
        """Everything about one sample of a run: texts, every judge attempt, flags, override."""
        return svc.sample(run_id, sample_id)

    @api_errors
    def my_runs(owner_tok: str) -> list:
        """Your runs, newest first."""
        return [dict(zip(RUN_LIST_COLUMNS, r.row())) for r in svc.runs_of(owner_tok)]

    @api_errors
    def rename(run_id: str, name: str, owner_tok: str) -> str:
        return svc.rename(run_id, owner_tok, name)

    @api_errors
    def delete(run_id: str, owner_tok: str) -> str:
        return svc.delete(run_id, owner_tok)

    for fn in (validate, grade, stop, resume, override, clear_override, view_grades, status, sample, my_runs,
               rename, delete):
        gr.api(fn, api_name=fn.__name__)


def _compare_section(svc: GradingService, owner: gr.Textbox) -> None:
    """The Compare view: two or more of the visitor's runs or uploaded grade files, against the first (thin: the
    rules are `mmvet_core.gradesets.compare_for_app` and `mmvet_core.compare`)."""
    from mmvet_core.charts import make_compare_figures
    from mmvet_core.compare import (DISAGREEMENT_COLUMNS, PAIR_COLUMNS, SUMMARY_COLUMNS, CompareError,
                                    disagreement_rows, format_report, pair_rows, summary_rows)
    from mmvet_core.export import GradeFileError
    from mmvet_core.gradesets import compare_for_app, run_choices

    with gr.Accordion("Compare runs and grade files (judge vs judge, model vs model)", open=False,
                      elem_id="compare-section"):
        gr.Markdown("Pick two or more of your runs or upload grade files; the first is the reference. Δ̄ is the "
                    "mean absolute difference of per-sample scores (the paper's Table 6); B − A comes with a 95% "
                    "paired bootstrap interval over samples.")
        with gr.Row():
            cmp_runs = gr.Dropdown(choices=[], multiselect=True, value=[], label="Your runs", elem_id="compare-runs",
                                   scale=3)
            cmp_refresh = gr.Button("↻ My runs", size="sm", elem_id="compare-refresh", scale=0)
        cmp_files = gr.File(label="Grade files (official grade JSON, VLMEvalKit graded table, graded lmms-eval log, "
                                  "human scores {id: score})", file_count="multiple", elem_id="compare-files",
                            file_types=[".json", ".jsonl", ".xlsx", ".tsv", ".csv"])
        cmp_btn = gr.Button("Compare", variant="primary", elem_id="compare-button")
        cmp_report = gr.Textbox(label="Comparison", lines=8, interactive=False, elem_id="compare-report")
        cmp_summary = gr.Dataframe(headers=SUMMARY_COLUMNS, interactive=False, type="array", label="Sets",
                                   elem_id="compare-summary")
        with gr.Row():
            cmp_scatter = gr.Plot(label="Per-sample scores", show_label=False, elem_id="compare-scatter")
            cmp_radar = gr.Plot(label="Capabilities", show_label=False, elem_id="compare-radar")
        cmp_pair = gr.Dataframe(headers=PAIR_COLUMNS, interactive=False, type="array",
                                label="Second set against the reference, per column", elem_id="compare-columns")
        cmp_worst = gr.Dataframe(headers=DISAGREEMENT_COLUMNS, interactive=False, type="array",
                                 label="Samples that disagree most", elem_id="compare-disagreements")
        cmp_downloads = gr.File(label="comparison.json, comparison.csv, comparison-samples.csv",
                                file_count="multiple", interactive=False, elem_id="compare-downloads")

    def my_runs(owner_tok):
        return gr.Dropdown(choices=run_choices(svc.store, owner_tok))

    owner.change(my_runs, owner, cmp_runs, api_visibility="private", queue=False)
    cmp_refresh.click(my_runs, owner, cmp_runs, api_visibility="private")

    def compare(run_ids, files, owner_tok):
        paths = [p for p in (_file_path(f) for f in (files or [])) if p]
        try:
            for p in paths:
                svc.check_size(p)
        except ServiceError as e:
            gr.Warning(_esc(e))
            return (gr.skip(),) * 8
        out = svc.exports_dir / f"compare-{secrets.token_urlsafe(12)}"
        try:
            cmp, written = compare_for_app(svc.store, owner_tok, list(run_ids or []), paths, out)
        except (CompareError, GradeFileError, OSError) as e:
            gr.Warning(_esc(e))
            return (gr.skip(),) * 8
        scatter, radar = make_compare_figures(cmp)
        return (format_report(cmp, integrations=False), summary_rows(cmp), scatter, radar, pair_rows(cmp),
                disagreement_rows(cmp), [str(p) for p in written.values()], gr.skip())

    cmp_btn.click(compare, [cmp_runs, cmp_files, owner],
                  [cmp_report, cmp_summary, cmp_scatter, cmp_radar, cmp_pair, cmp_worst, cmp_downloads, cmp_runs],
                  api_name="compare")


def _owner_secret(data_dir: Path) -> str:
    """A stable secret for the browser-side owner token (kept in the data dir, created once)."""
    path = data_dir / ".browser-state-secret"
    if not path.exists():
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(secrets.token_urlsafe(32))
        path.chmod(0o600)
    return path.read_text().strip()


def launch_options(settings: AppSettings) -> dict:
    """`demo.launch` keyword arguments (shared by `python app.py` and the tests)."""
    return dict(ssr_mode=False, css=CSS, max_file_size=f"{settings.max_upload_mb}mb",
                # only our own exports (.json/.csv/.zip we write): never the uploads folder, whose files come from
                # visitors (an HTML page there would be served inline on the app's origin)
                allowed_paths=[str(settings.data_dir / "exports")],
                footer_links=["api"],
                run_history=False)  # run history would keep typed API keys in the browser's storage


if __name__ == "__main__":
    app_settings = AppSettings.from_env()
    demo = build_demo(app_settings)
    demo.queue(default_concurrency_limit=32)
    demo.launch(server_name=os.environ.get("GRADIO_SERVER_NAME", "0.0.0.0"),
                server_port=int(os.environ.get("GRADIO_SERVER_PORT", "7860")), **launch_options(app_settings))
