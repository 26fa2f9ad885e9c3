"""MM-Vet Grader: drop a model's results file, watch it graded live, inspect every grade, share a link.

A Hugging Face Space style Gradio Blocks app over `mmvet_core`. The rules (ownership, keys and endpoints, budgets,
what a start may do) live in `mmvet_core.service`; the page is built from one module per view in `ui/` (each lays
out its components and maps each event to one service call), and this file only composes them and launches. A
visitor's mistake is a toast (`gr.Warning`) that leaves every other component as it was; the named API endpoints
(for scripts, `mmvet_app/api.py`) call the same service and answer an error instead. Run `python app.py`. Configuration
comes from the environment only (see docs/app.md "Configuration" and docs/hosting.md).
"""
from __future__ import annotations

import os

import gradio as gr

from mmvet_core.service import (BENCH_BUNDLED, BENCH_HUB, BENCH_UPLOAD, JUDGE_BASELINE, JUDGE_HOST, JUDGE_OWN,
                                OPENAI_PUBLIC_URL, GradingService, ServiceSettings)
from mmvet_app.api import register_api
from mmvet_app.common import build_page, quiet_statuses, wire_load
from mmvet_app.compare import build_compare
from mmvet_app.grade import build_grade, wire_grade
from mmvet_app.grade_file import build_grade_file, wire_grade_file
from mmvet_app.judge_check import CSS as JUDGES_CSS
from mmvet_app.judge_check import TAB_ID as JUDGES_TAB
from mmvet_app.judge_check import build_judges
from mmvet_app.leaderboard import TAB_ID as BOARD_TAB
from mmvet_app.leaderboard import build_leaderboard
from mmvet_app.mcp import hide_other_endpoints, register_mcp_tools
from mmvet_app.my_runs import build_my_runs, wire_my_runs
from mmvet_app.samples import build_samples, wire_samples
from mmvet_app.sessions import lean_queue, lean_sessions

__all__ = ["AppSettings", "BENCH_BUNDLED", "BENCH_HUB", "BENCH_UPLOAD", "JUDGE_BASELINE", "JUDGE_HOST", "JUDGE_OWN",
           "OPENAI_PUBLIC_URL", "build_demo", "launch_options", "queue_options"]

AppSettings = ServiceSettings          # the app's settings are the service's (read from the environment)
DEFAULT_CONCURRENCY = 32               # events of a kind running at once (`demo.queue(default_concurrency_limit=)`)
# How often the queue tells waiting clients their place in it (seconds). Gradio's default ("auto") tells every
# waiting client each time an event starts: with N events waiting that is N messages per start, N² while a crowd
# drains (a crowd of 640 pages following one run: 1.1 GB of messages, the Python heap left fragmented: issue 33).
QUEUE_STATUS_EVERY_S = 2.0
# Gradio 6.31 rebuilds a pandas summary of up to 10,000 recorded events after EVERY event, only for its
# /monitoring dashboard (off here: `launch_options`, and `lean_queue` skips the summary); with scripts polling
# /status that was ~15% of the server's CPU under load, and a crowd closing at once left 1.5 GB behind (issue 33).
os.environ.setdefault("GRADIO_ANALYTICS_CACHE_FREQUENCY", "1000")
# uvicorn (under Gradio) replaces the client address by X-Forwarded-For whenever the connection comes from
# 127.0.0.1: a client on the same machine (or behind a local proxy that forwards the header untouched) could then
# be anyone it likes. Our own `MMVET_TRUSTED_PROXY_HOPS` decides which forwarded entries count, on the real peer.
os.environ.setdefault("FORWARDED_ALLOW_IPS", "")
ATTRIBUTION = ("MM-Vet © Yu et al., *MM-Vet: Evaluating Large Multimodal Models for Integrated Capabilities* "
               "(ICML 2024), licensed [CC BY-NC 4.0](https://creativecommons.org/licenses/by-nc/4.0/). "
               "Scores follow the official evaluator (Apache-2.0).")
