"""Fixtures for the app-level tests: the Gradio app in-process on a free port, a fake judge as the server's
judge, and a headless Debian Chromium driven by sync Playwright.

Import the fixtures into a test module with ``from tests.app_fixtures import app_server, fake_server, browser``
(they are module-scoped: the app starts once per module, each module has its own data dir and fake judge).
"""
from __future__ import annotations

import os

# Gradio reads these at import time; set them before anything imports gradio.
os.environ.setdefault("GRADIO_ANALYTICS_ENABLED", "False")
os.environ.setdefault("HF_HUB_DISABLE_TELEMETRY", "1")
os.environ.setdefault("HF_HUB_OFFLINE", "1")

import json
import re
import time
import urllib.request
import weakref
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import pytest
from playwright.sync_api import expect

from tests.fake_judge import FakeJudgeServer, free_port

SHARED = Path(__file__).resolve().parent / "data"
RESULTS_DIR = SHARED / "results"
OFFICIAL_GRADES = SHARED / "official-grades"
V2_RESULTS = SHARED / "mmvet-v2-partial" / "gemini-1.5-pro.json"
CHROMIUM = "/usr/bin/chromium"
CHROMIUM_ARGS = ["--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
                 "--disable-background-networking", "--disable-component-update", "--disable-sync"]
HOST_KEY = "sk-test"
# How long a page may take to show what a test waits for (expect) or to be ready for an action: generous, since only
# a broken page comes near it and a busy machine needs many seconds (plotly.js, a reload). Playwright's expect option
# is global: this is the suite's one value (per-module values used to be whichever module was imported last).
PAGE_TIMEOUT_MS = 60_000
expect.set_options(timeout=PAGE_TIMEOUT_MS)


#: Gradio 6.31's frontend leaves one `requestAnimationFrame` loop running for a page's whole life: the elapsed-time
#: timer of the app's own "Loading..." status tracker, whose flag only an effect on that tracker's status resets
#: (by the minified code, the tracker goes away with the loader before that effect runs), so its chain of frames
#: never ends. An idle test page then costs its renderer and GPU processes ≈ 75 CPU-ms a second for as long as it is
#: open (measured on a bare ``gr.Blocks()``: 0.73-0.76 CPU-s per 10 s idle; 0.03 with this script), the largest idle
#: cost of the browser tests. Injected into every test page before Gradio's own scripts: a chain of status-tracker
#: frames that has run for `STATUS_TIMER_MAX_MS` ends there (the elapsed seconds of a status still pending then stop
#: counting; no test reads them). Nothing else of the page changes. The app's visitors keep Gradio's loop (a fix
#: belongs to Gradio's frontend).
STATUS_TIMER_MAX_MS = 2000
END_GRADIO_IDLE_LOOP = """(() => {
  const raf = window.requestAnimationFrame.bind(window);
  const began = new Map();        // a chain of frames -> when its first frame was asked for
  let running = null;             // the chain whose frame is running now
  window.requestAnimationFrame = function (callback) {
    if ((new Error().stack || "").indexOf("statustracker-") < 0) return raf(callback);
    const chain = running !== null ? running : Symbol("chain");
    if (!began.has(chain)) began.set(chain, performance.now());
    if (performance.now() - began.get(chain) > %d) { began.delete(chain); return 0; }
    return raf((t) => { running = chain; try { callback(t); } finally { running = null; } });
  };
})();""" % STATUS_TIMER_MAX_MS


def new_context(browser, *, viewport: tuple[int, int] = (1400, 1000)):
    """A fresh browser context (its own localStorage, hence its own owner token) whose pages end Gradio's idle frame
    loop (`END_GRADIO_IDLE_LOOP`)."""
    context = browser.new_context(viewport={"width": viewport[0], "height": viewport[1]})
    context.add_init_script(END_GRADIO_IDLE_LOOP)
    return context


@dataclass
class AppHandle:
    """A running app: its URL, the Blocks (``demo.svc`` holds store and jobs) and its settings."""

    demo: object
    url: str
    settings: object

    @property
    def svc(self):
        return self.demo.svc

    @property
    def store(self):
        return self.demo.svc.store

    def view(self, run_id: str):
        """The run as the store has it, every judge attempt included."""
        from mmvet_core.runs.lifecycle import load_run_view
        return load_run_view(self.store, run_id, evidence_for="*")

    def wait_idle(self, timeout: float = 120.0) -> None:
        """Wait until no grading job of this app is running (so a test leaves nothing behind)."""
        deadline = time.time() + timeout
        while self.svc.jobs.running_count():
            if time.time() > deadline:
                raise TimeoutError("grading jobs still running")
            time.sleep(0.05)


def wait_http(url: str, timeout: float = 120.0) -> None:
    deadline = time.time() + timeout
    while True:
        try:
            with urllib.request.urlopen(url, timeout=10) as r:
                if r.status == 200:
                    return
        except OSError:
            pass
        if time.time() > deadline:
            raise TimeoutError(f"{url} did not answer")
        time.sleep(0.1)


