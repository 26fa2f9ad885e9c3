"""The Grade view: the results file, what was found, the settings, Grade / Stop / Resume (left column); progress,
score, run card, radars, capability tables and downloads of the open run (right column).

`build_grade` lays it out (the judge-check section sits in its setup column); `wire_grade` registers its handlers
and returns the `RunDisplay` (refresh of everything shown of the open run) that the samples view reuses after an
override.

Its size (over 600 lines) has a reason: the view's layout and its handlers share one set of components (the
setup column, the run display and the polling that refreshes it); the rules they call live in `mmvet_core.service`.
"""
from __future__ import annotations

import asyncio
import secrets
import time
from dataclasses import dataclass, field
from typing import Callable, Protocol

import gradio as gr

from mmvet_core.runs import views
from mmvet_core.inputs.benchmark import ASSETS_DIR
from mmvet_core.service import (BENCH_BUNDLED, BENCH_HUB, BENCH_UPLOAD, JUDGE_BASELINE, JUDGE_HOST, JUDGE_OWN,
                                SUBSETS, JudgeUnavailable, ServiceError)

from mmvet_core.store import StoreError

from mmvet_app.common import (MODES, Page, base_url, bench_of, esc, file_path, judge_of, runs_rows, store_unreachable,
                              toasts, visitor)
from mmvet_app.judge_check import TAB_ID as JUDGES_TAB
from mmvet_app.judge_check import JudgeCheckView, wire_judge_check
from mmvet_app.leaderboard import build_publish_control
from mmvet_app.widgets import (card_html, count_text, judge_note_html, overlay_choices, overlay_warning, progress_html,
                               radar_figures, sample_filter)

EXAMPLE_RESULTS = ASSETS_DIR / "examples" / "llava_llama2_13b_chat.json"
RADAR_EVERY_S = 5.0   # while a run streams in, the radar charts are redrawn at most this often per page
FOLLOW_EVERY_S = 0.5  # an open page that follows a grading run is updated at most this often
FIRST_EVERY_S = 0.1   # ... and looked at this often until its first change (the first grades shown at once)
ACK_WAIT_S = 5.0      # a page that has not asked for its last update within this is sent the next one anyway
OUTAGE_RETRY_S = 1.0  # while the database cannot be read, a following page's stream reads again this often
UNREACHABLE = "store-unreachable"   # the version a page follows while the database cannot be read
HEARTBEAT_S = 15.0    # ... and hears from the server at least this often (a closed tab's stream then ends)
EMPTY_RESULTS = ("**No run open yet.** Drop a results file on the left (or load the official example) and click "
                 "**Grade**; progress and the score appear here. You can also reopen one of **My runs** below, "
                 "or open a grade file without any judge call.")
# the address carries the open run, so a reload or a server restart brings it back
SET_ADDRESS_JS = """(run) => { const u = new URL(window.location.href);
  if (run) { u.searchParams.set('run', run); } else { u.searchParams.delete('run'); }
  window.history.replaceState(null, '', u.toString()); return []; }"""


@dataclass
class GradeView:
    """The Grade view's components (other views read the settings and update the run panel)."""
    setup_col: gr.Column
    actions: gr.Column          # the cost estimate, Grade / Stop / Resume: at the head of the results column
    results_file: gr.File
    example_btn: gr.Button
    report: gr.Textbox
    model_name: gr.Textbox
    runs: gr.Number
    mode: gr.Dropdown
    judge_choice: gr.Radio
    base_url: gr.Textbox
    judge_model: gr.Textbox
    api_key: gr.Textbox
    judge_picker: gr.Dropdown
    judge_facts: gr.HTML
    bench_acc: gr.Accordion
    bench_choice: gr.Radio
    bench_file: gr.File
    hub_id: gr.Textbox
    subset: gr.Radio
    estimate: gr.Textbox
    grade_btn: gr.Button
    stop_btn: gr.Button
    resume_btn: gr.Button
    judge_unavailable: gr.HTML
    judge_check: JudgeCheckView | None      # the Judges tab's (app.py sets it before wiring)
    progress: gr.HTML
    total: gr.Textbox
    empty_note: gr.Markdown
    run_panel: gr.Column
    run_card: gr.HTML
    owner_tools: gr.Row
    rename_box: gr.Textbox
    rename_btn: gr.Button
    delete_btn: gr.Button
    share: gr.Textbox
    flags_box: gr.Textbox
    overlays: gr.Dropdown
    overlay_note: gr.Markdown
    radar_caps: gr.Plot
    radar_ints: gr.Plot
    cap_table: gr.Dataframe
    int_table: gr.Dataframe
    downloads: gr.File
    server_judge: gr.Dropdown | None = None    # the server's judges the host offers (MMVET_SERVER_JUDGES)
    check_link: gr.Button | None = None        # "check this judge": selects the Judges tab

    @property
    def bench_inputs(self) -> list:
        """The benchmark fields, in `bench_of`'s order."""
        return [self.bench_choice, self.bench_file, self.hub_id, self.subset]


