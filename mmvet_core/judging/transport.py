"""The HTTP layer under the openai SDK: an ``httpx2.AsyncClient`` whose transport is aiohttp.

The SDK keeps doing everything it does (request building, retries honouring ``retry-after``, error classes,
timeouts); only the bytes on the wire go through aiohttp instead of httpcore2, which costs less CPU per call.
aiohttp errors are mapped onto the httpx2 exceptions the SDK expects, so it still raises `APITimeoutError` for
timeouts and `APIConnectionError` for connection failures. ``MMVET_HTTP_CLIENT=default`` opts out (httpx2's own
transport is used, still with the body cap below).

A judge endpoint may be hostile (a visitor's URL on a public host). Whatever the client, an `EndpointPolicy`
applies here, in the bytes:

- **Body cap.** A response body is read up to `EndpointPolicy.max_body_bytes` (1 MB; a judge answer is a few
  hundred bytes), compressed bodies are decompressed up to the same cap, and a longer body is cut there: the
  response carries ``extensions["mmvet_body_capped"] = True`` and the connection is dropped, so memory stays
  bounded whatever the server sends (a 1 GB body cost 10 GB of RSS before).
- **Per-attempt total timeout.** aiohttp's ``total`` timeout is the request's read timeout, so a server that drips
  a byte every few seconds cannot hold a call forever (the per-read timeout never fires on it).
- **Private destinations (`block_private`).** Every address a host name resolves to is checked *at connect time*
  (the resolver of the connection itself, so DNS rebinding between a check and the connection changes nothing):
  loopback, private, link-local (cloud metadata 169.254.169.254), shared, reserved and multicast ranges are refused
  with `BlockedDestination`. Only http(s) URLs are accepted and redirects are never followed.
"""
from __future__ import annotations

import asyncio
import ipaddress
import os
import socket
import typing as t
import zlib
from dataclasses import dataclass
from functools import lru_cache

import httpx2

ENV_VAR = "MMVET_HTTP_CLIENT"
#: A judge answer is a few hundred bytes; anything past this is cut (the call then fails, memory stays bounded).
MAX_BODY_BYTES = 1 << 20
#: The response extension that says the body was cut at the cap.
CAPPED = "mmvet_body_capped"


@lru_cache(maxsize=1)
def default_ssl_context():
    """The process's one verifying TLS context (httpx2's default: the system's or certifi's CAs, SSL_CERT_FILE),
    shared by every judge client: building one loads the whole CA bundle (≈ 25 ms of CPU), and a client is made
    per run, check and model list (it was 8 % of the suite's CPU). A context is only read once built."""
    return httpx2.create_ssl_context(verify=True)


@dataclass(frozen=True)
class EndpointPolicy:
    """What a judge endpoint may do to us. The default (the CLI, the host's own judge) caps bodies only; a public
    host gives visitors' endpoints ``block_private=True``."""

    max_body_bytes: int = MAX_BODY_BYTES
    block_private: bool = False      # refuse loopback / private / link-local / metadata destinations


class BlockedDestination(OSError):
    """The endpoint's address is not allowed (a private destination on a public host, or not http(s))."""


def blocked_reason(address: str) -> str | None:
    """Why a connection to the IP `address` is refused on a public host, or None when it is a public address.

    >>> blocked_reason("8.8.8.8") is None, blocked_reason("127.0.0.1"), blocked_reason("169.254.169.254")
    (True, 'loopback', 'link-local (cloud metadata)')
    >>> blocked_reason("10.1.2.3"), blocked_reason("::ffff:192.168.0.1"), blocked_reason("100.100.100.200")
    ('private', 'private', 'not a public address')
    """
    try:
        ip = ipaddress.ip_address(address.split("%", 1)[0])
    except ValueError:
        return "not an IP address"
    if isinstance(ip, ipaddress.IPv6Address) and ip.ipv4_mapped is not None:
        ip = ip.ipv4_mapped
    if ip.is_loopback:
        return "loopback"
    if ip.is_link_local:
        return "link-local (cloud metadata)"
    if ip.is_private:
        return "private"
    if ip.is_multicast or ip.is_unspecified or ip.is_reserved or not ip.is_global:
        return "not a public address"
    return None


