"""The HTTP layer under the openai SDK: an ``httpx2.AsyncClient`` whose transport is aiohttp.

The SDK keeps doing everything it does (request building, retries honouring ``retry-after``, error classes,
timeouts); only the bytes on the wire go through aiohttp instead of httpcore2, which costs less CPU per call.
aiohttp errors are mapped onto the httpx2 exceptions the SDK expects, so it still raises `APITimeoutError` for
timeouts and `APIConnectionError` for connection failures. ``MMVET_HTTP_CLIENT=default`` opts out (the SDK's own
httpx2 client is used).
"""
from __future__ import annotations

import asyncio
import os
import typing as t

import httpx2

ENV_VAR = "MMVET_HTTP_CLIENT"


def _mapped(exc: BaseException, waiting_for_response: bool) -> httpx2.RequestError:
    """The httpx2 exception the SDK expects for an aiohttp / socket / timeout error."""
    import aiohttp

    message = str(exc) or type(exc).__name__
    if isinstance(exc, aiohttp.ConnectionTimeoutError):
        return httpx2.ConnectTimeout(message)
    if isinstance(exc, aiohttp.SocketTimeoutError):
        return httpx2.ReadTimeout(message)
    if isinstance(exc, (asyncio.TimeoutError, TimeoutError)):
        return httpx2.ReadTimeout(message) if waiting_for_response else httpx2.ConnectTimeout(message)
    if isinstance(exc, aiohttp.ClientConnectorError):
        return httpx2.ConnectError(message)
    if isinstance(exc, (aiohttp.InvalidURL, aiohttp.NonHttpUrlClientError)):
        return httpx2.UnsupportedProtocol(message)
    if isinstance(exc, aiohttp.ClientPayloadError):
        return httpx2.RemoteProtocolError(message)
    if isinstance(exc, aiohttp.ServerDisconnectedError):
        return httpx2.RemoteProtocolError(message)
    return httpx2.ReadError(message) if waiting_for_response else httpx2.ConnectError(message)


class _AiohttpStream(httpx2.AsyncByteStream):
    """A streamed (server-sent events) response body."""

    def __init__(self, response) -> None:
        self._response = response

    async def __aiter__(self) -> t.AsyncIterator[bytes]:
        import aiohttp

        try:
            async for chunk in self._response.content.iter_any():
                yield chunk
        except (aiohttp.ClientError, OSError, asyncio.TimeoutError) as e:
            raise _mapped(e, True) from e

    async def aclose(self) -> None:
        self._response.release()


