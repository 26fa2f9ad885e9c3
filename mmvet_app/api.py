"""The named endpoints scripts call (gradio_client): the same service calls as the page; an error is an error
answer (a page's mistakes are toasts instead). Register them first in the Blocks, so they keep their plain names
(the page's events are private)."""
from __future__ import annotations

import gradio as gr
from gradio.data_classes import FileData

from mmvet_core.service import (BENCH_BUNDLED, JUDGE_BASELINE, JUDGE_HOST, MODE_LIVE, RUN_LIST_COLUMNS,
                                GradingService, JudgeChoice)

from mmvet_app.common import api_errors, base_url, bench_of, file_path, orig_name, visitor


def register_api(svc: GradingService) -> None:
    """Register the named `gr.api` endpoints (validate, grade, stop, resume, override, clear_override,
    view_grades, status, sample, my_runs, rename, delete, judge_board, judge_check_report) in the Blocks being
    built."""
    bench = bench_of

    @api_errors
    def validate(results: FileData, bench_c: str = BENCH_BUNDLED, bench_f: FileData | None = None, hub: str = "",
                 sub: str = "All samples", n_runs: int = 1, judge_c: str = JUDGE_BASELINE, model: str = "",
                 mode: str = MODE_LIVE) -> dict:
        """What a results file holds against the benchmark, and what grading it would cost."""
        v = svc.inputs.validate(file_path(results), bench(bench_c, bench_f, hub, sub), int(n_runs),
                                JudgeChoice(judge_c, model=model, mode=mode), original_name=orig_name(results))
        return {"report": v.report, "estimate": v.estimate, "model_name": v.model_name}

    @api_errors
    def grade(results: FileData, bench_c: str = BENCH_BUNDLED, bench_f: FileData | None = None, hub: str = "",
              sub: str = "All samples", n_runs: int = 1, judge_c: str = JUDGE_BASELINE, url: str = "",
              model: str = "", key: str = "", owner_tok: str = "", model_name: str = "", mode: str = MODE_LIVE,
              request: gr.Request = None) -> dict:
        """Start grading (in the background); poll `status`. The same job started again while it runs returns
        the running run (``started: false``)."""
        run_id, started = svc.runs.start(file_path(results), bench(bench_c, bench_f, hub, sub), int(n_runs),
                                         JudgeChoice(judge_c, url, model, key, mode), owner=owner_tok,
                                         visitor=visitor(svc, request), model_name=model_name,
                                         original_name=orig_name(results))
        return {"run_id": run_id, "share_url": svc.reading.share_url(run_id, base_url(request)), "started": started}

    @api_errors
    def stop(run_id: str, owner_tok: str) -> str:
        """Stop a running run of yours (answers already paid for are stored)."""
        return svc.runs.stop(run_id, owner_tok)

    @api_errors
    def resume(run_id: str, judge_c: str = JUDGE_HOST, url: str = "", model: str = "", key: str = "",
               owner_tok: str = "", request: gr.Request = None) -> str:
        """Grade what is missing of a run of yours."""
        return svc.runs.resume(run_id, owner_tok, visitor(svc, request), JudgeChoice(judge_c, url, model, key))

    @api_errors
    def override(run_id: str, sample_id: str, score: float, reason: str, owner_tok: str) -> dict:
        """Replace a sample's score by yours (with a reason); returns the run's status."""
        svc.runs.override(run_id, owner_tok, sample_id, score, reason)
        return svc.reading.status(run_id)

    @api_errors
    def clear_override(run_id: str, sample_id: str, owner_tok: str) -> dict:
        svc.runs.clear_override(run_id, owner_tok, sample_id)
        return svc.reading.status(run_id)

    @api_errors
    def view_grades(f: FileData, bench_c: str = BENCH_BUNDLED, bench_f: FileData | None = None, hub: str = "",
                    sub: str = "All samples", owner_tok: str = "", request: gr.Request = None) -> dict:
        """Store a grade file as a finished run (no judge call)."""
        run_id = svc.runs.open_grade_file(file_path(f), bench(bench_c, bench_f, hub, sub), owner_tok,
                                          visitor(svc, request))
        return {"run_id": run_id, "share_url": svc.reading.share_url(run_id, base_url(request))}

    @api_errors
    def status(run_id: str) -> dict:
        """Progress, scores and run card of a run (what a script polls after grade)."""
        return svc.reading.status(run_id)

    @api_errors
    def sample(run_id: str, sample_id: str) -> dict:
        """Everything about one sample of a run: texts, every judge attempt, flags, override."""
        return svc.reading.sample(run_id, sample_id)

    @api_errors
    def my_runs(owner_tok: str) -> list:
        """Your runs, newest first."""
        return [dict(zip(RUN_LIST_COLUMNS, r.row())) for r in svc.reading.runs_of(owner_tok)]

    @api_errors
    def rename(run_id: str, name: str, owner_tok: str) -> str:
        return svc.runs.rename(run_id, owner_tok, name)

    @api_errors
    def delete(run_id: str, owner_tok: str) -> str:
        return svc.runs.delete(run_id, owner_tok)

    @api_errors
    def judge_board(sort: str = "delta_bar", owner_tok: str = "") -> list:
        """The successor board: every judge this server checked with its own key (Δ̄, total shift with its 95 %
        interval, Kendall τ, verdict, estimates available, shutdown date, reference sets, check id, verified),
        sorted by `sort` (delta_bar, abs_shift, tau, shutdown or checked); then the checks the owner of
        `owner_tok` made with their own key (theirs alone: unranked, ``verified`` false)."""
        return [r.to_dict() for r in svc.judges.judge_board(sort, owner_tok or "")]

    @api_errors
    def judge_check_report(check_id: str, owner_tok: str = "") -> str:
        """The full report of one stored judge check (a board row's check_id); "" when there is none (a
        visitor's own check: for its owner's token only)."""
        return svc.judges.check_report(check_id, owner_tok or "")

    for fn in (validate, grade, stop, resume, override, clear_override, view_grades, status, sample, my_runs,
               rename, delete, judge_board, judge_check_report):
        gr.api(fn, api_name=fn.__name__)
