"""What every view shares: the page's session components and the helpers between Gradio and the service.

`Page` holds the service, the settings and the hidden components that carry a visitor's session (owner token,
open run); every view is built from it. A visitor's mistake is a toast (`toasts`): a `ServiceError` becomes
`gr.Warning` and every output is `gr.skip()`.
"""
from __future__ import annotations

import functools
import html
import logging
import secrets
from dataclasses import dataclass
from pathlib import Path

import gradio as gr

from mmvet_core.service import (BENCH_BUNDLED, JUDGE_BASELINE, JUDGE_HOST, JUDGE_OWN, MODE_BATCH, MODE_LIVE,
                                STORE_DOWN, BenchmarkChoice, GradingService, JudgeChoice, ServiceError,
                                ServiceSettings, store_fault)
from mmvet_core.store import STORE_UNREACHABLE, StoreError

log = logging.getLogger("mmvet_grader")

MODES = {"Live": MODE_LIVE, "Batch API (½ price, ≤ 24 h)": MODE_BATCH}
# set once the page's load event (owner token, ?run=) has been applied: scripts and tests wait for it
MARK_LOADED_JS = "() => { document.body.dataset.mmvetLoaded = '1'; return []; }"


def plotly_preload_js() -> str | None:
    """JS that loads Gradio's plotly.js chunk in the browser once the page is idle, or None if this Gradio has no
    such chunk.

    The page's first chart loads and runs plotly.js (4.6 MB): about a second of a browser's main thread, in which
    the page draws nothing else (in a run's first draw it held back the first rows; a click on Grade waited for
    it). After load, when the browser is idle, the chunk is loaded as the Plot component loads it (the same
    URL, so the same module: it runs once)."""
    assets = Path(gr.__file__).parent / "templates" / "frontend" / "assets"
    chunk = next(iter(sorted(assets.glob("PlotlyPlot-*.js"))), None)
    if chunk is None:
        return None
    load = f"() => import(new URL('./assets/{chunk.name}', document.baseURI).href).catch(() => {{}})"
    return f"() => {{ (window.requestIdleCallback || setTimeout)({load}); return []; }}"


def store_unreachable(error: StoreError | None = None) -> str:
    """What a page or a script is told while the database cannot be used: `STORE_UNREACHABLE`, then the fault
    in words (never an address; `StoreError` names none)."""
    head = STORE_UNREACHABLE[0].upper() + STORE_UNREACHABLE[1:] + "."
    detail = str(error or "").strip()
    return f"{head} {detail[0].upper() + detail[1:]}." if detail else head


def esc(message: object) -> str:
    """Text for a toast: Gradio renders HTML in gr.Error/Warning/Info, and messages quote visitors' files."""
    return html.escape(str(message), quote=False)


def file_path(f) -> str | None:
    """The local path of an uploaded file as Gradio hands it over (dict, path string, FileData, tempfile)."""
    if f is None:
        return None
    if isinstance(f, dict):
        return f.get("path")
    return f if isinstance(f, str) else getattr(f, "path", None) or getattr(f, "name", None)


def orig_name(f) -> str | None:
    """The name an uploaded file had on the visitor's machine (Gradio's `FileData.orig_name`), when known: the
    server keeps the file under a temporary folder, which must never name anything."""
    name = f.get("orig_name") if isinstance(f, dict) else getattr(f, "orig_name", None)
    return name if isinstance(name, str) and name.strip() else None


def visitor(svc: GradingService, request: gr.Request | None) -> str:
    """The visitor id the service budgets by (from the real peer and the trusted forwarded hops)."""
    if request is None:
        return svc.limits.visitor(None, None)
    peer = request.client.host if request.client else None
    return svc.limits.visitor(peer, request.headers.get("x-forwarded-for"))


def base_url(request: gr.Request | None) -> str | None:
    """The address the visitor reached the app at (for share links), or None outside a request."""
    if request is None:
        return None
    if getattr(request, "request", None) is not None:
        return str(request.request.base_url).rstrip("/")
    return f"http://{request.headers.get('host', 'localhost:7860')}"


