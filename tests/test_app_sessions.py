"""Issue 26, item 6: queued events of vanished clients are dropped, and what gone sessions kept is forgotten
(`mmvet_app.sessions`), against the running app. The app sweeps every 0.2 s and counts a client gone after 1 s without
a stream (production: every 5 s, 30 s), and lets 4 pages follow a run at once (production: 200); everything else
is as a host runs it.

The memory figures over an hour of page opens, follows and publishes are `bench/soak.py`'s; here the caches'
bounds are checked: the sessions Gradio keeps (and what each builds) and the queue.
"""
from __future__ import annotations

import re
import secrets
import time

import httpx
import pytest

from mmvet_core.service import BenchmarkChoice, JudgeChoice
from tests.app_fixtures import HOST_KEY, RESULTS_DIR, browser, new_page, start_app, stop_app, wait_progress  # noqa
from tests.fake_judge import FakeJudgeServer
from tests.waiting import wait_until

RESULTS = RESULTS_DIR / "llava-v1.5-7b.json"


@pytest.fixture(scope="module")
def judge():
    with FakeJudgeServer() as server:
        yield server


@pytest.fixture(scope="module")
def app(judge, tmp_path_factory):
    from mmvet_core.hosting.clients import SessionLimits
    from mmvet_core.hosting.requestlimit import RequestLimits

    mp = pytest.MonkeyPatch()
    tmp = tmp_path_factory.mktemp("sessions")
    mp.setenv("GRADIO_TEMP_DIR", str(tmp / "gradio-tmp"))
    handle = start_app(tmp / "data", host_key=HOST_KEY, host_base_url=judge.url, run_concurrency=1,
                       requests=RequestLimits(per_minute=0),       # this test is its many clients' only address
                       sessions=SessionLimits(gone_after_s=1.0, idle_after_s=1.0, closed_after_s=1.0,
                                              sweep_every_s=0.2, max_followers=4))
    try:
        yield handle
    finally:
        stop_app(handle)
        mp.undo()


def fn_index(app, name: str) -> tuple[int, list]:
    """The page's event handler `name`: its index and its inputs' default values (what a page would send)."""
    index, fn = next((i, f) for i, f in app.demo.fns.items() if getattr(f.fn, "__name__", "") == name)
    return index, [getattr(c, "value", None) for c in fn.inputs]


def join(http: httpx.Client, index: int, data: list, session: str) -> str:
    r = http.post("gradio_api/queue/join", json={"data": data, "fn_index": index, "session_hash": session,
                                                  "event_data": None, "trigger_id": None})
    r.raise_for_status()
    return r.json()["event_id"]


def read_until_done(http: httpx.Client, session: str) -> None:
    with http.stream("GET", "gradio_api/queue/data", params={"session_hash": session}) as r:
        for line in r.iter_lines():
            if '"process_completed"' in line:
                return


def test_viewers_who_left_a_running_run_never_keep_a_share_link_open_waiting(app, judge, browser):
    """The audit: a share-link open waited 226.6 s behind the queued events of clients that had gone. A page
    following a running run holds a queue worker while the run grades; 45 viewers opened the run and left without
    reading their stream (more than Gradio's 40 workers). Now the followers have their own pool, a gone viewer's
    stream is dropped (queued) or stopped (running), and a new viewer's page opens at once and follows the run live."""
    from app import DEFAULT_CONCURRENCY, JUDGE_HOST

    follow_fn = next(f for f in app.demo.fns.values() if getattr(f.fn, "__name__", "") == "follow")
    assert follow_fn.concurrency_limit == app.settings.sessions.max_followers == 4
    assert app.demo._queue.max_thread_count >= DEFAULT_CONCURRENCY + 4 + 1

    judge.state.latency = 1.0                          # one answer a second: the run grades for minutes
    run_id, _ = app.svc.runs.start(str(RESULTS), BenchmarkChoice(), 1, JudgeChoice(JUDGE_HOST), owner="o", visitor="v")
    try:
        open_index, open_data = fn_index(app, "open_run")
        follow_index, _ = fn_index(app, "follow")
        open_data[0] = run_id
        with httpx.Client(base_url=app.url, timeout=120) as http:
            for _ in range(45):                        # each opens the run (its page is drawn), follows, leaves
                session = secrets.token_hex(8)
                join(http, open_index, open_data, session)
                read_until_done(http, session)
                join(http, follow_index, [run_id], session)
        page = new_page(browser, f"{app.url}?run={run_id}", timeout_ms=60_000)      # a new viewer
        try:
            first = int(re.search(r"running: (\d+) / 218", wait_progress(page, r"running: \d+ / 218")).group(1))
            wait_progress(page, rf"running: (?!{first} )\d+ / 218")          # it follows the run live
        finally:
            page.context.close()
        assert app.svc.jobs.is_running(run_id)         # (all of it while the run graded)
    finally:
        judge.state.latency = 0.0
        app.svc.jobs.stop(run_id)
        app.wait_idle(60)


