"""The judge-check view: does the chosen judge grade reference models' answers like the official GPT-4 judge
(with intervals), and the successor board of every judge checked on this server. The check sits in the Grade
view's setup column (hidden for the offline baseline); the board spans the page under the Grade view (its 11
columns need the width). ``?check=<id>`` (a board row's link) opens both with that check's report."""
from __future__ import annotations

from dataclasses import dataclass, replace

import gradio as gr

from mmvet_core.successors import SORT_KEYS, TABLE_HEADERS, board_table
from mmvet_core.service import JUDGE_BASELINE

from .common import Page, base_url, esc, judge_of, toasts, visitor

BOARD_HELP = ("Every judge this server checked with its own key (then, for you alone and unranked, the checks "
              "you made with your own key: unverified): Δ̄ to the official grades (GPT-4-0613 against itself: about "
              "0.01; the keyword baseline: 0.15), the total shift with its 95 % interval, Kendall τ across the "
              "reference models, the verdict, whether official-equivalent estimates are available and the "
              "shutdown date its endpoint announced. A good successor has a small Δ̄, a narrow shift interval, "
              "τ = +1 and no near shutdown. Endpoints appear by kind only, never by address.")


@dataclass
class JudgeCheckView:
    section: gr.Accordion
    button: gr.Button
    report: gr.Textbox
    board_section: gr.Accordion | None = None     # the board's (`build_judge_board`)
    sort: gr.Dropdown | None = None
    refresh: gr.Button | None = None
    export: gr.DownloadButton | None = None
    board: gr.Dataframe | None = None
    export_button: gr.Button | None = None          # checks that travel (issue 30): export / import
    export_file: gr.File | None = None
    import_file: gr.File | None = None
    import_button: gr.Button | None = None


def build_judge_check(page: Page) -> JudgeCheckView:
    """Lay out the (collapsed) judge-check section: an explanation with the check's cost, the button and the
    report (the board comes with `build_judge_board`)."""
    with gr.Accordion("Check this judge first (is it close to the official GPT-4 judge?)", open=False,
                      elem_id="judge-check-section", visible=page.default_judge != JUDGE_BASELINE) as section:
        gr.Markdown(page.svc.judges.check_cost() + " The report says how far the judge is from the official grades, "
                    "with 95 % intervals, beside GPT-4's own run-to-run spread; a judge with a check gets "
                    "official-equivalent estimates on its runs' cards (labelled as estimates).",
                    elem_id="judge-check-cost")
        button = gr.Button("Check this judge", size="sm", elem_id="judge-check-button")
        report = gr.Textbox(label="Judge check", lines=4, max_lines=30, interactive=False,
                            elem_id="judge-check-report", buttons=["copy"])
        gr.Markdown("Checks travel between hosts: export this judge's check (no key, no private host name), or "
                    "import one exported elsewhere; an import is verified first by grading 5 % of its prompts "
                    "(at least 60) again with this judge.", elem_id="judge-check-share-help")
        export_button = gr.Button("Export this judge's check", size="sm", elem_id="judge-check-export")
        export_file = gr.File(label="Exported check (a dataset folder, zipped)", interactive=False,
                              elem_id="judge-check-export-file")
        import_file = gr.File(label="Import a check: its check.jsonl or its folder zipped", file_types=[".jsonl", ".zip"],
                              elem_id="judge-check-import-file")
        import_button = gr.Button("Import and verify", size="sm", elem_id="judge-check-import")
    return JudgeCheckView(section, button, report, export_button=export_button, export_file=export_file,
                          import_file=import_file, import_button=import_button)


def build_judge_board(page: Page, jc: JudgeCheckView) -> JudgeCheckView:
    """Lay out the (collapsed) successor board where it is called (the page's full width); returns `jc` with
    it."""
    with gr.Accordion("Successor board: every judge this server checked with its own key", open=False,
                      elem_id="judge-board-section") as board_section:
        gr.Markdown(BOARD_HELP)
        with gr.Row():
            sort = gr.Dropdown(list(SORT_KEYS), value=next(iter(SORT_KEYS)), label="Sort by",
                               elem_id="board-sort", scale=3)
            refresh = gr.Button("Refresh", size="sm", elem_id="board-refresh", scale=1)
            export = gr.DownloadButton("Download CSV", size="sm", elem_id="board-csv", scale=1)
        board = gr.Dataframe(headers=TABLE_HEADERS, datatype=["str"] * 10 + ["markdown"], interactive=False,
                             elem_id="judge-board", wrap=True, max_height=400)
    return replace(jc, board_section=board_section, sort=sort, refresh=refresh, export=export, board=board)


