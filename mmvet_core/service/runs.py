"""Runs, one facet of the service: what an owner does to a run — start grading a results file, stop, resume,
override a grade, rename, delete, open a grade file as a finished run, compare runs and grade files. Each action
checks who is asking and what the host allows before it touches the store or a judge."""
from __future__ import annotations

import threading
from dataclasses import replace
from pathlib import Path

from ..hosting.agent_judges import ANY as ANY_JUDGE, agent_judge_refusal
from ..inputs.benchmark import Benchmark
from ..judging.budget import check_prediction_lengths
from ..scores.export import GradeFileError
from ..runs.jobs import JobManager, TooManyRuns
from ..judging.judge import JudgeSettings
from ..hosting.keeping import cap_predictions
from ..runs.provenance import VISITOR_CREDENTIAL, note_endpoint, note_visitor_credential
from ..inputs.results import ResultsError, select_predictions
from ..runs.lifecycle import benchmark_to_stored, create_run, load_run_view, run_fingerprint
from ..store import RunRecord, Store, StoreError
from .inputs import Inputs
from .judges import Judges
from .limits import HostLimits
from .reading import RunReading
from .records import (JUDGE_HOST, MODE_BATCH, MODE_LIVE, OPENAI_PUBLIC_URL, BenchmarkChoice, JudgeChoice,
                      Permissions, ServiceError, clean_model_name, file_safe)
from .settings import ServiceSettings


