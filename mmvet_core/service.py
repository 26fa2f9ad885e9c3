"""The app's rules, without the UI: who owns a run, what a start, stop, resume or override may do, which key goes
to which endpoint, when the host's budget applies. The `ui/` view modules map each event to one call here and show a
`ServiceError` as a toast (its message is for the user; the UI escapes it).

Everything a visitor gives (files, URLs, keys, names, scores) is checked here before it touches the store or a
judge. The named API endpoints of the app call the same methods, so a script gets the same rules as the page.
"""
from __future__ import annotations

import json
import logging
import os
import re
import shutil
import threading
import time
import zipfile
from dataclasses import dataclass, field, replace
from pathlib import Path
from urllib.parse import urlsplit

from . import __version__
from .archive import ArchiveError
from .benchmark import Benchmark, BenchmarkError
from .agent_judges import ANY as ANY_JUDGE, agent_judge_refusal, parse_agent_judges
from .budget import (BudgetLimits, HostBudget, check_prediction_lengths, client_address, private_salt,
                     visitor_id)
from .endpoints import LIST_TIMEOUT, JudgeRow, ModelList, judge_facts, judge_rows, list_judge_models, preflight, \
    retirement_note, today_utc
from .estimate import estimate_cost
from .export import GradeFileError
from .graded import OFFICIAL_JUDGES
from .hosting import HostingLimits, UploadGate
from .jobs import JobManager, TooManyRuns
from .requestlimit import RequestLimits
from .clients import SessionLimits
from .keeping import RunKeeper, StorageLimits, StorageRefused, cap_predictions, cut_note
from .judge import BASELINE_NAME, DEFAULT_JUDGE_MODEL, JudgeSettings, make_judge
from .results import ResultsError, select_predictions, validate_results
from .runs import RunView, create_run, export_run, load_run_view, run_fingerprint, \
    benchmark_to_stored
from .sources import load_benchmark, load_subset
from .store import RunRecord, Store, StoreError
from .ratelimit import account_key
from .transport import BlockedDestination, EndpointPolicy, check_endpoint_url

log = logging.getLogger("mmvet_grader")

JUDGE_BASELINE = "Offline baseline (not MM-Vet)"
JUDGE_HOST = "Server's judge"
JUDGE_OWN = "My own key / endpoint"
BENCH_BUNDLED = "MM-Vet v1 (bundled, 218 samples)"
BENCH_UPLOAD = "Upload: official zip or metadata JSON"
BENCH_HUB = "Hugging Face hub dataset"
SUBSETS = {"All samples": None, "Bard set (168)": "bard"}
#: Where a visitor's key goes when they leave the base URL empty ("empty = OpenAI"). Explicit, so that the
#: SDK's OPENAI_BASE_URL fallback (the host's endpoint) never receives a visitor's key.
OPENAI_PUBLIC_URL = "https://api.openai.com/v1"
MODE_LIVE = "live"
MODE_BATCH = "batch"
#: How old (seconds) the answer of `status` of a running run may be when it is polled often (progress and scores
#: always come from one snapshot of the run).
STATUS_TTL = 2.0
#: How many runs' `status` answers are kept (each is a few KB).
FINISHED_CACHE_SIZE = 256
#: Results files read by `validate` kept for `start` (Grade right after the check makes no second parse, so the
#: run and its ``?run=`` address come at once): how many, and up to which file size.
READ_CACHE_SIZE, READ_CACHE_MAX_BYTES = 16, 5_000_000
MAX_NAME = 100
#: How many runs' views pages share (`GradingService.view`; a v1 run's view is well under a megabyte).
VIEW_CACHE_SIZE = 32


class ServiceError(Exception):
    """A visitor's mistake or a refusal: the message says what happened and what to do (shown as a toast)."""


class JudgeUnavailable(ServiceError):
    """The chosen judge is the official one and its endpoint no longer serves it: nothing was started. The message
    says why and lists the judges the endpoint serves (`models`); the page shows it in place. `message_for` words
    it for another caller (an agent's tools name tools, not the page's sections)."""

    def __init__(self, message: str, models: ModelList, render=None):
        super().__init__(message)
        self.models = models
        self._render = render

    def message_for(self, *, check_hint: str, view_hint: str) -> str:
        return self._render(check_hint=check_hint, view_hint=view_hint) if self._render else str(self)


#: Where the app's retired-judge message points (the app's own sections, not CLI commands).
APP_CHECK_HINT = "“Check this judge first”, under Grade"
APP_VIEW_HINT = "“Open a grade file (no judge call)”"
#: How the message of a check that cannot start (the official judge is shut down) says what to do, on the page.
PAGE_CHECK_HINTS = {"check_hint": "pick one in the judge field and click Check this judge",
                    "view_hint": "Open a grade file"}
#: Seconds an endpoint's model list is reused (the judge field and every start read it).
MODEL_LIST_TTL = 60.0


# --- configuration (read once, at the edge) ---------------------------------------------------------------
def _default_data_dir() -> Path:
    data = Path("/data")
    if data.is_dir() and os.access(data, os.W_OK):
        return data / "mmvet-grader"
    return Path("data")


def _int_env(env, name: str, default: int) -> int:
    try:
        return int(env.get(name, default))
    except ValueError:
        return default