class SamplesParts(Protocol):
    """What opening or redrawing a run updates in the Samples view (app.py hands the view over): its section,
    filters, table, one sample's detail and the override buttons."""
    section: gr.Column
    f_cap: gr.Dropdown
    f_min: gr.Number
    f_max: gr.Number
    f_flag: gr.Checkbox
    f_sort: gr.Dropdown
    sample_count: gr.Markdown
    samples: gr.Dataframe
    d_id: gr.Textbox
    d_image: gr.Image
    d_question: gr.Textbox
    d_truth: gr.Textbox
    d_image_note: gr.Markdown
    d_pred: gr.Textbox
    d_flags: gr.Textbox
    d_attempts: gr.Dataframe
    override_row: gr.Row
    o_btn: gr.Button
    o_clear: gr.Button


class RunsList(Protocol):
    """The My runs view's table, redrawn when a run opens or ends."""
    runs_table: gr.Dataframe


@dataclass
class RunDisplay:
    """What shows the open run: `refresh(run_id, overlays, cap, lo, hi, flagged, order, owner, sample_id)` returns
    the values of `live_outputs` + the run-opening outputs; `live_outputs` are the components a change to the
    run (an override) updates."""
    refresh: Callable[..., tuple]
    live_outputs: list


def build_grade(page: Page) -> GradeView:
    """Lay out the setup column (with the judge-check section) and the results column, side by side."""
    settings, default_judge = page.settings, page.default_judge
    with gr.Row():
        with gr.Column(scale=5, elem_id="setup-column") as setup_col:
            results_file = gr.File(label="1 · Results file (official JSON, LLaVA JSONL, lmms-eval logs, "
                                         "VLMEvalKit xlsx/tsv/csv)", elem_id="results-file", height=140,
                                   file_types=[".json", ".jsonl", ".xlsx", ".tsv", ".csv"])
            example_btn = gr.Button("…or load the official example (LLaVA-13B, LLaMA-2)", size="sm",
                                    elem_id="example-button")
            # at most 4 lines (the rest scrolls): a long report must not push Grade below the fold
            report = gr.Textbox(label="2 · What was found", lines=2, max_lines=4, interactive=False,
                                elem_id="validation-report",
                                placeholder="Drop a results file: its format and coverage show here.")
            with gr.Row(equal_height=True):
                model_name = gr.Textbox(label="3 · Model name", elem_id="model-name", max_length=100,
                                        placeholder="taken from the file", scale=4)
                # no minimum/maximum (Gradio would answer 9 with an error on every output): the service checks
                runs = gr.Number(1, step=1, precision=0,
                                 label="Judge runs", info=None, elem_id="runs", scale=2, min_width=100)
                mode = gr.Dropdown(list(MODES), value=list(MODES)[0], label="Judge calls", elem_id="mode",
                                   visible=default_judge != JUDGE_BASELINE, scale=3, min_width=120)
            judge_choice = gr.Radio(page.judge_choices, value=default_judge, label="Judge", elem_id="judge-choice")
            offered = page.svc.judges.server_judge_choices()      # [] unless the host offers several
            server_judge = gr.Dropdown(offered, value=settings.judge_model if offered else None,
                                       label="The server's judges (check status)", elem_id="server-judge",
                                       visible=bool(offered) and default_judge != JUDGE_OWN, interactive=True)
            own = default_judge == JUDGE_OWN      # these fields only apply to "My own key / endpoint"
            base_url_box = gr.Textbox(label="Base URL (OpenAI-compatible; empty = OpenAI)",
                                      placeholder="http://localhost:8000/v1", elem_id="base-url", visible=own)
            judge_model = gr.Textbox(value=settings.judge_model, label="Judge model",
                                     elem_id="judge-model", visible=own)
            api_key = gr.Textbox(label="API key (used for this run only, never stored)", type="password",
                                 elem_id="api-key", visible=own)
            # the endpoint's chat models with their shutdown dates and checks (filled once the endpoint is known)
            judge_picker = gr.Dropdown(choices=[], value=None, label="Judges this endpoint serves (shutdown date · "
                                       "judge check)", elem_id="judge-picker", visible=own, interactive=True)
            judge_facts = gr.HTML("", elem_id="judge-facts", visible=False)
            with gr.Accordion("Benchmark: MM-Vet v1 (bundled), all samples", open=False,
                              elem_id="benchmark-accordion") as bench_acc:
                bench_choice = gr.Radio([BENCH_BUNDLED, BENCH_UPLOAD, BENCH_HUB], value=BENCH_BUNDLED,
                                        label="Benchmark", elem_id="benchmark-choice")
                bench_file = gr.File(label="Official mm-vet.zip or metadata JSON", elem_id="benchmark-file",
                                     file_types=[".zip", ".json"], height=90)
                hub_id = gr.Textbox(label="Hub dataset id", placeholder="whyu/mm-vet", elem_id="hub-id")
                subset = gr.Radio(list(SUBSETS), value="All samples", label="Subset", elem_id="subset")
            # an optional step before grading: the check itself is on the Judges tab
            check_link = gr.Button("Is this judge close to the official one? Check it on the Judges tab →",
                                   size="sm", variant="secondary", elem_id="judge-check-link",
                                   visible=default_judge != JUDGE_BASELINE)
        with gr.Column(scale=7, elem_id="results-column"):
            # what grading costs and Grade head the results column, right above the progress they start: in the
            # first viewport whatever judge fields are open on the left, and on a phone the progress comes right
            # after Grade
            with gr.Column(elem_id="grade-actions") as actions:     # the owner's, as the setup column
                estimate = gr.Textbox(label="Before you spend", interactive=False, lines=1, max_lines=3,
                                      elem_id="estimate", container=False, placeholder="Cost estimate")
                with gr.Row():
                    grade_btn = gr.Button("Grade", variant="primary", elem_id="grade-button", min_width=80)
                    stop_btn = gr.Button("Stop", variant="stop", elem_id="stop-button", min_width=80,
                                         interactive=False)
                    resume_btn = gr.Button("Resume", elem_id="resume-button", min_width=80, interactive=False)
                # why Grade did not start (the official judge is shut down): in place, not an error badge
                judge_unavailable = gr.HTML("", elem_id="judge-unavailable", visible=False)
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
                build_publish_control(page)    # the owner's leaderboard entry (wired to the open run itself)
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
                # tall enough for all 16 integrations (at the default 500 px, 4 rows hid below a silent scroll)
                int_table = gr.Dataframe(headers=views.INTEGRATION_COLUMNS, label="Capability integrations",
                                         interactive=False, elem_id="integrations-table", type="array",
                                         wrap=True, max_height=720)
                downloads = gr.File(label="Downloads: official grade JSON, both CSVs, the run card (run.json) "
                                          "and a zip of all", file_count="multiple", interactive=False,
                                    elem_id="downloads", visible=False)
    judge_check = None
    return GradeView(setup_col, actions, results_file, example_btn, report, model_name, runs, mode, judge_choice,
                     base_url_box, judge_model, api_key, judge_picker, judge_facts, bench_acc, bench_choice,
                     bench_file, hub_id, subset, estimate, grade_btn, stop_btn, resume_btn, judge_unavailable,
                     judge_check, progress, total, empty_note, run_panel,
                     run_card, owner_tools, rename_box, rename_btn, delete_btn, share, flags_box, overlays,
                     overlay_note, radar_caps, radar_ints, cap_table, int_table, downloads, server_judge,
                     check_link)


