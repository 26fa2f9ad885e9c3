"""The My runs view: the visitor's runs (kept by the owner token in this browser), reopen one with a click; the
open run's owner tools (rename, delete: laid out in the Grade view's run panel) act on this list."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol

import gradio as gr

from mmvet_core.service import RUN_LIST_COLUMNS

from mmvet_app.common import Page, esc, runs_rows, toasts
from mmvet_app.widgets import card_html



class RunPanel(Protocol):
    """What this view acts on in the Grade view's run panel (app.py hands the Grade view over): the owner tools
    laid out there, and what a rename or a delete changes."""
    rename_box: gr.Textbox
    rename_btn: gr.Button
    delete_btn: gr.Button
    run_card: gr.HTML
    downloads: gr.File
    run_panel: gr.Column
    empty_note: gr.Markdown
    total: gr.Textbox


class SamplesSection(Protocol):
    """The samples view's section, closed with the run panel when the open run is deleted."""
    section: gr.Column


@dataclass
class MyRunsView:
    runs_table: gr.Dataframe


def build_my_runs(page: Page) -> MyRunsView:
    """Lay out the (open) My runs accordion."""
    with gr.Accordion("My runs", open=True, elem_id="my-runs"):
        gr.Markdown("Runs you start or open here are listed with their scores; click one to reopen it. "
                    "This list lives in this browser (no account needed).", elem_id="my-runs-note")
        runs_table = gr.Dataframe(headers=RUN_LIST_COLUMNS, interactive=False, type="array",
                                  elem_id="my-runs-table", max_height=300)
    return MyRunsView(runs_table)


def wire_my_runs(page: Page, my: MyRunsView, g: RunPanel, s: SamplesSection) -> None:
    """Register: a click on a row opens that run; rename and delete the open run (owner tools); a deleted run
    closes the run panel and the samples section."""
    svc, run_state, owner = page.svc, page.run_state, page.owner

    def pick_run(owner_tok, evt: gr.SelectData):
        row = evt.row_value or []
        return str(row[-1]) if row else gr.skip()

    my.runs_table.select(pick_run, [owner], run_state, api_visibility="private")

    @toasts(3)
    def rename(run_id, name, owner_tok):
        gr.Info(esc(svc.runs.rename(run_id, owner_tok, name)))
        view = svc.reading.view(run_id)
        files = svc.reading.downloads(view) if view.n_graded and not svc.jobs.is_running(run_id) else None
        return (card_html(svc.reading.card(view)), runs_rows(svc, owner_tok),
                gr.File(value=files, visible=bool(files)) if files else gr.skip())

    g.rename_btn.click(rename, [run_state, g.rename_box, owner], [g.run_card, my.runs_table, g.downloads],
                       api_visibility="private")

    @toasts(2)
    def delete(run_id, owner_tok):
        gr.Info(esc(svc.runs.delete(run_id, owner_tok)))
        return "", runs_rows(svc, owner_tok)

    g.delete_btn.click(delete, [run_state, owner], [run_state, my.runs_table], api_visibility="private",
                       js="(run, tok) => confirm('Delete this run and its grades? This cannot be undone.') "
                          "? [run, tok] : [null, tok]")

    def closed(run_id):
        """No run open (deleted): back to the empty state."""
        if run_id:
            return tuple(gr.skip() for _ in range(4))
        return gr.Column(visible=False), gr.Column(visible=False), gr.Markdown(visible=True), ""

    run_state.change(closed, run_state, [g.run_panel, s.section, g.empty_note, g.total],
                     api_visibility="private", show_progress="hidden")
