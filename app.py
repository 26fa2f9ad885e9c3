"""MM-Vet Grader: drop a model's results file, watch it graded live, inspect every grade, share a link.

A Hugging Face Space style Gradio Blocks app over `mmvet_core` (which holds all the logic). Run `python app.py`.
Configuration comes from the environment only (see README "Configuration" and "Hosting a public Space").
"""
from __future__ import annotations

import html
import html
import os
import re
import secrets
import shutil
import time
import zipfile
from dataclasses import dataclass, field, replace
from pathlib import Path

import gradio as gr

from mmvet_core.archive import ArchiveError
from mmvet_core.benchmark import ASSETS_DIR, Benchmark, BenchmarkError
from mmvet_core.budget import (BudgetLimits, HostBudget, check_prediction_lengths, client_address, private_salt,
                               visitor_id)
from mmvet_core.charts import make_radar, paper_model_names, paper_series
from mmvet_core.estimate import estimate_cost
from mmvet_core.export import GradeFileError
from mmvet_core.jobs import JobManager, TooManyRuns
from mmvet_core.grading import GRADED
from mmvet_core.hosting import HostingLimits, UploadGate
from mmvet_core.judge import BASELINE_NAME, DEFAULT_JUDGE_MODEL, JudgeSettings, make_judge
from mmvet_core.results import ResultsError, read_results, select_predictions, validate_results
from mmvet_core.runs import create_run, export_run, load_run_view, open_grade_file, RunView
from mmvet_core.sources import load_benchmark, load_subset
from mmvet_core.store import Store
from mmvet_core.transport import BlockedDestination, EndpointPolicy, check_endpoint_url
from mmvet_core import views

EXAMPLE_RESULTS = ASSETS_DIR / "examples" / "llava_llama2_13b_chat.json"
JUDGE_BASELINE = "Offline keyword baseline (not the MM-Vet metric)"
JUDGE_HOST = "Server's judge"
JUDGE_OWN = "My own key / endpoint"
#: Where a visitor's key goes when they leave the base URL empty ("empty = OpenAI"). Explicit, so that the
#: SDK's OPENAI_BASE_URL fallback (the host's endpoint) never receives a visitor's key.
OPENAI_PUBLIC_URL = "https://api.openai.com/v1"
#: How old (seconds) the scores in /status of a running run may be when it is polled often (progress is exact).
STATUS_TTL = 2.0
#: How many finished runs' /status answers are kept (each is a few KB).
FINISHED_CACHE_SIZE = 256
# Gradio 6.31 rebuilds a pandas summary of up to 10,000 recorded events after EVERY event, only for its
# /monitoring dashboard (off here); with scripts polling /status that was ~15% of the server's CPU under load.
os.environ.setdefault("GRADIO_ANALYTICS_CACHE_FREQUENCY", "1000")
# uvicorn (under Gradio) replaces the client address by X-Forwarded-For whenever the connection comes from
# 127.0.0.1: a client on the same machine (or behind a local proxy that forwards the header untouched) could then
# be anyone it likes. Our own `MMVET_TRUSTED_PROXY_HOPS` decides which forwarded entries count, on the real peer.
os.environ.setdefault("FORWARDED_ALLOW_IPS", "")
SHORT_LABELS = {"rec": "Rec", "ocr": "OCR", "know": "Know", "gen": "Gen", "spat": "Spat", "math": "Math",
                "seq": "Seq"}
BENCH_BUNDLED = "MM-Vet v1 (bundled, 218 samples)"
BENCH_UPLOAD = "Upload: official zip or metadata JSON"
BENCH_HUB = "Hugging Face hub dataset"
RADAR_EVERY_S = 5.0   # while a run streams in, the radar charts are redrawn at most this often per page
SUBSETS = {"All samples": None, "Bard set (168)": "bard"}
ATTRIBUTION = ("MM-Vet © Yu et al., *MM-Vet: Evaluating Large Multimodal Models for Integrated Capabilities* "
               "(ICML 2024), licensed [CC BY-NC 4.0](https://creativecommons.org/licenses/by-nc/4.0/). "
               "Scores follow the official evaluator (Apache-2.0).")


# --- configuration (read once, at the edge) ---------------------------------------------------------------
def _default_data_dir() -> Path:
    data = Path("/data")
    if data.is_dir() and os.access(data, os.W_OK):
        return data / "mmvet-grader"
    return Path("data")


def _int_env(name: str, default: int) -> int:
    try:
        return int(os.environ.get(name, default))
    except ValueError:
        return default