@dataclass
class ServiceSettings:
    data_dir: Path = field(default_factory=_default_data_dir)
    host_key: str | None = None
    host_provider: str = "openai"
    host_base_url: str | None = None
    host_api_version: str | None = None
    judge_model: str = DEFAULT_JUDGE_MODEL
    max_upload_mb: int = 50
    run_concurrency: int = 256             # ceiling per run: the account's limiter finds the judge's pace
    max_active_runs: int = 64
    max_runs_per_visitor: int = 2          # running at once, per visitor (0: no limit)
    max_runs_per_job: int = 5
    limits: BudgetLimits = field(default_factory=BudgetLimits)
    public_url: str | None = None
    hosting: HostingLimits = field(default_factory=HostingLimits)   # uploads, parsing, folders (MMVET_* variables)
    storage: StorageLimits = field(default_factory=StorageLimits)   # quotas, expiry, free-disk floor (keeping.py)
    requests: RequestLimits = field(default_factory=RequestLimits)  # API requests per client (requestlimit.py)
    sessions: SessionLimits = field(default_factory=SessionLimits)  # gone clients, kept sessions (clients.py)
    trusted_proxy_hops: int = 0            # proxies in front of the app that append to X-Forwarded-For
    allow_private_endpoints: bool = False  # let visitors' endpoints be loopback / private addresses
    call_deadline: float = 120.0           # seconds per judge call, retries included
    batch_poll: float = 30.0               # seconds between two looks at a Batch API job
    host_secret: str | None = None         # MMVET_HOST_SECRET: unlocks the host's leaderboard controls (hide)
    publish_per_hour: int = 10             # leaderboard publishes (and republishes) per visitor and hour
    mcp_server: bool = True                # MMVET_MCP=0 turns the MCP server (agents' tools, ui/mcp.py) off
    agent_judges: tuple[str, ...] = ()     # MMVET_AGENT_JUDGES: server judges an agent may pick (agent_judges.py)

    @classmethod
    def from_env(cls, env=None) -> "ServiceSettings":
        env = os.environ if env is None else env
        azure = bool(env.get("AZURE_OPENAI_API_KEY") and env.get("AZURE_OPENAI_ENDPOINT"))
        space_host = (env.get("SPACE_HOST") or "").split(",")[0].strip()
        return cls(
            data_dir=Path(env["MMVET_DATA_DIR"]) if env.get("MMVET_DATA_DIR") else _default_data_dir(),
            host_key=env.get("AZURE_OPENAI_API_KEY") if azure else (env.get("OPENAI_API_KEY") or None),
            host_provider="azure" if azure else "openai",
            host_base_url=env.get("AZURE_OPENAI_ENDPOINT") if azure else (env.get("OPENAI_BASE_URL") or None),
            host_api_version=env.get("OPENAI_API_VERSION"),
            judge_model=env.get("MMVET_JUDGE_MODEL", DEFAULT_JUDGE_MODEL),
            max_upload_mb=_int_env(env, "MMVET_MAX_UPLOAD_MB", 50),
            run_concurrency=_int_env(env, "MMVET_RUN_CONCURRENCY", 256),
            max_active_runs=_int_env(env, "MMVET_MAX_ACTIVE_RUNS", 64),
            max_runs_per_visitor=_int_env(env, "MMVET_MAX_RUNS_PER_VISITOR", 2),
            limits=BudgetLimits(per_visitor_daily=_int_env(env, "MMVET_BUDGET_PER_VISITOR", 2000),
                                global_daily=_int_env(env, "MMVET_BUDGET_GLOBAL", 20000),
                                tokens_per_visitor_daily=_int_env(env, "MMVET_TOKENS_PER_VISITOR", 1_500_000),
                                tokens_global_daily=_int_env(env, "MMVET_TOKENS_GLOBAL", 15_000_000),
                                max_prediction_chars=_int_env(env, "MMVET_MAX_PREDICTION_CHARS", 8000)),
            public_url=env.get("MMVET_PUBLIC_URL") or (f"https://{space_host}" if space_host else None),
            hosting=HostingLimits.from_env(env),
            storage=StorageLimits.from_env(env),
            requests=RequestLimits.from_env(env),
            sessions=SessionLimits.from_env(env),
            # on Spaces the app sits behind Hugging Face's proxy, which appends the client's address
            trusted_proxy_hops=_int_env(env, "MMVET_TRUSTED_PROXY_HOPS", 1 if env.get("SPACE_ID") else 0),
            allow_private_endpoints=env.get("MMVET_ALLOW_PRIVATE_ENDPOINTS", "").strip().lower()
            in ("1", "true", "yes"),
            call_deadline=float(_int_env(env, "MMVET_CALL_DEADLINE", 120)),
            batch_poll=float(_int_env(env, "MMVET_BATCH_POLL", 30)),
            host_secret=env.get("MMVET_HOST_SECRET") or None,
            publish_per_hour=_int_env(env, "MMVET_PUBLISH_PER_HOUR", 10),
            mcp_server=env.get("MMVET_MCP", "1").strip().lower() not in ("0", "false", "no", "off"),
            agent_judges=parse_agent_judges(env.get("MMVET_AGENT_JUDGES")),
        )

    def host_settings(self) -> JudgeSettings:
        return JudgeSettings(model=self.judge_model, provider=self.host_provider, base_url=self.host_base_url,
                             api_version=self.host_api_version, deadline=self.call_deadline)


# --- what a visitor asks for ------------------------------------------------------------------------------
@dataclass
class BenchmarkChoice:
    kind: str = BENCH_BUNDLED
    file: str | None = None          # BENCH_UPLOAD: the uploaded zip / metadata JSON
    hub_id: str = ""                 # BENCH_HUB
    subset: str = "All samples"      # a key of SUBSETS


@dataclass
class JudgeChoice:
    kind: str = JUDGE_BASELINE
    base_url: str = ""
    model: str = ""
    api_key: str = ""
    mode: str = MODE_LIVE            # or MODE_BATCH: the Batch API, half price, answers within 24 h
    host_model: str = ""             # JUDGE_HOST: a server judge an agent picked (MMVET_AGENT_JUDGES); "" = default


@dataclass
class Validation:
    report: str
    estimate: str
    model_name: str = ""             # the name the file gives (or its stem): the default of the model name box


@dataclass
class RunSummary:
    """One line of a visitor's "My runs"."""

    id: str
    model: str
    judge: str
    benchmark: str
    n_runs: int
    created_at: float
    status: str
    total: float | None
    complete: bool = True            # False: `total` is over part of the grades (shown "(partial)")

    def row(self) -> list:
        total = "—" if self.total is None else f"{self.total:.1f}" + ("" if self.complete else " (partial)")
        return [self.model, self.judge, self.benchmark, self.n_runs,
                time.strftime("%Y-%m-%d %H:%M", time.gmtime(self.created_at)), self.status, total, self.id]


RUN_LIST_COLUMNS = ["model", "judge", "benchmark", "runs", "date (UTC)", "status", "total", "id"]


@dataclass
class Permissions:
    """What the page may offer for a run (buttons are enabled only when they can act)."""

    owner: bool = False
    running: bool = False
    can_stop: bool = False
    can_resume: bool = False
    can_override: bool = False


def file_safe(name: str) -> str:
    """`name` usable as part of a file name: the last path component, unsafe characters replaced. Model and
    judge names come from uploaded files (lmms-eval ``model_name: "org/model"``, a grade file's judge) or from
    the visitor; unsanitised they fail the export ("org/") or write outside the exports folder ("../")."""
    base = re.split(r"[/\\]", str(name or ""))[-1]
    return re.sub(r"[^\w.+=@-]+", "_", base).strip("._")[:MAX_NAME] or "model"


def clean_model_name(name: str) -> str:
    """A visitor's model name: one line, printable, bounded (shown as text everywhere, never as markup)."""
    text = re.sub(r"[\x00-\x1f\x7f]+", " ", str(name or "")).strip()
    return text[:MAX_NAME]


def _shutdown_note(judge: dict) -> str | None:
    """`endpoints.retirement_note` of a stored judge (its recorded shutdown date), as of today."""
    from datetime import date

    try:
        when = date.fromisoformat(judge.get("shutdown_date") or "")
    except ValueError:
        return None
    return retirement_note(judge.get("model", "judge"), when, today_utc())


def endpoint_host(judge: dict) -> str:
    """The host of a run's judge endpoint, for the run card ("api.openai.com"; never a path or a key)."""
    if judge.get("provider") == "baseline":
        return "offline (no endpoint)"
    if judge.get("provider") == "imported":
        return "imported grade file"
    url = judge.get("base_url") or OPENAI_PUBLIC_URL
    return urlsplit(url).hostname or "?"


def _gradio_cache_dir() -> Path:
    """Where Gradio stores uploads (its ``GRADIO_TEMP_DIR``, else ``<tmp>/gradio``), bounded by the housekeeper."""
    import tempfile
    return Path(os.environ.get("GRADIO_TEMP_DIR") or Path(tempfile.gettempdir()) / "gradio")


def _stamp_of(updated_at: float, status: str) -> str:
    return f"{updated_at!r}:{status}"


def _total_stamp(run: RunRecord) -> str:
    """What a kept total belongs to: a rename, an override, a resume or a status change makes it stale."""
    return _stamp_of(run.updated_at, run.status)


