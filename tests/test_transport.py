"""The aiohttp transport under the openai SDK (mmvet_core/transport.py): same answers, retries, timeouts and error
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

from mmvet_core.judge import JudgeError, JudgeSettings, OpenAIJudge, make_judge
from mmvet_core.transport import ENV_VAR, AiohttpTransport, make_http_client
from tests.fake_judge import deterministic_answer, free_port

PROMPT = "Compare the ground truth and prediction.\n" + "x" * 2000 + "\nWhat is 2+2? | 4 | four"


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
        # the SDK does not retry: we do (a 429 pauses the whole account, see mmvet_core.ratelimit)
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
    assert 0.2 <= time.monotonic() - t0 < 3
    assert 3 <= len(fake_judge.state.calls) <= 10


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
    fake_judge.state.slow_calls, fake_judge.state.slow_seconds = 1, 3.0
    t0 = time.monotonic()
    err = _error(_settings(fake_judge, timeout=0.3, max_retries=0))
    assert err.kind == "timeout"
    assert time.monotonic() - t0 < 2.0                               # the request's timeout (0.3 s) applied


def test_a_timed_out_call_is_retried(fake_judge):
    fake_judge.state.slow_calls, fake_judge.state.slow_seconds = 1, 3.0
    (reply,) = _run(_complete, _settings(fake_judge, timeout=0.3, max_retries=1))
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
    fake_judge.state.slow_calls, fake_judge.state.slow_seconds = 1, 1.0

    async def go():
        judge = OpenAIJudge(_settings(fake_judge, timeout=0.3, max_retries=0), "sk-test")
        with pytest.raises(JudgeError):
            await judge.complete(PROMPT, 0.0)                         # the slow call times out
        await asyncio.gather(*(judge.complete(PROMPT + f"\n{i} | c | d", 0.0) for i in range(8)))
        await judge.aclose()
        fresh = OpenAIJudge(_settings(fake_judge), "sk-test")
        await asyncio.gather(*(fresh.complete(PROMPT + f"\n{i} | e | f", 0.0) for i in range(8)))
        await fresh.aclose()
        return judge, fresh

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
            assert r.headers["content-encoding"] == "gzip"
            async with client.stream("GET", f"http://127.0.0.1:{port}/sse") as s:
                text = "".join([chunk async for chunk in s.aiter_text()])
            assert text == "data: 0\n\ndata: 1\n\ndata: 2\n\n"
        finally:
            await client.aclose()
            await runner.cleanup()
    asyncio.run(go())
