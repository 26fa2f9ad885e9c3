"""The account limiter (mmvet_core/judging/ratelimit.py) against the fake judge enforcing OpenAI-style rate limits: runs finish
with every grade, near the limit, with few 429s; a 429 pauses the whole account; runs on one key share one limit;
the window starts wide and grows while the endpoint keeps up."""
from __future__ import annotations

import asyncio
import concurrent.futures
import json
import time
from collections import Counter

from mmvet_core.judging.grading import grade_run
from mmvet_core.runs.jobs import JobManager
from mmvet_core.judging.judge import JudgeSettings, make_judge
from mmvet_core.judging.ratelimit import START_WINDOW, AccountLimiter, account_key, limiter_for
from mmvet_core.store import Store
from tests.conftest import cli_env
from tests.call_gate import CallGate
from tests.fake_judge import FakeJudgeServer, FakeState
from tests.test_grading import RESULTS_FILE, new_run, tiny
from tests.cli_run import run_cli
from tests.waiting import wait_until


def test_one_cli_invocation_finishes_every_grade_against_20_requests_per_second(tmp_path):
    """The issue's case: default settings, a judge enforcing 20 requests/s with 429 + retry-after-ms: exit 0, every
    grade in, few 429s, and the same grades as without any limit. (How close to the limit it runs is a figure of
    `python bench/bench_speed.py rps`: a rate floor here would fail on a busy machine.)"""
    with FakeJudgeServer(FakeState(rps=20, latency=0.05)) as limited:
        proc = run_cli("grade", RESULTS_FILE, "--base-url", limited.url, "--db", tmp_path / "a.db",
                       "--out", tmp_path / "a", cwd=tmp_path, env=cli_env(OPENAI_API_KEY="sk-test"))
        calls = list(limited.state.calls)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "done: 218 grades" in proc.stdout
    ok = [c for c in calls if c["status"] == 200]
    refused = [c for c in calls if c["status"] == 429]
    assert len(refused) <= 0.25 * 218, len(refused)
    with FakeJudgeServer() as free:
        proc = run_cli("grade", RESULTS_FILE, "--base-url", free.url, "--db", tmp_path / "b.db",
                       "--out", tmp_path / "b", cwd=tmp_path, env=cli_env(OPENAI_API_KEY="sk-test"))
    assert proc.returncode == 0, proc.stdout + proc.stderr
    (a,), (b,) = (tmp_path / "a").glob("*-grade-*.json"), (tmp_path / "b").glob("*-grade-*.json")
    assert json.loads(a.read_text()) == json.loads(b.read_text())
    assert len(ok) == sum(1 for c in free.state.calls if c["status"] == 200)     # no call made twice


def _grade_all(store: Store, settings: JudgeSettings, runs: list[tuple[str, object]], key: str = "sk-test",
               concurrency: int = 256):
    async def go():
        judges = [make_judge(settings, key) for _ in runs]
        try:
            return await asyncio.gather(*(grade_run(store, run_id, bench, j, concurrency=concurrency)
                                          for (run_id, bench), j in zip(runs, judges)))
        finally:
            for j in judges:
                await j.aclose()
    return asyncio.run(go())