@dataclass
class AppSettings:
    data_dir: Path = field(default_factory=_default_data_dir)
    host_key: str | None = None
    host_provider: str = "openai"
    host_base_url: str | None = None
    host_api_version: str | None = None
    judge_model: str = DEFAULT_JUDGE_MODEL
    max_upload_mb: int = 50
    run_concurrency: int = 16
    max_active_runs: int = 64
    max_runs_per_visitor: int = 2          # running at once, per visitor (0: no limit)
    max_runs_per_job: int = 5
    limits: BudgetLimits = field(default_factory=BudgetLimits)
    public_url: str | None = None
    hosting: HostingLimits = field(default_factory=HostingLimits)   # uploads, parsing, folders (MMVET_* variables)
    trusted_proxy_hops: int = 0            # proxies in front of the app that append to X-Forwarded-For
    allow_private_endpoints: bool = False  # let visitors' endpoints be loopback / private addresses
    call_deadline: float = 120.0           # seconds per judge call, retries included

    @classmethod
    def from_env(cls) -> "AppSettings":
        env = os.environ
        azure = bool(env.get("AZURE_OPENAI_API_KEY") and env.get("AZURE_OPENAI_ENDPOINT"))
        space_host = (env.get("SPACE_HOST") or "").split(",")[0].strip()
        return cls(
            data_dir=Path(env["MMVET_DATA_DIR"]) if env.get("MMVET_DATA_DIR") else _default_data_dir(),
            host_key=env.get("AZURE_OPENAI_API_KEY") if azure else (env.get("OPENAI_API_KEY") or None),
            host_provider="azure" if azure else "openai",
            host_base_url=env.get("AZURE_OPENAI_ENDPOINT") if azure else (env.get("OPENAI_BASE_URL") or None),
            host_api_version=env.get("OPENAI_API_VERSION"),
            judge_model=env.get("MMVET_JUDGE_MODEL", DEFAULT_JUDGE_MODEL),
            max_upload_mb=_int_env("MMVET_MAX_UPLOAD_MB", 50),
            run_concurrency=_int_env("MMVET_RUN_CONCURRENCY", 16),
            max_active_runs=_int_env("MMVET_MAX_ACTIVE_RUNS", 64),
            max_runs_per_visitor=_int_env("MMVET_MAX_RUNS_PER_VISITOR", 2),
            limits=BudgetLimits(per_visitor_daily=_int_env("MMVET_BUDGET_PER_VISITOR", 2000),
                                global_daily=_int_env("MMVET_BUDGET_GLOBAL", 20000),
                                tokens_per_visitor_daily=_int_env("MMVET_TOKENS_PER_VISITOR", 1_500_000),
                                tokens_global_daily=_int_env("MMVET_TOKENS_GLOBAL", 15_000_000),
                                max_prediction_chars=_int_env("MMVET_MAX_PREDICTION_CHARS", 8000)),
            public_url=env.get("MMVET_PUBLIC_URL") or (f"https://{space_host}" if space_host else None),
            hosting=HostingLimits.from_env(env),
            # on Spaces the app sits behind Hugging Face's proxy, which appends the client's address
            trusted_proxy_hops=_int_env("MMVET_TRUSTED_PROXY_HOPS", 1 if env.get("SPACE_ID") else 0),
            allow_private_endpoints=env.get("MMVET_ALLOW_PRIVATE_ENDPOINTS", "").strip().lower()
            in ("1", "true", "yes"),
            call_deadline=float(_int_env("MMVET_CALL_DEADLINE", 120)),
        )

    def host_settings(self) -> JudgeSettings:
        return JudgeSettings(model=self.judge_model, provider=self.host_provider, base_url=self.host_base_url,
                             api_version=self.host_api_version, deadline=self.call_deadline)


@dataclass
class Services:
    """Long-lived objects of one app instance (no module-level mutable state)."""

    settings: AppSettings
    store: Store
    jobs: JobManager
    budget: HostBudget
    work_dir: Path
    gate: UploadGate
    salt: str = ""          # of visitor ids: private (never the browser-state secret, which /config publishes)

    def visitor(self, request: gr.Request | None) -> str:
        """The visitor a host-key call and a run slot are charged to: their IP address, salted and hashed. It is
        the socket's peer, or behind `trusted_proxy_hops` proxies the X-Forwarded-For entry the outermost trusted
        one appended (entries a client writes itself are ignored)."""
        if request is None:
            return visitor_id("local", self.salt)
        peer = request.client.host if request.client else None
        return visitor_id(client_address(peer, request.headers.get("x-forwarded-for"),
                                         self.settings.trusted_proxy_hops), self.salt)

    def make_judge(self, jset: JudgeSettings, key: str | None, host: bool):
        """The judge of a run: errors redacted (an upstream body may echo a key or an internal page); a visitor's
        endpoint may not reach private addresses unless the host allows it."""
        block = not host and not self.settings.allow_private_endpoints
        return make_judge(jset, key, policy=EndpointPolicy(block_private=block), redact=True)



def make_services(settings: AppSettings) -> Services:
    """The app's long-lived objects. A damaged database stops the app here with what is wrong (`StoreError`)."""
    import logging

    settings.data_dir.mkdir(parents=True, exist_ok=True)
    store = Store(settings.data_dir / "mmvet-grader.db")
    for warning in store.warnings:
        logging.getLogger("mmvet_grader").warning("%s", warning)
    store.mark_interrupted()
    work = settings.data_dir / "uploads"
    work.mkdir(exist_ok=True)
    limits = replace(settings.hosting, upload_mb=settings.max_upload_mb)
    gate = UploadGate(limits, work, settings.data_dir / "exports")
    gate.housekeeper.run()
    jobs = JobManager(store, max_active=settings.max_active_runs, per_visitor=settings.max_runs_per_visitor)
    return Services(settings, store, jobs, HostBudget(store, settings.limits), work, gate,
                    private_salt(settings.data_dir))


def _esc(message: object) -> str:
    """Text for a toast: Gradio renders HTML in gr.Error/Warning/Info, and messages quote visitors' files."""
    return html.escape(str(message), quote=False)


# --- pure-ish helpers used by the handlers ----------------------------------------------------------------
def _file_path(f) -> str | None:
    if f is None:
        return None
    return f if isinstance(f, str) else getattr(f, "path", None) or getattr(f, "name", None)


def _check_size(path: str, settings: AppSettings) -> None:
    size = Path(path).stat().st_size
    if size > settings.max_upload_mb * 1024 * 1024:
        raise gr.Error(_esc(f"{Path(path).name} is {size / 1e6:.1f} MB; the limit here is {settings.max_upload_mb} MB."))


def _resolve_benchmark(svc: Services, choice: str, bench_file, hub_id: str, subset_label: str) -> tuple[Benchmark, str]:
    """The benchmark (and its spec) the user picked; `gr.Error` with a clear message when it cannot load."""
    try:
        if choice == BENCH_UPLOAD:
            path = _file_path(bench_file)
            if not path:
                raise gr.Error("Upload the official mm-vet.zip or a metadata JSON, or pick the bundled MM-Vet v1.")
            _check_size(path, svc.settings)
            bench, spec = svc.gate.load_upload(path), Path(path).name
        elif choice == BENCH_HUB:
            repo = (hub_id or "").strip()
            if not repo:
                raise gr.Error("Enter a hub dataset id such as whyu/mm-vet or lmms-lab/MMVet.")
            bench, spec = svc.gate.load_hub(repo), f"hf:{repo}"
        else:
            bench, spec = load_benchmark("mmvet-v1"), "mmvet-v1"
        return load_subset(bench, SUBSETS.get(subset_label)), spec
    except (BenchmarkError, ArchiveError, FileNotFoundError) as e:
        raise gr.Error(_esc(f"Benchmark: {e}"))


