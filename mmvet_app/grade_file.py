"""The Open-a-grade-file view: an official grade JSON, a VLMEvalKit graded table or a graded lmms-eval log is
stored as a finished run and opened, without any judge call (against the Grade view's benchmark choice)."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol

import gradio as gr

from mmvet_app.common import Page, bench_of, file_path, toasts, visitor



class BenchmarkFields(Protocol):
    """The Grade view's benchmark fields (app.py hands the Grade view over), in `bench_of`'s order."""
    bench_inputs: list


@dataclass
class GradeFileView:
    grade_json_file: gr.File


def build_grade_file(page: Page) -> GradeFileView:
    """Lay out the (collapsed) accordion with its file drop."""
    with gr.Accordion("Open a grade file (no judge call)", open=False, elem_id="grade-file-section"):
        grade_json_file = gr.File(label="An official grade JSON (or the MM-Vet Space's zip), a VLMEvalKit graded "
                                        "table, a graded lmms-eval log", elem_id="grade-json-file", height=90,
                                  file_types=[".json", ".jsonl", ".xlsx", ".tsv", ".csv", ".zip"])
    return GradeFileView(grade_json_file)


def wire_grade_file(page: Page, gf: GradeFileView, g: BenchmarkFields) -> None:
    """An uploaded grade file becomes the open run (a bad file is a toast)."""
    svc = page.svc

    @toasts(1)
    def view_grade_file(f, bench_c, bench_f, hub, sub, owner_tok, request: gr.Request):
        path = file_path(f)
        if not path:
            return gr.skip()
        return svc.runs.open_grade_file(path, bench_of(bench_c, bench_f, hub, sub), owner_tok, visitor(svc, request))

    gf.grade_json_file.upload(view_grade_file, [gf.grade_json_file, *g.bench_inputs, page.owner], page.run_state,
                              api_visibility="private")
