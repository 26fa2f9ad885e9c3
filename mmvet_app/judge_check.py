"""The Judges tab: does the judge chosen on the Grade tab grade reference models' answers like the official GPT-4
judge (with intervals), shown as a report — the verdict first, then its numbers as tables and two plots — and the
successor board of every judge checked on this server. ``?check=<id>`` (a board row's link) opens the tab with that
check's report. The numbers come formatted once from `mmvet_core.successors.judgecheck.check_tables` (the CLI prints the same
tables); the plots from `mmvet_core.scores.charts`."""
from __future__ import annotations

import html
import time
from dataclasses import dataclass

import gradio as gr

from mmvet_core.scores.charts import make_check_lomo, make_check_shifts
from mmvet_core.successors.judgecheck import LEGEND, check_headline, check_tables, estimates_line, format_correction
from mmvet_core.service import JUDGE_BASELINE, JUDGE_OWN
from mmvet_core.successors.table import SORT_KEYS, TABLE_HEADERS, board_table

from mmvet_app.common import Page, base_url, esc, judge_of, toasts, visitor

TAB_ID = "judges"
BOARD_HELP = ("Every judge this server checked with its own key (then, for you alone and unranked, the checks "
              "you made with your own key: unverified): Δ̄ to the official grades (GPT-4-0613 against itself: about "
              "0.01; the keyword baseline: 0.15), the total shift with its 95 % interval, Kendall τ across the "
              "reference models, the verdict, whether official-equivalent estimates are available and the "
              "shutdown date its endpoint announced. A good successor has a small Δ̄, a narrow shift interval, "
              "τ = +1 and no near shutdown. Endpoints appear by kind only, never by address.")
EMPTY_REPORT = ("No check of this judge is stored yet. **Check this judge** grades the reference answers whose "
                "official grades are known; the report (verdict, tables, plots) appears here.")
CSS = """
#judge-check-report .verdict {border-left:6px solid var(--color-accent); padding:6px 12px; margin:0 0 8px 0;
  font-size:1.05em; font-weight:600;}
#judge-check-report .verdict.close {border-color:#16a34a;} #judge-check-report .verdict.drifts {border-color:#dc2626;}
#judge-check-report .verdict.unclear {border-color:#d97706;}
#judge-check-report table.check {border-collapse:collapse; font-size:0.85em; font-variant-numeric:tabular-nums;
  margin:4px 0 8px 0; width:auto; max-width:100%;}
#judge-check-report table.check th, #judge-check-report table.check td {padding:2px 8px; text-align:right;
  border-bottom:1px solid var(--border-color-primary); white-space:nowrap;}
#judge-check-report table.check th:first-child, #judge-check-report table.check td:first-child {text-align:left;
  white-space:normal; overflow-wrap:anywhere;}
#judge-check-report .tables {display:flex; flex-wrap:wrap; gap:16px; align-items:flex-start;}
#judge-check-report .tables > div {overflow-x:auto; max-width:100%;}
#judge-check-report p {margin:2px 0; font-size:0.9em;}
"""


@dataclass
class JudgeCheckView:
    section: gr.Column
    judge_line: gr.Markdown
    button: gr.Button
    report: gr.HTML
    plot_lomo: gr.Plot
    plot_shifts: gr.Plot
    text: gr.Textbox
    board_section: gr.Column | None = None
    sort: gr.Dropdown | None = None
    refresh: gr.Button | None = None
    export: gr.DownloadButton | None = None
    board: gr.Dataframe | None = None
    export_button: gr.Button | None = None          # checks that travel (issue 30): export / import
    export_file: gr.File | None = None
    import_file: gr.File | None = None
    import_button: gr.Button | None = None


# ---- the report as HTML (pure) ----
def table_html(table, elem_id: str, caption: str) -> str:
    """A `judgecheck.CheckTable` as an HTML table (every cell escaped: model names come from the manifest and
    judge names from visitors)."""
    e = lambda v: html.escape(str(v), quote=True)       # noqa: E731
    head = "".join(f"<th>{e(h)}</th>" for h in table.headers)
    body = "".join("<tr>" + "".join(f"<td>{e(c)}</td>" for c in row) + "</tr>" for row in table.rows)
    return (f'<div><strong>{e(caption)}</strong><table class="check" id="{e(elem_id)}"><thead><tr>{head}</tr>'
            f"</thead><tbody>{body}</tbody></table></div>")