GRADE_TAB, ABOUT_TAB = "grade", "about"
ABOUT = """### What MM-Vet is
MM-Vet (Yu et al., ICML 2024) asks 218 open-ended questions about images that need several capabilities at once:
recognition, OCR, knowledge, language generation, spatial awareness and math. A model's free-form answers are graded
by an LLM judge (0 to 1, with a few-shot prompt), and the score is the mean, per capability, per capability
integration (16 combinations) and in total, in points out of 100.

### The method
This app grades a results file exactly as the official evaluator does when the judge answers the same: the official
prompt, the official re-asks of an unparsable answer, the official aggregation and rounding, one or more judge runs
(mean ± std). Every judge answer is stored the moment it arrives (nothing paid for is asked twice), every grade can
be inspected and overridden by hand, and every score comes with a 95 % bootstrap interval over the questions.
Leaderboard ranks are ranges from paired bootstrap tests, only among entries graded by the same judge on the same
samples.

### After gpt-4-0613
The official judge, `gpt-4-0613`, was shut down by OpenAI on 2026-10-23: the official metric can no longer be
recomputed for new results. Another judge's scores are **not** the MM-Vet metric. The **Judges** tab checks a
candidate judge against reference models whose official grades are known (how far, with intervals, and whether it
orders models the same way); a checked judge's runs get an **official-equivalent estimate** — what gpt-4-0613 would
likely have given, with its interval, always labelled as an estimate. Official grade files made before the shutdown
open without any judge call (*Open a grade file*). With no key, the offline keyword baseline gives a rough score that
is not the MM-Vet metric.

### Data and licence
""" + ATTRIBUTION + """ The benchmark's images and questions are redistributed under that licence
(non-commercial use, with attribution); the reference sets used by judge checks list their sources in
`assets/reference/SOURCES.md`. The code of this app is open source.
"""
CSS = """
#run-card .card {border:1px solid var(--border-color-primary); border-radius:8px; padding:8px 12px;}
#run-card .card h3 {margin:0 0 4px 0;}
#run-card .card dl {display:grid; grid-template-columns:max-content 1fr; gap:2px 12px; margin:0; font-size:0.9em;}
#run-card .card dt {color:var(--body-text-color-subdued);}
#run-card .card dd {margin:0; overflow-wrap:anywhere;}
#card-equivalent {white-space:pre-line;}
#results-file {min-height:0;}
.judge-note {border-left:3px solid var(--color-accent); padding:4px 8px; font-size:0.9em; overflow-wrap:anywhere;}
/* toasts at the bottom right: at the top right they covered Grade and the progress bar of the run they announce */
.toast-wrap {top:auto !important; bottom:var(--size-4) !important;}
"""


def build_demo(settings: AppSettings | None = None) -> gr.Blocks:
    """The page: the views of `ui/` laid out top to bottom, then the handlers that span views, in event order."""
    settings = settings or AppSettings.from_env()
    lean_sessions()        # a session's copy of the page is built as it is read (mmvet_app/sessions.py)
    lean_queue()           # an idle queue looks for events every 10 ms, not every 1 ms, and builds no pandas summary
                           # of the traffic per event: nobody reads it (mmvet_app/sessions.py)
    svc = GradingService(settings)
    # Gradio's own cache (uploads, re-encoded images) is swept: files older than the age go (docs/hosting.md)
    with gr.Blocks(title="MM-Vet Grader", delete_cache=settings.hosting.gradio_delete_cache()) as demo:
        demo.svc = svc  # for tests and the launcher
        register_api(svc)   # first: the scripts' endpoints keep their plain names (the page's events are private)
        register_mcp_tools(svc)                # the agents' tools (docs/agents.md)
        page = build_page(svc, settings)       # session (owner token, open run), header, arrival line

        # ---- the views, tab by tab (a Space's shape: Grade, Leaderboard, Judges, About) ----
        with gr.Tabs(selected=GRADE_TAB, elem_id="tabs") as tabs:
            page.tabs = tabs
            with gr.Tab("Grade", id=GRADE_TAB, elem_id="tab-grade"):
                grade = build_grade(page)              # setup | Grade, progress, score, card, radars
                samples = build_samples(page)          # samples table, filters, one sample, override
                my_runs = build_my_runs(page)          # the visitor's runs
                grade_file = build_grade_file(page)    # open a grade file (no judge call)
                build_compare(page)                    # compare runs and grade files (its own handlers)
            with gr.Tab("Leaderboard", id=BOARD_TAB, elem_id="tab-leaderboard") as board_tab:
                build_leaderboard(demo, page, board_tab)   # published runs, honest ranks (handlers and API)
            with gr.Tab("Judges", id=JUDGES_TAB, elem_id="tab-judges"):
                grade.judge_check = build_judges(page)     # check a judge: the report; the successor board
            with gr.Tab("About", id=ABOUT_TAB, elem_id="tab-about"):
                gr.Markdown(ABOUT, elem_id="about")
        gr.Markdown(ATTRIBUTION, elem_id="attribution")

        # ---- handlers that update other views' components ----
        display = wire_grade(page, grade, samples, my_runs)
        wire_samples(page, samples, grade, display)
        wire_my_runs(page, my_runs, grade, samples)
        wire_grade_file(page, grade_file, grade)
        wire_load(demo, page, my_runs.runs_table)   # last: owner token, ?run=, then the page's 'loaded' mark
        quiet_statuses(demo)     # the page's status bookkeeping: only what shows a progress (no tabs, no panels)
    hide_other_endpoints(demo)     # the MCP server lists the agents' tools only (the scripts' API keeps all)
    return demo