def check_endpoint_url(url: str, *, block_private: bool = True) -> None:
    """Refuse, with `BlockedDestination`, a judge base URL that is not http(s) or (when `block_private`) whose host
    resolves to a non-public address. This is the early check that gives the visitor a clear message before a run
    starts; the transport checks again at every connection (DNS may answer differently the second time)."""
    parsed = httpx2.URL(url) if url else None
    if parsed is None or parsed.scheme not in ("http", "https") or not parsed.host:
        raise BlockedDestination("the base URL must be an http:// or https:// URL with a host name")
    if not block_private:
        return
    host = parsed.host
    port = parsed.port or (443 if parsed.scheme == "https" else 80)
    try:
        infos = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)
    except OSError as e:
        raise BlockedDestination(f"the host {host!r} could not be resolved") from e
    for *_, sockaddr in infos:
        reason = blocked_reason(sockaddr[0])
        if reason:
            raise BlockedDestination(f"the host {host!r} resolves to a {reason} address, which this server does "
                                     "not call")


def _check_addresses(host: str, addresses: t.Iterable[str]) -> None:
    for address in addresses:
        reason = blocked_reason(address)
        if reason:
            raise BlockedDestination(f"the host {host!r} resolves to a {reason} address, which this server does "
                                     "not call")


class _GuardedResolver:
    """aiohttp resolver that refuses non-public addresses (checked on the very addresses the socket will use)."""

    def __init__(self) -> None:
        from aiohttp.resolver import DefaultResolver

        self._inner = DefaultResolver()

    async def resolve(self, host: str, port: int = 0, family: int = socket.AF_INET):
        infos = await self._inner.resolve(host, port, family)
        _check_addresses(host, [info["host"] for info in infos])
        return infos

    async def close(self) -> None:
        await self._inner.close()


def _decoded_capped(content: bytes, encoding: str, cap: int) -> tuple[bytes, bool] | None:
    """`content` decompressed (gzip / deflate) up to `cap` bytes, and whether it was cut; None for an encoding we
    do not decode (the raw bytes are then kept: they will not parse as a chat completion)."""
    encoding = encoding.strip().lower()
    if encoding in ("gzip", "x-gzip"):
        decoders = [zlib.decompressobj(16 + zlib.MAX_WBITS)]
    elif encoding == "deflate":
        decoders = [zlib.decompressobj(), zlib.decompressobj(-zlib.MAX_WBITS)]
    else:
        return None
    for decoder in decoders:
        try:
            out = decoder.decompress(content, cap + 1)
        except zlib.error:
            continue
        return (out[:cap], True) if len(out) > cap or decoder.unconsumed_tail else (out, False)
    return None


def _capped_response(status: int, raw_headers, content: bytes, cap: int, cut: bool, request, extensions: dict):
    """The httpx2 response for a fully read (possibly cut) body: compressed bodies are decoded here, within the
    cap, and the response no longer claims an encoding or a length (httpx2 would otherwise decode it again,
    without a limit)."""
    headers = httpx2.Headers(raw_headers)
    encoding = headers.get("content-encoding")
    if encoding and encoding.lower() != "identity":
        decoded = _decoded_capped(content, encoding, cap)
        if decoded is not None:
            content, more = decoded
            cut = cut or more
        del headers["content-encoding"]
    if cut:
        extensions = {**extensions, CAPPED: True}
    headers.pop("content-length", None)
    headers.pop("transfer-encoding", None)
    return httpx2.Response(status, headers=headers, content=content, request=request, extensions=extensions)


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

    def __init__(self, response, cap: int) -> None:
        self._response = response
        self._cap = cap

    async def __aiter__(self) -> t.AsyncIterator[bytes]:
        import aiohttp

        left = self._cap
        try:
            async for chunk in self._response.content.iter_any():
                if len(chunk) > left:
                    self._response.close()
                    raise httpx2.RemoteProtocolError(f"the response body exceeded {self._cap} bytes")
                left -= len(chunk)
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

    def __init__(self, *, limits: httpx2.Limits | None = None, verify: t.Any = True,
                 policy: EndpointPolicy | None = None) -> None:
        self.policy = policy or EndpointPolicy()
        self._limits = limits or httpx2.Limits(max_connections=1000, max_keepalive_connections=100)
        # the context httpx2's own transport would use (the shared one when verifying: `default_ssl_context`)
        self._ssl = default_ssl_context() if verify is True else httpx2.create_ssl_context(verify=verify)
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
            keepalive_timeout=self._limits.keepalive_expiry or 5.0, ssl=self._ssl,
            resolver=_GuardedResolver() if self.policy.block_private else None)
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
        url = self._url_for(request)
        if url.scheme not in ("http", "https"):
            raise httpx2.UnsupportedProtocol(f"only http and https are allowed, not {url.scheme!r}")
        if self.policy.block_private and _is_ip(url.host):
            _check_addresses(url.host, [url.host])      # aiohttp does not resolve (nor check) an IP literal
        cap = self.policy.max_body_bytes
        got_response = False
        try:
            resp = await session.request(
                request.method, url, headers=request.headers.multi_items(),
                data=body, allow_redirects=False, compress=None, timeout=self._timeout_for(request),
                server_hostname=request.extensions.get("sni_hostname"))
            got_response = True
            if resp.content_type == "text/event-stream":
                return httpx2.Response(resp.status, headers=resp.raw_headers, stream=_AiohttpStream(resp, cap),
                                       request=request, extensions=self._extensions(resp))
            try:
                content, cut = await _read_capped(resp, cap)
            except BaseException:
                resp.close()                        # a half-read connection is not reusable
                raise
        except BlockedDestination:
            raise
        except (aiohttp.ClientError, OSError, asyncio.TimeoutError) as e:
            blocked = _blocked_cause(e)
            if blocked is not None:
                raise blocked from e
            raise _mapped(e, got_response) from e
        if cut or "Content-Encoding" in resp.headers:
            return _capped_response(resp.status, resp.raw_headers, content, cap, cut, request,
                                    self._extensions(resp))
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
            # `total` bounds the whole attempt by the request's timeout: a server that drips a byte every few
            # seconds never trips the per-read timeout, and would otherwise hold the call forever
            total = read
            timeout = self._timeouts[key] = aiohttp.ClientTimeout(
                total=total, connect=acquire, sock_connect=connect, sock_read=read)
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


