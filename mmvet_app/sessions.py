"""Gradio's queue and per-session memory, kept to the clients still there (`mmvet_core.hosting.clients`, issue 26).

Gradio keeps, per session (a page load, a script's client): a copy of the page's component configuration (463 KB
for this page when built whole, up to 10,000 sessions by default: the audit's 868 MB -> 2.8 GB), the messages of its
events until a stream reads them, and its queued events until they run, whether or not anyone is still there to
read their answers. Gradio itself cleans up after a client whose open stream closes; a client that joined the
queue and left without ever opening a stream (or whose page closed) is never looked at again.

`SessionStreamMiddleware` sees every stream a client holds open (the page's heartbeat, the queue's data stream,
the REST result stream) and `SessionKeeper` sweeps, every few seconds, with what `ClientStreams` knows:

- a queued event of a client gone for `gone_after_s` is dropped (and a running generator of one stops at its
  next update); the messages nobody will read go with it;
- a session without a page forgets its state after `idle_after_s`, a closed page after `closed_after_s`;
  `max_sessions` bounds them all (Gradio's ``state_session_capacity``); freed memory is handed back to the
  system (``malloc_trim``), so the process's size comes back down.

`lean_sessions` makes a session's copy of the page lazy: Gradio 6.31 builds, for every new session (a page load,
a script's client, each MCP tool call), the configuration of every component (355 here: 463 KB of small dicts,
35 CPU-ms), although a session only ever reads the few its events update. Built on first need, a session costs
about 23 KB, and a crowd's memory is not scattered across the heap where it cannot be handed back (issue 33).

`lean_queue` stops Gradio's traffic summary, which only its /monitoring dashboard reads (off here: `launch_options`):
Gradio 6.31 builds, in the worker thread of each event that ends, a pandas DataFrame of up to 10,000 recorded
events (its check of how many events passed since the last one is not locked, so when a crowd of followers closes
at once, many worker threads build one side by side). pandas keeps its strings in pyarrow, whose allocator
(mimalloc) reserves a heap per thread: memray's largest allocation when 640 followers of a 5,000-entry board
closed (1.07 GB). One part of issue 33's crowd memory, not all of it: what a closing crowd leaves is mostly freed
but fragmented heap (gc.collect + malloc_trim give back ~10 %). It also makes an idle queue look for events every
10 ms instead of every millisecond (`QUEUE_IDLE_POLL_S`).
"""
from __future__ import annotations

import asyncio
import copy
import ctypes
import ctypes.util
import datetime
import logging
import os
import re
import time
from dataclasses import dataclass
from urllib.parse import parse_qs

from mmvet_core.hosting.clients import ClientStreams, SessionLimits

__all__ = ["SessionKeeper", "SessionStreamMiddleware", "SweepReport", "lean_queue", "lean_sessions"]

log = logging.getLogger("mmvet_grader")

_HEARTBEAT = re.compile(r"/gradio_api/heartbeat/([^/]+)/?$")
_QUEUE_DATA = re.compile(r"/gradio_api/queue/data/?$")
_CALL_RESULT = re.compile(r"/gradio_api/call/(?:v2/)?[^/]+/([^/]+)/?$")


@dataclass
class SweepReport:
    """What sweeps did so far (and the state they left)."""
    sweeps: int = 0
    dropped_events: int = 0          # queued events of gone clients, never run
    stopped_events: int = 0          # running events of gone clients, told to stop at their next update
    forgotten_sessions: int = 0      # sessions whose state was forgotten
    sessions: int = 0                # sessions whose state is kept, after the last sweep
    queued: int = 0                  # events in the queue, after the last sweep


def _trim_malloc() -> None:
    """Hand freed heap memory back to the system (glibc); nothing elsewhere."""
    try:
        libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6")
        libc.malloc_trim(0)
    except (OSError, AttributeError):
        pass


class _LazyConfigs(dict):
    """A session's ``config_values`` (component id -> its configuration), each built from the session's
    ``blocks_config`` the first time it is read; reading them all (Gradio's deep links) builds the rest, in the
    page's order. What Gradio stores (an update, a value) is stored as in a plain dict."""

    def __init__(self, blocks_config, ids: tuple):
        super().__init__()
        self._blocks_config, self._ids, self._known = blocks_config, ids, frozenset(ids)
        self._complete = False

    def _build(self, key):
        return self._blocks_config.config_for_block(key, [], self._blocks_config.blocks[key])

    def __missing__(self, key):
        if key not in self._known:
            raise KeyError(key)
        value = self._build(key)
        dict.__setitem__(self, key, value)
        return value

    def __contains__(self, key):
        return dict.__contains__(self, key) or key in self._known

    def get(self, key, default=None):
        return self[key] if key in self else default

    def _all(self) -> dict:
        if not self._complete:             # once: every component, in the page's order, then what Gradio added
            built = {k: dict.__getitem__(self, k) if dict.__contains__(self, k) else self._build(k) for k in self._ids}
            added = {k: v for k, v in dict.items(self) if k not in self._known}
            dict.clear(self)
            dict.update(self, built)
            dict.update(self, added)
            self._complete = True
        return self

    def __iter__(self):
        return dict.__iter__(self._all())

    def __len__(self):
        return dict.__len__(self._all())

    def keys(self):
        return dict.keys(self._all())

    def values(self):
        return dict.values(self._all())

    def items(self):
        return dict.items(self._all())