def _judge_choice(svc: Services, choice: str, base_url: str, model: str, api_key: str):
    """(JudgeSettings, key, uses_host_key) for the judge the user picked. A visitor cannot point the host's key
    at another base URL: the host judge always uses the server's endpoint and model."""
    if choice == JUDGE_HOST:
        if not svc.settings.host_key:
            raise gr.Error("This server has no judge key of its own: enter your own API key, or use the baseline.")
        return svc.settings.host_settings(), svc.settings.host_key, True
    if choice == JUDGE_OWN:
        key = (api_key or "").strip()
        url = (base_url or "").strip() or None
        if not key and not url:
            raise gr.Error("Enter your API key (or the base URL of a local OpenAI-compatible server).")
        _check_visitor_url(svc.settings, url or OPENAI_PUBLIC_URL)
        return (JudgeSettings(model=(model or "").strip() or DEFAULT_JUDGE_MODEL, base_url=url or OPENAI_PUBLIC_URL,
                              deadline=svc.settings.call_deadline), key or None, False)
    return JudgeSettings(model=BASELINE_NAME, provider="baseline"), None, False


def _check_visitor_url(settings: AppSettings, url: str) -> None:
    """Refuse a visitor's base URL that is not http(s), or that resolves to a private address unless the host
    allows them (`gr.Error` with the reason; the transport checks again at every connection)."""
    try:
        check_endpoint_url(url, block_private=not settings.allow_private_endpoints)
    except BlockedDestination as e:
        raise gr.Error(_esc(f"Base URL refused: {e}."))


def _share_url(svc: Services, request: gr.Request | None, run_id: str) -> str:
    base = svc.settings.public_url
    if not base and request is not None:
        base = str(request.request.base_url).rstrip("/") if getattr(request, "request", None) else None
        if not base:
            host = request.headers.get("host", "localhost:7860")
            base = f"http://{host}"
    return f"{(base or '').rstrip('/')}/?run={run_id}"


def _radar_figures(view: RunView, overlays: list[str], svc: Services, owner: str):
    cap_axes = [c.name for c in view.scores.capabilities]
    int_axes = [c.name for c in view.scores.integrations]
    label = f"{view.run.model_name} (this run{', NOT the official MM-Vet metric' if view.metric_note else ''})"
    caps = [(label, {c.name: c.mean for c in view.scores.capabilities})]
    ints = [(label, {c.name: c.mean for c in view.scores.integrations})]
    subset = view.benchmark.subset_name
    paper = [o for o in overlays or [] if not o.startswith("run:")]
    # the paper reports the full v1 set and the Bard set only
    if paper and view.benchmark.version == "v1" and subset in (None, "bard"):
        caps += paper_series(paper, "capabilities", subset)
        ints += paper_series(paper, "integrations", subset)
    for o in overlays or []:
        if o.startswith("run:"):
            other = load_run_view(svc.store, o.split(":", 1)[1].split(" ")[0])
            if other is not None and other.run.owner == owner:
                name = f"{other.run.model_name} ({other.run.id[:6]}" \
                       f"{', NOT the official MM-Vet metric' if other.metric_note else ''})"
                caps.append((name, {c.name: c.mean for c in other.scores.capabilities}))
                ints.append((name, {c.name: c.mean for c in other.scores.integrations}))
    # the paper's short column names (Table 2): long labels are clipped on narrow screens
    labels = {c: SHORT_LABELS.get(c, c) for c in cap_axes}
    return (make_radar(caps, cap_axes, "Core capabilities", labels=labels),
            make_radar(ints, int_axes, "Capability integrations"))


def _filter(capability: str, lo: float, hi: float, flagged: bool) -> views.SampleFilter:
    return views.SampleFilter(capability=capability or "all", min_score=float(lo if lo is not None else 0),
                              max_score=float(hi if hi is not None else 1), flagged_only=bool(flagged))


def _file_safe(name: str) -> str:
    """`name` usable as part of a file name: the last path component, unsafe characters replaced. Model and
    judge names come from uploaded files (lmms-eval ``model_name: "org/model"``, a grade file's judge) or from
    the visitor; unsanitised they fail the export ("org/") or write outside the exports folder ("../")."""
    base = re.split(r"[/\\]", str(name or ""))[-1]
    return re.sub(r"[^\w.+=@-]+", "_", base).strip("._")[:100] or "model"


def _downloads(svc: Services, view: RunView) -> list[str]:
    """The official files and a zip of them, rewritten only when the run changed since the last export."""
    view = replace(view, run=replace(view.run, model_name=_file_safe(view.run.model_name),
                                     judge={**view.run.judge, "model": _file_safe(view.judge_name)}))
    out = svc.settings.data_dir / "exports" / view.run.id
    stamp = f"{view.run.updated_at}:{view.n_graded}:{len(view.overrides)}"
    marker = out / ".stamp"
    if marker.exists() and marker.read_text() == stamp:
        return sorted(str(p) for p in out.iterdir() if p.name != ".stamp")
    if out.exists():
        shutil.rmtree(out)
    paths = export_run(view, out)
    zpath = out / f"{view.run.model_name}_mmvet-grades.zip"
    with zipfile.ZipFile(zpath, "w", zipfile.ZIP_DEFLATED) as z:
        for p in paths.values():
            z.write(p, arcname=Path(p).name)
    marker.write_text(stamp)
    return sorted(str(p) for p in [*paths.values(), zpath])