def toasts(n_outputs: int):
    """Run a UI handler; a `ServiceError` becomes a warning toast and every output stays as it was (an exception
    in a Gradio handler would mark every output of the event with an "Error" badge)."""
    def deco(fn):
        @functools.wraps(fn)
        def wrapper(*args, **kwargs):
            try:
                return fn(*args, **kwargs)
            except Exception as e:  # noqa: BLE001 — a visitor's mistake, or the database down: named, never a badge
                if not isinstance(e, ServiceError) and not store_fault(e):
                    raise
                gr.Warning(esc(e) if isinstance(e, ServiceError) else STORE_DOWN)
                if n_outputs == 0:
                    return None
                return gr.skip() if n_outputs == 1 else tuple(gr.skip() for _ in range(n_outputs))
        return wrapper
    return deco


def api_errors(fn):
    """A named API endpoint: a `ServiceError` is answered as an error (its message escaped); the database failing
    is answered as `STORE_DOWN` (never a bare ``{"error": null}``, never the database's address)."""
    @functools.wraps(fn)
    def wrapper(*args, **kwargs):
        try:
            return fn(*args, **kwargs)
        except ServiceError as e:
            raise gr.Error(esc(e)) from None
        except Exception as e:  # noqa: BLE001 — only the database's faults are named here; a bug still raises
            if not store_fault(e):
                raise
            log.warning("a request met the database down: %s", e)
            raise gr.Error(STORE_DOWN) from None
    return wrapper


# ---- inputs as the service's records ----
def bench_of(bench_c, bench_f, hub, sub) -> BenchmarkChoice:
    """The benchmark fields of the page (or an API call) as the service's record."""
    return BenchmarkChoice(bench_c or BENCH_BUNDLED, file_path(bench_f), hub or "", sub or "All samples")


def judge_of(judge_c, url="", model="", key="", mode_label=None) -> JudgeChoice:
    """The judge fields of the page as the service's record (`mode_label` is a key of `MODES`). For the server's
    judge the model field carries the server judge the visitor picked (`MMVET_SERVER_JUDGES`; the service refuses
    one the host does not offer)."""
    kind = judge_c or JUDGE_BASELINE
    return JudgeChoice(kind, url or "", model or "", key or "", MODES.get(mode_label, MODE_LIVE),
                       host_model=(model or "").strip() if kind == JUDGE_HOST else "")


def arrival_text(settings: ServiceSettings) -> str:
    """The page's first line after its title: the official judge's shutdown and the way forward, for this
    server's configuration (with or without a key of its own, with or without a choice of judges)."""
    from mmvet_core.judging.endpoints import retirement_of
    from mmvet_core.judging.judge import DEFAULT_JUDGE_MODEL

    r = retirement_of(DEFAULT_JUDGE_MODEL)
    when = f" on {r.shutdown_date.isoformat()}" if r else ""
    head = f"**The official judge {DEFAULT_JUDGE_MODEL} was shut down{when}.**"
    if settings.host_key and settings.server_judges:
        way = "Pick a checked successor among the server's judges (status on the **Judges** tab) or use your own key"
    elif settings.host_key:
        way = (f"This server grades with {settings.judge_model}: check it or a successor on the **Judges** tab, or "
               "use your own key")
    else:
        way = "Grade with your own key and a successor judge checked on the **Judges** tab"
    return (f"{head} {way}; with no key: the offline baseline (not the MM-Vet metric) or an official grade file. "
            "Other judges get an official-equivalent *estimate*.")


def owner_secret(data_dir: Path) -> str:
    """A stable secret for the browser-side owner token (kept in the data dir, created once)."""
    path = data_dir / ".browser-state-secret"
    if not path.exists():
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(secrets.token_urlsafe(32))
        path.chmod(0o600)
    return path.read_text().strip()


@dataclass
class Page:
    """The service, the settings and the session components every view reads: `owner` (the visitor's owner
    token, restored from the browser's storage by `owner_store`) and `run_state` (the open run's id; changing it
    opens the run)."""
    svc: GradingService
    settings: ServiceSettings
    owner_store: gr.BrowserState
    owner: gr.Textbox
    run_state: gr.Textbox
    ro_note: gr.Markdown
    tabs: gr.Tabs | None = None       # the page's tabs (set once laid out: a link or a pointer selects one)

    @property
    def default_judge(self) -> str:
        return JUDGE_HOST if self.settings.host_key else JUDGE_BASELINE

    @property
    def judge_choices(self) -> list[str]:
        return ([JUDGE_HOST] if self.settings.host_key else []) + [JUDGE_OWN, JUDGE_BASELINE]