class Runs:
    """An owner's actions on runs; every refusal a `ServiceError` that leaves the run as it was."""

    def __init__(self, settings: ServiceSettings, store: Store, jobs: JobManager, inputs: Inputs,
                 limits: HostLimits, judges: Judges, reading: RunReading):
        self.settings, self.store, self.jobs, self.inputs = settings, store, jobs, inputs
        self.limits, self.judges, self.reading = limits, judges, reading
        self._start_lock = threading.Lock()

    def start(self, path: str | None, bench: BenchmarkChoice, n_runs: int, judge: JudgeChoice, *, owner: str,
              visitor: str, model_name: str = "", original_name: str | None = None) -> tuple[str, bool]:
        """Start grading; returns (run id, started). The same job started again by the same owner while it runs
        (a double click, a second tab) returns the running run with ``started=False``: nothing is paid twice."""
        if not path:
            raise ServiceError("Drop a results file first (or load the official example).")
        if not owner:
            raise ServiceError("Your session has no id yet; reload the page.")
        n_runs = 1 if n_runs is None else int(n_runs)
        if not 1 <= n_runs <= self.settings.max_runs_per_job:
            raise ServiceError(f"Judge runs must be between 1 and {self.settings.max_runs_per_job}.")
        rf = self.inputs.read(path, original_name)
        benchmark, spec, _ = self.inputs.resolve_benchmark(bench)
        try:
            preds = select_predictions(rf, benchmark)
        except ResultsError as e:
            raise ServiceError(str(e)) from None
        jset, key, host = self.inputs.judge_for(judge)
        mode = self._mode(judge.mode, jset)
        cap = self.settings.limits.max_prediction_chars
        if host:
            too_long = check_prediction_lengths(preds, cap)
            if too_long:
                raise ServiceError(too_long)
        jset = self.judges.check_judge_served(jset, key, host)
        # every run's predictions are capped (storage); the card keeps their original lengths
        preds, cut = cap_predictions(preds, cap)
        self.limits.check_storage(visitor, sum(len(p.encode("utf-8")) for p in preds.values()))
        # a name typed by the visitor is kept as typed (shown as text everywhere); one taken from the file is
        # made file-safe as the official file names need it ("org/model" in lmms-eval logs)
        name = clean_model_name(model_name) or file_safe(rf.model_name or Path(original_name or path).stem)
        fp = run_fingerprint(name, benchmark_to_stored(benchmark, spec), n_runs, jset, preds)
        with self._start_lock:     # a double click sends two starts at once: one run, one bill
            for run in self.store.list_runs(owner):
                if run.fingerprint == fp and self.jobs.is_running(run.id):
                    return run.id, False
            try:
                self.jobs.check_capacity(visitor)
            except TooManyRuns as e:
                raise ServiceError(str(e)) from None
            info = {**({"mode": mode} if mode == MODE_BATCH else {}), **({"predictions_cut": cut} if cut else {}),
                    # a visitor's own key: its answers are not the server's judge's, whatever the endpoint (no
                    # check of the server's stands behind them: `judgecheck.run_check`, `provenance`)
                    **({"credential": VISITOR_CREDENTIAL} if not host and jset.provider != "baseline" else {})}
            try:
                run_id = create_run(self.store, benchmark=benchmark, spec=spec, predictions=preds, n_runs=n_runs,
                                    settings=jset, model_name=name, results_format=rf.format, owner=owner,
                                    judge_info=info or None)
                self.limits.keeper.stored(run_id, visitor, host=host)
                # once for every process on the database: the same job started on two replicas at once
                claimed = self.store.claim_job(run_id, owner, fp)
            except StoreError as e:        # a write fault (a full disk): named, never a generic error
                raise ServiceError(f"The run could not be stored: {e}. Nothing was graded or paid.") from None
            if claimed != run_id:
                self.store.forget_run(run_id)
                return claimed, False
            self._launch(run_id, benchmark, jset, key, host, visitor, mode)
        return run_id, True

    def _mode(self, mode: str, jset: JudgeSettings) -> str:
        if mode != MODE_BATCH:
            return MODE_LIVE
        if jset.provider != "openai":
            raise ServiceError("The Batch API works with OpenAI-compatible endpoints only: pick your own key or "
                               "the server's OpenAI judge, or grade live.")
        return MODE_BATCH

    def _launch(self, run_id: str, benchmark: Benchmark, jset: JudgeSettings, key: str | None, host: bool,
                visitor: str, mode: str) -> None:
        budget = self.limits.budget.hook(visitor) if host else None
        try:
            self.jobs.start(run_id, benchmark, self.limits.make_judge(jset, key, host),
                            concurrency=self.settings.run_concurrency, budget=budget, visitor=visitor,
                            batch=mode == MODE_BATCH, batch_poll=self.settings.batch_poll, host=host)
        except TooManyRuns as e:      # a slot went to someone else since the check
            try:
                if self.store.get_run(run_id).status in ("created", "running"):    # (its start's claim)
                    self.store.set_status(run_id, "stopped", str(e))
            except StoreError:
                pass
            raise ServiceError(str(e)) from None
        self.jobs.on_end(run_id, self.reading.remember_total_of)

    def owned(self, run_id: str, owner: str) -> RunRecord:
        """The run, when `owner` owns it; else `ServiceError`."""
        run = self.store.get_run(run_id or "") if run_id else None
        if run is None:
            raise ServiceError("No run is selected (or this run id does not exist).")
        if not owner or run.owner != owner:
            raise ServiceError("This is a read-only shared view: only the run's owner can change it.")
        return run

    def permissions(self, run_id: str, owner: str) -> Permissions:
        run = self.store.get_run(run_id or "") if run_id else None
        if run is None:
            return Permissions()
        mine = bool(owner) and run.owner == owner
        running = self.jobs.is_running(run.id)
        imported = run.judge.get("provider") == "imported"
        return Permissions(owner=mine, running=running, can_stop=mine and running,
                           can_resume=mine and not running and not imported and run.status != "done",
                           can_override=mine and not running)

    def stop(self, run_id: str, owner: str) -> str:
        self.owned(run_id, owner)
        if not self.jobs.stop(run_id):
            return "This run is not running."
        return "Stopping after the calls in flight (they are paid for and will be stored)."

    def resume(self, run_id: str, owner: str, visitor: str, judge: JudgeChoice) -> str:
        run = self.owned(run_id, owner)
        if self.jobs.is_running(run_id):
            return "This run is already grading."
        if run.judge.get("provider") == "imported":     # a grade file's view: no judge, no predictions to grade
            raise ServiceError("These grades were imported from a grade file: there is nothing to resume. To "
                               "grade the answers yourself, drop the results file and click Grade.")
        view = load_run_view(self.store, run_id)
        stored_dict = {k: v for k, v in run.judge.items() if k in JudgeSettings.__dataclass_fields__}
        stored = JudgeSettings(**stored_dict)
        settings = self.settings
        if stored.provider == "baseline":
            jset, key, host = stored, None, False
        elif stored.base_url == settings.host_base_url and settings.host_key and judge.kind == JUDGE_HOST \
                and (stored.model == settings.judge_model
                     or not agent_judge_refusal(stored.model, settings.agent_judges, settings.judge_model,
                                                self.judges.model_list(settings.host_settings(), settings.host_key,
                                                                       True)
                                                if settings.agent_judges == (ANY_JUDGE,) else None)):
            jset, key, host = stored, settings.host_key, True
        else:
            # The visitor's key goes only to the endpoint they give now, or to this run's own (visitor)
            # endpoint; never to the host's endpoint, whatever endpoint the run started on.
            key = (judge.api_key or "").strip() or None
            own_url = (judge.base_url or "").strip() or None
            if not own_url and stored.base_url and stored.base_url != settings.host_base_url:
                own_url = stored.base_url
            if not key and not own_url:
                raise ServiceError("Resuming needs the API key of this run's judge: pick “My own key / endpoint” "
                                   "and enter it.")
            self.limits.check_visitor_url(own_url or OPENAI_PUBLIC_URL)
            jset, host = replace(stored, provider="openai", api_version=None,
                                 base_url=own_url or OPENAI_PUBLIC_URL, deadline=settings.call_deadline), False
        mode = MODE_BATCH if run.judge.get("mode") == MODE_BATCH and jset.provider == "openai" else MODE_LIVE
        self.judges.check_judge_served(jset, key, host)
        self.limits.check_storage(None)
        try:
            if host:
                self.limits.keeper.stored(run_id, visitor, host=True)
            note_endpoint(self.store, run_id, jset.base_url)     # provenance: every endpoint that graded it
            if not host and jset.provider != "baseline":          # and whose key: a visitor's, from now on
                note_visitor_credential(self.store, run_id)
            # once for every process on the database: Resume clicked on two replicas at once grades it once
            claimed = self.store.claim_start(run_id, "resuming")
        except StoreError as e:
            raise ServiceError(f"The run could not be resumed: {e}.") from None
        if not claimed:
            return "This run is already grading."
        self._launch(run_id, view.benchmark, jset, key, host, visitor, mode)
        return "Resumed: only what is missing is graded (stored grades are not paid again)."

    def override(self, run_id: str, owner: str, sample_id: str, score, reason: str) -> str:
        """Replace a sample's score by a human one (every run); the judge's grades stay stored beside it."""
        run = self.owned(run_id, owner)
        if not sample_id:
            raise ServiceError("Open a sample first (click its row).")
        if sample_id not in run.benchmark["samples"]:        # (not the whole run's grades and scores)
            raise ServiceError(f"No sample {sample_id!r} in this run.")
        if self.jobs.is_running(run_id):
            raise ServiceError("Wait until the run ends (or stop it) before overriding a grade.")
        try:
            value = float(score)
        except (TypeError, ValueError):
            raise ServiceError("An override score must be a number between 0 and 1.") from None
        if not 0.0 <= value <= 1.0:
            raise ServiceError("An override score must be between 0 and 1.")
        if not (reason or "").strip():
            raise ServiceError("Give a short reason for the override.")
        self.store.set_override(run_id, sample_id, value, reason.strip()[:500])
        return f"Override saved: {sample_id} = {value:g}."

    def clear_override(self, run_id: str, owner: str, sample_id: str) -> str:
        self.owned(run_id, owner)
        if not sample_id:
            raise ServiceError("Open a sample first (click its row).")
        self.store.clear_override(run_id, sample_id)
        return f"Override cleared: {sample_id} is graded by the judge again."

    def rename(self, run_id: str, owner: str, name: str) -> str:
        self.owned(run_id, owner)
        clean = clean_model_name(name)
        if not clean:
            raise ServiceError("A model name cannot be empty.")
        self.store.rename_run(run_id, clean)
        return f"Model name set to {clean}."

    def delete(self, run_id: str, owner: str) -> str:
        run = self.owned(run_id, owner)
        if self.jobs.is_running(run_id):
            raise ServiceError("Stop the run before deleting it.")
        self.store.forget_run(run_id)
        self.reading.forget_files(run_id)
        return f"Deleted the run of {run.model_name}."

    def open_grade_file(self, path: str, bench: BenchmarkChoice, owner: str, visitor: str | None = None) -> str:
        """Store a grade file (official grade JSON, VLMEvalKit graded table, graded lmms-eval log) as a finished
        run of `owner` (stored for `visitor`'s quota), with no judge call. The file is row- and cell-counted,
        then parsed in the bounded worker (never in this process); its predictions are capped as a run's."""
        from ..runs.lifecycle import create_grade_view

        self.limits.check_size(path)
        self.limits.check_storage(visitor)
        benchmark, spec, _ = self.inputs.resolve_benchmark(bench)
        try:       # rows and cells counted before any reader runs, then read in the bounded worker
            grades = self.limits.gate.read_grade_file(path, benchmark,
                                                      max_bytes=self.settings.max_upload_mb * 1024 * 1024)
        except (GradeFileError, ResultsError) as e:
            raise ServiceError(f"Grade file: {e}") from None
        grades.predictions, cut = cap_predictions(grades.predictions, self.settings.limits.max_prediction_chars)
        self.limits.check_storage(visitor, sum(len(p.encode("utf-8")) for p in grades.predictions.values()))
        try:
            run_id = create_grade_view(self.store, grades, benchmark=benchmark, spec=spec, owner=owner,
                                       judge_info={"predictions_cut": cut} if cut else None)
            self.limits.keeper.stored(run_id, visitor)
        except StoreError as e:
            raise ServiceError(f"The grade file could not be stored: {e}.") from None
        self.reading.remember_total_of(run_id)
        return run_id

    def compare(self, owner: str, run_ids: list[str], files: list[str], out_dir: Path):
        """The app's Compare (`gradesets.compare_for_app`), every uploaded grade file parsed in the bounded worker.
        Returns (comparison, written files)."""
        from ..scores.compare import CompareError
        from ..runs.gradesets import compare_for_app

        for p in files:
            self.limits.check_size(p)
        try:
            return compare_for_app(self.store, owner, run_ids, files, out_dir,
                                   read_file=self.limits.gate.read_grade_set)
        except (CompareError, GradeFileError, ResultsError, OSError) as e:
            raise ServiceError(str(e)) from None

