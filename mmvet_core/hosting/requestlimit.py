"""Requests per client on the app's API routes: a token bucket per visitor, and the ASGI middleware that applies it.

One client (a script, an agent, a crowd of tabs behind one address) may send at most ``per_minute`` requests a
minute to the routes that run the app's handlers (`limited`): every POST (or other non-GET) under
``/gradio_api/`` (``call/``, ``run/``, ``api/``, ``queue/join``, ``upload``, ``cancel``, ``stream/``, the MCP
messages, ...), ``GET /gradio_api/run/…``, and every request to the MCP server (``/gradio_api/mcp/…``: the SSE
session, its messages, the streamable endpoint), in bursts of at most ``burst``. Pages, static files and the
streams that deliver answers (``queue/data``, ``call/<api>/<event>``, ``heartbeat``) are never counted.

Beyond the limit the request is refused before any handler or the queue sees it: ``429 Too Many Requests`` with
``Retry-After``. MCP is answered in the protocol instead, so that an honest agent's session survives (an HTTP
error ends the official ``mcp`` client's session) and the agent slows down and reads why:

- a tool call (a JSON-RPC ``tools/call`` message, on either MCP transport) goes through marked (`OVER_LIMIT` in
  the request's ``state``) and the tool answers a tool error with the wait (`over_limit_message`; `mmvet_app/mcp.py`);
- the protocol's own messages (``tools/list``, which the official client sends by itself before a call,
  ``initialize``, ``ping``, notifications) are cheap: over the limit they pass within a second allowance of
  `PROTOCOL_FACTOR` times the limit; beyond that too, a request on the streamable transport gets a JSON-RPC error
  (HTTP 200), and a message on the SSE transport (whose answers come on its stream) waits up to `MAX_SLOWDOWN_S`
  before it passes.

**Open streams** (a page's heartbeat and its queue stream, which a page following a run holds for as long as the
run grades; a script's result stream, an agent's MCP stream: `stream_kind`) are counted while they are open: at
most ``streams_per_address`` per client and ``max_streams`` in all (`StreamCounter`); beyond either, the stream is
refused (429) with words that say which. Opening a page's or an agent's stream also spends a request of the
client's budget (a script's result stream comes with its own counted request). A crowd of pages following one
run from a few addresses therefore costs what those addresses may spend, and what a closed stream held is given
back when it closes.

A visitor is whatever `identify` makes of the socket's peer and ``X-Forwarded-For`` (the service's salted address:
a client cannot rotate the header to get more). Buckets live in memory, at most ``max_clients`` of them (the idlest
are dropped first), or in the database shared by every replica (`SharedRequestLimiter`, ``MMVET_DATABASE_URL``).
"""
from __future__ import annotations

import asyncio
import json
import logging
import threading
import re
import time
from dataclasses import dataclass
from typing import Callable, Mapping

from .policy import env_number
from ..store import Store, StoreError

log = logging.getLogger("mmvet_grader")

__all__ = ["RequestLimits", "RequestLimiter", "RequestLimitMiddleware", "OVER_LIMIT", "StreamCounter", "limited",
           "over_limit_message", "stream_kind"]

API = "/gradio_api/"
MCP = "/gradio_api/mcp"
#: Where the middleware leaves the refusal of an MCP tool call over the limit (``scope["state"]``, which is what a
#: Starlette ``Request.state`` reads): the tool answers it as its error.
OVER_LIMIT = "mmvet_over_limit"
#: The MCP SDK refuses larger messages (413) itself; a body is read at most this far to tell a tool call.
MAX_PEEK = 4 * 1024 * 1024
#: The allowance of MCP's protocol messages over the limit (``tools/list``, ``ping``...): this many times the limit.
PROTOCOL_FACTOR = 4
#: The longest an MCP message on the SSE transport is held back beyond both allowances (it cannot be refused in
#: the protocol on that transport: its answer travels on the session's stream).
MAX_SLOWDOWN_S = 5.0
_STREAMS = re.compile(r"^/gradio_api/(?:heartbeat/[^/]+|queue/data|call/(?:v2/)?[^/]+/[^/]+|mcp/sse|mcp)/?$")


def stream_kind(method: str, path: str) -> str | None:
    """``"page"`` for a stream a page or an agent holds open (the heartbeat, the queue's data stream, MCP's SSE
    and streamable GET streams), ``"answer"`` for a script's result stream (``call/<api>/<event>``, after its
    counted POST), None for anything else.

    >>> [stream_kind("GET", p) for p in ("/gradio_api/heartbeat/abc", "/gradio_api/queue/data",
    ...                                   "/gradio_api/mcp/sse", "/gradio_api/call/status/e1", "/gradio_api/info")]
    ['page', 'page', 'page', 'answer', None]
    >>> stream_kind("POST", "/gradio_api/queue/data"), stream_kind("GET", "/gradio_api/call/status")
    (None, None)
    """
    if method != "GET" or not _STREAMS.match(path):
        return None
    return "answer" if path.startswith(API + "call/") else "page"