def report_html(result) -> str:
    """The check's report: the verdict, the judge and references, the per-column and per-reference tables, the
    legend, the correction and whether estimates are shown."""
    e = lambda v: html.escape(str(v), quote=True)       # noqa: E731
    tables = check_tables(result)
    kind = result.verdict_kind or ("close" if result.close else "drifts")
    parts = [f'<div class="verdict {e(kind)}" id="judge-check-verdict">{e(result.verdict)}</div>']
    tail = estimates_line(result)
    if tail:
        parts.append(f'<p id="judge-check-estimates"><strong>{e(tail)}</strong></p>')
    parts.append('<div class="tables">'
                 + table_html(tables["columns"], "judge-check-columns", "Per column, pooled over the references")
                 + table_html(tables["references"], "judge-check-references", "Per reference model (total)")
                 + "</div>")
    parts += [f"<p>{e(line)}</p>" for line in check_headline(result)]
    parts.append(f"<p><small>{e(LEGEND.format(resamples=result.resamples, seed=result.seed))}</small></p>")
    if result.level_note:
        parts.append(f"<p>{e(result.level_note)}</p>")
    parts += [f"<p><small>{e(line)}</small></p>" for line in format_correction(result) if line]
    return "".join(parts)


def report_values(state: str, result) -> tuple:
    """(report HTML, LOMO plot, shift plot, plain text) for a check's state: a progress or failure line alone, or
    the stored check's report."""
    from mmvet_core.successors.judgecheck import format_check

    if result is None:
        text = f"<p>{html.escape(state)}</p>" if state else ""
        return text, gr.Plot(value=None, visible=False), gr.Plot(value=None, visible=False), state
    lomo = make_check_lomo(result)
    return (report_html(result), gr.Plot(value=lomo, visible=lomo is not None),
            gr.Plot(value=make_check_shifts(result), visible=True), format_check(result))


def judge_line(judge_c: str, model: str, host_model: str) -> str:
    """Which judge the Judges tab checks (the one chosen on the Grade tab)."""
    if judge_c == JUDGE_BASELINE:
        return ("The judge chosen on the **Grade** tab is the offline keyword baseline: it is what the check "
                "compares against. Choose the server's judge or your own key on the Grade tab to check a judge.")
    if judge_c == JUDGE_OWN:
        return f"Checking the judge chosen on the **Grade** tab: **{esc(model or '?')}** at your own endpoint."
    return f"Checking the judge chosen on the **Grade** tab: the server's judge **{esc(host_model or model)}**."