def test_sessions_without_a_page_are_forgotten_and_an_open_page_keeps_its_own(app, browser):
    """The audit: the app grew from 868 MB to 2.8 GB and never came down: Gradio kept every session's copy of the
    page (~400 KB each, up to 10,000). Scripts' sessions are now forgotten once idle; an open page keeps its
    session (its heartbeat is open) and keeps working."""
    holder = app.demo.state_holder
    before = set(holder.session_data)
    page = new_page(browser, app.url)
    try:
        mine = set(holder.session_data) - before
        assert len(mine) == 1, mine                    # the page's session
        with httpx.Client(base_url=app.url, timeout=60) as http:
            for _ in range(40):                        # 40 scripts, each its own session (a state each)
                r = http.post("gradio_api/call/my_runs", json={"data": ["owner-x"],
                                                                "session_hash": secrets.token_hex(8)})
                with http.stream("GET", f"gradio_api/call/my_runs/{r.json()['event_id']}") as answer:
                    list(answer.iter_lines())
        # the sweep forgets every session but the open page's
        wait_until(lambda: not set(holder.session_data) - mine, every=0.1,
                   what=lambda: f"the sweep ({len(holder.session_data)} sessions kept)")
        assert mine <= set(holder.session_data)
        page.locator("#example-button").click()         # the open page still works, with its own session
        page.wait_for_function("() => /218 of 218/.test(document.querySelector('#validation-report textarea')"
                               ".value)")
    finally:
        page.context.close()




def test_a_session_builds_only_the_part_of_the_page_it_reads(app):
    """Gradio 6.31 built, for every new session (a page, a script's client, an MCP call), the configuration of all
    355 components: 463 KB of small dicts and 35 CPU-ms each (2,000 followers: 0.9 GB, scattered where the heap
    could not hand it back). A session now builds what it reads: a script's call builds a few, an idle session
    stays small, and a session that reads everything (Gradio's deep links) gets what Gradio would have built."""
    import gc
    import tracemalloc

    from gradio.state_holder import SessionState

    session = secrets.token_hex(8)
    with httpx.Client(base_url=app.url, timeout=60) as http:
        r = http.post("gradio_api/call/my_runs", json={"data": ["owner-x"], "session_hash": session})
        with http.stream("GET", f"gradio_api/call/my_runs/{r.json()['event_id']}") as answer:
            list(answer.iter_lines())
    state = app.demo.state_holder.session_data[session]
    assert dict.__len__(state.config_values) < 10          # of 355: what the call's outputs updated

    gc.collect()
    tracemalloc.start()
    try:
        fresh = [SessionState(app.demo) for _ in range(20)]
        size, _ = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert size / len(fresh) < 100_000, size / len(fresh)    # eager: ~463 KB

    eager = object.__new__(SessionState)
    SessionState._mmvet_eager_init(eager, app.demo)
    assert sorted(vars(eager)) == sorted(k for k in vars(fresh[0]))
    assert list(fresh[0].config_values.items()) == list(eager.config_values.items())
    assert list(fresh[0].components) == list(eager.components)


def test_an_idle_queue_looks_for_events_every_10_ms_not_every_millisecond(app):
    """Gradio 6.31's queue looked for events to start every millisecond while it had none (a thousand wake-ups a
    second: 31 CPU-ms a second of an idle server, measured with `psutil` per thread). The app's queue, and any
    queue made after it (``demo.queue()`` makes a new one), sleeps `QUEUE_IDLE_POLL_S`; the attribute is the one
    Gradio's loop reads, so an upgrade that renames it fails here."""
    import inspect

    from gradio import queueing

    from mmvet_app.sessions import QUEUE_IDLE_POLL_S

    assert "await asyncio.sleep(self.sleep_when_free)" in inspect.getsource(queueing.Queue.start_processing)
    assert app.demo._queue.sleep_when_free == QUEUE_IDLE_POLL_S == 0.01
    assert queueing.Queue(live_updates=False, concurrency_count=1, update_intervals=1, max_size=None,
                          blocks=app.demo).sleep_when_free == QUEUE_IDLE_POLL_S