def start_app(data_dir: Path, port: int | None = None, **settings_kwargs) -> AppHandle:
    """Build the app with `AppSettings(data_dir=…, **settings_kwargs)` and launch it on `port` (default: a free
    one; a restarted app takes its predecessor's port, so the browser's origin and storage stay the same)."""
    from app import AppSettings, build_demo, launch_options, queue_options
    from gradio import networking as gr_networking

    from mmvet_app import common

    # the fake judges are on 127.0.0.1: visitors' endpoints there need the private deployment's allowance
    settings_kwargs.setdefault("allow_private_endpoints", True)
    settings = AppSettings(data_dir=Path(data_dir), **settings_kwargs)
    with pytest.MonkeyPatch.context() as mp:
        # plotly.js is loaded by the page's first chart, not beforehand when the page is idle: ≈ 1.1 CPU-s of
        # Chromium per page load, about a third of it, and many test pages draw no chart. Apps started as
        # `python app.py` (test_app_ux's restart, test_many_machines, test_deploy, bench/) preload it as
        # visitors get it.
        mp.setattr(common, "plotly_preload_js", lambda: None)
        demo = build_demo(settings)
        demo.queue(**queue_options())
        port = port or free_port()
        # Gradio's launch asks the new server for its page, 3 s at most, and on a timeout refuses to start ("When
        # localhost is not accessible, a shareable link must be created"): on a machine the suite keeps busy the
        # page took longer once. The test's app waits for its server as long as `wait_http` does.
        mp.setattr(gr_networking, "url_ok", lambda url: wait_http(url) is None)
        # exactly what `python app.py` passes (allowed paths, upload limit, ...)
        demo.launch(server_name="127.0.0.1", server_port=port, prevent_thread_lock=True, quiet=True,
                    **launch_options(settings))
    url = f"http://127.0.0.1:{port}/"
    wait_http(url + "gradio_api/info")
    return AppHandle(demo, url, settings)


def stop_app(app: AppHandle) -> None:
    app.svc.jobs.shutdown()
    app.demo.close()
    app.store.close()


@pytest.fixture(scope="module")
def fake_server():
    """The server's judge: a real OpenAI-compatible HTTP server on 127.0.0.1 (``.state`` logs calls)."""
    with FakeJudgeServer() as server:
        yield server


@contextmanager
def host_app(fake_server, tmp_path_factory, name: str = "app", **settings_kwargs):
    """The app with the fake judge as its host judge (the default judge choice) in a fresh folder, and the
    environment pointing at that judge while it runs; `settings_kwargs` add to the settings (e.g. host_secret)."""
    mp = pytest.MonkeyPatch()
    # anything that falls back to the environment also lands on the fake judge, never on api.openai.com
    mp.setenv("OPENAI_API_KEY", HOST_KEY)
    mp.setenv("OPENAI_BASE_URL", fake_server.url)
    tmp = tmp_path_factory.mktemp(name)
    mp.setenv("GRADIO_TEMP_DIR", str(tmp / "gradio-tmp"))
    app = start_app(tmp / "data", host_key=HOST_KEY, host_base_url=fake_server.url, run_concurrency=4,
                    **settings_kwargs)
    try:
        yield app
    finally:
        stop_app(app)
        mp.undo()


@pytest.fixture(scope="module")
def app_server(fake_server, tmp_path_factory):
    """The app, with the fake judge as its host judge (the default judge choice). Module-scoped."""
    with host_app(fake_server, tmp_path_factory) as app:
        yield app


@pytest.fixture(scope="module")
def browser():
    """A headless Debian Chromium (sync Playwright; PyPI playwright has no bundled browser)."""
    from playwright.sync_api import sync_playwright

    with sync_playwright() as p:
        b = p.chromium.launch(executable_path=CHROMIUM, headless=True, args=CHROMIUM_ARGS)
        try:
            yield b
        finally:
            b.close()


def tracked_page(context, timeout_ms: int = PAGE_TIMEOUT_MS):
    """A new page of `context` whose requests are counted from before its first navigation (`track_requests`, for
    `wait_loaded`), with the suite's timeout."""
    page = context.new_page()
    track_requests(page)
    page.set_default_timeout(timeout_ms)
    return page


def new_page(browser, url: str, *, timeout_ms: int = PAGE_TIMEOUT_MS, viewport: tuple[int, int] = (1400, 1000)):
    """A page in a fresh browser context (its own localStorage, hence its own owner token)."""
    t0 = time.time()
    page = tracked_page(new_context(browser, viewport=viewport), timeout_ms)
    page.goto(url)
    wait_loaded(page)
    if os.environ.get("APP_TEST_TIMING"):
        print(f"new_page {time.time() - t0:.1f}s")
    return page


