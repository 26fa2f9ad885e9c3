"""The aiohttp transport under the openai SDK (mmvet_core/judging/transport.py): same answers, retries, timeouts and error
classes as the SDK's default httpx2 client, against the fake judge; and a clean close."""
from __future__ import annotations

import asyncio
import gc
import gzip
import json
import logging
import time
import warnings

import httpx2
import pytest

from mmvet_core.judging.judge import JudgeError, JudgeSettings, OpenAIJudge, make_judge
from mmvet_core.judging.transport import ENV_VAR, AiohttpTransport, make_http_client
from tests.fake_judge import deterministic_answer, free_port

PROMPT = "Compare the ground truth and prediction.\n" + "x" * 2000 + "\nWhat is 2+2? | 4 | four"
# A request timeout that only a call the fake judge holds on purpose reaches (it holds it until the client hangs
# up): every other answer, even on a machine kept busy by other work, comes far sooner. A held call costs this.
PATIENT_S = 3.0
HELD_S = 600.0       # `slow_seconds` of a held call: never reached, the client's timeout ends it first


def _settings(server, **kw) -> JudgeSettings:
    return JudgeSettings(base_url=server.url, **kw)


def _run(coro_fn, *args):
    return asyncio.run(coro_fn(*args))


async def _complete(settings: JudgeSettings, key: str = "sk-test", prompts=(PROMPT,), temperature: float = 0.0):
    judge = make_judge(settings, key)
    try:
        return [await judge.complete(p, temperature) for p in prompts]
    finally:
        await judge.aclose()


def _error(settings: JudgeSettings, key: str = "sk-test") -> JudgeError:
    with pytest.raises(JudgeError) as info:
        _run(_complete, settings, key)
    return info.value


@pytest.fixture(autouse=True)
def _aiohttp_client(monkeypatch):
    """Every test here runs with the aiohttp client (whatever the developer's shell says)."""
    monkeypatch.delenv(ENV_VAR, raising=False)


def test_judges_use_the_aiohttp_transport_unless_opted_out(monkeypatch):
    for settings in (JudgeSettings(base_url="http://127.0.0.1:9/v1"),
                     JudgeSettings(provider="azure", base_url="https://x.openai.azure.com", api_version="2024-06-01")):
        judge = make_judge(settings, "sk-test")
        assert isinstance(judge._client._client._transport, AiohttpTransport)
        # the SDK does not retry: we do (a 429 pauses the whole account, see mmvet_core.judging.ratelimit)
        assert judge._client.timeout == settings.timeout and judge._client.max_retries == 0
        asyncio.run(judge.aclose())
        monkeypatch.setenv(ENV_VAR, "default")
        judge = make_judge(settings, "sk-test")
        assert not isinstance(judge._client._client._transport, AiohttpTransport)      # the SDK's own client
        asyncio.run(judge.aclose())
        monkeypatch.delenv(ENV_VAR)
    assert make_http_client(5.0).timeout == httpx2.Timeout(5.0)


def test_normal_answers(fake_judge):
    prompts = [PROMPT + f"\nq{i} | a{i} | p{i}" for i in range(5)]
    replies = _run(_complete, _settings(fake_judge), "sk-test", prompts)
    assert [r.content for r in replies] == [deterministic_answer(p, 0.0) for p in prompts]
    assert all(r.model == "gpt-4-0613" and r.prompt_tokens == len(p) // 4 and r.completion_tokens == 2
               for r, p in zip(replies, prompts))
    calls = fake_judge.state.calls
    assert [c["prompt"] for c in calls] == prompts                   # the body arrived intact (2,000+ characters)
    assert all(c["auth"] == "Bearer sk-test" and c["max_tokens"] == 3 and c["temperature"] == 0.0 for c in calls)


def test_429_with_retry_after_is_waited_out(fake_judge):
    fake_judge.state.fail_429, fake_judge.state.retry_after = 2, 0.3
    t0 = time.monotonic()
    (reply,) = _run(_complete, _settings(fake_judge))
    assert reply.content == deterministic_answer(PROMPT, 0.0)
    assert [c["status"] for c in fake_judge.state.calls] == [429, 429, 200]
    assert time.monotonic() - t0 >= 0.55                             # retry-after (0.3 s) honoured twice