# --- the app --------------------------------------------------------------------------------------------
def build_demo(settings: AppSettings | None = None) -> gr.Blocks:
    settings = settings or AppSettings.from_env()
    svc = make_services(settings)
    default_judge = JUDGE_HOST if settings.host_key else JUDGE_BASELINE
    judge_choices = ([JUDGE_HOST] if settings.host_key else []) + [JUDGE_OWN, JUDGE_BASELINE]
    owner_secret = _owner_secret(settings.data_dir)

    # Gradio's own cache (uploads, re-encoded images) is swept: files older than the age go (README "Hosting")
    with gr.Blocks(title="MM-Vet Grader", delete_cache=settings.hosting.gradio_delete_cache()) as demo:
        demo.svc = svc  # for tests and the launcher
        owner_store = gr.BrowserState("", storage_key="mmvet-grader-owner", secret=owner_secret)
        owner = gr.Textbox(visible=False, elem_id="owner-token")
        run_state = gr.Textbox(visible=False, elem_id="run-id")
        readonly = gr.Checkbox(value=False, visible=False, elem_id="read-only")

        gr.Markdown("# MM-Vet Grader\nGrade a multimodal model's MM-Vet results with an LLM judge, exactly as the "
                    "official evaluator does, with live progress, radar charts and every grade inspectable.")
        ro_note = gr.Markdown("**Shared run (read-only).** You can inspect every grade; only the person who "
                              "started this run can change it. Open the page without `?run=` to grade your own.",
                              visible=False, elem_id="read-only-note")
        with gr.Row():
            with gr.Column(scale=1, elem_id="setup-column") as setup_col:
                results_file = gr.File(label="Results file (official JSON, LLaVA JSONL, lmms-eval logs, "
                                             "VLMEvalKit xlsx/tsv/csv)", elem_id="results-file",
                                       file_types=[".json", ".jsonl", ".xlsx", ".tsv", ".csv"])
                example_btn = gr.Button("Load the official example (LLaVA-13B, LLaMA-2)", size="sm",
                                        elem_id="example-button")
                report = gr.Textbox(label="What was found", lines=4, interactive=False, elem_id="validation-report")
                with gr.Accordion("Benchmark", open=False):
                    bench_choice = gr.Radio([BENCH_BUNDLED, BENCH_UPLOAD, BENCH_HUB], value=BENCH_BUNDLED,
                                            label="Benchmark", elem_id="benchmark-choice")
                    bench_file = gr.File(label="Official mm-vet.zip or metadata JSON", elem_id="benchmark-file",
                                         file_types=[".zip", ".json"])
                    hub_id = gr.Textbox(label="Hub dataset id", placeholder="whyu/mm-vet", elem_id="hub-id")
                    subset = gr.Radio(list(SUBSETS), value="All samples", label="Subset", elem_id="subset")
                runs = gr.Slider(1, settings.max_runs_per_job, value=1, step=1, label="Judge runs (the paper uses 5)",
                                 elem_id="runs")
                with gr.Accordion("Judge", open=True):
                    judge_choice = gr.Radio(judge_choices, value=default_judge, label="Judge", elem_id="judge-choice")
                    own = default_judge == JUDGE_OWN      # these fields only apply to "My own key / endpoint"
                    base_url = gr.Textbox(label="Base URL (OpenAI-compatible; empty = OpenAI)",
                                          placeholder="http://localhost:8000/v1", elem_id="base-url", visible=own)
                    judge_model = gr.Textbox(value=DEFAULT_JUDGE_MODEL, label="Judge model", elem_id="judge-model",
                                             visible=own)
                    api_key = gr.Textbox(label="API key (used for this run only, never stored)", type="password",
                                         elem_id="api-key", visible=own)
                estimate = gr.Textbox(label="Before you spend", interactive=False, elem_id="estimate")
                with gr.Row():
                    grade_btn = gr.Button("Grade", variant="primary", elem_id="grade-button")
                    stop_btn = gr.Button("Stop", variant="stop", elem_id="stop-button")
                    resume_btn = gr.Button("Resume", elem_id="resume-button")
                grade_json_file = gr.File(label="…or view a grade file (no judge call): an official grade JSON, "
                                                "a VLMEvalKit graded table, a graded lmms-eval log",
                                          elem_id="grade-json-file",
                                          file_types=[".json", ".jsonl", ".xlsx", ".tsv", ".csv"])
            with gr.Column(scale=2):
                progress = gr.HTML(elem_id="progress")
                total = gr.Textbox(label="Score", interactive=False, elem_id="total-score")
                flags_box = gr.Textbox(label="Flags", interactive=False, elem_id="flag-counts")
                share = gr.Textbox(label="Share link (read-only view)", interactive=False, elem_id="share-link",
                                   buttons=["copy"])
                overlays = gr.Dropdown(choices=paper_model_names(), multiselect=True, value=[],
                                       label="Overlay models of the paper (Tables 2-3) or your other runs",
                                       elem_id="overlays")
                with gr.Row():
                    radar_caps = gr.Plot(label="Core capabilities", show_label=False, elem_id="radar-capabilities")
                    radar_ints = gr.Plot(label="Capability integrations", show_label=False,
                                         elem_id="radar-integrations")
                with gr.Row():
                    cap_table = gr.Dataframe(headers=views.CAPABILITY_COLUMNS, label="Capabilities",
                                             interactive=False, elem_id="capabilities-table", type="array",
                                             column_widths=["34%", "14%", "22%", "14%", "16%"])
                    int_table = gr.Dataframe(headers=views.INTEGRATION_COLUMNS, label="Capability integrations",
                                             interactive=False, elem_id="integrations-table", type="array")
                downloads = gr.File(label="Downloads: official grade JSON, both CSVs, and a zip of all",
                                    file_count="multiple", interactive=False, elem_id="downloads",
                                    visible=False)   # shown once there is something to download

        gr.Markdown("## Samples\nClick a row to inspect it.")
        with gr.Row():
            f_cap = gr.Dropdown(["all"], value="all", label="Capability or integration", elem_id="filter-capability")
            f_min = gr.Number(0.0, minimum=0, maximum=1, step=0.1, label="Min score", elem_id="filter-min")
            f_max = gr.Number(1.0, minimum=0, maximum=1, step=0.1, label="Max score", elem_id="filter-max")
            f_flag = gr.Checkbox(False, label="Flagged only", elem_id="filter-flagged")
        samples = gr.Dataframe(headers=views.SAMPLE_COLUMNS, interactive=False, elem_id="samples-table",
                               type="array", max_height=420)
        with gr.Group(elem_id="sample-detail"):
            d_id = gr.Textbox(label="Sample", interactive=False, elem_id="detail-id")
            with gr.Row():
                # shown only when the benchmark has images (the bundled v1 metadata has none)
                d_image = gr.Image(label="Image", interactive=False, elem_id="detail-image", height=240,
                                   visible=False)
                with gr.Column():
                    d_question = gr.Textbox(label="Question", interactive=False, elem_id="detail-question")
                    d_truth = gr.Textbox(label="Ground truth", interactive=False, elem_id="detail-truth")
            d_pred = gr.Textbox(label="Model's answer", interactive=False, lines=3, elem_id="detail-prediction")
            d_flags = gr.Textbox(label="Flags", interactive=False, elem_id="detail-flags")
            d_attempts = gr.Dataframe(headers=views.ATTEMPT_COLUMNS, interactive=False, type="array",
                                      label="Judge answers (every run and attempt)", elem_id="detail-attempts")
        # outside the Group: inside one, Gradio draws the buttons as plain text
        with gr.Row(elem_id="override-row") as override_row:
            # a callable None: a plain None shows "0" in the browser (gradio issue #6728), inviting an override to 0
            o_score = gr.Number(lambda: None, label="Override score (0-1)", minimum=0, maximum=1, step=0.1,
                                placeholder="0 to 1", elem_id="override-score")
            o_reason = gr.Textbox(label="Reason", elem_id="override-reason")
            o_btn = gr.Button("Override", variant="primary", elem_id="override-button")
            o_clear = gr.Button("Clear override", elem_id="override-clear")
        _compare_section(svc, owner)
        gr.Markdown(ATTRIBUTION)
        timer = gr.Timer(1.0, active=False)

        # ---- handlers ---------------------------------------------------------------------------------
        def check(results, bench_c, bench_f, hub, sub, n_runs, judge_c, model):
            path = _file_path(results)
            if not path:
                return "Drop a results file, or load the official example.", ""
            _check_size(path, settings)
            try:
                rf = svc.gate.read_results(path, max_bytes=settings.max_upload_mb * 1024 * 1024)
            except ResultsError as e:
                raise gr.Error(_esc(e))
            try:
                bench, _ = _resolve_benchmark(svc, bench_c, bench_f, hub, sub)
            except gr.Error as e:
                return f"Results file read ({rf.format}, {len(rf.predictions)} predictions). {e.message}", ""
            rep = validate_results(rf, bench)
            preds = select_predictions(rf, bench, allow_missing=True) if not rep.wrong_benchmark else {}
            name = BASELINE_NAME if judge_c == JUDGE_BASELINE else (
                settings.judge_model if judge_c == JUDGE_HOST else (model or DEFAULT_JUDGE_MODEL))
            est = estimate_cost(bench, preds, int(n_runs), name).summary(name) if preds else ""
            if judge_c == JUDGE_BASELINE:
                est = "Offline keyword baseline: no calls, no cost. NOT the MM-Vet metric (an LLM judge is)."
            return rep.summary(), est

        check_inputs = [results_file, bench_choice, bench_file, hub_id, subset, runs, judge_choice, judge_model]
        # the report is cleared first: a file that cannot be read must not leave the previous file's report shown
        results_file.upload(lambda: ("", ""), None, [report, estimate], queue=False, api_visibility="private",
                            show_progress="hidden").then(check, check_inputs, [report, estimate],
                                                         api_name="validate")
        for comp in (bench_choice, bench_file, subset, runs, judge_choice):
            comp.change(check, check_inputs, [report, estimate], api_visibility="private")

        def own_judge_fields(choice):
            shown = choice == JUDGE_OWN
            return gr.Textbox(visible=shown), gr.Textbox(visible=shown), gr.Textbox(visible=shown)

        judge_choice.change(own_judge_fields, judge_choice, [base_url, judge_model, api_key], queue=False,
                            api_visibility="private")

        def load_example():
            return str(EXAMPLE_RESULTS)

        example_btn.click(load_example, None, results_file, api_visibility="private").then(
            check, check_inputs, [report, estimate], api_visibility="private")

        def start(results, bench_c, bench_f, hub, sub, n_runs, judge_c, url, model, key, owner_tok,
                  request: gr.Request):
            path = _file_path(results)
            if not path:
                raise gr.Error("Drop a results file first (or load the official example).")
            if not owner_tok:
                raise gr.Error("Your session has no id yet; reload the page.")
            _check_size(path, settings)
            visitor = svc.visitor(request)
            try:
                svc.jobs.check_capacity(visitor)
            except TooManyRuns as e:
                raise gr.Error(_esc(e))
            try:
                rf = svc.gate.read_results(path, max_bytes=settings.max_upload_mb * 1024 * 1024)
                bench, spec = _resolve_benchmark(svc, bench_c, bench_f, hub, sub)
                preds = select_predictions(rf, bench)
            except ResultsError as e:
                raise gr.Error(_esc(e))
            jset, jkey, host = _judge_choice(svc, judge_c, url, model, key)
            if host:
                too_long = check_prediction_lengths(preds, settings.limits.max_prediction_chars)
                if too_long:
                    raise gr.Error(_esc(too_long))
            run_id = create_run(svc.store, benchmark=bench, spec=spec, predictions=preds, n_runs=int(n_runs),
                                settings=jset, model_name=_file_safe(rf.model_name or Path(path).stem),
                                results_format=rf.format, owner=owner_tok)
            budget = svc.budget.hook(visitor) if host else None
            try:
                svc.jobs.start(run_id, bench, svc.make_judge(jset, jkey, host), concurrency=settings.run_concurrency,
                               budget=budget, visitor=visitor)
            except TooManyRuns as e:      # a slot went to someone else since the check above
                svc.store.set_status(run_id, "stopped", str(e))
                raise gr.Error(_esc(e))
            return run_id, _share_url(svc, request, run_id), gr.Timer(active=True)

        grade_inputs = [results_file, bench_choice, bench_file, hub_id, subset, runs, judge_choice, base_url,
                        judge_model, api_key, owner]
        grade_btn.click(start, grade_inputs, [run_state, share, timer], api_name="grade")

        def _own(run_id: str, owner_tok: str):
            run = svc.store.get_run(run_id or "")
            if run is None:
                raise gr.Error("No run is selected (or this run id does not exist).")
            if not owner_tok or run.owner != owner_tok:
                raise gr.Error("This is a read-only shared view: only the run's owner can change it.")
            return run

        def stop(run_id, owner_tok):
            _own(run_id, owner_tok)
            if not svc.jobs.stop(run_id):
                gr.Info("This run is not running.")
                return
            gr.Info("Stopping after the calls in flight (they are paid for and will be stored).")

        stop_btn.click(stop, [run_state, owner], None, api_name="stop")

        def resume(run_id, judge_c, url, model, key, owner_tok, request: gr.Request):
            run = _own(run_id, owner_tok)
            if svc.jobs.is_running(run_id):
                return gr.Timer(active=True)
            if run.judge.get("provider") == "imported":     # a grade file's view: no judge, no predictions to grade
                gr.Warning("These grades were imported from a grade file: there is nothing to resume. To grade "
                           "the answers yourself, drop the results file and click Grade.")
                return gr.skip()
            view = load_run_view(svc.store, run_id)
            stored = JudgeSettings(**run.judge)
            if stored.provider == "baseline":
                jset, jkey, host = stored, None, False
            elif stored.base_url == (settings.host_base_url) and stored.model == settings.judge_model \
                    and settings.host_key and judge_c == JUDGE_HOST:
                jset, jkey, host = stored, settings.host_key, True
            else:
                # The visitor's key goes only to the endpoint they give now, or to this run's own (visitor)
                # endpoint; never to the host's endpoint, whatever endpoint the run started on.
                jkey = (key or "").strip() or None
                own_url = (url or "").strip() or None
                if not own_url and stored.base_url and stored.base_url != settings.host_base_url:
                    own_url = stored.base_url
                if not jkey and not own_url:
                    raise gr.Error("Resuming needs the API key of this run's judge: enter it in the Judge box.")
                _check_visitor_url(settings, own_url or OPENAI_PUBLIC_URL)
                jset, host = replace(stored, provider="openai", api_version=None,
                                     base_url=own_url or OPENAI_PUBLIC_URL, deadline=settings.call_deadline), False
            visitor = svc.visitor(request)
            budget = svc.budget.hook(visitor) if host else None
            try:
                svc.jobs.start(run_id, view.benchmark, svc.make_judge(jset, jkey, host),
                               concurrency=settings.run_concurrency, budget=budget, visitor=visitor)
            except TooManyRuns as e:      # the caps apply to resumed runs too
                raise gr.Error(_esc(e))
            return gr.Timer(active=True)

        resume_btn.click(resume, [run_state, judge_choice, base_url, judge_model, api_key, owner], [timer],
                         api_name="resume")

        radar_sent: dict[str, float] = {}   # per session and run: when the radars were last sent mid-run

        def refresh(run_id, overlay_sel, cap_f, lo, hi, flagged, owner_tok, radar_key: str | None = None):
            # Ask whether the job runs BEFORE reading the run: a job that ends while we read then still gets
            # one more tick, so the final state is always shown (else the timer stops on a stale "running").
            running = bool(run_id) and svc.jobs.is_running(run_id)
            view = load_run_view(svc.store, run_id) if run_id else None
            if view is None:
                return (gr.skip(),) * 10 + (gr.Timer(active=False),)
            prog = views.progress_of(view)
            # Mid-run timer ticks redraw the two plotly charts every RADAR_EVERY_S only: redrawing them every
            # second cost the browser as much CPU as the grading itself (bench/bench_app_e2e.py).
            now = time.monotonic()
            if running and radar_key is not None and now - radar_sent.get(radar_key, 0.0) < RADAR_EVERY_S:
                rc = ri = gr.skip()
            else:
                rc, ri = _radar_figures(view, overlay_sel, svc, owner_tok)
                if radar_key is not None:
                    if len(radar_sent) > 10_000:
                        radar_sent.clear()
                    radar_sent[radar_key] = now
            flags = view.flag_counts()
            flag_text = ", ".join(f"{k}: {v}" for k, v in sorted(flags.items())) or "none"
            files = _downloads(svc, view) if not running and view.n_graded else None
            cap_choices = ["all"] + view.benchmark.capabilities + view.benchmark.integrations
            return (prog.html(), views.total_text(view), f"Flagged samples — {flag_text}", rc, ri,
                    views.capability_rows(view), views.integration_rows(view),
                    views.sample_rows(view, _filter(cap_f, lo, hi, flagged)),
                    gr.File(value=files, visible=bool(files)),
                    gr.Dropdown(choices=cap_choices), gr.Timer(active=running))

        view_outputs = [progress, total, flags_box, radar_caps, radar_ints, cap_table, int_table, samples,
                        downloads, f_cap, timer]
        view_inputs = [run_state, overlays, f_cap, f_min, f_max, f_flag, owner]

        def tick(run_id, overlay_sel, cap_f, lo, hi, flagged, owner_tok, request: gr.Request):
            key = f"{getattr(request, 'session_hash', None) or ''}:{run_id}"
            return refresh(run_id, overlay_sel, cap_f, lo, hi, flagged, owner_tok, radar_key=key)

        timer.tick(tick, view_inputs, view_outputs, api_visibility="private", show_progress="hidden")
        run_state.change(refresh, view_inputs, view_outputs, api_visibility="private", show_progress="hidden")
        overlays.change(refresh, view_inputs, view_outputs, api_visibility="private", show_progress="hidden")

        def filter_rows(run_id, cap_f, lo, hi, flagged):
            view = load_run_view(svc.store, run_id) if run_id else None
            return views.sample_rows(view, _filter(cap_f, lo, hi, flagged)) if view else []

        for comp in (f_cap, f_min, f_max, f_flag):
            comp.change(filter_rows, [run_state, f_cap, f_min, f_max, f_flag], samples, api_visibility="private")

        def show_sample(run_id, sample_id):
            view = load_run_view(svc.store, run_id, evidence_for=sample_id) if run_id else None
            if view is None or sample_id not in view.benchmark.samples:
                raise gr.Error(_esc(f"No sample {sample_id!r} in this run."))
            d = views.sample_detail(view, sample_id)
            flags = " ".join(d["flags"]) or "none"
            if d["override"]:
                flags += f" — override {d['override']['score']} ({d['override']['reason']})"
            image = views.sample_image(view, sample_id)     # decoded and re-encoded: never the uploaded bytes
            return (sample_id, gr.Image(value=image, visible=image is not None), d["question"],
                    d["ground_truth"], d["prediction"], flags, views.attempt_rows(d))

        detail_outputs = [d_id, d_image, d_question, d_truth, d_pred, d_flags, d_attempts]

        def select_row(run_id, evt: gr.SelectData):
            row = evt.row_value or []
            if not row:
                return (gr.skip(),) * len(detail_outputs)
            return show_sample(run_id, str(row[0]))

        samples.select(select_row, [run_state], detail_outputs, api_visibility="private")
        def sample(run_id: str, sample_id: str) -> dict:
            """Everything about one sample of a run: texts, every judge attempt, flags, override."""
            view = load_run_view(svc.store, run_id or "", evidence_for=sample_id)
            if view is None or sample_id not in view.benchmark.samples:
                raise gr.Error(_esc(f"No sample {sample_id!r} in this run."))
            return views.sample_detail(view, sample_id)

        gr.api(sample, api_name="sample")

        def override(run_id, sample_id, score, reason, owner_tok, overlay_sel, cap_f, lo, hi, flagged):
            _own(run_id, owner_tok)
            if not sample_id:
                raise gr.Error("Open a sample first (click its row).")
            if score is None or not 0.0 <= float(score) <= 1.0:
                raise gr.Error("An override score must be between 0 and 1.")
            if not (reason or "").strip():
                raise gr.Error("Give a short reason for the override.")
            svc.store.set_override(run_id, sample_id, float(score), reason.strip()[:500])
            return refresh(run_id, overlay_sel, cap_f, lo, hi, flagged, owner_tok) + show_sample(run_id, sample_id)

        def clear_override(run_id, sample_id, owner_tok, overlay_sel, cap_f, lo, hi, flagged):
            _own(run_id, owner_tok)
            svc.store.clear_override(run_id, sample_id)
            return refresh(run_id, overlay_sel, cap_f, lo, hi, flagged, owner_tok) + show_sample(run_id, sample_id)

        filters = [overlays, f_cap, f_min, f_max, f_flag]
        o_btn.click(override, [run_state, d_id, o_score, o_reason, owner] + filters, view_outputs + detail_outputs,
                    api_name="override")
        o_clear.click(clear_override, [run_state, d_id, owner] + filters, view_outputs + detail_outputs,
                      api_name="clear_override")

        def view_grade_file(f, bench_c, bench_f, hub, sub, owner_tok, request: gr.Request):
            path = _file_path(f)
            if not path:
                return gr.skip(), gr.skip()
            _check_size(path, settings)
            try:
                svc.gate.check_rows(path)        # rows counted before any reader runs (issue 9, row 6)
            except ResultsError as e:
                gr.Warning(_esc(f"Grade file: {e}"))
                return gr.skip(), gr.skip()
            bench, spec = _resolve_benchmark(svc, bench_c, bench_f, hub, sub)
            try:   # an official grade JSON, a VLMEvalKit graded table or a graded lmms-eval log; no judge call
                run_id = open_grade_file(svc.store, path, benchmark=bench, spec=spec, owner=owner_tok,
                                         max_bytes=settings.max_upload_mb * 1024 * 1024)
            except GradeFileError as e:   # the user's file: a warning (escaped: toasts render HTML), page unchanged
                gr.Warning(html.escape(f"Grade file: {e}"))
                return gr.skip(), gr.skip()
            return run_id, _share_url(svc, request, run_id)

        grade_json_file.upload(view_grade_file, [grade_json_file, bench_choice, bench_file, hub_id, subset, owner],
                               [run_state, share], api_name="view_grades")

        status_cache: dict[str, tuple[float, dict]] = {}
        finished_cache: dict[str, tuple[tuple, dict]] = {}    # run id -> ((status, updated_at), status answer)

        def status(run_id: str) -> dict:
            """Progress and scores of a run (what a script polls after /grade)."""
            # While a run is grading, its scores are recomputed at most every STATUS_TTL seconds however often
            # it is polled (that reads and aggregates the whole run); its progress is always exact (one COUNT),
            # and once the run has ended everything is exact.
            now = time.monotonic()
            hit = status_cache.get(run_id or "")
            if hit is not None and now - hit[0] < STATUS_TTL and svc.jobs.is_running(run_id):
                counts = svc.store.count_grades(run_id)
                return {**hit[1], "done": sum(n for st, n in counts.items() if st in GRADED),
                        "errored": counts.get("error", 0)}
            # A run that has ended is computed once per change (its status and updated_at: an override bumps it):
            # pollers of a finished run cost one small query, not a reload and aggregation of every grade.
            record = svc.store.get_run(run_id or "") if run_id else None
            if record is None:
                raise gr.Error("No such run.")
            ended = finished_cache.get(record.id)
            if ended is not None and ended[0] == (record.status, record.updated_at) \
                    and not svc.jobs.is_running(record.id):
                return dict(ended[1])
            view = load_run_view(svc.store, run_id or "")
            if view is None:
                raise gr.Error("No such run.")
            failure = svc.jobs.failure(run_id)       # a full disk may have kept the stored status at "running"
            if failure and view.run.status == "running":
                view = replace(view, run=replace(view.run, status="failed", message=failure))
            p = views.progress_of(view)
            out = {"run_id": run_id, "status": view.run.status, "message": view.run.message, "done": p.done,
                   "errored": p.errored, "total": p.total, "total_score": view.scores.total.mean,
                   "total_std": view.scores.total.std, "complete": view.scores.complete,
                   "scores": view.scores.to_dict(), "flags": view.flag_counts(), "judge": view.judge_text,
                   "metric_note": view.metric_note}
            for rid in [r for r, (t, _) in list(status_cache.items()) if now - t >= STATUS_TTL]:
                status_cache.pop(rid, None)
            if out["status"] == "running" and svc.jobs.is_running(run_id):
                status_cache[run_id] = (now, out)
            else:
                status_cache.pop(run_id, None)
                if out["status"] != "running" and not svc.jobs.is_running(run_id):
                    if len(finished_cache) >= FINISHED_CACHE_SIZE:
                        finished_cache.pop(next(iter(finished_cache)))       # the oldest entry
                    finished_cache[record.id] = ((view.run.status, view.run.updated_at), out)
            return dict(out)

        gr.api(status, api_name="status")

        def on_load(stored_owner, request: gr.Request):
            tok = stored_owner or secrets.token_urlsafe(18)
            params = dict(request.query_params) if request else {}
            run_id = params.get("run", "")
            run = svc.store.get_run(run_id) if run_id else None
            if run_id and run is None:
                gr.Warning("This link's run does not exist (or was removed).")
            is_readonly = run is not None and run.owner != tok
            mine = [f"run:{r.id} {r.model_name}" for r in svc.store.list_runs(tok) if r.id != run_id][:20]
            return (tok, tok, run.id if run else "", is_readonly,
                    gr.Column(visible=not is_readonly), gr.Row(visible=not is_readonly),
                    gr.Dropdown(choices=paper_model_names() + mine),
                    _share_url(svc, request, run.id) if run else "", gr.Markdown(visible=is_readonly))

        demo.load(on_load, [owner_store], [owner_store, owner, run_state, readonly, setup_col, override_row,
                                           overlays, share, ro_note], api_visibility="private")
    return demo