# ---- the wiring: one function per concern, called by `wire_grade` in the order the events are registered ----
def wire_grade(page: Page, g: GradeView, s: SamplesParts, my: RunsList) -> RunDisplay:
    """Register the Grade view's handlers: the judge field (`wire_judge_field`), validation and estimate as the
    settings change with the judge check's (`wire_setup`), Grade / Stop / Resume (`wire_run_buttons`), and the
    open run's display on opening, on each change while it grades and on overlay changes (`wire_open_run`).

    While a run grades, the page does not poll: one stream per open page (`follow_handler`) pushes the run's
    version (`RunReading.run_version`, read once for all the pages that follow the run) into a hidden box when it
    changes, at most every FOLLOW_EVERY_S, and that change redraws the page with its current filters and overlays.
    A run that does not change costs its viewers nothing but a heartbeat."""
    version = gr.Textbox(visible=False, elem_id="run-version")
    judge_field = wire_judge_field(page, g)
    wire_setup(page, g, judge_field)
    state = Following()
    follow = follow_handler(page.svc, state)
    wire_run_buttons(page, g, version, follow, state)
    return wire_open_run(page, g, s, my, version, follow, state)


@dataclass
class JudgeField:
    """The judge field's handler with its inputs and outputs (run again once a results file is loaded)."""
    handler: Callable[..., tuple]
    inputs: list
    outputs: list