def test_429s_do_not_count_against_the_retry_budget(fake_judge):
    fake_judge.state.fail_429, fake_judge.state.retry_after = 10, 0.01
    (reply,) = _run(_complete, _settings(fake_judge, max_retries=0))
    assert reply.content == deterministic_answer(PROMPT, 0.0)
    assert [c["status"] for c in fake_judge.state.calls] == [429] * 10 + [200]


def test_429s_past_the_rate_limit_deadline_are_a_rate_limit_error(fake_judge):
    fake_judge.state.fail_429, fake_judge.state.retry_after = 1000, 0.05
    t0 = time.monotonic()
    err = _error(_settings(fake_judge, rate_limit_wait=0.3))
    assert (err.kind, err.status) == ("rate_limit", 429)
    # it waited some 429s out (a busy machine fits fewer in 0.3 s), then gave up long before the 1000th (50 s)
    assert 0.2 <= time.monotonic() - t0 < 25
    assert 2 <= len(fake_judge.state.calls) <= 10


def test_an_exhausted_quota_is_not_waited_out(fake_judge):
    fake_judge.state.quota_exhausted = True
    err = _error(_settings(fake_judge))
    assert (err.kind, err.status) == ("quota", 429) and "quota" in err.message
    assert len(fake_judge.state.calls) == 1


def test_500_is_retried(fake_judge):
    fake_judge.state.fail_500 = 2
    (reply,) = _run(_complete, _settings(fake_judge))
    assert reply.content == deterministic_answer(PROMPT, 0.0)
    assert [c["status"] for c in fake_judge.state.calls] == [500, 500, 200]


def test_500_after_all_retries_is_a_server_error(fake_judge):
    fake_judge.state.fail_500 = 10
    err = _error(_settings(fake_judge, max_retries=1))
    assert (err.kind, err.status) == ("server", 500)


def test_client_timeout_is_a_timeout_error(fake_judge):
    fake_judge.state.slow_calls, fake_judge.state.slow_seconds = 1, HELD_S
    t0 = time.monotonic()
    err = _error(_settings(fake_judge, timeout=0.3, max_retries=0))
    assert err.kind == "timeout"
    assert time.monotonic() - t0 < HELD_S / 4                        # the request's timeout applied, not the server


def test_a_timed_out_call_is_retried(fake_judge):
    fake_judge.state.slow_calls, fake_judge.state.slow_seconds = 1, HELD_S
    (reply,) = _run(_complete, _settings(fake_judge, timeout=PATIENT_S, max_retries=1))
    assert reply.content == deterministic_answer(PROMPT, 0.0)
    assert len(fake_judge.state.calls) == 2


def test_closed_port_is_a_connection_error():
    err = _error(JudgeSettings(base_url=f"http://127.0.0.1:{free_port()}/v1", max_retries=2))
    assert err.kind == "connection"


def test_wrong_key_is_an_auth_error(fake_judge):
    fake_judge.state.api_key = "sk-right"
    err = _error(_settings(fake_judge), "sk-wrong")
    assert (err.kind, err.status) == ("auth", 401)
    assert "Incorrect API key" in err.message


def test_unknown_model_and_parameter_adaptation(fake_judge):
    fake_judge.state.reject_max_tokens = True                        # 400 bodies are parsed like the default's
    (reply,) = _run(_complete, _settings(fake_judge))
    assert reply.sent == {"max_completion_tokens": 3, "temperature": 0.0}
    fake_judge.state.served_models = {"other"}
    err = _error(_settings(fake_judge))
    assert (err.kind, err.status) == ("not_found", 404)