_in_flight: "weakref.WeakKeyDictionary" = weakref.WeakKeyDictionary()
#: Quiet a page's network must keep (no request in flight but its heartbeat) to count as settled, and the longest
#: wait for it (a page whose timer polls is never quiet).
SETTLED_QUIET_S, SETTLED_MOST_S = 0.5, 5.0


def track_requests(page) -> None:
    """Keep count of `page`'s requests in flight (`wait_settled`), from before its first navigation. Its heartbeat
    is left out: that stream stays open as long as the page (so Playwright's "networkidle" never comes)."""
    flying: set = set()
    _in_flight[page] = flying
    page.on("request", lambda r: "/heartbeat/" in r.url or flying.add(r))
    page.on("requestfinished", lambda r: flying.discard(r))
    page.on("requestfailed", lambda r: flying.discard(r))


def wait_settled(page) -> None:
    """Let the events a page load set off (opening a ?run=, the visitor's runs, a tab's contents) settle: until no
    request but the heartbeat has been in flight for `SETTLED_QUIET_S`, at most `SETTLED_MOST_S`. A page that
    `track_requests` does not know waits the longest."""
    flying = _in_flight.get(page)
    deadline = time.monotonic() + SETTLED_MOST_S
    quiet_since = None
    while time.monotonic() < deadline:
        page.wait_for_timeout(50)                # Playwright delivers the page's request events while it waits
        if flying is None or flying:
            quiet_since = None
        elif quiet_since is None:
            quiet_since = time.monotonic()
        elif time.monotonic() - quiet_since >= SETTLED_QUIET_S:
            return


def wait_loaded(page) -> None:
    """Wait for the Gradio page to mount and for `demo.load` to fill the owner token, then for what that set off
    to settle (`wait_settled`)."""
    page.wait_for_selector("#total-score textarea", state="attached")
    # the load event (owner token, ?run=) is a queued call; the page marks <body> once its outputs are applied
    page.wait_for_selector("body[data-mmvet-loaded]", state="attached", timeout=60_000)
    wait_settled(page)


def reopen(page, url: str) -> None:
    """Load `url` in `page` again, e.g. after the server restarted. Gradio's page may be navigating by itself at that
    moment (it reloads when the server's app version changes), which aborts our navigation: try again."""
    from playwright.sync_api import Error as PlaywrightError

    for attempt in range(3):
        try:
            page.goto(url)
            break
        except PlaywrightError as e:
            if "ERR_ABORTED" not in str(e) or attempt == 2:
                raise
            page.wait_for_timeout(1000)
    wait_loaded(page)


# --- page helpers (shared by the browser tests) ----------------------------------------------------------------
def text_of(page, elem_id: str) -> str:
    """The value of a Gradio Textbox by elem_id."""
    return page.locator(f"#{elem_id}").locator("textarea, input").first.input_value()


def progress_text(page) -> str:
    loc = page.locator("#progress-text")
    return loc.inner_text() if loc.count() else ""


def wait_progress(page, pattern: str, timeout: float = 180.0) -> str:
    from playwright.sync_api import expect

    expect(page.locator("#progress-text")).to_have_text(re.compile(pattern), timeout=timeout * 1000)
    return progress_text(page)


def upload_results(page, path) -> None:
    """Drop `path` on the results file box (clearing the file already there, if any)."""
    clear = page.locator("#results-file button[aria-label='Clear']")
    if clear.count():
        clear.click()
    page.locator("#results-file input[type=file]").set_input_files(str(path))


def set_runs(page, n: int) -> None:
    box = page.locator("#runs input[type=number]")
    box.fill(str(n))
    box.press("Enter")
    box.blur()


@pytest.fixture(scope="module")
def page(app_server, browser):
    """One visitor's page on the module's app (its own browser context), shared by the module's tests."""
    p = new_page(browser, app_server.url)
    yield p
    p.context.close()


def open_grade_file(page, path, timeout_ms: int = PAGE_TIMEOUT_MS) -> str:
    """Drop `path` on "Open a grade file" (opening the section first) and wait for the run it opens: its id in the
    address and in the share link. Returns the run id."""
    from playwright.sync_api import expect

    before = page.url
    if not page.locator("#grade-json-file").is_visible():
        page.locator("#grade-file-section").get_by_text("Open a grade file").first.click()
    clear = page.locator("#grade-json-file button[aria-label='Clear']")
    if clear.count():
        clear.click()
    page.locator("#grade-json-file input[type=file]").set_input_files(str(path))
    expect(page).not_to_have_url(before, timeout=timeout_ms)
    expect(page).to_have_url(re.compile(r"\?run=[\w-]{24}$"), timeout=timeout_ms)
    run_id = page.url.rsplit("run=", 1)[1]
    expect(page.locator("#share-link textarea")).to_have_value(re.compile(f"run={run_id}$"), timeout=timeout_ms)
    return run_id


def write_json(path: Path, data) -> Path:
    path.write_text(json.dumps(data, ensure_ascii=False), encoding="utf-8")
    return path