def test_a_crowd_of_calls_ending_at_once_builds_no_traffic_summary(app, monkeypatch):
    """Gradio 6.31 rebuilt a pandas DataFrame of up to 10,000 recorded events in the worker thread of an event that
    ends, for its /monitoring dashboard; when a crowd of followers closed at once, many threads built one side by
    side and pyarrow's allocator kept a heap per thread (a 5,000-entry board's 640 followers: 1.5 GB never handed
    back). The dashboard is off and its summary is never built, even at Gradio's own pace (after every event)."""
    import threading

    from gradio import queueing

    queue = app.demo._queue
    built = []
    get_df = queueing.Queue._get_df
    monkeypatch.setattr(queueing.Queue, "_get_df", staticmethod(lambda records: built.append(1) or get_df(records)))
    monkeypatch.setattr(queue, "ANAYLTICS_CACHE_FREQUENCY", 1)          # Gradio's default: after every event
    before = queue.events_recorded
    gate = threading.Barrier(24)
    errors = []

    def follower():
        with httpx.Client(base_url=app.url, timeout=60) as http:
            session = secrets.token_hex(8)
            gate.wait()                                                    # all at once
            try:
                r = http.post("gradio_api/call/my_runs", json={"data": ["owner-x"], "session_hash": session})
                with http.stream("GET", f"gradio_api/call/my_runs/{r.json()['event_id']}") as answer:
                    assert any(line.startswith("event: complete") for line in answer.iter_lines())
            except Exception as e:  # noqa: BLE001 — reported below
                errors.append(e)
    crowd = [threading.Thread(target=follower) for _ in range(24)]
    for t in crowd:
        t.start()
    for t in crowd:
        t.join()
    assert not errors, errors
    assert queue.events_recorded - before >= 24         # Gradio recorded them (its bookkeeping is unchanged)
    assert built == []                                   # and built no DataFrame of them
    assert httpx.get(app.url + "monitoring/summary", timeout=30).status_code == 403      # the dashboard is off


def test_a_crowd_waiting_in_the_queue_is_told_its_place_at_a_pace_not_at_every_start(app, monkeypatch):
    """Gradio's default tells every waiting client its place each time an event starts: N waiting events cost N
    messages per start, N² while a crowd drains (640 pages following one run on a 5,000-entry board: the app's
    Python heap grew by 1.1 GB of such messages and stayed fragmented). Here the queue tells them every
    `QUEUE_STATUS_EVERY_S` seconds: of 29 events waiting behind one slot, none hears of its place more than once
    when it joins and once per interval it waits (the last of them would hear it once per event started before it)."""
    import threading

    from gradio.server_messages import EstimationMessage
    from mmvet_app.app import QUEUE_STATUS_EVERY_S
    from tests.held_calls import HeldCalls

    queue = app.demo._queue
    fn = next(f for f in app.demo.fns.values() if f.api_name == "my_runs")      # the API's (/call/my_runs)
    queue.create_event_queue_for_fn(fn)                  # (Gradio makes an event's lane when it first queues one)
    lane = queue.event_queue_per_concurrency_id[fn.concurrency_id]
    monkeypatch.setattr(lane, "concurrency_limit", 1)                 # one slot: the others wait in the queue
    told: dict[str, int] = {}
    send = queue.send_message

    def counting(event, message):
        if isinstance(message, EstimationMessage):
            told[event.session_hash] = told.get(event.session_hash, 0) + 1
        return send(event, message)
    monkeypatch.setattr(queue, "send_message", counting)
    sessions = [f"crowd-{i}-{secrets.token_hex(4)}" for i in range(30)]   # (one address: at most 32 open streams)
    errors = []

    def client(session: str) -> None:
        try:
            with httpx.Client(base_url=app.url, timeout=120) as http:
                r = http.post("gradio_api/call/my_runs", json={"data": ["owner-x"], "session_hash": session})
                with http.stream("GET", f"gradio_api/call/my_runs/{r.json()['event_id']}") as answer:
                    lines = list(answer.iter_lines())
                assert any(line.startswith("event: complete") for line in lines), lines
        except Exception as e:  # noqa: BLE001 — reported below
            errors.append(e)

    with HeldCalls(app.svc.reading, "runs_of") as held:
        crowd = [threading.Thread(target=client, args=(sessions[0],))]
        crowd[0].start()
        held.wait_entered(1)                                           # the slot is taken
        started = time.monotonic()
        crowd += [threading.Thread(target=client, args=(s,)) for s in sessions[1:]]
        for t in crowd[1:]:
            t.start()
        wait_until(lambda: len(lane.queue) >= 29, what=lambda: f"29 waiting events ({len(lane.queue)})", every=0.05)
        assert len(lane.queue) == 29, len(lane.queue)
    for t in crowd:
        t.join()
    waited = time.monotonic() - started
    assert not errors, errors
    most = max(told.values())
    # once when it joined, then once per interval it waited (with Gradio's default: once per start ahead, 28)
    assert most <= 2 + waited / QUEUE_STATUS_EVERY_S, (most, waited)