def test_concurrency_32(fake_judge):
    fake_judge.state.latency = 0.05
    prompts = [PROMPT + f"\nq{i} | a{i} | p{i}" for i in range(160)]

    async def go():
        judge = make_judge(_settings(fake_judge), "sk-test")
        sem = asyncio.Semaphore(32)

        async def one(p):
            async with sem:
                return await judge.complete(p, 0.0)
        try:
            t0 = time.monotonic()
            replies = await asyncio.gather(*(one(p) for p in prompts))
            return replies, time.monotonic() - t0, judge._client._client._transport
        finally:
            await judge.aclose()
    replies, _elapsed, transport = asyncio.run(go())
    assert [r.content for r in replies] == [deterministic_answer(p, 0.0) for p in prompts]
    assert fake_judge.state.peak_in_flight >= 16                     # really concurrent, whatever the machine's load
    assert transport._session is None                                # closed by aclose


def test_closes_cleanly(fake_judge, caplog):
    """No "Unclosed client session / connector / connection" (ResourceWarning or asyncio's log) after aclose, also
    after a call that timed out and with concurrent first calls (which must share one aiohttp session)."""
    fake_judge.state.slow_calls, fake_judge.state.slow_seconds = 1, HELD_S

    async def go():
        judge = OpenAIJudge(_settings(fake_judge, timeout=PATIENT_S, max_retries=0), "sk-test")
        with pytest.raises(JudgeError):
            await judge.complete(PROMPT, 0.0)                         # the slow call times out
        await asyncio.gather(*(judge.complete(PROMPT + f"\n{i} | c | d", 0.0) for i in range(8)))
        await judge.aclose()
        fresh = OpenAIJudge(_settings(fake_judge), "sk-test")
        await asyncio.gather(*(fresh.complete(PROMPT + f"\n{i} | e | f", 0.0) for i in range(8)))
        await fresh.aclose()
        return judge, fresh

    gc.collect()        # what earlier tests of this process left (an event loop never closed) is not ours to count
    with caplog.at_level(logging.DEBUG, logger="asyncio"), warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        judge, fresh = asyncio.run(go())
        gc.collect()
    unclosed = [str(w.message) for w in caught if issubclass(w.category, ResourceWarning)]
    assert not unclosed, unclosed
    assert "Unclosed" not in caplog.text
    assert judge._client.is_closed() and fresh._client.is_closed()


def test_sdk_default_client_when_opted_out(fake_judge, monkeypatch):
    monkeypatch.setenv(ENV_VAR, "default")
    fake_judge.state.fail_429, fake_judge.state.retry_after = 1, 0.05
    (reply,) = _run(_complete, _settings(fake_judge))
    assert reply.content == deterministic_answer(PROMPT, 0.0)
    assert [c["status"] for c in fake_judge.state.calls] == [429, 200]


# --- the transport on its own: compressed and streamed bodies, which the fake judge does not send ----------------

@pytest.fixture
def aiohttp_server():
    """A tiny aiohttp server on 127.0.0.1: /gzip answers gzip-compressed JSON, /sse streams three events."""
    from aiohttp import web

    async def gz(request):
        body = gzip.compress(json.dumps({"ok": True, "echo": (await request.read()).decode()}).encode())
        return web.Response(body=body, headers={"Content-Encoding": "gzip", "Content-Type": "application/json"})

    async def sse(request):
        resp = web.StreamResponse(headers={"Content-Type": "text/event-stream"})
        await resp.prepare(request)
        for i in range(3):
            await resp.write(f"data: {i}\n\n".encode())
            await asyncio.sleep(0.01)
        await resp.write_eof()
        return resp

    app = web.Application()
    app.router.add_post("/gzip", gz)
    app.router.add_get("/sse", sse)
    return app


def test_compressed_and_streamed_bodies(aiohttp_server):
    from aiohttp import web

    async def go():
        runner = web.AppRunner(aiohttp_server)
        await runner.setup()
        port = free_port()
        await web.TCPSite(runner, "127.0.0.1", port).start()
        client = make_http_client(5.0)
        try:
            r = await client.post(f"http://127.0.0.1:{port}/gzip", content=b"hello")
            assert r.status_code == 200 and r.json() == {"ok": True, "echo": "hello"}
            assert "content-encoding" not in r.headers       # decoded here, within the body cap
            async with client.stream("GET", f"http://127.0.0.1:{port}/sse") as s:
                text = "".join([chunk async for chunk in s.aiter_text()])
            assert text == "data: 0\n\ndata: 1\n\ndata: 2\n\n"
        finally:
            await client.aclose()
            await runner.cleanup()
    asyncio.run(go())