def lean_sessions() -> None:
    """Make every Gradio session's copy of the page lazy (see the module); once per process, for every app in it.
    The constructor is Gradio 6.31's `SessionState.__init__` with ``config_values`` left to `_LazyConfigs`
    (`tests/test_app_sessions.py` holds that a session reads what the eager one would have built)."""
    from gradio import state_holder

    cls = state_holder.SessionState
    if getattr(cls, "_mmvet_eager_init", None) is not None:
        return

    def __init__(self, blocks):
        self.blocks_config = copy.copy(blocks.default_config)
        ids = tuple(k for k in self.blocks_config.blocks if k in blocks.blocks)
        self.config_values = _LazyConfigs(self.blocks_config, ids)
        self.state_data = {}
        self._state_ttl = {}
        self.is_closed = False
        self.STATE_TTL_WHEN_CLOSED = 1 if os.getenv("GRADIO_IS_E2E_TEST", None) else 3600

    cls._mmvet_eager_init = cls.__init__
    cls.__init__ = __init__


#: How long Gradio's queue sleeps between looks at its events when none can start (Gradio 6.31: 1 ms on Linux, a
#: thousand wake-ups a second: an idle server spent 31 CPU-ms a second, 3 % of a core, doing nothing). At 10 ms an
#: event starts at most 10 ms later, unseen beside a network's round trip.
QUEUE_IDLE_POLL_S = 0.01


def lean_queue() -> None:
    """Gradio's queue, once per process, for every queue made from now on (``Blocks()`` makes one,
    ``demo.queue()`` another): it looks for events to start every `QUEUE_IDLE_POLL_S` when it has nothing to do,
    instead of every millisecond, and computes its traffic summary only for an app whose /monitoring dashboard is
    on (see the module). Gradio 6.31's `Queue.__init__` and `Queue.compute_analytics_summary` otherwise, unchanged."""
    from gradio import queueing

    cls = queueing.Queue
    if getattr(cls, "_mmvet_summary", None) is not None:
        return
    init, summary = cls.__init__, cls.compute_analytics_summary

    def __init__(self, *args, **kwargs):
        init(self, *args, **kwargs)
        self.sleep_when_free = max(self.sleep_when_free, QUEUE_IDLE_POLL_S)

    def compute_analytics_summary(self, records):
        if not getattr(self.blocks, "enable_monitoring", True):
            return self.cached_event_analytics_summary         # nobody reads it: no DataFrame per event
        return summary(self, records)

    cls._mmvet_summary = summary
    cls.__init__ = __init__
    cls.compute_analytics_summary = compute_analytics_summary