def request_limit_middleware(settings: AppSettings):
    """The per-client request limit on the API routes and open streams (`mmvet_core.hosting.requestlimit`; docs/hosting.md
    "Storage, parsing and crowds"), as FastAPI middleware: a client is its address as `MMVET_TRUSTED_PROXY_HOPS`
    says; with `MMVET_DATABASE_URL` the buckets are in the database, one per client for every replica."""
    from starlette.middleware import Middleware

    from mmvet_core.judging.budget import client_address
    from mmvet_core.hosting.requestlimit import RequestLimiter, RequestLimitMiddleware

    hops = settings.trusted_proxy_hops
    limiter = RequestLimiter(settings.requests)
    if settings.database_url:           # replicas on one database spend one budget per client (issue 33)
        from mmvet_core.hosting.requestlimit import SharedRequestLimiter
        from mmvet_core.store import Store

        limiter = SharedRequestLimiter(Store(settings.database_url, check=False), settings.requests)
    return Middleware(RequestLimitMiddleware, limiter=limiter,
                      identify=lambda peer, forwarded: client_address(peer, forwarded, hops))


def session_middleware(settings: AppSettings):
    """The sweep of gone clients' queued events and sessions (`mmvet_app.sessions`; docs/hosting-limits.md), as FastAPI
    middleware that sees the streams clients hold open."""
    from starlette.middleware import Middleware

    from mmvet_app.sessions import SessionKeeper, SessionStreamMiddleware

    return Middleware(SessionStreamMiddleware, keeper=SessionKeeper(settings.sessions))


def launch_options(settings: AppSettings) -> dict:
    """`demo.launch` keyword arguments (shared by `python app.py` and the tests)."""
    sessions = settings.sessions
    return dict(ssr_mode=False, css=CSS + JUDGES_CSS, max_file_size=f"{settings.max_upload_mb}mb",
                app_kwargs={"middleware": [request_limit_middleware(settings),      # requests per client
                                           session_middleware(settings)]},          # gone clients, sessions
                # the sessions whose state Gradio keeps: a bound on them all
                state_session_capacity=sessions.max_sessions,
                # every queued event (a page following a run too) holds one of these workers: the followers' own
                # pool comes on top of the other events' (DEFAULT_CONCURRENCY), so viewers never starve them
                max_threads=DEFAULT_CONCURRENCY + sessions.max_followers + 16,
                # only our own exports (.json/.csv/.zip we write): never the uploads folder, whose files come from
                # visitors (an HTML page there would be served inline on the app's origin)
                allowed_paths=[str(settings.data_dir / "exports")],
                footer_links=["api"],
                mcp_server=settings.mcp_server,      # MMVET_MCP=0 turns the agents' tools off (docs/agents.md)
                # Gradio's traffic dashboard (its URL printed on the console) would read a summary rebuilt in pandas
                # after events: off, and `lean_queue` skips the summary (issue 33)
                enable_monitoring=False,
                run_history=False)  # run history would keep typed API keys in the browser's storage


def mcp_start_lines(local_url: str) -> list[str]:
    """What the start log says of the agents' MCP server besides Gradio's own line (which names the streamable
    HTTP URL only): both URLs, the SSE one first, as the README's client configuration uses it.

    >>> mcp_start_lines("http://127.0.0.1:7860/")[1:]
    ['* SSE URL: http://127.0.0.1:7860/gradio_api/mcp/sse', '* Streamable HTTP URL: http://127.0.0.1:7860/gradio_api/mcp/']
    """
    base = local_url.rstrip("/")
    return ["MCP server for agents (docs/hosting-limits.md): point an MCP client at either URL",
            f"* SSE URL: {base}/gradio_api/mcp/sse", f"* Streamable HTTP URL: {base}/gradio_api/mcp/"]


def queue_options() -> dict:
    """The arguments of ``demo.queue()`` the app is served with (tests and benches serve it with the same)."""
    return {"default_concurrency_limit": DEFAULT_CONCURRENCY, "status_update_rate": QUEUE_STATUS_EVERY_S}


def main() -> None:
    """Serve the app (``python app.py``, ``mmvet-grader app``): settings from the environment."""
    app_settings = AppSettings.from_env()
    demo = build_demo(app_settings)
    demo.queue(**queue_options())
    demo.launch(server_name=os.environ.get("GRADIO_SERVER_NAME", "0.0.0.0"),
                server_port=int(os.environ.get("GRADIO_SERVER_PORT", "7860")), prevent_thread_lock=True,
                **launch_options(app_settings))
    if app_settings.mcp_server:
        print("\n".join(mcp_start_lines(demo.local_url or "")), flush=True)
    demo.block_thread()


if __name__ == "__main__":
    main()