def wire_judge_field(page: Page, g: GradeView) -> JudgeField:
    """The judge field: what the endpoint serves, and the facts beside the chosen judge, as the judge fields
    change; a judge picked from the list becomes the judge model."""
    svc = page.svc

    def judge_field(judge_c, url, model, key):
        """The endpoint's chat models (own key) and what to say beside the judge that will grade (own key and the
        server's judge): its shutdown date and check, or that it is shut down and what the endpoint serves."""
        try:
            rows, chosen, facts = svc.judges.judge_field(judge_of(judge_c, url, model, key))
        except ServiceError:         # incomplete fields or a refused URL: said when Grade uses them
            return gr.skip(), gr.HTML(value="", visible=False)
        names = [r.name for r in rows]
        picker = gr.Dropdown(choices=[(r.label(), r.name) for r in rows],
                             value=chosen if chosen in names else None)
        return picker, gr.HTML(value=judge_note_html(facts), visible=bool(facts))

    field = JudgeField(judge_field, [g.judge_choice, g.base_url, g.judge_model, g.api_key],
                       [g.judge_picker, g.judge_facts])
    g.judge_choice.change(judge_field, field.inputs, field.outputs, api_visibility="private", show_progress="hidden")
    for box in (g.base_url, g.judge_model, g.api_key):
        box.blur(judge_field, field.inputs, field.outputs, api_visibility="private", show_progress="hidden")

    def pick_judge(picked, judge_c, url, key):
        """A judge picked from the list becomes the judge model (the facts follow)."""
        if not picked:
            return gr.skip(), gr.skip(), gr.skip()
        picker, facts = judge_field(judge_c, url, picked, key)
        return picked, picker, facts

    g.judge_picker.input(pick_judge, [g.judge_picker, g.judge_choice, g.base_url, g.api_key],
                         [g.judge_model, g.judge_picker, g.judge_facts], api_visibility="private",
                         show_progress="hidden")
    return field


def wire_setup(page: Page, g: GradeView, field: JudgeField) -> None:
    """The setup column: a new file or a changed setting is validated and priced again; the benchmark accordion's
    label; the own-key fields shown for "My own key"; the judge check (`wire_judge_check`); the example button."""
    svc = page.svc

    @toasts(3)
    def check(results, bench_c, bench_f, hub, sub, n_runs, judge_c, model, mode_label, name_now):
        v = svc.inputs.validate(file_path(results), bench_of(bench_c, bench_f, hub, sub), n_runs,
                                judge_of(judge_c, model=model, mode_label=mode_label))
        return v.report, v.estimate, (name_now or v.model_name) if v.model_name else gr.skip()

    check_inputs = [g.results_file, *g.bench_inputs, g.runs, g.judge_choice, g.judge_model, g.mode, g.model_name]
    check_outputs = [g.report, g.estimate, g.model_name]

    def new_file(results):
        """A new file: the previous file's report and name must not stay shown (the name comes from it)."""
        return "", "", ""

    g.results_file.upload(new_file, g.results_file, check_outputs, queue=False, api_visibility="private",
                          show_progress="hidden").then(check, check_inputs, check_outputs,
                                                       api_visibility="private") \
        .then(field.handler, field.inputs, field.outputs, api_visibility="private", show_progress="hidden")
    g.results_file.clear(new_file, g.results_file, check_outputs, queue=False, api_visibility="private")
    for comp in (g.bench_choice, g.bench_file, g.subset, g.runs, g.judge_choice, g.mode):
        comp.change(check, check_inputs, check_outputs, api_visibility="private")

    def bench_label(bench_c, sub):
        kind = {BENCH_BUNDLED: "MM-Vet v1 (bundled)", BENCH_UPLOAD: "uploaded", BENCH_HUB: "hub dataset"}
        return gr.Accordion(label=f"Benchmark: {kind.get(bench_c, bench_c)}, {sub.lower()}")

    for comp in (g.bench_choice, g.subset):
        comp.change(bench_label, [g.bench_choice, g.subset], g.bench_acc, api_visibility="private", queue=False)

    offered = bool(g.server_judge is not None and g.server_judge.choices)

    def own_judge_fields(choice):
        shown = choice == JUDGE_OWN
        return (gr.Textbox(visible=shown), gr.Textbox(visible=shown), gr.Textbox(visible=shown),
                gr.Dropdown(visible=choice != JUDGE_BASELINE), gr.Button(visible=choice != JUDGE_BASELINE),
                gr.Dropdown(visible=shown), gr.Dropdown(visible=offered and choice == JUDGE_HOST))

    g.judge_choice.change(own_judge_fields, g.judge_choice,
                          [g.base_url, g.judge_model, g.api_key, g.mode, g.check_link, g.judge_picker,
                           g.server_judge], queue=False, api_visibility="private")
    if offered:      # a server judge picked: it is the judge model the server's judge grades with
        # the labels carry each judge's check status as of now (a check stored since the page was built)
        gr.on(None, lambda: gr.Dropdown(choices=svc.judges.server_judge_choices()), None, g.server_judge,
              api_visibility="private", show_progress="hidden")
        g.server_judge.input(lambda name: name or gr.skip(), g.server_judge, g.judge_model, queue=False,
                             api_visibility="private") \
            .then(check, check_inputs, check_outputs, api_visibility="private") \
            .then(field.handler, field.inputs, field.outputs, api_visibility="private", show_progress="hidden")
    if page.tabs is not None:
        g.check_link.click(lambda: gr.Tabs(selected=JUDGES_TAB), None, page.tabs, queue=False,
                           api_visibility="private")

    wire_judge_check(page, g.judge_check, g.judge_choice, g.base_url, g.judge_model, g.api_key, page.tabs)

    g.example_btn.click(lambda: (str(EXAMPLE_RESULTS), "", "", ""), None, [g.results_file] + check_outputs,
                        api_visibility="private").then(check, check_inputs, check_outputs,
                                                       api_visibility="private") \
        .then(field.handler, field.inputs, field.outputs, api_visibility="private", show_progress="hidden")