class SessionKeeper:
    """Sweeps a Gradio app's queue and per-session state with `limits` (see the module)."""

    def __init__(self, limits: SessionLimits | None = None, streams: ClientStreams | None = None):
        self.limits = limits or SessionLimits()
        self.streams = streams or ClientStreams(self.limits.gone_after_s)
        self.report = SweepReport()
        self._task: asyncio.Task | None = None

    # ---- which session a stream belongs to ----
    def stream_session(self, scope, app) -> str | None:
        """The session a request holds a stream open for (a GET of the heartbeat, the queue's data or a REST
        result), else None."""
        if scope.get("method") != "GET":
            return None
        path = scope.get("path", "")
        if m := _HEARTBEAT.search(path):
            return m.group(1)
        if _QUEUE_DATA.search(path):
            values = parse_qs(scope.get("query_string", b"").decode("latin-1")).get("session_hash")
            return values[0] if values else None
        if (m := _CALL_RESULT.search(path)) and app is not None:
            event_id = m.group(1)
            queue = app.get_blocks()._queue
            event = queue.event_ids_to_events.get(event_id)
            if event is not None:
                return event.session_hash
            return next((s for s, ids in list(queue.pending_event_ids_session.items()) if event_id in ids), event_id)
        return None

    # ---- the sweep ----
    async def sweep(self, app) -> SweepReport:
        """One sweep of `app` (Gradio's App, on its event loop): see the module."""
        blocks = app.get_blocks()
        queue = blocks._queue
        streams, limits, report = self.streams, self.limits, self.report
        gone: set[str] = set()
        for event_queue in list(queue.event_queue_per_concurrency_id.values()):
            for event in list(event_queue.queue):
                if streams.gone(event.session_hash, since=event.enqueue_time):
                    await queue.clean_events(event_id=event._id)
                    gone.add(event.session_hash)
                    report.dropped_events += 1
        active: set[str] = set()       # sessions with an event running, then also queued
        for job in list(queue.active_jobs):
            for event in job or ():
                active.add(event.session_hash)
                if event.alive and streams.gone(event.session_hash, since=event.enqueue_time):
                    event.alive = False              # a generator stops at its next update
                    report.stopped_events += 1
        # sessions with an event still to run keep their messages (the event writes to them when it runs)
        active |= {e.session_hash for eq in list(queue.event_queue_per_concurrency_id.values()) for e in list(eq.queue)}
        # answers nobody will read: the messages and event ids of gone sessions with nothing queued or running
        async with queue.pending_message_lock:
            for session in list(queue.pending_event_ids_session):
                if session not in active and streams.gone(session, since=self._last_used(app, session)):
                    queue.pending_event_ids_session.pop(session, None)
                    queue.pending_messages_per_session.pop(session, None)
                    gone.add(session)
        forgotten = self._forget_sessions(app, active)
        streams.forget_older_than(max(limits.gone_after_s, limits.idle_after_s, limits.closed_after_s) * 2)
        report.sweeps += 1
        report.sessions = len(app.state_holder.session_data)
        report.queued = len(queue)
        if forgotten:
            _trim_malloc()
        if gone or forgotten:
            log.info("sessions: dropped the events of %d gone client(s), forgot %d session(s), %d kept",
                     len(gone), forgotten, report.sessions)
        return report

    @staticmethod
    def _last_used(app, session: str) -> float:
        """When `session` last ran an event, on the monotonic clock (-inf when unknown)."""
        used = app.state_holder.time_last_used.get(session)
        if used is None:
            return float("-inf")
        return time.monotonic() - (datetime.datetime.now() - used).total_seconds()

    def _forget_sessions(self, app, active: set[str]) -> int:
        holder, limits = app.state_holder, self.limits
        now = datetime.datetime.now()
        forgotten = 0
        for session in list(holder.session_data):
            if session in active or self.streams.is_open(session):
                continue
            state = holder.session_data.get(session)
            used = holder.time_last_used.get(session)
            if state is None:
                continue
            idle = (now - used).total_seconds() if used else float("inf")
            if idle <= (limits.closed_after_s if state.is_closed else limits.idle_after_s):
                continue
            holder.delete_state(session)             # gr.State delete callbacks run
            with holder.lock:
                holder.session_data.pop(session, None)
                holder.time_last_used.pop(session, None)
            forgotten += 1
        self.report.forgotten_sessions += forgotten
        return forgotten

    # ---- the periodic sweep ----
    def ensure_running(self, app) -> None:
        """Start sweeping `app` every `sweep_every_s` on the running loop (once; again if it stopped)."""
        if app is None or (self._task is not None and not self._task.done()):
            return
        self._task = asyncio.get_running_loop().create_task(self._run(app))

    async def _run(self, app) -> None:
        stop = getattr(app, "stop_event", None)
        while True:
            try:
                if stop is not None:
                    await asyncio.wait_for(stop.wait(), self.limits.sweep_every_s)
                    return                               # the server stops
                await asyncio.sleep(self.limits.sweep_every_s)
            except asyncio.TimeoutError:
                pass
            try:
                await self.sweep(app)
            except Exception:  # noqa: BLE001 — a sweep must never take the server down; the next one tries again
                log.exception("sweeping gone clients")


class SessionStreamMiddleware:
    """ASGI middleware: counts the streams each session holds open for `keeper` (its `ClientStreams`) and keeps
    its sweep running. Install it with ``FastAPI(middleware=[Middleware(SessionStreamMiddleware, keeper=...)])``
    (Gradio: ``launch(app_kwargs=...)``)."""

    def __init__(self, app, keeper: SessionKeeper):
        self.app, self.keeper = app, keeper

    async def __call__(self, scope, receive, send):
        if scope.get("type") != "http":
            return await self.app(scope, receive, send)
        gradio_app = scope.get("app")
        if gradio_app is not None and hasattr(gradio_app, "get_blocks"):
            self.keeper.ensure_running(gradio_app)
        else:
            gradio_app = None
        session = self.keeper.stream_session(scope, gradio_app)
        if session is None:
            return await self.app(scope, receive, send)
        self.keeper.streams.opened(session)
        try:
            await self.app(scope, receive, send)
        finally:
            self.keeper.streams.closed(session)