def _compare_section(svc: Services, owner: gr.Textbox) -> None:
    """The Compare view: two or more of the visitor's runs or uploaded grade files, against the first (thin: the
    rules are `mmvet_core.gradesets.compare_for_app` and `mmvet_core.compare`)."""
    from mmvet_core.charts import make_compare_figures
    from mmvet_core.compare import (DISAGREEMENT_COLUMNS, PAIR_COLUMNS, SUMMARY_COLUMNS, CompareError,
                                    disagreement_rows, format_report, pair_rows, summary_rows)
    from mmvet_core.gradesets import compare_for_app, run_choices

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

    owner.change(my_runs, owner, cmp_runs, api_visibility="private", queue=False)
    cmp_refresh.click(my_runs, owner, cmp_runs, api_visibility="private")

    def compare(run_ids, files, owner_tok):
        paths = [p for p in (_file_path(f) for f in (files or [])) if p]
        for p in paths:
            _check_size(p, svc.settings)
        out = svc.settings.data_dir / "exports" / f"compare-{secrets.token_urlsafe(12)}"
        try:
            cmp, written = compare_for_app(svc.store, owner_tok, list(run_ids or []), paths, out)
        except (CompareError, GradeFileError, OSError) as e:
            gr.Warning(html.escape(str(e)))
            return (gr.skip(),) * 8
        scatter, radar = make_compare_figures(cmp)
        return (format_report(cmp, integrations=False), summary_rows(cmp), scatter, radar, pair_rows(cmp),
                disagreement_rows(cmp), [str(p) for p in written.values()], gr.skip())

    cmp_btn.click(compare, [cmp_runs, cmp_files, owner],
                  [cmp_report, cmp_summary, cmp_scatter, cmp_radar, cmp_pair, cmp_worst, cmp_downloads, cmp_runs],
                  api_name="compare")


def _owner_secret(data_dir: Path) -> str:
    """A stable secret for the browser-side owner token (kept in the data dir, created once)."""
    path = data_dir / ".browser-state-secret"
    if not path.exists():
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(secrets.token_urlsafe(32))
        path.chmod(0o600)
    return path.read_text().strip()


def launch_options(settings: AppSettings) -> dict:
    """`demo.launch` keyword arguments (shared by `python app.py` and the tests)."""
    return dict(ssr_mode=False, max_file_size=f"{settings.max_upload_mb}mb",
                # only our own exports (.json/.csv/.zip we write): never the uploads folder, whose files come from
                # visitors (an HTML page there would be served inline on the app's origin)
                allowed_paths=[str(settings.data_dir / "exports")],
                footer_links=["api"],
                run_history=False)  # run history would keep typed API keys in the browser's storage


if __name__ == "__main__":
    app_settings = AppSettings.from_env()
    demo = build_demo(app_settings)
    demo.queue(default_concurrency_limit=32)
    demo.launch(server_name=os.environ.get("GRADIO_SERVER_NAME", "0.0.0.0"),
                server_port=int(os.environ.get("GRADIO_SERVER_PORT", "7860")), **launch_options(app_settings))