def limited(method: str, path: str) -> bool:
    """Whether a request runs a handler of the app and so counts against its client's limit (see the module).

    >>> [limited("POST", p) for p in ("/gradio_api/call/status", "/gradio_api/api/grade", "/gradio_api/cancel")]
    [True, True, True]
    >>> [limited("GET", p) for p in ("/gradio_api/mcp/sse", "/gradio_api/mcp/", "/gradio_api/run/status")]
    [True, True, True]
    >>> [limited("GET", p) for p in ("/", "/gradio_api/queue/data", "/gradio_api/call/status/abc", "/gradio_api/info")]
    [False, False, False, False]
    """
    if path == MCP or path.startswith(MCP + "/"):
        return True
    if not path.startswith(API):
        return False
    return method not in ("GET", "HEAD", "OPTIONS") or path.startswith(API + "run/")


def over_limit_message(state) -> str | None:
    """The refusal the middleware left for an MCP tool call (a ``Request.state``, or a ``scope["state"]`` dict),
    or None when the call is within its client's limit."""
    if isinstance(state, dict):
        return state.get(OVER_LIMIT)
    return getattr(state, OVER_LIMIT, None)


def _refusal(limits: "RequestLimits", wait: float) -> str:
    return (f"Too many requests from your address: at most {limits.per_minute:g} a minute. "
            f"Try again in {max(1, round(wait))} s.")


def _stream_refusal(limits: "RequestLimits", whose: str) -> str:
    if whose == "address":
        return (f"Too many open streams from your address: at most {limits.streams_per_address} at once (each open "
                "page holds one or two). Close some pages or wait for their answers, then try again.")
    return (f"The server holds as many open streams as it serves at once ({limits.max_streams}); "
            "try again in a minute.")


@dataclass(frozen=True)
class RequestLimits:
    per_minute: float = 600.0     # MMVET_REQUESTS_PER_MIN: sustained rate per client (an open page uses ~60)
    burst: int = 120              # MMVET_REQUESTS_BURST: requests a client may send at once
    max_clients: int = 50_000     # buckets kept in memory
    streams_per_address: int = 32  # MMVET_STREAMS_PER_ADDRESS: streams one client holds open at once (0: no bound)
    max_streams: int = 2000       # MMVET_MAX_STREAMS: streams open at once in all (0: no bound)

    @classmethod
    def from_env(cls, env: Mapping[str, str]) -> "RequestLimits":
        d = cls()
        return cls(per_minute=env_number(env, "MMVET_REQUESTS_PER_MIN", d.per_minute),
                   burst=int(env_number(env, "MMVET_REQUESTS_BURST", d.burst)),
                   streams_per_address=int(env_number(env, "MMVET_STREAMS_PER_ADDRESS", d.streams_per_address)),
                   max_streams=int(env_number(env, "MMVET_MAX_STREAMS", d.max_streams)))

    def scaled(self, factor: float) -> "RequestLimits":
        """These limits `factor` times larger (the MCP protocol messages' allowance)."""
        return RequestLimits(self.per_minute * factor, int(self.burst * factor), self.max_clients,
                             self.streams_per_address, self.max_streams)


class StreamCounter:
    """Streams open per client and in all, within `RequestLimits.streams_per_address` and `max_streams`
    (thread-safe).

    >>> c = StreamCounter(RequestLimits(streams_per_address=2, max_streams=3))
    >>> [c.open("a"), c.open("a"), c.open("a") is not None, c.open("b"), c.open("c") is not None]
    [None, None, True, None, True]
    >>> c.close("a"); c.open("c"), c.open_count(), c.open_count("a")
    (None, 3, 1)
    """

    def __init__(self, limits: RequestLimits):
        self.limits = limits
        self._open: dict[str, int] = {}
        self._total = 0
        self._lock = threading.Lock()

    def open(self, key: str) -> str | None:
        """Count a stream of `key` as open: None, or the refusal (nothing counted) when a bound is reached."""
        lim = self.limits
        with self._lock:
            if lim.streams_per_address and self._open.get(key, 0) >= lim.streams_per_address:
                return _stream_refusal(lim, "address")
            if lim.max_streams and self._total >= lim.max_streams:
                return _stream_refusal(lim, "server")
            self._open[key] = self._open.get(key, 0) + 1
            self._total += 1
            return None

    def close(self, key: str) -> None:
        with self._lock:
            left = self._open.get(key, 0) - 1
            if left > 0:
                self._open[key] = left
            else:
                self._open.pop(key, None)
            self._total = max(0, self._total - 1)

    def open_count(self, key: str | None = None) -> int:
        with self._lock:
            return self._total if key is None else self._open.get(key, 0)


