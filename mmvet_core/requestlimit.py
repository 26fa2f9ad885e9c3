"""Requests per client on the app's API routes: a token bucket per visitor, and the ASGI middleware that applies it.

One client (a script, a crowd of tabs behind one address) may send at most ``per_minute`` requests a minute to the
routes that run the app's handlers or take uploads (``/gradio_api/call/…``, ``/gradio_api/queue/join``,
``/gradio_api/run/…``, ``/gradio_api/upload``), in bursts of at most ``burst``; beyond it the server answers
``429 Too Many Requests`` with ``Retry-After`` at once, before any handler or the queue sees the request. Pages,
static files and the SSE streams that deliver answers are never counted. A visitor is whatever `identify` makes of
the socket's peer and ``X-Forwarded-For`` (the service's salted address: a client cannot rotate the header to get
more). Buckets live in memory, at most ``max_clients`` of them (the idlest are dropped first).
"""
from __future__ import annotations

import json
import threading
import time
from dataclasses import dataclass
from typing import Callable, Mapping

from .hosting import env_number

__all__ = ["RequestLimits", "RequestLimiter", "RequestLimitMiddleware", "LIMITED_PREFIXES"]

#: The routes that run handlers or take files (Gradio 6's API); everything else passes untouched.
LIMITED_PREFIXES = ("/gradio_api/call/", "/gradio_api/queue/join", "/gradio_api/run/", "/gradio_api/upload")


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
    """ASGI middleware: `limiter` applied to `LIMITED_PREFIXES`, clients told apart by ``identify(peer,
    x_forwarded_for)``. Install it with ``FastAPI(middleware=[Middleware(RequestLimitMiddleware, ...)])`` (Gradio:
    ``launch(app_kwargs=...)``)."""

    def __init__(self, app, limiter: RequestLimiter, identify: Callable[[str | None, str | None], str]):
        self.app, self.limiter, self.identify = app, limiter, identify

    async def __call__(self, scope, receive, send):
        if scope.get("type") != "http" or not scope.get("path", "").startswith(LIMITED_PREFIXES) \
                or scope.get("method") == "GET" and not scope["path"].startswith("/gradio_api/run/"):
            return await self.app(scope, receive, send)     # pages, files, and the streams that deliver answers
        client = scope.get("client")
        forwarded = None
        for name, value in scope.get("headers") or ():
            if name == b"x-forwarded-for":
                forwarded = value.decode("latin-1")
        wait = self.limiter.allow(self.identify(client[0] if client else None, forwarded))
        if not wait:
            return await self.app(scope, receive, send)
        body = json.dumps({"error": f"Too many requests from your address: at most "
                                    f"{self.limiter.limits.per_minute:g} a minute. Try again in {wait:.0f} s."}
                          ).encode()
        await send({"type": "http.response.start", "status": 429,
                    "headers": [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode()),
                                (b"retry-after", str(max(1, round(wait))).encode())]})
        await send({"type": "http.response.body", "body": body})