def wire_judge_check(page: Page, jc: JudgeCheckView, judge_choice: gr.Radio, base_url_box: gr.Textbox,
                     judge_model: gr.Textbox, api_key: gr.Textbox) -> None:
    """Start a check with the Grade view's judge fields; the report follows it (polled while it runs) and is
    re-read when the judge fields change; the board follows the checks stored, its sort and its refresh."""
    svc, judges = page.svc, page.svc.judges          # this view reads the judges facet only (and who asks)
    check_timer = gr.Timer(1.0, active=False)

    def board(sort_label, owner_tok="", request: gr.Request | None = None):
        # this server's checks, then the visitor's own (theirs alone, unranked); the CSV holds the server's only
        key = SORT_KEYS.get(sort_label, "delta_bar")
        return board_table(judges.judge_board(key, owner_tok or "")), judges.judge_board_csv(key, base_url(request))

    @toasts(4)
    def check_judge(judge_c, url, model, key, owner_tok, sort_label, request: gr.Request):
        message = judges.check_judge(judge_of(judge_c, url, model, key), owner_tok, visitor(svc, request))
        gr.Info(esc(message))
        return check_text(judge_c, url, model, key, owner_tok, sort_label, request)

    def check_text(judge_c, url, model, key, owner_tok, sort_label, request: gr.Request):
        text, running = judges.judge_check_text(judge_of(judge_c, url, model, key), owner_tok)
        if running:                  # the board changes when the check ends, not on every tick
            return text, gr.Timer(active=True), gr.skip(), gr.skip()
        return (text, gr.Timer(active=False), *board(sort_label, owner_tok, request))

    def on_load(request: gr.Request):
        """``?check=<id>``: open the section with that check's report (a board row's link)."""
        sort_label = next(iter(SORT_KEYS))
        params = dict(request.query_params) if request else {}
        check_id = params.get("check", "")
        if not check_id:
            return gr.skip(), gr.skip(), gr.skip(), *board(sort_label, "", request)
        text = judges.check_report(check_id)
        if not text:
            gr.Warning("This link's judge check does not exist.")
            return gr.skip(), gr.skip(), gr.skip(), *board(sort_label, "", request)
        return (text, gr.Accordion(open=True, visible=True), gr.Accordion(open=True),
                *board(sort_label, "", request))

    @toasts(1)
    def export_check(judge_c, url, model, key):
        return judges.export_check(judge_of(judge_c, url, model, key))

    @toasts(4)
    def import_check(judge_c, url, model, key, owner_tok, sort_label, upload, request: gr.Request):
        if not upload:
            gr.Warning("Choose the exported check first (its check.jsonl or its folder zipped).")
            return gr.skip(), gr.skip(), gr.skip(), gr.skip()
        path = upload if isinstance(upload, str) else getattr(upload, "name", "")
        message = judges.import_check(judge_of(judge_c, url, model, key), path, owner_tok, visitor(svc, request))
        gr.Info(esc(message))
        return check_text(judge_c, url, model, key, owner_tok, sort_label, request)

    inputs = [judge_choice, base_url_box, judge_model, api_key, page.owner, jc.sort]
    outputs = [jc.report, check_timer, jc.board, jc.export]
    jc.button.click(check_judge, inputs, outputs, api_visibility="private")
    if jc.export_button is not None:
        jc.export_button.click(export_check, inputs[:4], [jc.export_file], api_visibility="private")
        jc.import_button.click(import_check, [*inputs, jc.import_file], outputs, api_visibility="private")
    check_timer.tick(check_text, inputs, outputs, api_visibility="private", show_progress="hidden")
    judge_choice.change(check_text, inputs, outputs, api_visibility="private")
    for box in (base_url_box, judge_model, api_key):     # (on blur: a base URL is checked when it is used)
        box.blur(check_text, inputs, outputs, api_visibility="private")
    board_outputs = [jc.board, jc.export]
    jc.sort.change(board, [jc.sort, page.owner], board_outputs, api_visibility="private")
    jc.refresh.click(board, [jc.sort, page.owner], board_outputs, api_visibility="private")
    gr.on(None, on_load, None, [jc.report, jc.section, jc.board_section, jc.board, jc.export],  # on page load
          api_visibility="private")
