"""The Compare view: two or more of the visitor's runs or uploaded grade files, against the first (thin: the
rules are `service.runs.Runs.compare`, `mmvet_core.runs.gradesets.compare_for_app` and `mmvet_core.scores.compare`)."""
from __future__ import annotations

import secrets

import gradio as gr

from mmvet_core.scores.charts import make_compare_figures
from mmvet_core.scores.compare import (DISAGREEMENT_COLUMNS, PAIR_COLUMNS, SUMMARY_COLUMNS, disagreement_rows,
                                       format_report, pair_rows, summary_rows)
from mmvet_core.runs.gradesets import run_choices
from mmvet_core.service import ServiceError

from mmvet_app.common import Page, esc, file_path


def build_compare(page: Page) -> None:
    """Lay out the (collapsed) Compare accordion and register its handlers (its run menu follows the owner
    token; the `compare` event is also a named API endpoint)."""
    svc, owner = page.svc, page.owner
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

    owner.change(my_runs, owner, cmp_runs, api_visibility="private", queue=False, show_progress="hidden")
    cmp_refresh.click(my_runs, owner, cmp_runs, api_visibility="private")

    def compare(run_ids, files, owner_tok):
        paths = [p for p in (file_path(f) for f in (files or [])) if p]
        out = svc.exports_dir / f"compare-{secrets.token_urlsafe(12)}"
        try:       # every uploaded grade file is read in the bounded worker, never in this process
            cmp, written = svc.runs.compare(owner_tok, list(run_ids or []), paths, out)
        except ServiceError as e:
            gr.Warning(esc(e))
            return (gr.skip(),) * 8
        scatter, radar = make_compare_figures(cmp)
        return (format_report(cmp, integrations=False), summary_rows(cmp), scatter, radar, pair_rows(cmp),
                disagreement_rows(cmp), [str(p) for p in written.values()], gr.skip())

    cmp_btn.click(compare, [cmp_runs, cmp_files, owner],
                  [cmp_report, cmp_summary, cmp_scatter, cmp_radar, cmp_pair, cmp_worst, cmp_downloads, cmp_runs],
                  api_name="compare")