class AiohttpTransport(httpx2.AsyncBaseTransport):
    """An ``httpx2`` transport that sends requests with one aiohttp session (HTTP/1.1, pooled connections).

    The session is created on first use, inside the event loop that uses it, and closed by `aclose`. A non-streamed
    response is read fully here (the SDK reads chat completions fully anyway), so read timeouts and errors while
    reading the body surface from `handle_async_request` as httpx2 exceptions; ``text/event-stream`` answers are
    streamed.
    """

    def __init__(self, *, limits: httpx2.Limits | None = None, verify: t.Any = True) -> None:
        self._limits = limits or httpx2.Limits(max_connections=1000, max_keepalive_connections=100)
        self._ssl = httpx2.create_ssl_context(verify=verify)     # the same context httpx2's own transport uses
        self._session = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._closing: set = set()      # closing sessions of earlier event loops
        self._timeouts: dict = {}        # parsed once: the SDK sends the same URL and timeouts call after call
        self._urls: dict = {}

    def _new_session(self):
        """A session for the running event loop (synchronous, so concurrent first calls share it). A session of
        an earlier loop is closed: its connections belong to that loop."""
        import aiohttp

        old, old_loop = self._session, self._loop
        self._loop = asyncio.get_running_loop()
        connector = aiohttp.TCPConnector(
            limit=self._limits.max_connections or 0, limit_per_host=0,
            keepalive_timeout=self._limits.keepalive_expiry or 5.0, ssl=self._ssl)
        self._session = aiohttp.ClientSession(
            connector=connector, auto_decompress=False, cookie_jar=aiohttp.DummyCookieJar(), trust_env=False,
            requote_redirect_url=False)
        if old is not None and not old.closed:
            self._close_session(old, old_loop)
        return self._session

    def _close_session(self, session, loop) -> None:
        if loop is not None and not loop.is_closed() and loop is not self._loop:
            asyncio.run_coroutine_threadsafe(session.close(), loop)     # still running in another thread
        else:     # on a closed loop this only marks it closed: its connections went with the loop
            task = asyncio.get_running_loop().create_task(session.close())
            self._closing.add(task)
            task.add_done_callback(self._closing.discard)

    async def handle_async_request(self, request: httpx2.Request) -> httpx2.Response:
        import aiohttp

        session = self._session if self._loop is asyncio.get_running_loop() else self._new_session()
        try:
            body: t.Any = request.content or None
        except httpx2.RequestNotRead:
            body = request.stream
            request.headers.pop("transfer-encoding", None)       # aiohttp chunks it itself
        got_response = False
        try:
            resp = await session.request(
                request.method, self._url_for(request), headers=request.headers.multi_items(),
                data=body, allow_redirects=False, compress=None, timeout=self._timeout_for(request),
                server_hostname=request.extensions.get("sni_hostname"))
            got_response = True
            if resp.content_type == "text/event-stream":
                return httpx2.Response(resp.status, headers=resp.raw_headers, stream=_AiohttpStream(resp),
                                       request=request, extensions=self._extensions(resp))
            try:
                content = await resp.read()         # releases the connection to the pool once the body is in
            except BaseException:
                resp.close()                        # a half-read connection is not reusable
                raise
        except (aiohttp.ClientError, OSError, asyncio.TimeoutError) as e:
            raise _mapped(e, got_response) from e
        return httpx2.Response(resp.status, headers=resp.raw_headers, content=content, request=request,
                               extensions=self._extensions(resp))

    def _timeout_for(self, request: httpx2.Request):
        """aiohttp's timeouts for the request's httpx2 ones (``request.extensions["timeout"]``, which the SDK sets
        per request). aiohttp's `connect` covers waiting for a pooled connection *and* opening one, `sock_connect`
        opening the socket, `sock_read` each read; it has no write timeout (a chat request is written at once)."""
        tm = request.extensions.get("timeout") or {}
        key = (tm.get("pool"), tm.get("connect"), tm.get("read"))
        timeout = self._timeouts.get(key)
        if timeout is None:
            import aiohttp

            pool, connect, read = key
            acquire = None if pool is None or connect is None else pool + connect
            if len(self._timeouts) > 64:
                self._timeouts.clear()
            timeout = self._timeouts[key] = aiohttp.ClientTimeout(
                total=None, connect=acquire, sock_connect=connect, sock_read=read)
        return timeout

    def _url_for(self, request: httpx2.Request):
        """The request's URL for aiohttp, as encoded by httpx2 (aiohttp must not re-quote it)."""
        text = str(request.url)
        url = self._urls.get(text)
        if url is None:
            from yarl import URL

            if len(self._urls) > 256:
                self._urls.clear()
            url = self._urls[text] = URL(text, encoded=True)
        return url

    @staticmethod
    def _extensions(resp) -> dict:
        ext: dict = {"http_version": b"HTTP/1.1"}
        if resp.reason:
            ext["reason_phrase"] = resp.reason.encode("ascii", "replace")
        return ext

    async def aclose(self) -> None:
        session, loop = self._session, self._loop
        self._session = self._loop = None
        if session is not None and not session.closed:
            if loop is None or loop.is_closed() or loop is asyncio.get_running_loop():
                await session.close()
            else:       # the loop that owns it runs in another thread
                await asyncio.wait_for(asyncio.wrap_future(asyncio.run_coroutine_threadsafe(session.close(), loop)),
                                       10)
        here = asyncio.get_running_loop()
        closing = [task for task in self._closing if task.get_loop() is here]
        self._closing.clear()
        await asyncio.gather(*closing, return_exceptions=True)


def make_http_client(timeout: float | httpx2.Timeout) -> httpx2.AsyncClient | None:
    """The HTTP client for the SDK: aiohttp underneath, or None (the SDK's default) when ``MMVET_HTTP_CLIENT`` is
    ``default`` or aiohttp is not installed."""
    if os.environ.get(ENV_VAR, "").strip().lower() == "default":
        return None
    try:
        import aiohttp  # noqa: F401
    except ImportError:  # pragma: no cover
        return None
    limits = httpx2.Limits(max_connections=1000, max_keepalive_connections=100)
    return httpx2.AsyncClient(transport=AiohttpTransport(limits=limits), timeout=timeout, limits=limits,
                              follow_redirects=True)