def follow_opts(page: Page) -> dict:
    """A stream per open page: its own concurrency group (it waits on asyncio, holding no thread), bounded so that
    a crowd of viewers never takes the queue's workers from every other event (`SessionLimits.max_followers`)."""
    return dict(api_visibility="private", show_progress="hidden",
                concurrency_limit=page.settings.sessions.max_followers, concurrency_id="follow-run")


@dataclass
class Following:
    """What the follow streams of this app know about each page session: the stream that follows its open run
    (`tokens`), the run version its page drew last (`drawn`), when its page last asked for a redraw (`asked`: a
    tick) and whether its last opening failed on a database outage (`unopened`: the next redraw opens it)."""
    tokens: dict[str, str] = field(default_factory=dict)
    drawn: dict[str, str | None] = field(default_factory=dict)
    asked: dict[str, float] = field(default_factory=dict)
    unopened: set[str] = field(default_factory=set)

    def note_asked(self, session: str | None) -> None:
        if session:
            if len(self.asked) > 10_000:
                self.asked.clear()
            self.asked[session] = time.monotonic()


def follow_handler(svc, state: Following) -> Callable:
    """The `follow` stream of a page: it pushes the open run's version into the page's version box while the run
    grades, starting from the version the page drew (`remember_drawn`); a newer stream of the same page (another
    run opened, a resume) ends this one.

    - Until the first change it looks every FIRST_EVERY_S (the page's first rows right after the first grades),
      then every FOLLOW_EVERY_S.
    - A new version waits until the page has asked for the redraw of the previous one (its tick; at most
      ACK_WAIT_S): a slow browser (a busy machine) is never sent more updates than it draws, and each costs it a
      round of Gradio's status bookkeeping over every component of the page.
    - While the database cannot be read, the page is told so once (`UNREACHABLE`: its redraw says
      `STORE_UNREACHABLE` in place of the progress) and the stream keeps following, reading again every
      OUTAGE_RETRY_S; once the database answers, the page is redrawn and followed to the run's end."""

    def look(run_id: str, pace: float) -> tuple[bool, str | None]:
        # whether the job runs is asked BEFORE the run is read: a job that ends meanwhile changes its version
        running = svc.jobs.is_running(run_id)
        return running, svc.reading.run_version(run_id, pace if running else 0)

    async def follow(run_id, request: gr.Request):
        session = getattr(request, "session_hash", None) or secrets.token_hex(8)
        token = state.tokens[session] = secrets.token_hex(8)
        yield gr.skip()           # (a Gradio generator must yield at least once)
        try:
            # from the version the opening drew: a run that ended (or started waiting) since is redrawn at once
            last = state.drawn.pop(session, None) if run_id else None
            beat, sent = time.monotonic(), 0.0        # (no update sent yet: the first is never held back)
            pace, running = FIRST_EVERY_S, True
            while last is not None and state.tokens.get(session) == token:
                await asyncio.sleep(pace if running else 0)
                try:
                    running, now = await asyncio.to_thread(look, run_id, pace)
                except StoreError:
                    if last != UNREACHABLE:
                        last, beat = UNREACHABLE, time.monotonic()
                        yield f"{run_id}|{UNREACHABLE}"
                    elif time.monotonic() - beat > HEARTBEAT_S:
                        beat = time.monotonic()
                        yield gr.skip()
                    await asyncio.sleep(OUTAGE_RETRY_S)
                    continue
                if now is not None and now != last:
                    if running and state.asked.get(session, 0.0) < sent and time.monotonic() - sent < ACK_WAIT_S \
                            and last != UNREACHABLE:
                        continue          # the page has not asked for the last update yet
                    last, beat = now, time.monotonic()
                    sent, pace = beat, FOLLOW_EVERY_S
                    yield f"{run_id}|{now}"
                elif time.monotonic() - beat > HEARTBEAT_S:
                    beat = time.monotonic()
                    yield gr.skip()
                if not running:
                    break
        finally:
            if state.tokens.get(session) == token:
                state.tokens.pop(session, None)

    return follow