def test_tokens_per_minute_limit_is_paced(store):
    """A tokens limit only (no requests limit): the limiter learns the bucket from the headers, estimates each
    call's tokens and keeps to it."""
    bench = tiny(40)
    # ~1,100 tokens a call; 12,000 tokens a second: about 11 calls a second
    with FakeJudgeServer(FakeState(tpm=12_000, token_period=1.0, latency=0.05)) as judge:
        settings = JudgeSettings(base_url=judge.url)
        (outcome,) = _grade_all(store, settings, [(new_run(store, bench, settings, n_runs=3), bench)])
        calls = list(judge.state.calls)
    assert outcome.status == "done" and outcome.graded == 120
    refused = sum(c["status"] == 429 for c in calls)
    assert refused <= 0.25 * 120, refused
    tokens = sum(len(c["prompt"]) // 4 + 3 for c in calls if c["status"] == 200)
    span = max(c["t"] for c in calls) - min(c["t"] for c in calls)
    assert tokens <= 12_000 * (span + 1) * 1.05                           # never above what the server allows


def test_two_app_runs_on_the_host_key_share_the_limit_and_both_finish(store):
    """The app's background jobs (one event loop for every run): two runs with the host's key, each with its own
    judge object, share one limiter and split the account's 15 requests/s instead of fighting over them: both
    finish with few 429s. (How near the limit they run together: `python bench/bench_speed.py app`.)"""
    bench_a, bench_b = tiny(30), tiny(30, start=30)
    with FakeJudgeServer(FakeState(rps=15, latency=0.05)) as judge:
        settings = JudgeSettings(base_url=judge.url)
        jobs = JobManager(store)
        try:
            runs = [(new_run(store, bench_a, settings, n_runs=2), bench_a),
                    (new_run(store, bench_b, settings, n_runs=2), bench_b)]
            judges = [make_judge(settings, "sk-host") for _ in runs]
            for (run_id, bench), j in zip(runs, judges):
                jobs.start(run_id, bench, j)
            outcomes = [jobs.wait(run_id, timeout=120) for run_id, _ in runs]
        finally:
            jobs.shutdown()
        calls = list(judge.state.calls)
    assert [o.status for o in outcomes] == ["done", "done"]
    assert judges[0]._limiter_obj is not None and judges[0]._limiter_obj is judges[1]._limiter_obj   # one limiter
    # few 429s: the limiter paces at the account's rate, but a busy machine can delay the calls it lets go until
    # they reach the server together (idle and beside a 3-process CPU hog: 17-19 for the 120 grades; once 49 in a
    # whole suite's run; two runs fighting with a limiter each would double the rate)
    assert sum(c["status"] == 429 for c in calls) <= 0.5 * 120


def test_a_429_pauses_every_call_of_the_account_for_its_retry_after(store, fake_judge):
    """One 429 with retry-after 2 s: no call of the account starts during the pause (not only the refused one).
    The first window of calls is held at the judge until all of them have arrived; then one is let through and
    refused. Every call that arrives after that was sent after the client read the 429, however slow the machine:
    the refused call's retry and the calls the window had no room for."""
    state = fake_judge.state
    state.latency = 0.05
    state.fail_429, state.retry_after = 1, 2.0             # the first call let through is refused
    gate = state.gate = CallGate()
    bench = tiny(START_WINDOW + 8)
    settings = JudgeSettings(base_url=fake_judge.url)
    run_id = new_run(store, bench, settings)
    with concurrent.futures.ThreadPoolExecutor(1) as pool:
        grading = pool.submit(_grade_all, store, settings, [(run_id, bench)])
        try:
            gate.wait_held(START_WINDOW)                   # the window is full: no other call can start
            released = time.time()
            gate.release(1)
            wait_until(lambda: any(c.get("status") == 429 for c in list(state.calls)), what="a call refused",
                       every=0.01)
        finally:
            gate.open()                                    # the held calls answer; the rest wait for the pause
        (outcome,) = grading.result(timeout=300)
    assert outcome.status == "done"
    later = sorted(c["t"] - released for c in state.calls if c["t"] > released)
    assert len(later) >= 9 and later[0] >= 1.95, later


def test_the_window_starts_wide_and_grows_while_the_endpoint_keeps_up(store):
    """The first START_WINDOW calls go out at once; the server holds them and answers them together, so they come
    back with the same latency (flat: the endpoint keeps up), and the window widens past 1.5 x its start."""
    bench = tiny(120)
    gate = CallGate()
    with FakeJudgeServer(FakeState(gate=gate)) as judge, concurrent.futures.ThreadPoolExecutor(1) as pool:
        settings = JudgeSettings(base_url=judge.url)
        run = new_run(store, bench, settings, n_runs=3)
        grading = pool.submit(_grade_all, store, settings, [(run, bench)])
        try:
            gate.wait_held(START_WINDOW)
            # held long after the last one arrived compared with how spread out their arrivals were (a busy machine
            # spreads them): their latencies then differ by a few percent at most
            arrivals = sorted(c["t"] for c in judge.state.calls)
            time.sleep(max(1.0, 10 * (arrivals[-1] - arrivals[0])))
            # these calls, not the ones sent as their answers come back: a pass taken by one of those (its latency
            # a tenth of theirs, hence the base latency) made the first answers look slow, the window stopped at
            # 48 and the test waited in vain for 49 calls (a fresh clone's failure, 2026-12-07)
            gate.release_held()
            try:
                gate.wait_held(int(START_WINDOW * 1.5) + 1)
            except TimeoutError as e:       # (seen once in a whole suite's run: say where the limiter stood)
                raise AssertionError(f"{e}; the limiters: {_limiters()}; the judge's calls by status: "
                                     f"{Counter(str(c.get('status')) for c in list(judge.state.calls))}; "
                                     f"arrivals of the first calls spread over {arrivals[-1] - arrivals[0]:.2f} s"
                                     ) from None
        finally:
            gate.open()
        (outcome,) = grading.result(timeout=300)
    assert outcome.status == "done"
    assert gate.peak_held > START_WINDOW * 1.5, gate.peak_held


def _limiters() -> list[dict]:
    """What every live limiter says of itself (for a failure's message)."""
    from mmvet_core.judging.ratelimit import _LIMITERS

    return [{**limiter.status(), "peak_window": limiter.stats.peak_window, "calls": limiter.stats.calls,
             "waiting": len(limiter._waiters), "base_latency": limiter._base_latency,
             "avg_latency": limiter._avg_latency, "answers": limiter._answers}
            for per_loop in list(_LIMITERS.values()) for limiter in list(per_loop.values())]


def test_without_rate_limit_headers_429s_still_never_fail_a_run(store):
    """A server that only answers 429 + retry-after-ms (no x-ratelimit-* headers): the window backs off."""
    bench = tiny(40)
    with FakeJudgeServer(FakeState(rps=20, latency=0.05, ratelimit_headers=False)) as judge:
        settings = JudgeSettings(base_url=judge.url)
        (outcome,) = _grade_all(store, settings, [(new_run(store, bench, settings, n_runs=2), bench)])
        calls = list(judge.state.calls)
    assert outcome.status == "done" and outcome.errored == 0
    assert sum(c["status"] == 429 for c in calls) <= 80


def test_one_limiter_per_account_and_event_loop():
    async def go():
        a = limiter_for(account_key("openai", "http://h/v1", None, "sk-1"))
        b = limiter_for(account_key("openai", "http://h/v1/", None, "sk-1"))
        c = limiter_for(account_key("openai", "http://h/v1", None, "sk-2"))
        return a, b, c
    a, b, c = asyncio.run(go())
    assert a is b and a is not c
    assert "sk-1" not in account_key("openai", "http://h/v1", None, "sk-1")
    a2, _, _ = asyncio.run(go())
    assert a2 is not a                                     # each event loop has its own limiters


def test_window_rules():
    """Additive increase while the window is used and latency is flat; one halving per round trip on 429s."""
    async def go():
        lim = AccountLimiter(window=4)
        tickets = [await lim.acquire() for _ in range(4)]
        for t in tickets:
            lim.release(t, outcome="ok", latency=0.1)
        grown = lim.window
        tickets = [await lim.acquire() for _ in range(4)]
        lim.release(tickets[0], outcome="rate_limited", retry_after=0.0)
        lim.release(tickets[1], outcome="rate_limited", retry_after=0.0)   # the same round trip: no second halving
        return grown, lim.window
    grown, after = asyncio.run(go())
    assert grown > 4 and after == grown / 2


def test_a_429_describing_the_buckets_leaves_the_window_to_the_pace():
    """Regression (issue 31: one worker alone reached 72 % of 20 requests/s with a 1 s judge): the first burst's
    429s halved the window twice, to 8 calls in flight, which then climbed back one call a second; at 20
    requests/s and 1 s latency a run needs 20 in flight. A 429 whose headers say the requests bucket is empty is
    the request rate's refusal, answered by the pause and that bucket: the window stays. One without those
    headers, or from the tokens bucket (a call's tokens are estimated), still halves it."""
    bucket = {"x-ratelimit-limit-requests": "20", "x-ratelimit-remaining-requests": "0",
              "x-ratelimit-reset-requests": "1s", "retry-after-ms": "50"}

    async def go(headers):
        lim = AccountLimiter(window=32)
        tickets = [await lim.acquire() for _ in range(32)]
        lim.release(tickets[0], outcome="rate_limited", headers=headers, retry_after=0.0)
        return lim.window
    assert asyncio.run(go(bucket)) == 32
    assert asyncio.run(go({"retry-after-ms": "50"})) == 16
    tokens = {"x-ratelimit-limit-requests": "20", "x-ratelimit-remaining-requests": "5",
              "x-ratelimit-limit-tokens": "9000", "x-ratelimit-remaining-tokens": "0", "retry-after-ms": "50"}
    assert asyncio.run(go(tokens)) == 16


def test_a_job_tells_until_when_it_waits_for_the_rate_limit(store, fake_judge):
    """What the app's progress shows: a running job waiting out a 429 reports the pause's end, then finishes."""
    fake_judge.state.fail_429, fake_judge.state.retry_after = 10**6, 2.0
    bench = tiny(4)
    settings = JudgeSettings(base_url=fake_judge.url)
    run_id = new_run(store, bench, settings)
    jobs = JobManager(store)
    try:
        t0 = time.time()
        jobs.start(run_id, bench, make_judge(settings, "sk-test"))
        seen, deadline = None, time.monotonic() + 300
        while seen is None:         # the judge refuses every call (each a pause of 2 s) until the test has seen one
            assert time.monotonic() < deadline, "the job never said it waits for the rate limit"
            seen = jobs.waiting_until(run_id)
            time.sleep(0.02)
        fake_judge.state.fail_429 = 0
        outcome = jobs.wait(run_id, timeout=300)
    finally:
        jobs.shutdown()
    assert t0 + 1.5 <= seen <= time.time() + 0.5            # a pause's end: after the 429, before the run ended
    assert outcome.status == "done" and jobs.waiting_until(run_id) is None