class RequestLimiter:
    """Token buckets per client key (thread-safe). ``per_minute`` 0 means no limit."""

    def __init__(self, limits: RequestLimits, clock: Callable[[], float] = time.monotonic):
        self.limits, self.clock = limits, clock
        self._buckets: dict[str, tuple[float, float]] = {}       # key -> (tokens, at)
        self._lock = threading.Lock()

    def allow(self, key: str) -> float:
        """0.0 when `key` may send a request now (and it is counted), else the seconds until it may.

        >>> t = [0.0]; lim = RequestLimiter(RequestLimits(per_minute=60, burst=2), clock=lambda: t[0])
        >>> [lim.allow("a"), lim.allow("a"), lim.allow("a"), lim.allow("b")]
        [0.0, 0.0, 1.0, 0.0]
        >>> t[0] = 1.0; lim.allow("a")
        0.0
        """
        lim = self.limits
        if not lim.per_minute:
            return 0.0
        rate, cap = lim.per_minute / 60.0, max(1, lim.burst)
        now = self.clock()
        with self._lock:
            tokens, at = self._buckets.pop(key, (float(cap), now))
            tokens = min(cap, tokens + (now - at) * rate)
            if len(self._buckets) >= lim.max_clients:
                self._buckets.pop(next(iter(self._buckets)))       # the least recently seen client
            if tokens >= 1.0:
                self._buckets[key] = (tokens - 1.0, now)
                return 0.0
            self._buckets[key] = (tokens, now)
            return (1.0 - tokens) / rate


class RequestLimitMiddleware:
    """ASGI middleware: `limiter` applied to the requests `limited` names and to the streams `stream_kind` names
    (counted open by a `StreamCounter`), clients told apart by ``identify(peer, x_forwarded_for)``. Install it with
    ``FastAPI(middleware=[Middleware(RequestLimitMiddleware, ...)])`` (Gradio: ``launch(app_kwargs=...)``)."""

    def __init__(self, app, limiter, identify: Callable[[str | None, str | None], str],
                 streams: StreamCounter | None = None):
        self.app, self.limiter, self.identify = app, limiter, identify
        self.streams = streams or StreamCounter(limiter.limits)
        self.protocol = RequestLimiter(limiter.limits.scaled(PROTOCOL_FACTOR))    # MCP's own messages, over the limit

    def _key(self, scope) -> str:
        client = scope.get("client")
        forwarded = None
        for name, value in scope.get("headers") or ():
            if name == b"x-forwarded-for":
                forwarded = value.decode("latin-1")
        return self.identify(client[0] if client else None, forwarded)

    async def _allow(self, key: str) -> float:
        if getattr(self.limiter, "blocking", False):          # a shared limiter asks the database: off the loop
            return await asyncio.to_thread(self.limiter.allow, key)
        return self.limiter.allow(key)

    async def __call__(self, scope, receive, send):
        path, method = scope.get("path", ""), scope.get("method", "GET")
        if scope.get("type") != "http":
            return await self.app(scope, receive, send)
        kind = stream_kind(method, path)
        counted = limited(method, path)
        if kind is None and not counted:
            return await self.app(scope, receive, send)     # pages, files, Gradio's info
        key = self._key(scope)
        wait = await self._allow(key) if (counted or kind == "page") else 0.0
        if wait and path.startswith(MCP) and method == "POST":
            return await self._mcp_over_limit(scope, receive, send, key, wait)
        if wait:
            return await _refuse(send, path, _refusal(self.limiter.limits, wait), wait)
        if kind is None:
            return await self.app(scope, receive, send)
        refused = self.streams.open(key)
        if refused:
            return await _refuse(send, path, refused, 60.0)
        try:
            await self.app(scope, receive, send)
        finally:
            self.streams.close(key)

    async def _mcp_over_limit(self, scope, receive, send, key: str, wait: float):
        """An MCP message over its client's limit, answered so that the agent's session survives (the module)."""
        message = _refusal(self.limiter.limits, wait)
        body, receive = await _peek(receive)
        call = _json_rpc(body)
        if call.get("method") == "tools/call" and "id" in call:
            # answered by the tool, in the protocol (an HTTP error would end the agent's session)
            scope.setdefault("state", {})[OVER_LIMIT] = message
            return await self.app(scope, receive, send)
        more = self.protocol.allow(key)
        if not more:
            return await self.app(scope, receive, send)           # tools/list, ping, initialize: cheap
        if path_is_sse_message(scope.get("path", "")) or "id" not in call:
            await asyncio.sleep(min(more, MAX_SLOWDOWN_S))          # slowed down, never cut off
            return await self.app(scope, receive, send)
        payload = json.dumps({"jsonrpc": "2.0", "id": call.get("id"),
                              "error": {"code": -32000, "message": message}}).encode()
        await send({"type": "http.response.start", "status": 200,
                    "headers": [(b"content-type", b"application/json"),
                                (b"content-length", str(len(payload)).encode()),
                                (b"retry-after", str(max(1, round(wait))).encode())]})
        await send({"type": "http.response.body", "body": payload})