def remember_drawn(svc, state: Following, run_id: str, request: gr.Request | None) -> None:
    """Note the run's version as this page is about to draw it (read BEFORE the run is: a change while it is
    drawn is then followed); `UNREACHABLE` while the database cannot be read (followed until it can)."""
    session = getattr(request, "session_hash", None)
    if run_id and session:
        if len(state.drawn) > 10_000:
            state.drawn.clear()
        try:
            state.drawn[session] = svc.reading.run_version(run_id, 0)
        except StoreError:
            state.drawn[session] = UNREACHABLE


def unreachable_html(error: StoreError | None = None) -> str:
    """The progress's place while the database cannot be read: what happened, that nothing is lost, and that the
    page follows the run again by itself (everything interpolated is ours or escaped)."""
    return (f'<div id="progress-box"><div id="progress-text" class="store-unreachable">'
            f'{esc(store_unreachable(error))} This page follows the run again as soon as it is back.</div></div>')


def wire_run_buttons(page: Page, g: GradeView, version: gr.Textbox, follow: Callable, state: Following) -> None:
    """Grade (a refused official judge is said in place, with the judges the endpoint serves), Stop, Resume
    (then the page follows the run again)."""
    svc, run_state, owner = page.svc, page.run_state, page.owner

    @toasts(3)
    def start(results, bench_c, bench_f, hub, sub, n_runs, judge_c, url, model, key, mode_label, name,
              owner_tok, request: gr.Request):
        try:
            run_id, started = svc.runs.start(file_path(results), bench_of(bench_c, bench_f, hub, sub), n_runs,
                                             judge_of(judge_c, url, model, key, mode_label), owner=owner_tok,
                                             visitor=visitor(svc, request), model_name=name or "")
        except JudgeUnavailable as e:     # said in place under Grade, with the judges the endpoint serves
            gr.Warning("Nothing was graded: the official judge is shut down (see the message under Grade).")
            rows = [(m.name + (f" · shutdown {m.shutdown_date.isoformat()}" if m.shutdown_date else ""), m.name)
                    for m in e.models.chat_models()]
            return (gr.skip(), gr.HTML(value=judge_note_html(str(e)), visible=True),
                    gr.Dropdown(choices=rows, value=None) if rows else gr.skip())
        if not started:
            gr.Info("This job is already grading: showing its run (nothing is paid twice).")
        note = svc.judges.judge_note(run_id)
        if note:
            gr.Info(esc(f"Note: {note}; stored grades stay viewable and exportable."))
        return run_id, gr.HTML(value="", visible=False), gr.skip()

    g.grade_btn.click(start, [g.results_file, *g.bench_inputs, g.runs, g.judge_choice, g.base_url, g.judge_model,
                              g.api_key, g.mode, g.model_name, owner],
                      [run_state, g.judge_unavailable, g.judge_picker], api_visibility="private",
                      show_progress="hidden")      # (the run's progress shows what it does)

    @toasts(0)
    def stop(run_id, owner_tok):
        gr.Info(svc.runs.stop(run_id, owner_tok))

    g.stop_btn.click(stop, [run_state, owner], None, api_visibility="private")

    @toasts(0)
    def resume(run_id, judge_c, url, model, key, owner_tok, request: gr.Request):
        remember_drawn(svc, state, run_id, request)   # the page shows the run as it is now: `follow` draws changes
        gr.Info(svc.runs.resume(run_id, owner_tok, visitor(svc, request), judge_of(judge_c, url, model, key)))

    g.resume_btn.click(resume, [run_state, g.judge_choice, g.base_url, g.judge_model, g.api_key, owner], None,
                       api_visibility="private").then(follow, [run_state], [version], **follow_opts(page))