# --- hostile endpoints (issue 9): each test performs the attack against a real HTTP server ----------------------

@pytest.fixture(params=["aiohttp", "default"])
def http_client(request, monkeypatch):
    """Both HTTP clients: our aiohttp transport and ``MMVET_HTTP_CLIENT=default`` (httpx2's own transport)."""
    if request.param == "default":
        monkeypatch.setenv(ENV_VAR, "default")
    return request.param


def test_a_huge_body_is_cut_at_the_cap_not_read_whole(fake_judge, http_client):
    # a valid chat completion padded to 64 MB: read whole, it would even be scored 1.0
    fake_judge.state.huge_body = 64 << 20
    t0 = time.monotonic()
    err = _error(_settings(fake_judge))
    assert (err.kind, err.status) == ("too_large", 200)
    assert time.monotonic() - t0 < 60                                # nothing waited for the rest of the body
    assert len(fake_judge.state.calls) == 1                          # not retried: every try would be the same


def test_a_gzip_bomb_is_decoded_only_up_to_the_cap(http_client):
    from aiohttp import web

    bomb = gzip.compress(b'{"choices": [{"message": {"content": "1.0"}}], "pad": "' + b"x" * (200 << 20) + b'"}')

    async def go():
        app = web.Application()
        app.router.add_post("/v1/chat/completions", lambda r: web.Response(
            body=bomb, headers={"Content-Encoding": "gzip", "Content-Type": "application/json"}))
        runner = web.AppRunner(app)
        await runner.setup()
        port = free_port()
        await web.TCPSite(runner, "127.0.0.1", port).start()
        judge = make_judge(JudgeSettings(base_url=f"http://127.0.0.1:{port}/v1", max_retries=0), "k")
        try:
            with pytest.raises(JudgeError) as info:
                await judge.complete(PROMPT, 0.0)
            return info.value
        finally:
            await judge.aclose()
            await runner.cleanup()
    assert len(bomb) < 1 << 20
    assert asyncio.run(go()).kind == "too_large"


def test_an_endpoint_that_never_answers_fails_at_the_call_deadline(fake_judge, http_client):
    fake_judge.state.hang = True
    t0 = time.monotonic()
    err = _error(_settings(fake_judge, timeout=60, deadline=1.5))     # per-attempt timeout alone: 7 x 60 s
    elapsed = time.monotonic() - t0
    assert err.kind == "unresponsive" and "1.5 s" in err.message
    assert 1.4 < elapsed < 30                                        # the deadline, not one 60 s attempt


def test_an_endpoint_that_drips_a_byte_every_half_second_times_out(fake_judge):
    # the per-read timeout (1 s) never fires on it; the per-attempt total does, then the call's deadline
    fake_judge.state.drip_every = 0.5
    t0 = time.monotonic()
    err = _error(_settings(fake_judge, timeout=1.0, max_retries=0, deadline=30))
    assert err.kind in ("timeout", "unresponsive")
    assert time.monotonic() - t0 < 20                                # the attempt's 1 s, not the call's 30 s


def test_a_dripping_endpoint_hits_the_deadline_with_either_client(fake_judge, http_client):
    fake_judge.state.drip_every = 0.3
    t0 = time.monotonic()
    err = _error(_settings(fake_judge, timeout=60, deadline=2))
    assert err.kind in ("timeout", "unresponsive") and time.monotonic() - t0 < 30     # not one 60 s attempt


def test_redirects_are_not_followed(http_client):
    from tests.fake_judge import FakeJudgeServer, FakeState

    with FakeJudgeServer() as inner, FakeJudgeServer(FakeState(redirect_to=inner.url + "/chat/completions")) as outer:
        err = _error(_settings(outer))
        assert (err.kind, err.status) == ("redirect", 307)
        assert inner.state.calls == []                               # the POST was not re-sent to the target