def build_page(svc: GradingService, settings: ServiceSettings) -> Page:
    """The session's hidden components, the header and the read-only note of a shared run."""
    # replicas on one database share one secret: a browser's owner token reads alike on every replica
    secret = svc.store.lasting_secret("browser-state") if svc.store.backend == "postgresql" else \
        owner_secret(settings.data_dir)
    owner_store = gr.BrowserState("", storage_key="mmvet-grader-owner", secret=secret)
    owner = gr.Textbox(visible=False, elem_id="owner-token")
    run_state = gr.Textbox(visible=False, elem_id="run-id")
    gr.Markdown("## MM-Vet Grader\n<small>Grade a multimodal model's MM-Vet results with an LLM judge, with the "
                "official prompt and scoring: live progress, radar charts, every grade inspectable, a link to "
                "share.</small>", elem_id="header")
    gr.Markdown(arrival_text(settings), elem_id="arrival")
    ro_note = gr.Markdown("**Shared run (read-only).** You can inspect every grade; only the person who "
                          "started this run can change it. Open the page without `?run=` to grade your own.",
                          visible=False, elem_id="read-only-note")
    return Page(svc, settings, owner_store, owner, run_state, ro_note)


def runs_rows(svc: GradingService, owner_tok: str) -> list[list]:
    """The rows of the "My runs" table for this owner token, newest first."""
    return [r.row() for r in svc.reading.runs_of(owner_tok)]


def quiet_statuses(demo: gr.Blocks) -> None:
    """Keep the page's status bookkeeping to the components that show a progress (call once every event is
    registered; an event given its own `show_progress_on` is left as it is).

    Gradio 6.31's page keeps a loading status for every progress target (`show_progress_on`, by default every
    output) of every event that ever ran in it, and on EACH status change of ANY event (pending, each streamed
    yield, completion) it updates them all: a snapshot of each component's props, and of a layout container's
    whole subtree. With the tab set an output of the load events, every status change after load snapshot the
    whole page; with the run panel, the samples table and the radars outputs of the redraw of a grading run, every
    update of the run cost several of those (bench/bench_app_e2e.py: the browser 2.1x the CLI, the first rows
    6 s after the first grade).

    - An event whose progress is hidden tracks no status at all (it shows none).
    - Any other event shows its progress on its outputs but layout containers (tabs, columns, rows, accordions),
      which show none anyway.

    What a visitor sees is unchanged: the same outputs get the same values."""
    for fn in demo.fns.values():
        if fn.show_progress_on is not None:
            continue
        if fn.show_progress == "hidden":
            fn.show_progress_on = []
        elif any(isinstance(b, gr.blocks.BlockContext) for b in fn.outputs):
            fn.show_progress_on = [b for b in fn.outputs if not isinstance(b, gr.blocks.BlockContext)]


def wire_load(demo: gr.Blocks, page: Page, runs_table: gr.Dataframe) -> None:
    """On page load: the owner token (new or restored), the run of `?run=`, the visitor's runs; then the
    'loaded' mark; and plotly.js once the browser is idle (`plotly_preload_js`). Registered last."""
    svc = page.svc

    def on_load(stored_owner, request: gr.Request):
        tok = stored_owner or secrets.token_urlsafe(18)
        params = dict(request.query_params) if request else {}
        run_id = params.get("run", "")
        run = svc.store.get_run(run_id) if run_id else None
        if run_id and run is None:
            gr.Warning("This link's run does not exist (or was removed).")
        return tok, tok, run.id if run else "", runs_rows(svc, tok)

    demo.load(on_load, [page.owner_store], [page.owner_store, page.owner, page.run_state, runs_table],
              api_visibility="private", show_progress="hidden") \
        .then(None, None, None, js=MARK_LOADED_JS, api_visibility="private")
    preload = plotly_preload_js()
    if preload:        # a run's charts, a grade file's, the board's: plotly.js is loaded before the first one
        demo.load(None, None, None, js=preload, api_visibility="private")