# --- the service -----------------------------------------------------------------------------------------
class GradingService:
    """The app's long-lived objects and every rule of the app (no module-level mutable state)."""

    def __init__(self, settings: ServiceSettings):
        settings.data_dir.mkdir(parents=True, exist_ok=True)
        self.settings = settings
        self.store = Store(settings.data_dir / "mmvet-grader.db")
        for warning in self.store.warnings:
            log.warning("%s", warning)
        self.store.mark_interrupted()
        self.work_dir = settings.data_dir / "uploads"
        self.work_dir.mkdir(exist_ok=True)
        self.exports_dir = settings.data_dir / "exports"
        limits = replace(settings.hosting, upload_mb=settings.max_upload_mb)
        self.gate = UploadGate(limits, self.work_dir, self.exports_dir, gradio_cache=_gradio_cache_dir())
        self.gate.housekeeper.run()
        self.jobs = JobManager(self.store, max_active=settings.max_active_runs,
                               per_visitor=settings.max_runs_per_visitor)
        self.budget = HostBudget(self.store, settings.limits)
        self.salt = private_salt(settings.data_dir)   # of visitor ids: never the browser-state secret
        self._start_lock = threading.Lock()
        self._status_cache: dict[str, tuple[tuple, float, dict]] = {}   # run -> (change key, computed at, status)
        self._view_cache: dict[str, tuple[tuple, RunView]] = {}           # run -> (change stamp, view)
        self._versions: dict[str, tuple[float, str | None]] = {}          # run -> (read at, run_version)
        self._checks: dict[str, dict] = {}       # judge-check task -> {"done", "total"}
        self._model_lists: dict[str, tuple[float, ModelList]] = {}   # account -> (when read, list)
        self._equivalence_cache: dict[str, tuple[tuple, object]] = {}   # run id -> (stamp, Equivalence)
        self._read_cache: dict[tuple, object] = {}    # (path, size, mtime, name) -> ResultsFile, oldest first
        self._read_lock = threading.Lock()
        self._board: tuple[tuple, list] | None = None     # (store.board_stamp(), rows): ranks are costly
        self._board_lock = threading.Lock()
        self._board_entries: dict[tuple[str, int], object] = {}    # decoded frozen versions
        self._rank_cache: dict = {}                                   # ranks per rank group (members, versions)
        self.keeper = RunKeeper(self.store, settings.storage, settings.data_dir, on_expire=self._forget_files)
        self.keeper.expire(self._running_ids())

    def _running_ids(self) -> list[str]:
        return [rid for rid in list(self.jobs._jobs) if self.jobs.is_running(rid)]

    def _forget_files(self, run_id: str) -> None:
        shutil.rmtree(self.exports_dir / run_id, ignore_errors=True)
        self._status_cache.pop(run_id, None)
        self._view_cache.pop(run_id, None)

    def _check_storage(self, visitor: str | None, adding_bytes: int = 0) -> None:
        """Refuse new work when the disk is nearly full or the visitor keeps their quota (`keeping`)."""
        self.keeper.maybe_expire(self._running_ids)
        try:
            self.keeper.check_new_run(visitor, adding_bytes)
        except StorageRefused as e:
            raise ServiceError(str(e)) from None
        except StoreError as e:
            raise ServiceError(f"The server's storage failed: {e}. Nothing was started.") from None

    # ---- who is asking ----
    def visitor(self, peer: str | None, forwarded_for: str | None) -> str:
        """The visitor a host-key call and a run slot are charged to: their IP address, salted and hashed. It is
        the socket's peer, or behind `trusted_proxy_hops` proxies the X-Forwarded-For entry the outermost trusted
        one appended (entries a client writes itself are ignored)."""
        if peer is None and forwarded_for is None:
            return visitor_id("local", self.salt)
        return visitor_id(client_address(peer, forwarded_for, self.settings.trusted_proxy_hops), self.salt)

    def make_judge(self, jset: JudgeSettings, key: str | None, host: bool):
        """The judge of a run: errors redacted (an upstream body may echo a key or an internal page); a visitor's
        endpoint may not reach private addresses unless the host allows it."""
        block = not host and not self.settings.allow_private_endpoints
        return make_judge(jset, key, policy=EndpointPolicy(block_private=block), redact=True)

    # ---- inputs ----
    def check_size(self, path: str) -> None:
        size = Path(path).stat().st_size
        limit = self.settings.max_upload_mb
        if size > limit * 1024 * 1024:
            raise ServiceError(f"{Path(path).name} is {size / 1e6:.1f} MB; the limit here is {limit} MB.")

    def resolve_benchmark(self, choice: BenchmarkChoice) -> tuple[Benchmark, str, Benchmark]:
        """(the benchmark or subset to grade, its spec, the full benchmark it comes from)."""
        try:
            if choice.kind == BENCH_UPLOAD:
                if not choice.file:
                    raise ServiceError("Upload the official mm-vet.zip or a metadata JSON, or pick the bundled "
                                       "MM-Vet v1.")
                self.check_size(choice.file)
                full, spec = self.gate.load_upload(choice.file), Path(choice.file).name
            elif choice.kind == BENCH_HUB:
                repo = (choice.hub_id or "").strip()
                if not repo:
                    raise ServiceError("Enter a hub dataset id such as whyu/mm-vet or lmms-lab/MMVet.")
                full, spec = self.gate.load_hub(repo), f"hf:{repo}"
            else:
                full, spec = load_benchmark("mmvet-v1"), "mmvet-v1"
            if choice.subset not in SUBSETS:
                raise ServiceError(f"Unknown subset; pick one of: {', '.join(SUBSETS)}.")
            return load_subset(full, SUBSETS[choice.subset]), spec, full
        except (BenchmarkError, ArchiveError, FileNotFoundError) as e:
            raise ServiceError(f"Benchmark: {e}") from None

    def judge_for(self, choice: JudgeChoice) -> tuple[JudgeSettings, str | None, bool]:
        """(JudgeSettings, key, uses the host's key) for the judge the visitor picked. A visitor cannot point the
        host's key at another base URL: the host judge always uses the server's endpoint and model."""
        if choice.kind == JUDGE_HOST:
            if not self.settings.host_key:
                raise ServiceError("This server has no judge key of its own: enter your own API key, or use the "
                                   "baseline.")
            return self._host_judge(choice.host_model), self.settings.host_key, True
        if choice.kind == JUDGE_OWN:
            key = (choice.api_key or "").strip()
            url = (choice.base_url or "").strip() or None
            if not key and not url:
                raise ServiceError("Enter your API key (or the base URL of a local OpenAI-compatible server).")
            self.check_visitor_url(url or OPENAI_PUBLIC_URL)
            return (JudgeSettings(model=(choice.model or "").strip() or DEFAULT_JUDGE_MODEL,
                                  base_url=url or OPENAI_PUBLIC_URL, deadline=self.settings.call_deadline),
                    key or None, False)
        if choice.kind != JUDGE_BASELINE:
            raise ServiceError(f"Unknown judge; pick one of: {JUDGE_HOST}, {JUDGE_OWN}, {JUDGE_BASELINE}.")
        return JudgeSettings(model=BASELINE_NAME, provider="baseline"), None, False

    def _host_judge(self, model: str) -> JudgeSettings:
        """The server's judge settings with the model an agent picked (`agent_judges`: the host's rule), on the
        server's own endpoint; `ServiceError` when the host does not let agents use that model."""
        settings = self.settings.host_settings()
        model = (model or "").strip()
        if not model or model == settings.model:
            return settings
        served = None
        if self.settings.agent_judges == (ANY_JUDGE,):
            served = self.model_list(settings, self.settings.host_key, True)
        refusal = agent_judge_refusal(model, self.settings.agent_judges, settings.model, served)
        if refusal:
            raise ServiceError(refusal)
        return replace(settings, model=model)

    def check_visitor_url(self, url: str) -> None:
        """Refuse a visitor's base URL that is not http(s), or that resolves to a private address unless the host
        allows them (the transport checks again at every connection)."""
        try:
            check_endpoint_url(url, block_private=not self.settings.allow_private_endpoints)
        except BlockedDestination as e:
            raise ServiceError(f"Base URL refused: {e}.") from None

    def _read(self, path: str, original_name: str | None = None):
        """The results file at `path` (an upload), read in the parsing box; the same unchanged file read again
        (validate, then Grade) comes from a small cache."""
        self.check_size(path)
        st = Path(path).stat()
        name = original_name or Path(path).name
        key = (str(Path(path).resolve()), st.st_size, st.st_mtime_ns, name)
        with self._read_lock:
            if (hit := self._read_cache.pop(key, None)) is not None:
                self._read_cache[key] = hit          # most recent last
                return hit
        try:
            found = self.gate.read_results(path, max_bytes=self.settings.max_upload_mb * 1024 * 1024,
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
        rf = self._read(path, original_name)
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
            model = self._host_judge(judge.host_model).model
        else:
            model = judge.model or DEFAULT_JUDGE_MODEL
        est = estimate_cost(benchmark, preds, int(n_runs), model).summary(model) if preds else ""
        if est and judge.mode == MODE_BATCH:
            est += " · Batch API chosen: half price, answers within 24 h"
        return Validation(rep.summary(), est, name)

    # ---- what the endpoint serves ----
    def model_list(self, jset: JudgeSettings, key: str | None, host: bool) -> ModelList:
        """The model list of the judge's endpoint (reused for `MODEL_LIST_TTL` seconds per account; a visitor's
        endpoint under the same address policy as their grading)."""
        if jset.provider == "baseline":
            return ModelList(None, reason="offline baseline")
        account = account_key(jset.provider, jset.base_url, jset.api_version, key)
        hit = self._model_lists.get(account)
        now = time.monotonic()
        if hit is not None and now - hit[0] < MODEL_LIST_TTL:
            return hit[1]
        block = not host and not self.settings.allow_private_endpoints
        models = self.jobs.call(list_judge_models(jset, key, policy=EndpointPolicy(block_private=block)),
                                timeout=LIST_TIMEOUT + 5)
        for old in [a for a, (t, _) in self._model_lists.items() if now - t >= MODEL_LIST_TTL]:
            self._model_lists.pop(old, None)
        self._model_lists[account] = (now, models)
        return models

    def judges(self, choice: JudgeChoice) -> tuple[ModelList, list[JudgeRow]]:
        """The chat models the chosen endpoint (the host's, or the visitor's own) serves, each with its shutdown
        date and stored judge check: what the judge field offers. The baseline has none."""
        jset, key, host = self.judge_for(choice)
        models = self.model_list(jset, key, host)
        return models, (judge_rows(models, jset, today_utc(), self.store) if models.known else [])

    def judge_field(self, choice: JudgeChoice) -> tuple[list[JudgeRow], str, str]:
        """What the judge field shows: (the endpoint's chat models with their facts, the judge that will grade,
        what to say beside it: its shutdown date and check, or why it cannot grade here). `ServiceError` for
        incomplete own-key fields or a refused base URL."""
        jset, key, host = self.judge_for(choice)
        if jset.provider == "baseline":
            return [], jset.model, ""
        models, rows = self.judges(choice)
        return rows, jset.model, judge_facts(jset.model, models, rows)

    def check_judge_served(self, jset: JudgeSettings, key: str | None, host: bool) -> JudgeSettings:
        """Before any paid call (at most one probe): `JudgeUnavailable` when the official judge is not served by
        the endpoint; else `jset` with the shutdown date the endpoint announces (recorded with the run)."""
        if jset.provider == "baseline":
            return jset
        models = self.model_list(jset, key, host)

        async def go():
            judge = self.make_judge(jset, key, host)
            try:
                return await preflight(jset, key, today=today_utc(), judge=judge, models=models)
            finally:
                await judge.aclose()
        pre = self.jobs.call(go(), timeout=LIST_TIMEOUT + self.settings.call_deadline + 5)
        if pre.stop:
            raise JudgeUnavailable(pre.message(check_hint=APP_CHECK_HINT, view_hint=APP_VIEW_HINT), pre.models,
                                   render=pre.message)
        for warning in pre.warnings:
            log.info("%s", warning)
        return replace(jset, shutdown_date=pre.shutdown_date.isoformat()) if pre.shutdown_date else jset

    def judge_note(self, run_id: str) -> str | None:
        """The shutdown flag of a run's judge ("grades by judge-b cannot be re-run after 2026-12-11"), from the
        date recorded with the run; None when none is known."""
        run = self.store.get_run(run_id or "") if run_id else None
        return _shutdown_note(run.judge) if run is not None else None

    # ---- runs ----
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
        rf = self._read(path, original_name)
        benchmark, spec, _ = self.resolve_benchmark(bench)
        try:
            preds = select_predictions(rf, benchmark)
        except ResultsError as e:
            raise ServiceError(str(e)) from None
        jset, key, host = self.judge_for(judge)
        mode = self._mode(judge.mode, jset)
        cap = self.settings.limits.max_prediction_chars
        if host:
            too_long = check_prediction_lengths(preds, cap)
            if too_long:
                raise ServiceError(too_long)
        jset = self.check_judge_served(jset, key, host)
        # every run's predictions are capped (storage); the card keeps their original lengths
        preds, cut = cap_predictions(preds, cap)
        self._check_storage(visitor, sum(len(p.encode("utf-8")) for p in preds.values()))
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
            info = {**({"mode": mode} if mode == MODE_BATCH else {}), **({"predictions_cut": cut} if cut else {})}
            try:
                run_id = create_run(self.store, benchmark=benchmark, spec=spec, predictions=preds, n_runs=n_runs,
                                    settings=jset, model_name=name, results_format=rf.format, owner=owner,
                                    judge_info=info or None)
                self.keeper.stored(run_id, visitor, host=host)
            except StoreError as e:        # a write fault (a full disk): named, never a generic error
                raise ServiceError(f"The run could not be stored: {e}. Nothing was graded or paid.") from None
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
        budget = self.budget.hook(visitor) if host else None
        try:
            self.jobs.start(run_id, benchmark, self.make_judge(jset, key, host),
                            concurrency=self.settings.run_concurrency, budget=budget, visitor=visitor,
                            batch=mode == MODE_BATCH, batch_poll=self.settings.batch_poll)
        except TooManyRuns as e:      # a slot went to someone else since the check
            try:
                if self.store.get_run(run_id).status == "created":
                    self.store.set_status(run_id, "stopped", str(e))
            except StoreError:
                pass
            raise ServiceError(str(e)) from None
        self.jobs.on_end(run_id, self._remember_total_of)

    def _remember_total_of(self, run_id: str) -> None:
        """Keep an ended run's total for My runs (a failure here must never touch the run)."""
        try:
            view = load_run_view(self.store, run_id)
            if view is not None:
                self._remember_total(view)
        except Exception:  # noqa: BLE001 — My runs computes it again when it is missing
            log.exception("keeping the total of run %s", run_id)

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
                                                self.model_list(settings.host_settings(), settings.host_key, True)
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
            self.check_visitor_url(own_url or OPENAI_PUBLIC_URL)
            jset, host = replace(stored, provider="openai", api_version=None,
                                 base_url=own_url or OPENAI_PUBLIC_URL, deadline=settings.call_deadline), False
        mode = MODE_BATCH if run.judge.get("mode") == MODE_BATCH and jset.provider == "openai" else MODE_LIVE
        self.check_judge_served(jset, key, host)
        self._check_storage(None)
        try:
            if host:
                self.keeper.stored(run_id, visitor, host=True)
        except StoreError as e:
            raise ServiceError(f"The run could not be resumed: {e}.") from None
        self._launch(run_id, view.benchmark, jset, key, host, visitor, mode)
        return "Resumed: only what is missing is graded (stored grades are not paid again)."

    def override(self, run_id: str, owner: str, sample_id: str, score, reason: str) -> str:
        """Replace a sample's score by a human one (every run); the judge's grades stay stored beside it."""
        self.owned(run_id, owner)
        if not sample_id:
            raise ServiceError("Open a sample first (click its row).")
        view = load_run_view(self.store, run_id)
        if sample_id not in view.benchmark.samples:
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
        self._forget_files(run_id)
        return f"Deleted the run of {run.model_name}."

    def open_grade_file(self, path: str, bench: BenchmarkChoice, owner: str, visitor: str | None = None) -> str:
        """Store a grade file (official grade JSON, VLMEvalKit graded table, graded lmms-eval log) as a finished
        run of `owner` (stored for `visitor`'s quota), with no judge call. The file is row- and cell-counted,
        then parsed in the bounded worker (never in this process); its predictions are capped as a run's."""
        from .runs import create_grade_view

        self.check_size(path)
        self._check_storage(visitor)
        benchmark, spec, _ = self.resolve_benchmark(bench)
        try:       # rows and cells counted before any reader runs, then read in the bounded worker
            grades = self.gate.read_grade_file(path, benchmark, max_bytes=self.settings.max_upload_mb * 1024 * 1024)
        except (GradeFileError, ResultsError) as e:
            raise ServiceError(f"Grade file: {e}") from None
        grades.predictions, cut = cap_predictions(grades.predictions, self.settings.limits.max_prediction_chars)
        self._check_storage(visitor, sum(len(p.encode("utf-8")) for p in grades.predictions.values()))
        try:
            run_id = create_grade_view(self.store, grades, benchmark=benchmark, spec=spec, owner=owner,
                                       judge_info={"predictions_cut": cut} if cut else None)
            self.keeper.stored(run_id, visitor)
        except StoreError as e:
            raise ServiceError(f"The grade file could not be stored: {e}.") from None
        self._remember_total_of(run_id)
        return run_id

    def compare(self, owner: str, run_ids: list[str], files: list[str], out_dir: Path):
        """The app's Compare (`gradesets.compare_for_app`), every uploaded grade file parsed in the bounded worker.
        Returns (comparison, written files)."""
        from .compare import CompareError
        from .gradesets import compare_for_app

        for p in files:
            self.check_size(p)
        try:
            return compare_for_app(self.store, owner, run_ids, files, out_dir, read_file=self.gate.read_grade_set)
        except (CompareError, GradeFileError, ResultsError, OSError) as e:
            raise ServiceError(str(e)) from None

    # ---- judge check ----
    def _check_key(self, jset: JudgeSettings, owner: str) -> str:
        return f"judge-check:{owner}:{jset.fingerprint()}"

    def check_cost(self, references: str | None = None) -> str:
        """What a check costs, said before it starts: the reference sets and the judge calls."""
        from .judgecheck import call_count, distinct_prompts, load_manifest

        refs = self._check_refs(references)
        left_out = [s.model for s in load_manifest() if s.model not in {r.model for r in refs}]
        return (f"A check grades {len(refs)} reference sets ({', '.join(r.model for r in refs)}) with real official "
                f"GPT-4-0613 grades: {call_count(refs=refs)} judge calls at most ({distinct_prompts(refs=refs)} "
                "distinct prompts; answers already stored are reused for free)."
                + (f" Not in the default check: {', '.join(left_out)}." if left_out else ""))

    @staticmethod
    def _check_refs(references: str | None):
        from .judgecheck import load_references
        try:
            return load_references(which=references or "default")
        except ValueError as e:
            raise ServiceError(str(e)) from None

    def check_judge(self, choice: JudgeChoice, owner: str, visitor: str, references: str | None = None,
                    hints: dict | None = None) -> str:
        """Start checking the chosen judge against the reference sets with official GPT-4-0613 grades (the default
        ones: 436 calls at most, fewer when answers are stored). With the host's key every call is charged to the
        visitor's and the day's budgets, as grading is. Returns what to tell the user. `hints`: how the message of
        a check that cannot run (the endpoint no longer serves the official judge) says what to do instead
        (`PAGE_CHECK_HINTS` by default; an agent's tools name tools)."""
        from .judgecheck import call_count, check_settings, run_judge_check

        if not owner:
            raise ServiceError("Your session has no id yet; reload the page.")
        jset, key, host = self.judge_for(choice)
        if jset.provider == "baseline":
            raise ServiceError("The offline baseline is what the check compares a judge against: pick the server's "
                               "judge or your own to check it.")
        jset = check_settings(jset)
        refs = self._check_refs(references)
        task = self._check_key(jset, owner)
        if self.jobs.is_running(task):
            return "This judge is being checked already."
        progress = self._checks[task] = {"done": 0, "total": call_count(refs=refs)}

        def counted(row) -> None:
            progress["done"] += 1

        budget = self.budget.hook(visitor) if host else None
        judge = self.make_judge(jset, key, host)
        policy = EndpointPolicy(block_private=not host and not self.settings.allow_private_endpoints)

        async def check(stop):
            from .endpoints import preflight

            # never spend on a judge the endpoint no longer serves; record the shutdown date it announces
            pre = await preflight(jset, key, policy=policy, judge=judge)
            if pre.stop:
                await judge.aclose()
                raise RuntimeError(pre.message(**(hints or PAGE_CHECK_HINTS)))
            checked = replace(jset, shutdown_date=pre.shutdown_date.isoformat()) if pre.shutdown_date else jset
            return await run_judge_check(self.store, checked, key, judge=judge,
                                         concurrency=self.settings.run_concurrency, on_grade=counted, stop=stop,
                                         budget=budget, refs=refs)
        try:
            self.jobs.start_task(task, check, visitor=visitor)
        except TooManyRuns as e:
            raise ServiceError(str(e)) from None
        return (f"Checking {jset.model}: it grades {progress['total']} reference answers whose official GPT-4-0613 "
                "grades are known (answers already stored are reused for free).")

    def _shown_check(self, result, host: bool):
        """A check as a visitor may see it: the host's endpoint by its host name only."""
        result.judge = {**result.judge, "base_url": endpoint_host(result.judge)} if host else result.judge
        return result

    def judge_check_text(self, choice: JudgeChoice, owner: str) -> tuple[str, bool]:
        """(what the check of the chosen judge says now, whether it is still running)."""
        from .judgecheck import check_settings, format_check, stored_check

        try:
            jset, _, host = self.judge_for(choice)
        except ServiceError:
            return "", False
        if jset.provider == "baseline":
            return "", False
        jset = check_settings(jset)
        task = self._check_key(jset, owner)
        if self.jobs.is_running(task):
            p = self._checks.get(task, {"done": 0, "total": 0})
            return f"checking: {p['done']} / {p['total']} reference grades", True
        failure = self.jobs.failure(task)
        if failure:
            return f"The check stopped: {failure}", False
        result = stored_check(self.store, jset)
        if result is None:
            return "", False
        return format_check(self._shown_check(result, host)), False

    # ---- the successor board ----
    def judge_board(self, sort: str = "delta_bar") -> list:
        """Every judge checked on this server (`board.BoardRow`), sorted by `sort` (a value of
        `board.SORT_KEYS`)."""
        from .successors import board_rows, sort_rows
        from .endpoints import load_retirements

        shutdowns = {name: r.shutdown_date for name, r in load_retirements().items()}
        rows = board_rows(self.store.judge_checks(), host_base_url=self.settings.host_base_url or "",
                          shutdowns=shutdowns)
        return sort_rows(rows, sort)

    def judge_board_csv(self, sort: str = "delta_bar", base: str | None = None) -> str:
        """Write the board as CSV (in the exports folder) and return its path."""
        from .successors import make_board_csv_text

        from .successors import SORT_KEYS

        out = self.exports_dir / "board"
        out.mkdir(parents=True, exist_ok=True)
        sort = sort if sort in SORT_KEYS.values() else "delta_bar"
        path = out / f"mmvet-judge-successor-board-by-{sort}.csv"
        root = self.settings.public_url or base or ""
        tmp = path.with_name(f".{path.name}.{threading.get_ident()}.tmp")     # visitors export at once
        tmp.write_text(make_board_csv_text(self.judge_board(sort), root), encoding="utf-8")
        tmp.replace(path)
        return str(path)

    def check_report(self, check_id: str) -> str:
        """The full report of one stored check (a board row's link), endpoints by host name only; "" when there
        is no such check."""
        from .judgecheck import JudgeCheckResult, format_check

        entry = next((c for c in self.store.judge_checks() if c["id"] == (check_id or "")), None)
        if entry is None:
            return ""
        result = JudgeCheckResult.from_dict(entry["result"])
        result.judge = {**result.judge, "base_url": endpoint_host(result.judge)}
        return format_check(result)

    # ---- official-equivalent estimate ----
    def equivalence(self, view: RunView):
        """The run's official-equivalent estimate (`equivalence.Equivalence`), or why there is none; computed for
        finished runs only (a running run's scores move)."""
        from .equivalence import Equivalence
        from .runs import run_equivalence

        if not view.scores.complete:
            return Equivalence(False, "the run is not complete yet", str(view.run.judge.get("model", "?")))
        key = (view.run.id, view.run.updated_at, view.n_graded, len(view.overrides), self.store.judge_checks_stamp())
        hit = self._equivalence_cache.get(view.run.id)
        if hit is not None and hit[0] == key:
            return hit[1]
        eq = run_equivalence(self.store, view)
        if len(self._equivalence_cache) >= FINISHED_CACHE_SIZE:
            self._equivalence_cache.pop(next(iter(self._equivalence_cache)))
        self._equivalence_cache[view.run.id] = (key, eq)
        return eq

    # ---- what a page or a script reads ----
    def view(self, run_id: str, *, evidence_for: str | None = None) -> RunView | None:
        """A run as pages show it. Without `evidence_for`, one view per change of the run is read and shared by
        every page that shows it (a crowd of share-link viewers reads the run once per change, not once each);
        treat it as read-only."""
        if self.jobs._unsaved:
            self.jobs.retry_unsaved()
        if not run_id:
            return None
        if evidence_for is not None:
            view = load_run_view(self.store, run_id, evidence_for=evidence_for)
        else:
            stamp = self.store.change_stamp(run_id)
            hit = self._view_cache.get(run_id)
            if stamp is not None and hit is not None and hit[0] == stamp:
                view = hit[1]
            else:
                view = load_run_view(self.store, run_id) if stamp is not None else None
                self._view_cache.pop(run_id, None)
                if view is not None:
                    if len(self._view_cache) >= VIEW_CACHE_SIZE:
                        self._view_cache.pop(next(iter(self._view_cache)))
                    self._view_cache[run_id] = (stamp, view)
        if view is not None:
            self.keeper.opened(run_id)
        return view

    def runs_of(self, owner: str, limit: int = 100) -> list[RunSummary]:
        """The visitor's own runs, newest first (no page lists other visitors' runs). Read from one light query
        (no run's predictions or samples decoded) with each ended run's total kept since it was last computed:
        1,000 runs open as fast as 10."""
        if not owner:
            return []
        out = []
        for r in self.store.run_summaries(owner, limit):
            label = f"{r['bench_name'] or '?'}" + (f" · {r['subset']} set" if r["subset"] else "")
            total, complete = None, True
            if r["status"] == "done" or r["provider"] == "imported":
                if r["total_stamp"] == _stamp_of(r["updated_at"], r["status"]):
                    total = r["total"]             # kept for complete runs only (`_remember_total`)
                else:
                    view = load_run_view(self.store, r["id"])
                    total = view.scores.total.mean if view else None
                    complete = view.scores.complete if view else True
                    if view is not None:
                        self._remember_total(view)
            status = "running" if self.jobs.is_running(r["id"]) else r["status"]
            out.append(RunSummary(r["id"], r["model_name"], r["judge_model"] or "?", label, r["n_runs"],
                                  r["created_at"], status, total, complete))
        return out

    def card(self, view: RunView) -> dict:
        """The run card: what a page (owner or shared) and the exports say about a run."""
        run, judge = view.run, view.run.judge
        bench = run.benchmark
        status = "running" if self.jobs.is_running(run.id) else run.status
        failure = self.jobs.failure(run.id)
        if failure and status == "running":
            status = "failed"
        usage = self.store.run_usage(run.id)
        if judge.get("provider") in ("baseline", "imported"):     # no judge was called
            usage = {k: 0 for k in usage}
        if judge.get("provider") == "baseline":
            prompt = "none (offline keyword baseline)"
        elif judge.get("provider") == "imported":
            prompt = "unknown (grades imported from a file)"
        elif judge.get("prompt_examples") is not None:
            prompt = f"MM-Vet {bench.get('version', 'v1')} few-shot prompt, examples {judge['prompt_examples']}"
        else:
            prompt = f"official MM-Vet {bench.get('version', 'v1')} few-shot prompt (7 examples)"
        return {"run_id": run.id, "model": run.model_name, "judge_model": view.judge_name,
                "judge": view.judge_text, "endpoint": endpoint_host(judge),
                "mode": "Batch API" if judge.get("mode") == MODE_BATCH else "live",
                "benchmark": bench.get("name", "?"), "version": bench.get("version", "?"),
                "subset": bench.get("subset") or "all samples", "n_samples": len(view.benchmark),
                "runs": run.n_runs, "prompt": prompt, "tool_version": __version__,
                "created": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime(run.created_at)),
                "status": status, "message": run.message, "results_format": run.results_format,
                "metric_note": view.metric_note, "metric_label": view.metric_label,
                "n_overrides": view.n_overrides, "judge_only_total": view.scores.judge_only_total,
                "complete": view.scores.complete, "graded": view.n_graded, "expected": view.n_expected,
                "judge_shutdown_date": judge.get("shutdown_date"),
                "judge_shutdown_note": _shutdown_note(judge),
                "predictions_cut": cut_note(judge.get("predictions_cut")), **usage, **self._equivalence_fields(view)}

    def _equivalence_fields(self, view: RunView) -> dict:
        """The card's official-equivalent estimate: the labelled line and the numbers (never the official
        metric; see `mmvet_core.equivalence`)."""
        from .equivalence import format_capability_line, format_equivalent_line

        eq = self.equivalence(view)
        judge = view.run.judge
        # shown on a card when there is an estimate, or when the reason helps (check this judge; the check
        # refuses): not for the baseline, imported grades or the official judge, which need none
        shown = eq.available or (view.scores.complete and judge.get("provider") not in ("baseline", "imported")
                                 and judge.get("model") not in OFFICIAL_JUDGES)
        return {"official_equivalent": format_equivalent_line(eq), "official_equivalent_shown": shown,
                "official_equivalent_capabilities": format_capability_line(eq),
                "official_equivalent_estimate": eq.to_dict()}

    def status(self, run_id: str) -> dict:
        """Progress and scores of a run (what a script polls after grade). Computed once per change of the run
        (its stored status, grades, overrides: `Store.change_stamp`, one cheap query) and served from memory to
        every viewer until the next change; while a run grades, its answer is recomputed at most every STATUS_TTL
        seconds however fast grades arrive. Progress and scores always come from one snapshot (a fresh count beside
        older scores read "251 / 436" next to "over 205 of 436 grades")."""
        if self.jobs._unsaved:
            self.jobs.retry_unsaved()
        stamp = self.store.change_stamp(run_id) if run_id else None
        if stamp is None:
            raise ServiceError("No such run.")
        self.keeper.opened(run_id)
        running = self.jobs.is_running(run_id)
        key = (stamp, running, self.jobs.failure(run_id))
        now = time.monotonic()
        hit = self._status_cache.get(run_id)
        if hit is not None and hit[0] == key:
            out = hit[2]
        elif hit is not None and running and hit[0][1] and now - hit[1] < STATUS_TTL:
            out = hit[2]                   # the whole snapshot, progress and scores alike
            self._cache_status(run_id, (key, hit[1], out))
        else:
            out = self._compute_status(run_id)
            self._cache_status(run_id, (key, now, out))
        return {**out, "waiting_until": self.jobs.waiting_until(run_id)}

    def _cache_status(self, run_id: str, entry: tuple) -> None:
        self._status_cache.pop(run_id, None)
        if len(self._status_cache) >= FINISHED_CACHE_SIZE:
            self._status_cache.pop(next(iter(self._status_cache)))       # the least recently changed
        self._status_cache[run_id] = entry

    def _compute_status(self, run_id: str) -> dict:
        from . import views
        view = load_run_view(self.store, run_id)
        if view is None:
            raise ServiceError("No such run.")
        view = self.with_failure(view)
        p = views.progress_of(view)
        self._remember_total(view)
        return {"run_id": run_id, "status": view.run.status, "message": view.run.message, "done": p.done,
                "errored": p.errored, "total": p.total, "total_score": view.scores.total.mean,
                "total_std": view.scores.total.std if view.scores.complete else None,
                "complete": view.scores.complete, "scores": view.scores.to_dict(), "flags": view.flag_counts(),
                "judge": view.judge_text, "metric_note": view.metric_note, "metric_label": view.metric_label,
                "n_overrides": view.n_overrides, "judge_only_total": view.scores.judge_only_total,
                "judge_only_std": view.scores.judge_only_std, "total_text": views.total_text(view),
                "card": self.card(view)}

    def _remember_total(self, view: RunView) -> None:
        """Keep the total of an ended run for My runs (so listing 1,000 runs never aggregates them again)."""
        if view.run.status == "running" or self.jobs.is_running(view.run.id) or not view.scores.complete:
            return                       # (a partial total is recomputed, so My runs can say "partial")
        try:
            self.store.set_total(view.run.id, view.scores.total.mean, _total_stamp(view.run))
        except StoreError:
            pass

    def run_version(self, run_id: str, max_age: float = 0.5) -> str | None:
        """A short text that changes whenever what a page shows of the run does (its change stamp, whether its job
        runs or failed, until when it waits out a rate limit), read at most once every `max_age` seconds however
        many open pages follow the run (None: no such run)."""
        now = time.monotonic()
        hit = self._versions.get(run_id)
        if hit is not None and now - hit[0] < max_age:
            return hit[1]
        stamp = self.store.change_stamp(run_id) if run_id else None
        running = self.jobs.is_running(run_id)
        waiting = self.jobs.waiting_until(run_id) if running else None     # a rate-limit pause is shown too
        version = None if stamp is None else \
            f"{stamp[0]}:{stamp[1]!r}:{stamp[3]}:{stamp[4]!r}:{int(running)}:{int(bool(self.jobs.failure(run_id)))}" \
            f":{round(waiting) if waiting else 0}"
        if len(self._versions) > 10_000:
            self._versions.clear()
        self._versions[run_id] = (now, version)
        return version

    def with_failure(self, view: RunView) -> RunView:
        """`view` with the failure a full disk kept from the stored status (which may still say running)."""
        failure = self.jobs.failure(view.run.id)
        if failure and view.run.status == "running":
            return replace(view, run=replace(view.run, status="failed", message=failure))
        return view

    def sample(self, run_id: str, sample_id: str) -> dict:
        """Everything about one sample of a run: texts, every judge attempt, flags, override."""
        from . import views
        view = self.view(run_id or "", evidence_for=sample_id)
        if view is None or sample_id not in view.benchmark.samples:
            raise ServiceError(f"No sample {sample_id!r} in this run.")
        return views.sample_detail(view, sample_id)

    def downloads(self, view: RunView) -> list[str]:
        """The official files, the run card (run.json) and a zip of them all, rewritten only when the run
        changed since the last export."""
        card = self.card(view)
        equivalence = self.equivalence(view)        # before the names are made file-safe (it finds the check)
        view = replace(view, run=replace(view.run, model_name=file_safe(view.run.model_name),
                                         judge={**view.run.judge, "model": file_safe(view.judge_name)}))
        out = self.exports_dir / view.run.id
        stamp = (f"{view.run.updated_at}:{view.n_graded}:{sorted(view.overrides.items())}:{view.run.model_name}:"
                 f"{self.store.judge_checks_stamp()}")
        marker = out / ".stamp"
        if marker.exists() and marker.read_text() == stamp:
            return sorted(str(p) for p in out.iterdir() if p.name != ".stamp")
        if out.exists():
            shutil.rmtree(out)
        paths = dict(export_run(view, out, equivalence=equivalence))
        card_path = out / "run.json"
        card_path.write_text(json.dumps(card, indent=2, ensure_ascii=False))
        paths["run"] = card_path
        zpath = out / f"{view.run.model_name}_mmvet-grades.zip"
        with zipfile.ZipFile(zpath, "w", zipfile.ZIP_DEFLATED) as z:
            for p in paths.values():
                z.write(p, arcname=Path(p).name)
        marker.write_text(stamp)
        return sorted(str(p) for p in [*paths.values(), zpath])

    def form_of(self, view: RunView) -> dict | None:
        """The settings a run was started with, as the grading form's values (what a reload restores beside the
        run card), or None for a grade file's view (nothing was graded here). Never a key; the host's endpoint is
        not named (the host judge is its choice)."""
        run, judge = view.run, view.run.judge
        if judge.get("provider") == "imported":
            return None
        if judge.get("provider") == "baseline":
            kind, url, model = JUDGE_BASELINE, "", ""
        elif judge.get("base_url") == self.settings.host_base_url and self.settings.host_key \
                and judge.get("model") == self.settings.judge_model:
            kind, url, model = JUDGE_HOST, "", judge.get("model", "")
        else:
            url = judge.get("base_url") or ""
            kind, url, model = JUDGE_OWN, "" if url == OPENAI_PUBLIC_URL else url, judge.get("model", "")
        spec = str(run.benchmark.get("spec", "mmvet-v1"))
        bench = BENCH_HUB if spec.startswith("hf:") else BENCH_BUNDLED if spec == "mmvet-v1" else BENCH_UPLOAD
        subset = next((label for label, key in SUBSETS.items() if key == run.benchmark.get("subset")), "All samples")
        return {"n_runs": run.n_runs, "judge": kind, "base_url": url, "judge_model": model,
                "mode": MODE_BATCH if judge.get("mode") == MODE_BATCH else MODE_LIVE, "benchmark": bench,
                "hub_id": spec.removeprefix("hf:") if bench == BENCH_HUB else "", "subset": subset,
                "model_name": run.model_name}

    def share_url(self, run_id: str, base: str | None) -> str:
        """The read-only link of a run: the configured public URL, else the address the page was opened at."""
        root = self.settings.public_url or base or "http://localhost:7860"
        return f"{root.rstrip('/')}/?run={run_id}"

    # ---- the leaderboard (mmvet_core/leaderboard.py) ----
    def publish(self, run_id: str, name: str, link: str, owner: str, *, visitor: str = "",
                republish: bool = False) -> dict:
        """Publish the owner's finished run to the leaderboard under `name` (plain text, bounded) with an
        optional https `link`; with `republish`, store the run's current scores as a new version of its entry.
        Only the run's owner may; `publish_per_hour` publishes per visitor and hour. Returns the entry's row
        (``row.to_json()``); `ServiceError` says what is refused."""
        from . import leaderboard as lb
        run = self.owned(run_id, owner)
        if self.jobs.is_running(run.id):
            raise ServiceError("Wait until the run ends before publishing it.")
        try:
            clean, url = lb.clean_display_name(name), lb.check_link(link)
        except lb.BoardError as e:
            raise ServiceError(str(e)) from None
        limit = self.settings.publish_per_hour
        if limit >= 0 and self.store.count_publishes(visitor or owner, time.time() - 3600) >= limit:
            raise ServiceError(f"You published {limit} times in the last hour; try again later.")
        view = load_run_view(self.store, run.id)
        try:
            entry = lb.publish_view(self.store, view, name=clean, link=url, owner=owner, republish=republish,
                                    tool_version=__version__)
        except lb.BoardError as e:
            raise ServiceError(str(e)) from None
        self.store.log_publish(visitor or owner)
        return self._entry_row(entry)

    def _owned_entry(self, entry_id: str, owner: str):
        from . import leaderboard as lb
        entry = lb.load_entry(self.store, entry_id or "")
        if entry is None:
            raise ServiceError("No such leaderboard entry.")
        if not owner or entry.owner_hash != lb.owner_hash(owner):
            raise ServiceError("Only the owner of this entry can change it.")
        return entry

    def rename_entry(self, entry_id: str, owner: str, name: str, link: str | None = None) -> str:
        """The owner renames an entry (and sets or clears its link when `link` is not None)."""
        from . import leaderboard as lb
        entry = self._owned_entry(entry_id, owner)
        try:
            fields = {"name": lb.clean_display_name(name)}
            if link is not None:
                fields["link"] = lb.check_link(link)
        except lb.BoardError as e:
            raise ServiceError(str(e)) from None
        self.store.update_board_entry(entry.id, **fields)
        return f"Entry renamed to {fields['name']}."

    def unpublish(self, entry_id: str, owner: str) -> str:
        """The owner takes an entry off the board (its versions stay stored; publishing again restores it)."""
        from . import leaderboard as lb
        entry = self._owned_entry(entry_id, owner)
        self.store.update_board_entry(entry.id, published=0)
        self.store.unpin_run(entry.run_id, lb.PIN_REASON)       # the run may expire again like any other
        return f"{entry.name} is no longer on the leaderboard."

    def restore_entry(self, entry_id: str, owner: str) -> str:
        """The owner puts an unpublished entry back (the same frozen version; republish to update it)."""
        from . import leaderboard as lb
        entry = self._owned_entry(entry_id, owner)
        self.store.update_board_entry(entry.id, published=1)
        self.store.pin_run(entry.run_id, lb.PIN_REASON)
        return f"{entry.name} is on the leaderboard again (version {entry.version})."

    def hide_entry(self, entry_id: str, secret: str, hidden: bool = True) -> str:
        """The host hides (or shows again) any entry. Needs the host secret (``MMVET_HOST_SECRET``); a server
        without one has no such control (the CLI's ``leaderboard hide`` is the host's other way)."""
        import hmac
        from . import leaderboard as lb
        expected = self.settings.host_secret
        if not expected or not hmac.compare_digest(str(secret or "").encode("utf-8"), expected.encode("utf-8")):
            raise ServiceError("Only the host can hide entries.")
        entry = lb.load_entry(self.store, entry_id or "")
        if entry is None:
            raise ServiceError("No such leaderboard entry.")
        self.store.update_board_entry(entry.id, hidden=int(bool(hidden)))
        return f"{entry.name} is {'hidden' if hidden else 'shown again'}."

    def board_rows(self) -> list:
        """Every row of the board (entries with their ranks, then the paper's reference rows), computed once per
        change of the board (ranks cost a paired bootstrap per rank group)."""
        from . import leaderboard as lb
        stamp = self.store.board_stamp()
        cached = self._board
        if cached is not None and cached[0] == stamp:
            return cached[1]
        with self._board_lock:
            if self._board is not None and self._board[0] == stamp:
                return self._board[1]
            entries = []
            for row in self.store.board_entries():
                known = self._board_entries.get((row["id"], row["version"]))
                if known is None:                       # decode each frozen version once
                    known = lb.entry_from_row(row)
                else:                                   # names, links and flags change without a new version
                    known = replace(known, name=row["name"], link=row["link"], published=bool(row["published"]),
                                    hidden=bool(row["hidden"]))
                entries.append(known)
            self._board_entries = {(e.id, e.version): e for e in entries}
            rows = lb.board_rows(entries, lb.rank_groups(entries, cache=self._rank_cache)) + lb.paper_rows()
            self._board = (stamp, rows)
            return rows

    def leaderboard(self, filters=None) -> list:
        """The board's rows (`leaderboard.BoardRow`) that `filters` (`leaderboard.BoardFilter`, a dict of its
        fields, or a deep link's ``board`` text) selects, sorted as it says."""
        from . import leaderboard as lb
        return lb.filter_rows(self.board_rows(), self.board_filter(filters))

    @staticmethod
    def board_filter(filters=None):
        from . import leaderboard as lb
        if filters is None:
            return lb.BoardFilter()
        if isinstance(filters, lb.BoardFilter):
            return filters.normalised()
        if isinstance(filters, str):
            return lb.filter_from_query(filters)
        if isinstance(filters, dict):
            known = {k: v for k, v in filters.items() if k in lb.BoardFilter.__dataclass_fields__}
            return lb.BoardFilter(**known).normalised()
        raise ServiceError("Filters are a dict with judge, benchmark, query, sort, descending, references.")

    def leaderboard_json(self, filters=None) -> dict:
        """What the API and the JSON download return: the filter, the note on ranks and one dict per row."""
        from . import leaderboard as lb
        f = self.board_filter(filters)
        return {"filter": {k: getattr(f, k) for k in lb.BoardFilter.__dataclass_fields__},
                "rank_note": lb.RANK_NOTE, "entries": [r.to_json() for r in self.leaderboard(f)[:lb.MAX_ROWS]]}

    def _entry_row(self, entry) -> dict:
        for row in self.board_rows():
            if row.entry == entry.id:
                return row.to_json()
        from . import leaderboard as lb
        return lb.board_rows([entry], {})[0].to_json()        # not on the board (unpublished, hidden)

    def board_entry(self, entry_id: str) -> dict:
        """One entry as the board shows it (read-only, anyone): its row, its frozen metadata and its frozen
        per-sample scores. Entries taken off the board are not shown."""
        from . import leaderboard as lb
        entry = lb.load_entry(self.store, entry_id or "")
        if entry is None or not entry.published or entry.hidden:
            raise ServiceError("No such leaderboard entry (it may have been unpublished).")
        meta = {k: v for k, v in entry.meta.items() if k not in ("sample_caps",)}
        samples = [{"id": sid, "capabilities": entry.meta.get("sample_caps", {}).get(sid, ""),
                    "scores": entry.scores.get(sid, [])} for sid in entry.meta.get("sample_ids", entry.scores)]
        return {"row": self._entry_row(entry), "meta": meta, "samples": samples,
                "versions": [v["version"] for v in self.store.board_versions(entry.id)]}

    def entry_of_run(self, run_id: str, owner: str) -> dict | None:
        """The entry published from the owner's run (for its publish control): id, name, link, version,
        published, hidden, and whether the run changed since (``stale``: republish to update); None when the run
        was never published or `owner` does not own it."""
        from . import leaderboard as lb
        run = self.store.get_run(run_id or "") if run_id else None
        if run is None or not owner or run.owner != owner:
            return None
        row = self.store.board_entry_for_run(run.id)
        if row is None:
            return None
        entry = lb.load_entry(self.store, row["id"])
        return {"entry": entry.id, "name": entry.name, "link": entry.link, "version": entry.version,
                "published": entry.published, "hidden": entry.hidden,
                "stale": run.updated_at > entry.published_at}