# ---- the view ----
def build_judges(page: Page) -> JudgeCheckView:
    """Lay out the Judges tab's content where it is called: the judge being checked, the button, the report
    (verdict, tables, plots, the plain text behind a fold) and the successor board."""
    with gr.Column(elem_id="judge-check-section") as section:
        judge_text = gr.Markdown(judge_line(page.default_judge, page.settings.judge_model, ""),
                                 elem_id="judge-check-judge")
        with gr.Row(equal_height=True):
            gr.Markdown(page.svc.judges.check_cost() + " A judge with a check gets official-equivalent estimates "
                        "on its runs' cards (labelled as estimates).", elem_id="judge-check-cost")
            button = gr.Button("Check this judge", size="sm", variant="primary", elem_id="judge-check-button",
                               scale=0, min_width=160)
        report = gr.HTML("", elem_id="judge-check-report")
        with gr.Row():
            plot_lomo = gr.Plot(show_label=False, elem_id="judge-check-lomo", visible=False, min_width=320)
            plot_shifts = gr.Plot(show_label=False, elem_id="judge-check-shifts", visible=False, min_width=320)
        with gr.Accordion("Checks that travel: export this judge's check, or import one", open=False,
                          elem_id="judge-check-share"):
            gr.Markdown("Export this judge's check (a dataset folder, zipped: no key, no private host name), or "
                        "import one exported elsewhere: an import is verified first by grading 5 % of its prompts "
                        "(at least 60, drawn at random) again with this judge, and is yours alone (the server's "
                        "estimates rest on the checks its host makes or imports).", elem_id="judge-check-share-help")
            with gr.Row():
                export_button = gr.Button("Export this judge's check", size="sm", elem_id="judge-check-export")
                import_button = gr.Button("Import and verify", size="sm", elem_id="judge-check-import")
            with gr.Row():
                export_file = gr.File(label="Exported check", interactive=False, elem_id="judge-check-export-file")
                import_file = gr.File(label="A check to import: its check.jsonl or its folder zipped",
                                      file_types=[".jsonl", ".zip"], elem_id="judge-check-import-file")
        with gr.Accordion("The report as text (as the command line prints it)", open=False):
            text = gr.Textbox(show_label=False, lines=4, max_lines=40, interactive=False, elem_id="judge-check-text",
                              buttons=["copy"])
    with gr.Column(elem_id="judge-board-section") as board_section:
        gr.Markdown("### Successor board: every judge this server checked with its own key\n" + BOARD_HELP)
        with gr.Row():
            sort = gr.Dropdown(list(SORT_KEYS), value=next(iter(SORT_KEYS)), label="Sort by",
                               elem_id="board-sort", scale=3)
            refresh = gr.Button("Refresh", size="sm", elem_id="board-refresh", scale=1)
            export = gr.DownloadButton("Download CSV", size="sm", elem_id="board-csv", scale=1)
        board = gr.Dataframe(headers=TABLE_HEADERS, datatype=["str"] * 10 + ["markdown"], interactive=False,
                             elem_id="judge-board", wrap=True, max_height=400)
    return JudgeCheckView(section, judge_text, button, report, plot_lomo, plot_shifts, text, board_section, sort,
                          refresh, export, board, export_button=export_button, export_file=export_file,
                          import_file=import_file, import_button=import_button)


