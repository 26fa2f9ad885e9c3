"""The Samples view: the open run's samples table and its filters, one sample's detail (question, truth, answer,
every judge attempt, image) and the owner's override of its score."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Callable, Protocol

import gradio as gr

from mmvet_core.runs import views
from mmvet_core.service import ServiceError

from mmvet_app.common import Page, esc, toasts
from mmvet_app.widgets import count_text, sample_filter



class OverlayField(Protocol):
    """What this view reads of the Grade view (app.py hands it over): the radar overlays chosen."""
    overlays: gr.Dropdown


class OpenRunDisplay(Protocol):
    """How this view redraws the open run after an override (the Grade view's `RunDisplay`): `refresh(...)`
    returns the values of `live_outputs` first."""
    refresh: Callable[..., tuple]
    live_outputs: list


@dataclass
class SamplesView:
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
    o_score: gr.Number
    o_reason: gr.Textbox
    o_btn: gr.Button
    o_clear: gr.Button

    @property
    def filters(self) -> list:
        """The filter fields, in `sample_filter`'s order."""
        return [self.f_cap, self.f_min, self.f_max, self.f_flag, self.f_sort]

    @property
    def detail_outputs(self) -> list:
        return [self.d_id, self.d_image, self.d_question, self.d_truth, self.d_image_note, self.d_pred, self.d_flags,
                self.d_attempts, self.o_btn, self.o_clear]


def build_samples(page: Page) -> SamplesView:
    """Lay out the (hidden until a run opens) samples section."""
    with gr.Column(visible=False, elem_id="samples-section") as section:
        gr.Markdown("## Samples\nClick a row to inspect it.")
        with gr.Row():
            f_cap = gr.Dropdown(["all"], value="all", label="Capability or integration",
                                elem_id="filter-capability")
            # no minimum/maximum: Gradio refuses an out-of-range value with an error badge; `sample_filter` clamps
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
    return SamplesView(section, f_cap, f_min, f_max, f_flag, f_sort, sample_count, samples, d_id, d_image,
                       d_question, d_truth, d_image_note, d_pred, d_flags, d_attempts, override_row, o_score,
                       o_reason, o_btn, o_clear)


def wire_samples(page: Page, s: SamplesView, g: OverlayField, display: OpenRunDisplay) -> None:
    """Register the filters, the row selection (detail) and the override; an override refreshes the Grade view's
    live outputs through `display`."""
    svc, run_state, owner = page.svc, page.run_state, page.owner

    def filter_rows(run_id, cap_f, lo, hi, flagged, order):
        view = svc.reading.view(run_id) if run_id else None
        if view is None:
            return gr.skip(), gr.skip()
        rows = views.sample_rows(view, sample_filter(cap_f, lo, hi, flagged, order))
        return rows, count_text(view, rows)

    for comp in s.filters:
        comp.change(filter_rows, [run_state, *s.filters], [s.samples, s.sample_count], api_visibility="private")

    # ---- one sample ----
    def detail(run_id, sample_id, owner_tok):
        view = svc.reading.view(run_id, evidence_for=sample_id) if run_id else None
        if view is None or sample_id not in view.benchmark.samples:
            raise ServiceError(f"No sample {sample_id!r} in this run.")
        d = views.sample_detail(view, sample_id)
        flags = " ".join(d["flags"]) or "none"
        if d["override"]:
            flags += f" — overridden by a person: {d['override']['score']} ({d['override']['reason']})"
        image = views.sample_image(view, sample_id)     # decoded and re-encoded: never the uploaded bytes
        note = "" if image is not None else views.image_note(view, sample_id)
        can = svc.runs.permissions(run_id, owner_tok).can_override
        return (sample_id, gr.Image(value=image, visible=image is not None), d["question"],
                d["ground_truth"], note or "", d["prediction"], flags, views.attempt_rows(d),
                gr.Button(interactive=can), gr.Button(interactive=can))

    detail_outputs = s.detail_outputs
    live_outputs, refresh = display.live_outputs, display.refresh

    @toasts(len(detail_outputs))
    def select_row(run_id, owner_tok, evt: gr.SelectData):
        row = evt.row_value or []
        if not row:
            return tuple(gr.skip() for _ in detail_outputs)
        return detail(run_id, str(row[0]), owner_tok)

    s.samples.select(select_row, [run_state, owner], detail_outputs, api_visibility="private")

    @toasts(len(live_outputs) + len(detail_outputs))
    def override(run_id, sample_id, score, reason, owner_tok, overlay_sel, cap_f, lo, hi, flagged, order):
        message = svc.runs.override(run_id, owner_tok, sample_id, score, reason)
        gr.Info(esc(message))
        shown = refresh(run_id, overlay_sel, cap_f, lo, hi, flagged, order, owner_tok, sample_id)
        return shown[:len(live_outputs)] + detail(run_id, sample_id, owner_tok)

    @toasts(len(live_outputs) + len(detail_outputs))
    def clear_override(run_id, sample_id, owner_tok, overlay_sel, cap_f, lo, hi, flagged, order):
        message = svc.runs.clear_override(run_id, owner_tok, sample_id)
        gr.Info(esc(message))
        shown = refresh(run_id, overlay_sel, cap_f, lo, hi, flagged, order, owner_tok, sample_id)
        return shown[:len(live_outputs)] + detail(run_id, sample_id, owner_tok)

    filters = [g.overlays, *s.filters]
    # a click made while the previous one is still answered (a warning shows before its event ends; a busy server)
    # runs after it with what the fields hold then; Gradio's default ("once") would drop it without a word
    s.o_btn.click(override, [run_state, s.d_id, s.o_score, s.o_reason, owner] + filters,
                  live_outputs + detail_outputs, api_visibility="private", trigger_mode="always_last")
    s.o_clear.click(clear_override, [run_state, s.d_id, owner] + filters, live_outputs + detail_outputs,
                    api_visibility="private", trigger_mode="always_last")