# ---- the open run: what is shown of it ----
def radar_update(svc, view, overlay_sel, owner_tok: str, running: bool, radar_key: str | None,
                 radar_sent: dict[str, float], opened: bool = False) -> tuple:
    """The two radars, or skips: mid-run updates redraw the two plotly charts every RADAR_EVERY_S only (redrawing
    them every second cost the browser as much CPU as the grading itself: bench/bench_app_e2e.py).

    A grading run just opened shows its progress first: its radars are cleared (never another run's left beside
    it) and drawn by the updates from RADAR_EVERY_S on, or at its end. The page's first plotly chart costs a
    browser about a second (plotly.js is loaded then): in the opening's draw it held back the first rows."""
    now = time.monotonic()
    if running and radar_key is not None and not opened and now - radar_sent.get(radar_key, 0.0) < RADAR_EVERY_S:
        return gr.skip(), gr.skip()
    rc, ri = (None, None) if running and opened else radar_figures(svc, view, overlay_sel, owner_tok)
    if radar_key is not None:
        if len(radar_sent) > 10_000:
            radar_sent.clear()
        radar_sent[radar_key] = now
    return rc, ri


def live_values(svc, view, perms, radars: tuple, rows: list, *, running: bool, opened: bool, owner_tok: str,
                sample_id: str) -> tuple:
    """The values of the live outputs (`wire_open_run`): what changes while a run grades or after an override."""
    flags = view.flag_counts()
    flag_text = ", ".join(f"{k}: {v}" for k, v in sorted(flags.items())) or "none"
    files = svc.reading.downloads(view) if not running and view.n_graded else None
    return (progress_html(svc, view), views.total_text(view), card_html(svc.reading.card(view)),
            f"Flagged samples — {flag_text}", *radars,
            {"data": views.capability_rows(view), "headers": views.table_columns(view, "capability")},
            {"data": views.integration_rows(view), "headers": views.table_columns(view, "integration")},
            rows, count_text(view, rows), gr.File(value=files, visible=bool(files)),
            gr.Button(interactive=perms.can_stop), gr.Button(interactive=perms.can_resume),
            gr.Button(interactive=perms.can_override and bool(sample_id)),
            gr.Button(interactive=perms.can_override and bool(sample_id)),
            gr.skip() if running and not opened else runs_rows(svc, owner_tok))


def opened_values(svc, view, perms, owner_tok: str) -> tuple:
    """The values of the opening outputs but the form's (`wire_open_run`): panels shown, menus filled, owner
    tools for the owner only, and no other run's sample left open."""
    return (gr.Column(visible=True), gr.Column(visible=True), gr.Markdown(visible=False),
            gr.Dropdown(choices=overlay_choices(svc, view, owner_tok), value=[]), "",
            gr.Dropdown(choices=views.filter_choices(view.benchmark), value="all"),
            gr.Row(visible=perms.owner),
            gr.Textbox(value=view.run.model_name), gr.Row(visible=perms.owner),
            gr.Column(visible=perms.owner), gr.Column(visible=perms.owner),
            gr.Markdown(visible=not perms.owner),
            # the detail of another run's sample must not stay shown beside this run
            "", gr.Image(value=None, visible=False), "", "", "", "", "", [])


def form_values(svc, view, owner: bool, n_outputs: int) -> tuple:
    """The owner's form shows the opened run's own settings (a reload used to show the defaults beside the
    run card's); a grade file's view and a shared view leave the form as it is."""
    form = svc.reading.form_of(view) if owner else None
    if form is None:
        return tuple(gr.skip() for _ in range(n_outputs))
    mode_label = next((label for label, m in MODES.items() if m == form["mode"]), list(MODES)[0])
    return (form["n_runs"], form["judge"], form["base_url"], form["judge_model"] or gr.skip(), mode_label,
            form["benchmark"], form["hub_id"], form["subset"], form["model_name"])


