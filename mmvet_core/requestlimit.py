"""Requests per client on the app's API routes: a token bucket per visitor, and the ASGI middleware that applies it.

One client (a script, an agent, a crowd of tabs behind one address) may send at most ``per_minute`` requests a
minute to the routes that run the app's handlers (`limited`): every POST (or other non-GET) under
``/gradio_api/`` (``call/``, ``run/``, ``api/``, ``queue/join``, ``upload``, ``cancel``, ``stream/``, the MCP
messages, ...), ``GET /gradio_api/run/…``, and every request to the MCP server (``/gradio_api/mcp/…``: the SSE
session, its messages, the streamable endpoint), in bursts of at most ``burst``. Pages, static files and the
streams that deliver answers (``queue/data``, ``call/<api>/<event>``, ``heartbeat``) are never counted.

Beyond the limit the request is refused before any handler or the queue sees it: ``429 Too Many Requests`` with
``Retry-After``. An MCP tool call (a JSON-RPC ``tools/call`` message, on either MCP transport) is refused in the
protocol instead, so that an honest agent's session survives and the agent reads why: the message goes through
marked (`OVER_LIMIT` in the request's ``state``) and the tool answers a tool error with the wait
(`over_limit_message`; `ui/mcp.py`). A visitor is whatever `identify` makes of the socket's peer and
``X-Forwarded-For`` (the service's salted address: a client cannot rotate the header to get more). Buckets live in
memory, at most ``max_clients`` of them (the idlest are dropped first).
"""
from __future__ import annotations

import json
import threading
import time
from dataclasses import dataclass
from typing import Callable, Mapping

from .hosting import env_number

__all__ = ["RequestLimits", "RequestLimiter", "RequestLimitMiddleware", "OVER_LIMIT", "limited",
           "over_limit_message"]

API = "/gradio_api/"
MCP = "/gradio_api/mcp"
#: Where the middleware leaves the refusal of an MCP tool call over the limit (``scope["state"]``, which is what a
#: Starlette ``Request.state`` reads): the tool answers it as its error.
OVER_LIMIT = "mmvet_over_limit"
#: The MCP SDK refuses larger messages (413) itself; a body is read at most this far to tell a tool call.
MAX_PEEK = 4 * 1024 * 1024


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


@dataclass(frozen=True)
class RequestLimits:
    per_minute: float = 600.0     # MMVET_REQUESTS_PER_MIN: sustained rate per client (an open page uses ~60)
    burst: int = 120              # MMVET_REQUESTS_BURST: requests a client may send at once
    max_clients: int = 50_000     # buckets kept in memory

    @classmethod
    def from_env(cls, env: Mapping[str, str]) -> "RequestLimits":
        d = cls()
        return cls(per_minute=env_number(env, "MMVET_REQUESTS_PER_MIN", d.per_minute),
                   burst=int(env_number(env, "MMVET_REQUESTS_BURST", d.burst)))


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
    """ASGI middleware: `limiter` applied to the requests `limited` names, clients told apart by ``identify(peer,
    x_forwarded_for)``. Install it with ``FastAPI(middleware=[Middleware(RequestLimitMiddleware, ...)])`` (Gradio:
    ``launch(app_kwargs=...)``)."""

    def __init__(self, app, limiter: RequestLimiter, identify: Callable[[str | None, str | None], str]):
        self.app, self.limiter, self.identify = app, limiter, identify

    async def __call__(self, scope, receive, send):
        path, method = scope.get("path", ""), scope.get("method", "GET")
        if scope.get("type") != "http" or not limited(method, path):
            return await self.app(scope, receive, send)     # pages, files, and the streams that deliver answers
        client = scope.get("client")
        forwarded = None
        for name, value in scope.get("headers") or ():
            if name == b"x-forwarded-for":
                forwarded = value.decode("latin-1")
        wait = self.limiter.allow(self.identify(client[0] if client else None, forwarded))
        if not wait:
            return await self.app(scope, receive, send)
        message = _refusal(self.limiter.limits, wait)
        rpc_id = None
        if path.startswith(MCP) and method == "POST":
            body, receive = await _peek(receive)
            call = _json_rpc(body)
            if call.get("method") == "tools/call" and "id" in call:
                # answered by the tool, in the protocol (an HTTP error would end the agent's session)
                scope.setdefault("state", {})[OVER_LIMIT] = message
                return await self.app(scope, receive, send)
            rpc_id = call.get("id")
        if path.startswith(MCP):
            payload = {"jsonrpc": "2.0", "id": rpc_id, "error": {"code": -32000, "message": message}}
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
