"""What a visitor's form means, one facet of the service: the benchmark they chose (bundled, uploaded, from the
hub; a subset), the judge they chose (the host's, their own key and endpoint, the offline baseline), their results
file read in the parsing box, and `validate`: what the file holds and what grading it would cost."""
from __future__ import annotations

import threading
from dataclasses import replace
from pathlib import Path

from ..hosting.agent_judges import ANY as ANY_JUDGE, agent_judge_refusal
from ..inputs.archive import ArchiveError
from ..inputs.benchmark import Benchmark, BenchmarkError
from ..judging.estimate import estimate_cost
from ..judging.judge import BASELINE_NAME, DEFAULT_JUDGE_MODEL, JudgeSettings
from ..inputs.results import ResultsError, select_predictions, validate_results
from ..inputs.sources import load_benchmark
from ..inputs.subsets import load_subset
from .limits import HostLimits
from .records import (BENCH_HUB, BENCH_UPLOAD, JUDGE_BASELINE, JUDGE_HOST, JUDGE_OWN, MODE_BATCH, OPENAI_PUBLIC_URL,
                      SUBSETS, BenchmarkChoice, JudgeChoice, ServiceError, Validation, file_safe)
from .settings import ServiceSettings

#: Results files read by `validate` kept for `start` (Grade right after the check makes no second parse, so the
#: run and its ``?run=`` address come at once): how many, and up to which file size.
READ_CACHE_SIZE, READ_CACHE_MAX_BYTES = 16, 5_000_000