async def _read_capped(resp, cap: int) -> tuple[bytes, bool]:
    """The body of an aiohttp response, at most `cap` bytes, and whether it was cut (then the connection is
    dropped: the rest is never read)."""
    length = resp.content_length
    if length is not None and length <= cap:
        return await resp.read(), False     # the usual case; releases the connection to the pool
    buf = bytearray()
    while len(buf) <= cap:
        chunk = await resp.content.read(min(1 << 16, cap + 1 - len(buf)))
        if not chunk:
            resp.release()
            return bytes(buf), False
        buf += chunk
    resp.close()
    return bytes(buf[:cap]), True


def _is_ip(host: str | None) -> bool:
    try:
        ipaddress.ip_address((host or "").strip("[]"))
        return True
    except ValueError:
        return False


def _blocked_cause(exc: BaseException) -> BlockedDestination | None:
    """The `BlockedDestination` our resolver raised, under aiohttp's wrapping of resolver errors."""
    seen = 0
    while exc is not None and seen < 5:
        if isinstance(exc, BlockedDestination):
            return exc
        exc = getattr(exc, "os_error", None) or exc.__cause__ or exc.__context__
        seen += 1
    return None


class CappedTransport(httpx2.AsyncBaseTransport):
    """httpx2's own transport (``MMVET_HTTP_CLIENT=default``) with the same body cap: the body is read here up to
    the cap, and decoded within it."""

    def __init__(self, inner: httpx2.AsyncBaseTransport, policy: EndpointPolicy | None = None) -> None:
        self._inner = inner
        self.policy = policy or EndpointPolicy()

    async def handle_async_request(self, request: httpx2.Request) -> httpx2.Response:
        response = await self._inner.handle_async_request(request)
        cap = self.policy.max_body_bytes
        buf, cut = bytearray(), False
        try:
            async for chunk in response.stream:
                buf += chunk
                if len(buf) > cap:
                    cut = True
                    break
        finally:
            await response.aclose()
        return _capped_response(response.status_code, response.headers.raw, bytes(buf[:cap]), cap, cut, request,
                                dict(response.extensions))

    async def aclose(self) -> None:
        await self._inner.aclose()


def make_http_client(timeout: float | httpx2.Timeout,
                     policy: EndpointPolicy | None = None) -> httpx2.AsyncClient | None:
    """The HTTP client for the SDK: aiohttp underneath, or httpx2's own transport when ``MMVET_HTTP_CLIENT`` is
    ``default`` (both cap bodies; neither follows redirects). A policy that blocks private destinations always
    gets the aiohttp transport: only it checks addresses at connect time."""
    policy = policy or EndpointPolicy()
    limits = httpx2.Limits(max_connections=1000, max_keepalive_connections=100)
    if os.environ.get(ENV_VAR, "").strip().lower() == "default" and not policy.block_private:
        transport: httpx2.AsyncBaseTransport = CappedTransport(
            httpx2.AsyncHTTPTransport(limits=limits, verify=default_ssl_context()), policy)
    else:
        transport = AiohttpTransport(limits=limits, policy=policy)
    return httpx2.AsyncClient(transport=transport, timeout=timeout, limits=limits, follow_redirects=False,
                              verify=default_ssl_context())