def test_a_key_echoed_by_the_endpoint_is_never_shown(fake_judge):
    fake_judge.state.echo_key = True
    err = _error(_settings(fake_judge), "sk-host-secret-key")
    assert err.kind == "auth" and "sk-host-secret-key" not in str(err)      # scrubbed even unredacted (the CLI)

    async def redacted():
        judge = make_judge(_settings(fake_judge), "sk-host-secret-key", redact=True)
        try:
            await judge.complete(PROMPT, 0.0)
        finally:
            await judge.aclose()
    with pytest.raises(JudgeError) as info:
        asyncio.run(redacted())
    assert "Incorrect API key" not in str(info.value) and "hidden" in str(info.value)


def test_private_destinations_are_refused_at_connect_time(fake_judge):
    from mmvet_core.judging.transport import BlockedDestination, EndpointPolicy, check_endpoint_url

    guarded = EndpointPolicy(block_private=True)

    async def call(url):
        judge = make_judge(JudgeSettings(base_url=url, max_retries=2), "k", policy=guarded, redact=True)
        try:
            await judge.complete(PROMPT, 0.0)
        finally:
            await judge.aclose()
    for url in (fake_judge.url, fake_judge.url.replace("127.0.0.1", "localhost"),
                fake_judge.url.replace("127.0.0.1", "[::ffff:127.0.0.1]")):
        with pytest.raises(JudgeError) as info:
            asyncio.run(call(url))
        assert info.value.kind == "blocked", url
        with pytest.raises(BlockedDestination):
            check_endpoint_url(url)
    assert fake_judge.state.calls == []                              # nothing reached the loopback server
    for url in ("file:///etc/passwd", "ftp://example.com/v1", "gopher://x", ""):
        with pytest.raises(BlockedDestination, match="http"):
            check_endpoint_url(url, block_private=False)
    check_endpoint_url(fake_judge.url, block_private=False)             # allowed explicitly (a private deployment)
    asyncio.run(_complete(_settings(fake_judge)))                        # and the default policy calls it


def test_dns_rebinding_is_caught_when_connecting(fake_judge, monkeypatch):
    """The early check saw a public address; by connection time the name resolves to loopback."""
    from aiohttp.resolver import DefaultResolver

    from mmvet_core.judging.transport import EndpointPolicy

    async def rebound(self, host, port=0, family=0):
        return [{"hostname": host, "host": "127.0.0.1", "port": port, "family": 2, "proto": 0, "flags": 0}]
    monkeypatch.setattr(DefaultResolver, "resolve", rebound)

    async def call():
        judge = make_judge(JudgeSettings(base_url=f"http://judge.example:{fake_judge.port}/v1"), "k",
                           policy=EndpointPolicy(block_private=True))
        try:
            await judge.complete(PROMPT, 0.0)
        finally:
            await judge.aclose()
    with pytest.raises(JudgeError) as info:
        asyncio.run(call())
    assert info.value.kind == "blocked" and fake_judge.state.calls == []


def test_every_judge_client_shares_one_verifying_tls_context():
    """A judge client is made per run, check and model list; each built its own TLS context (the whole CA bundle
    loaded again: 8 % of the suite's CPU). They share one, and it still verifies certificates and host names."""
    import ssl

    from mmvet_core.judging.transport import AiohttpTransport, default_ssl_context, make_http_client

    a, b = AiohttpTransport(), AiohttpTransport()
    assert a._ssl is b._ssl is default_ssl_context()
    ctx = default_ssl_context()
    assert ctx.verify_mode == ssl.CERT_REQUIRED and ctx.check_hostname
    assert ctx.cert_store_stats()["x509_ca"] > 0                  # the CA bundle is loaded
    assert make_http_client(5.0)._transport._ssl is ctx
    assert AiohttpTransport(verify=False)._ssl is not ctx         # an explicit choice still gets its own