def path_is_sse_message(path: str) -> bool:
    """Whether `path` is the SSE transport's message route (its answers travel on the session's stream)."""
    return path.startswith(MCP + "/messages")


async def _refuse(send, path: str, message: str, wait: float) -> None:
    """429 with Retry-After; on MCP's routes the body is a JSON-RPC error."""
    if path.startswith(MCP):
        payload = {"jsonrpc": "2.0", "id": None, "error": {"code": -32000, "message": message}}
    else:
        payload = {"error": message}
    body = json.dumps(payload).encode()
    await send({"type": "http.response.start", "status": 429,
                "headers": [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode()),
                            (b"retry-after", str(max(1, round(wait))).encode())]})
    await send({"type": "http.response.body", "body": body})


async def _peek(receive):
    """(the request body, read up to `MAX_PEEK` bytes, and a `receive` that gives it again to the app)."""
    chunks, size, more = [], 0, True
    while more and size <= MAX_PEEK:
        message = await receive()
        if message["type"] != "http.request":
            return b"", receive                      # the client went away
        chunks.append(message.get("body", b""))
        size += len(chunks[-1])
        more = message.get("more_body", False)
    body, replayed = b"".join(chunks), False

    async def replay():
        nonlocal replayed
        if not replayed:
            replayed = True
            return {"type": "http.request", "body": body, "more_body": more}
        return await receive()
    return body, replay


def _json_rpc(body: bytes) -> dict:
    """The JSON-RPC message of an MCP body ({} when it is none: a batch, not JSON, too large).

    >>> _json_rpc(b'{"jsonrpc": "2.0", "id": 3, "method": "tools/call", "params": {}}')["method"]
    'tools/call'
    >>> _json_rpc(b"[1, 2]"), _json_rpc(b"\\xff")
    ({}, {})
    """
    try:
        message = json.loads(body)
    except ValueError:
        return {}
    return message if isinstance(message, dict) else {}


#: The prefix of a visitor's request bucket among the store's paces (a judge account's is a hash: never this).
REQUESTS = "requests:"
#: Counted requests between two prunings of buckets idle for an hour (the table stays the size of the last hour).
PRUNE_EVERY = 5000


class SharedRequestLimiter:
    """`RequestLimiter`'s token bucket per client, kept in `store` for every process on the database
    (on its clock; issue 33): a client alternating two replicas spends one budget, not one per replica. One short
    transaction per counted request; if the database fails, each process counts alone until it answers again (a
    request is never refused for the database's sake). Blocking: the middleware calls `allow` from a thread
    (``blocking``)."""

    blocking = True

    def __init__(self, store: Store, limits: RequestLimits):
        self.store, self.limits = store, limits
        self.local = RequestLimiter(limits)          # while the database cannot be reached
        self._counted = 0

    def allow(self, key: str) -> float:
        """0.0 when `key` may send a request now (it is counted, for every replica), else the seconds until it
        may (see `RequestLimiter.allow`)."""
        lim = self.limits
        if not lim.per_minute:
            return 0.0
        rate, cap = lim.per_minute / 60.0, float(max(1, lim.burst))

        def change(state: dict, paused: float, now: float):
            tokens = min(cap, float(state.get("tokens", cap)) + (now - float(state.get("at", now))) * rate)
            if tokens >= 1.0:
                return 0.0, {"tokens": tokens - 1.0, "at": now}, paused
            return (1.0 - tokens) / rate, {"tokens": tokens, "at": now}, paused

        try:
            wait = self.store.update_pace(REQUESTS + key, change)
            self._counted += 1
            if self._counted % PRUNE_EVERY == 0:
                self.store.prune_paces(REQUESTS, idle_s=3600)
            return wait
        except StoreError as e:
            log.warning("requests are counted by this process alone while the database fails: %s", e)
            return self.local.allow(key)