def wire_open_run(page: Page, g: GradeView, s: SamplesParts, my: RunsList, version: gr.Textbox, follow: Callable,
                  state: Following) -> RunDisplay:
    """The open run's display: drawn when a run opens (then followed), redrawn at each change of its version
    and, radars only, when the overlays change; the address and the share link follow the open run."""
    svc, run_state, owner = page.svc, page.run_state, page.owner
    radar_sent: dict[str, float] = {}   # per session and run: when the radars were last sent mid-run

    form_outputs = [g.runs, g.judge_choice, g.base_url, g.judge_model, g.mode, g.bench_choice, g.hub_id, g.subset,
                    g.model_name]
    live_outputs = [g.progress, g.total, g.run_card, g.flags_box, g.radar_caps, g.radar_ints, g.cap_table,
                    g.int_table, s.samples, s.sample_count, g.downloads, g.stop_btn, g.resume_btn, s.o_btn,
                    s.o_clear, my.runs_table]
    open_outputs = [g.run_panel, s.section, g.empty_note, g.overlays, g.overlay_note, s.f_cap, g.owner_tools, g.rename_box,
                    s.override_row, g.setup_col, g.actions, page.ro_note, s.d_id, s.d_image, s.d_question, s.d_truth,
                    s.d_image_note, s.d_pred, s.d_flags, s.d_attempts, *form_outputs]
    view_outputs = live_outputs + open_outputs
    view_inputs = [run_state, g.overlays, s.f_cap, s.f_min, s.f_max, s.f_flag, s.f_sort, owner, s.d_id]

    def refresh(run_id, overlay_sel, cap_f, lo, hi, flagged, order, owner_tok, sample_id, radar_key=None,
                opened=False):
        """Everything shown of the open run. `opened`: the run was just opened (menus, visibility, share
        link are set too); else an update of a grading run (those stay as they are)."""
        # Ask whether the job runs BEFORE reading the run: a job that ends while we read then still changes the
        # run's version once more (`follow`), so the final state is always shown.
        running = bool(run_id) and svc.jobs.is_running(run_id)
        view = svc.reading.view(run_id) if run_id else None
        if view is None:
            return tuple(gr.skip() for _ in view_outputs)
        view = svc.reading.with_failure(view)
        radars = radar_update(svc, view, overlay_sel, owner_tok, running, radar_key, radar_sent, opened)
        perms = svc.runs.permissions(run_id, owner_tok)
        rows = views.sample_rows(view, sample_filter(cap_f, lo, hi, flagged, order))
        live = live_values(svc, view, perms, radars, rows, running=running, opened=opened, owner_tok=owner_tok,
                           sample_id=sample_id)
        if not opened:
            return live + tuple(gr.skip() for _ in open_outputs)
        return live + opened_values(svc, view, perms, owner_tok) + form_values(svc, view, perms.owner,
                                                                                len(form_outputs))

    def unreachable(error: StoreError) -> tuple:
        """The page while the database cannot be read: the progress says so, everything else stays as it was."""
        return (unreachable_html(error),) + tuple(gr.skip() for _ in view_outputs[1:])

    def tick(run_id, overlay_sel, cap_f, lo, hi, flagged, order, owner_tok, sample_id, request: gr.Request):
        session = getattr(request, "session_hash", None)
        state.note_asked(session)
        key = f"{session or ''}:{run_id}"
        opened = session in state.unopened       # its opening met an outage: this redraw opens it
        try:
            out = refresh(run_id, overlay_sel if not opened else [], cap_f, lo, hi, flagged, order, owner_tok,
                          sample_id, radar_key=key, opened=opened)
        except StoreError as e:
            return unreachable(e)
        state.unopened.discard(session)
        return out

    def open_run(run_id, overlay_sel, cap_f, lo, hi, flagged, order, owner_tok, sample_id, request: gr.Request):
        remember_drawn(svc, state, run_id, request)
        session = getattr(request, "session_hash", None)
        try:
            out = refresh(run_id, [], "all", lo, hi, flagged, order, owner_tok, "",
                          radar_key=f"{session or ''}:{run_id}", opened=True)
        except StoreError as e:
            if session and run_id:
                if len(state.unopened) > 10_000:
                    state.unopened.clear()
                state.unopened.add(session)
            return unreachable(e)
        state.unopened.discard(session)
        return out

    # the page's version box changes once per change of the run it follows: redraw with the page's current inputs
    version.change(tick, view_inputs, view_outputs, api_visibility="private", show_progress="hidden",
                   trigger_mode="always_last")
    # (after the opening: a stream registered on run_state.change itself would hold back the page's later
    # listeners of that change, such as the address and the share link, until the run ends)
    run_state.change(open_run, view_inputs, view_outputs, api_visibility="private", show_progress="hidden") \
        .then(follow, [run_state], [version], **follow_opts(page))
    run_state.change(None, run_state, None, js=SET_ADDRESS_JS, api_visibility="private")

    def share_of(run_id, request: gr.Request):
        return svc.reading.share_url(run_id, base_url(request)) if run_id else ""

    run_state.change(share_of, run_state, g.share, api_visibility="private", queue=False, show_progress="hidden")

    def on_overlays(run_id, overlay_sel, cap_f, lo, hi, flagged, order, owner_tok, sample_id):
        view = svc.reading.view(run_id) if run_id else None
        if view is None:
            return gr.skip(), gr.skip(), gr.skip()
        rc, ri = radar_figures(svc, view, overlay_sel, owner_tok)
        return rc, ri, overlay_warning(svc, view, overlay_sel, owner_tok)

    # .input (the visitor's choice), not .change: the opening's reset of the menu (its radars drawn already, its
    # note cleared) must not draw both plotly charts a second time (bench/bench_app_e2e.py: ~1 s of the page's CPU)
    g.overlays.input(on_overlays, view_inputs, [g.radar_caps, g.radar_ints, g.overlay_note],
                     api_visibility="private", show_progress="hidden")
    return RunDisplay(refresh, live_outputs)