class Inputs:
    """The form's fields as what the service acts on; every refusal a `ServiceError`."""

    def __init__(self, settings: ServiceSettings, limits: HostLimits):
        self.settings, self.limits = settings, limits
        self._read_cache: dict[tuple, object] = {}    # (path, size, mtime, name) -> ResultsFile, oldest first
        self._read_lock = threading.Lock()
        #: the judges facet's (cached) model lists, set by `GradingService` once that facet exists
        self.model_list = None

    def resolve_benchmark(self, choice: BenchmarkChoice) -> tuple[Benchmark, str, Benchmark]:
        """(the benchmark or subset to grade, its spec, the full benchmark it comes from)."""
        try:
            if choice.kind == BENCH_UPLOAD:
                if not choice.file:
                    raise ServiceError("Upload the official mm-vet.zip or a metadata JSON, or pick the bundled "
                                       "MM-Vet v1.")
                self.limits.check_size(choice.file)
                full, spec = self.limits.gate.load_upload(choice.file), Path(choice.file).name
            elif choice.kind == BENCH_HUB:
                repo = (choice.hub_id or "").strip()
                if not repo:
                    raise ServiceError("Enter a hub dataset id such as whyu/mm-vet or lmms-lab/MMVet.")
                full, spec = self.limits.gate.load_hub(repo), f"hf:{repo}"
            else:
                full, spec = load_benchmark("mmvet-v1"), "mmvet-v1"
            if choice.subset not in SUBSETS:
                raise ServiceError(f"Unknown subset; pick one of: {', '.join(SUBSETS)}.")
            return load_subset(full, SUBSETS[choice.subset]), spec, full
        except (BenchmarkError, ArchiveError, FileNotFoundError) as e:
            raise ServiceError(f"Benchmark: {e}") from None

    def host_judge(self, model: str) -> JudgeSettings:
        """The server's judge settings with the model an agent picked (`agent_judges`: the host's rule), on the
        server's own endpoint; `ServiceError` when the host does not let agents use that model."""
        settings = self.settings.host_settings()
        model = (model or "").strip()
        if not model or model == settings.model:
            return settings
        if model in self.settings.server_judges:     # the host offers it on the page (MMVET_SERVER_JUDGES)
            return replace(settings, model=model)
        served = None
        if self.settings.agent_judges == (ANY_JUDGE,) and self.model_list is not None:
            served = self.model_list(settings, self.settings.host_key, True)
        refusal = agent_judge_refusal(model, self.settings.agent_judges, settings.model, served)
        if refusal:
            raise ServiceError(refusal)
        return replace(settings, model=model)

    def judge_for(self, choice: JudgeChoice) -> tuple[JudgeSettings, str | None, bool]:
        """(JudgeSettings, key, uses the host's key) for the judge the visitor picked. A visitor cannot point the
        host's key at another base URL: the host judge always uses the server's endpoint and model."""
        if choice.kind == JUDGE_HOST:
            if not self.settings.host_key:
                raise ServiceError("This server has no judge key of its own: enter your own API key, or use the "
                                   "baseline.")
            return self.host_judge(choice.host_model), self.settings.host_key, True
        if choice.kind == JUDGE_OWN:
            key = (choice.api_key or "").strip()
            url = (choice.base_url or "").strip() or None
            if not key and not url:
                raise ServiceError("Enter your API key (or the base URL of a local OpenAI-compatible server).")
            self.limits.check_visitor_url(url or OPENAI_PUBLIC_URL)
            return (JudgeSettings(model=(choice.model or "").strip() or DEFAULT_JUDGE_MODEL,
                                  base_url=url or OPENAI_PUBLIC_URL, deadline=self.settings.call_deadline),
                    key or None, False)
        if choice.kind != JUDGE_BASELINE:
            raise ServiceError(f"Unknown judge; pick one of: {JUDGE_HOST}, {JUDGE_OWN}, {JUDGE_BASELINE}.")
        return JudgeSettings(model=BASELINE_NAME, provider="baseline"), None, False

    def read(self, path: str, original_name: str | None = None):
        """The results file at `path` (an upload), read in the parsing box; the same unchanged file read again
        (validate, then Grade) comes from a small cache."""
        self.limits.check_size(path)
        st = Path(path).stat()
        name = original_name or Path(path).name
        key = (str(Path(path).resolve()), st.st_size, st.st_mtime_ns, name)
        with self._read_lock:
            if (hit := self._read_cache.pop(key, None)) is not None:
                self._read_cache[key] = hit          # most recent last
                return hit
        try:
            found = self.limits.gate.read_results(path, max_bytes=self.settings.max_upload_mb * 1024 * 1024,
                                                  original_name=name)
        except ResultsError as e:
            raise ServiceError(str(e)) from None
        if st.st_size <= READ_CACHE_MAX_BYTES:
            with self._read_lock:
                self._read_cache[key] = found
                while len(self._read_cache) > READ_CACHE_SIZE:
                    self._read_cache.pop(next(iter(self._read_cache)))
        return found

    def validate(self, path: str | None, bench: BenchmarkChoice, n_runs: int, judge: JudgeChoice, *,
                 original_name: str | None = None) -> Validation:
        """What the file holds against the chosen benchmark, and what grading it would cost. Every path here is
        an upload (or the bundled example): its folder is the server's, so the model is named from the file's
        content, else its `original_name` (default: the path's own file name), never from the folder."""
        if not path:
            return Validation("Drop a results file, or load the official example.", "")
        rf = self.read(path, original_name)
        name = file_safe(rf.model_name or Path(original_name or path).stem)
        try:
            benchmark, _, full = self.resolve_benchmark(bench)
        except ServiceError as e:
            return Validation(f"Results file read ({rf.format}, {len(rf.predictions)} predictions). {e}", "", name)
        rep = validate_results(rf, benchmark, full=full)
        preds = select_predictions(rf, benchmark, allow_missing=True) if not rep.wrong_benchmark else {}
        if not rep.ok:          # nothing can be graded as it is: no price for it
            return Validation(rep.summary(), "No estimate: the file is not ready to grade (see the report).", name)
        if n_runs is None or not 1 <= int(n_runs) <= self.settings.max_runs_per_job:
            return Validation(rep.summary(), f"Judge runs must be between 1 and {self.settings.max_runs_per_job}.",
                              name)
        if judge.kind == JUDGE_BASELINE:
            return Validation(rep.summary(), "Offline keyword baseline: no calls, no cost. NOT the MM-Vet metric "
                                             "(an LLM judge is).", name)
        if judge.kind == JUDGE_HOST:       # the server's judge, or the one an agent picked (MMVET_AGENT_JUDGES)
            model = self.host_judge(judge.host_model).model
        else:
            model = judge.model or DEFAULT_JUDGE_MODEL
        est = estimate_cost(benchmark, preds, int(n_runs), model).summary(model) if preds else ""
        if est and judge.mode == MODE_BATCH:
            est += " · Batch API chosen: half price, answers within 24 h"
        return Validation(rep.summary(), est, name)