def wire_judge_check(page: Page, jc: JudgeCheckView, judge_choice: gr.Radio, base_url_box: gr.Textbox,
                     judge_model: gr.Textbox, api_key: gr.Textbox, tabs: gr.Tabs | None = None) -> None:
    """Start a check with the Grade tab's judge fields; the report follows it (polled while it runs) and is
    re-read when the judge fields change; the board follows the checks stored, its sort and its refresh."""
    svc, judges = page.svc, page.svc.judges          # this view reads the judges facet only (and who asks)
    check_timer = gr.Timer(1.0, active=False)

    def board(sort_label, owner_tok="", request: gr.Request | None = None):
        # this server's checks, then the visitor's own (theirs alone, unranked); the CSV holds the server's only
        key = SORT_KEYS.get(sort_label, "delta_bar")
        return board_table(judges.judge_board(key, owner_tok or "")), judges.judge_board_csv(key, base_url(request))

    @toasts(8)
    def check_judge(judge_c, url, model, key, owner_tok, sort_label, request: gr.Request):
        message = judges.check_judge(judge_of(judge_c, url, model, key), owner_tok, visitor(svc, request))
        gr.Info(esc(message))
        values = check_text(judge_c, url, model, key, owner_tok, sort_label, request)
        # the poll runs at least once more, even for a check that already stopped: the report ends on what the
        # check says, whatever a field's event answered late (`fields_text`)
        return (*values[:5], gr.Timer(active=True), *values[6:])

    def check_text(judge_c, url, model, key, owner_tok, sort_label, request: gr.Request):
        since = time.monotonic()
        choice = judge_of(judge_c, url, model, key)
        state, running, result = judges.judge_check_state(choice, owner_tok)
        line = judge_line(judge_c, model, choice.host_model)
        if result is None and not state and judge_c != JUDGE_BASELINE:
            state = EMPTY_REPORT
        values = report_values(state, result)
        if result is None and state == EMPTY_REPORT:
            values = (f"<p>{EMPTY_REPORT.replace('**Check this judge**', '<strong>Check this judge</strong>')}</p>",
                      *values[1:])
        if running:                  # the board changes when the check ends, not on every tick
            return (*values, line, gr.Timer(active=True), gr.skip(), gr.skip())
        boards = board(sort_label, owner_tok, request)
        if judges.check_started_since(owner_tok, since):
            # this visitor clicked Check while this answer was made: it may say what was true before (or be of
            # the fields as they were), and arrive after the click's own answer. Put nothing over that answer and
            # poll once more (seen on a busy machine: "no check stored" over the check just started, poll stopped)
            return (*(gr.skip() for _ in range(5)), gr.Timer(active=True), gr.skip(), gr.skip())
        return (*values, line, gr.Timer(active=False), *boards)

    def on_load(judge_c, url, model, key, owner_tok, sort_label, request: gr.Request):
        """On arrival: the report of the judge the page starts with; ``?check=<id>`` (a board row's link): the
        Judges tab with that check's report."""
        params = dict(request.query_params) if request else {}
        check_id = params.get("check", "")
        result = judges.check_result(check_id, owner_tok) if check_id else None
        if check_id and result is None:
            gr.Warning("This link's judge check does not exist.")
        if result is None:
            return (*check_text(judge_c, url, model, key, owner_tok, sort_label, request), gr.skip())
        return (*report_values("", result), f"The check behind the link: **{esc(result.judge.get('model'))}**.",
                gr.Timer(active=False), *board(sort_label, owner_tok, request), gr.Tabs(selected=TAB_ID))

    @toasts(1)
    def export_check(judge_c, url, model, key):
        return judges.export_check(judge_of(judge_c, url, model, key))

    @toasts(8)
    def import_check(judge_c, url, model, key, owner_tok, sort_label, upload, request: gr.Request):
        if not upload:
            gr.Warning("Choose the exported check first (its check.jsonl or its folder zipped).")
            return tuple(gr.skip() for _ in range(8))
        path = upload if isinstance(upload, str) else getattr(upload, "name", "")
        message = judges.import_check(judge_of(judge_c, url, model, key), path, owner_tok, visitor(svc, request))
        gr.Info(esc(message))
        return check_text(judge_c, url, model, key, owner_tok, sort_label, request)

    inputs = [judge_choice, base_url_box, judge_model, api_key, page.owner, jc.sort]
    outputs = [jc.report, jc.plot_lomo, jc.plot_shifts, jc.text, jc.judge_line, check_timer, jc.board, jc.export]
    jc.button.click(check_judge, inputs, outputs, api_visibility="private")
    if jc.export_button is not None:
        jc.export_button.click(export_check, inputs[:4], [jc.export_file], api_visibility="private")
        jc.import_button.click(import_check, [*inputs, jc.import_file], outputs, api_visibility="private")
    def fields_text(judge_c, url, model, key, owner_tok, sort_label, request: gr.Request):
        """`check_text` for a change of the judge fields, then one poll more. A field's event carries the fields
        as they were when it was made: answered late (a blur or the judge choice just before Check, on a busy
        server) it would leave the report of those old fields, "no check stored", over the check just started,
        or stop that check's poll. The poll reads the fields as they are when it ticks, and stops itself."""
        values = check_text(judge_c, url, model, key, owner_tok, sort_label, request)
        return (*values[:5], gr.Timer(active=True), *values[6:])

    check_timer.tick(check_text, inputs, outputs, api_visibility="private", show_progress="hidden")
    judge_choice.change(fields_text, inputs, outputs, api_visibility="private", show_progress="hidden")
    for box in (base_url_box, judge_model, api_key):     # (on blur: a base URL is checked when it is used)
        box.blur(fields_text, inputs, outputs, api_visibility="private", show_progress="hidden")
    judge_model.input(fields_text, inputs, outputs, api_visibility="private", show_progress="hidden",
                      trigger_mode="always_last")
    board_outputs = [jc.board, jc.export]
    jc.sort.change(board, [jc.sort, page.owner], board_outputs, api_visibility="private")
    jc.refresh.click(board, [jc.sort, page.owner], board_outputs, api_visibility="private")
    if tabs is not None:
        # once per page, when the load handler has set the visitor's token (a check is read as its owner sees it);
        # not on every change of the judge fields (`gr.on(None, …)` did: the link's warning again, its report over
        # the judge just chosen)
        page.owner.change(on_load, inputs, outputs + [tabs], api_visibility="private", show_progress="hidden")
