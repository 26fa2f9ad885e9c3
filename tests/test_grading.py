"""Specification of the grading engine (`mmvet_core.judging.grading`) against a real OpenAI-compatible HTTP server.

* Parity: `grade_run` and ``python -m mmvet_core grade`` give the official evaluator's grades and CSV numbers
  (`tests.official_reference`, an independent re-implementation) when the judge answers the same.
* The official retry policy in detail, API failures (429, 5xx, timeouts, bad key, unknown model, unreachable
  endpoint), reasoning-model parameters, the answer cache, secrets, the concurrency bound, MM-Vet v2 and the
  offline baseline judge.
"""
from __future__ import annotations

import asyncio
import concurrent.futures
import json
import logging
import socket
import sqlite3
import subprocess
import sys
import threading
import time
from pathlib import Path

import openai
import pytest
from fastapi.responses import JSONResponse

import tests.fake_judge as fake_judge_module
from mmvet_core.inputs.benchmark import Benchmark, Sample, load_bundled_v1
from mmvet_core.scores.export import read_official_csv
from mmvet_core.judging.grading import GRADED, CachedCaller, WorkOrder, grade_run
from mmvet_core.judging.judge import BaselineJudge, JudgeSettings, keyword_score, make_judge
from mmvet_core.inputs.results import read_results, select_predictions
from mmvet_core.runs.lifecycle import create_run, export_run, load_run_view
from mmvet_core.inputs.subsets import load_subset
from mmvet_core.store import Store
from tests.cli_run import run_cli
from tests.conftest import ROOT, cli_env
from tests.call_gate import CallGate
from tests.fake_judge import FakeJudgeServer, FakeState, free_port
from tests.waiting import wait_until
from tests.official_reference import (RETRY_TEXT, SHARED_DATA, aggregate_official, grade_official, grade_one,
                                      load_bard_set, load_official_metadata, load_official_prompt,
                                      official_question, sample_by_question)

RESULTS_FILE = next(p for p in (SHARED_DATA / "results" / "llava-v1.5-13b.json",
                                ROOT / "assets" / "examples" / "llava_llama2_13b_chat.json") if p.is_file())
MODEL_NAME = RESULTS_FILE.stem
JUDGE_MODEL = "gpt-4-0613"
V1 = load_bundled_v1()
METADATA = load_official_metadata()
OFFICIAL_PROMPT = load_official_prompt()
PARITY_CONFIGS = [(1, None), (3, None), (1, "bard"), (3, "bard")]
CONFIG_IDS = ["1run", "3runs", "1run-bard", "3runs-bard"]


# --- helpers ---------------------------------------------------------------------------------------------------

def tiny(n: int = 1, start: int = 0) -> Benchmark:
    """The first `n` real v1 samples from `start`."""
    return V1.subset([f"v1_{i}" for i in range(start, start + n)], name="tiny")


def predictions_for(benchmark: Benchmark, text: str = "The answer is 42.") -> dict[str, str]:
    return {sid: f"{text} ({sid})" for sid in benchmark.ids}


def new_run(store: Store, benchmark: Benchmark, settings: JudgeSettings, predictions: dict[str, str] | None = None,
            n_runs: int = 1) -> str:
    return create_run(store, benchmark=benchmark, spec="mmvet-v1", n_runs=n_runs, settings=settings,
                      predictions=predictions or predictions_for(benchmark), model_name=MODEL_NAME)


def grade(store: Store, run_id: str, benchmark: Benchmark, settings: JudgeSettings, *, key: str | None = "sk-test",
          concurrency: int = 32, judge=None):
    async def go():
        j = judge or make_judge(settings, key)
        try:
            return await grade_run(store, run_id, benchmark, j, concurrency=concurrency)
        finally:
            await j.aclose()
    return asyncio.run(go())


def settings_for(server: FakeJudgeServer, **kw) -> JudgeSettings:
    return JudgeSettings(base_url=server.url, **kw)


def grade_one_sample(store, server, answer_fn=None, *, sample_id="v1_0", prediction="A cat on a mat.", **kw):
    """Grade one real sample once; returns (grade row, the server calls it made, the run's outcome)."""
    if answer_fn is not None:
        server.state.answer_fn = answer_fn
    bench = V1.subset([sample_id], name="one")
    settings = settings_for(server, **kw)
    before = len(server.state.calls)
    run_id = new_run(store, bench, settings, {sample_id: prediction})
    outcome = grade(store, run_id, bench, settings)
    [row] = store.grades(run_id)
    return row, server.state.calls[before:], outcome


def oracle_one(server, sample_id="v1_0", prediction="A cat on a mat."):
    """The official loop for one sample against the same server: (model, content, score, calls made)."""
    before = len(server.state.calls)
    client = openai.OpenAI(api_key="sk-test", base_url=server.url, max_retries=0)
    try:
        model, content, score = grade_one(client, JUDGE_MODEL, OFFICIAL_PROMPT, METADATA[sample_id], prediction)
    finally:
        client.close()
    return model, content, score, server.state.calls[before:]


def samples_called(calls: list[dict], predictions: dict[str, str]) -> set[str]:
    """The samples whose judge prompts these calls carried."""
    index = sample_by_question(METADATA, predictions, OFFICIAL_PROMPT)
    return {index[c["prompt"].removesuffix(RETRY_TEXT)] for c in calls}


def is_number(text) -> bool:
    try:
        float(text)
        return True
    except (TypeError, ValueError):
        return False


# --- parity with the official evaluator ------------------------------------------------------------------------

@pytest.fixture(scope="module")
def parity_server_url():
    """The fake judge as its own process (the client under test and the server then use different cores)."""
    port = free_port()
    proc = subprocess.Popen([sys.executable, "-m", "tests.fake_judge", "--port", str(port), "--latency", "0"],
                            cwd=ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    url = f"http://127.0.0.1:{port}/v1"
    deadline = time.time() + 120
    while True:
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=0.2):
                break
        except OSError:
            if time.time() > deadline or proc.poll() is not None:
                proc.kill()
                raise RuntimeError(f"the fake judge process did not start (exit code {proc.poll()})")
            time.sleep(0.05)
    yield url
    proc.terminate()
    proc.wait(timeout=10)


@pytest.fixture(scope="module")
def official(parity_server_url):
    """The official grades of the results file for 3 runs: ``{"v1_0": {"model": [...] * 3, ...}}``.

    The official loop runs once over all 218 samples, one call at a time. The parity judge is stateless (its
    answer depends only on the prompt and the temperature), so the official loop would record the same grade in
    every run, and restricted to the Bard set exactly these grades restricted to its ids; the per-configuration
    expectations are derived from this (`expected_for`), the aggregation oracle is applied to each.
    """
    raw = json.loads(RESULTS_FILE.read_text(encoding="utf-8"))
    client = openai.OpenAI(api_key="sk-test", base_url=parity_server_url, max_retries=0)
    try:
        one_run = grade_official(client, JUDGE_MODEL, METADATA, raw, num_run=1)
    finally:
        client.close()
    return {sid: {k: values * 3 for k, values in rec.items()} for sid, rec in one_run.items()}


def expected_for(official_grades: dict, n_runs: int, subset: str | None) -> tuple[dict, dict]:
    ids = load_bard_set() if subset == "bard" else None
    grades = {sid: {k: rec[k][:n_runs] for k in ("model", "content", "score")}
              for sid, rec in official_grades.items() if ids is None or sid in ids}
    return grades, aggregate_official(METADATA, grades, n_runs, ids)


def assert_outputs_match(out_dir: Path, n_runs: int, subset: str | None, official_grades: dict) -> None:
    """Our exported grade JSON and both CSVs equal the official evaluator's, to the digit."""
    grades, agg = expected_for(official_grades, n_runs, subset)
    part = "bardset_" if subset == "bard" else ""
    grade_path = out_dir / f"{MODEL_NAME}_{JUDGE_MODEL}-grade-{n_runs}runs.json"
    cap_path = out_dir / f"{MODEL_NAME}_{part}{JUDGE_MODEL}-cap-score-{n_runs}runs.csv"
    cap_int_path = out_dir / f"{MODEL_NAME}_{part}{JUDGE_MODEL}-cap-int-score-{n_runs}runs.csv"

    ours = json.loads(grade_path.read_text(encoding="utf-8"))
    assert list(ours) == list(grades)
    for sid, rec in grades.items():
        assert {k: ours[sid][k] for k in ("model", "content", "score")} == rec, sid

    cap = read_official_csv(cap_path)[MODEL_NAME]
    assert {c: v for c, v in cap.items() if c not in ("total", "std", "runs")} == agg["cap"]
    cap_int = read_official_csv(cap_int_path)[MODEL_NAME]
    assert {frozenset(c.split("_")): v for c, v in cap_int.items() if c not in ("total", "std", "runs")} \
        == agg["cap_int"]
    for table in (cap, cap_int):
        assert (table["total"], table["std"], table["runs"]) == (agg["total"], agg["std"], agg["runs"])


def bench_for(subset: str | None) -> Benchmark:
    return load_subset(V1, subset)


@pytest.fixture(scope="module")
def api_parity(parity_server_url, tmp_path_factory):
    """Our `grade_run` for every configuration, in one store: the 3-run full grading pays for every answer, the
    other configurations reuse them from the cache (same prompts, same k-th answers).
    Yields the database path and, per configuration, (output folder, outcome, grade rows)."""
    root = tmp_path_factory.mktemp("api-parity")
    store = Store(root / "grader.db")
    settings = JudgeSettings(base_url=parity_server_url)
    results = read_results(RESULTS_FILE)
    outputs = {}
    for n_runs, subset in [(3, None), (1, None), (3, "bard"), (1, "bard")]:
        bench = bench_for(subset)
        run_id = create_run(store, benchmark=bench, spec="mmvet-v1", predictions=select_predictions(results, bench),
                            n_runs=n_runs, settings=settings, model_name=MODEL_NAME)
        outcome = grade(store, run_id, bench, settings, concurrency=32)
        out = root / f"out-{n_runs}-{subset}"
        export_run(load_run_view(store, run_id), out)
        outputs[(n_runs, subset)] = (out, outcome, store.grades(run_id))
    yield store.path, outputs
    store.close()


@pytest.mark.parametrize("n_runs, subset", PARITY_CONFIGS, ids=CONFIG_IDS)
def test_grade_run_matches_the_official_evaluator(api_parity, official, n_runs, subset):
    out, outcome, _ = api_parity[1][(n_runs, subset)]
    assert outcome.status == "done" and outcome.errored == 0
    assert_outputs_match(out, n_runs, subset, official)


def test_parity_run_exercises_retries_and_fallbacks(api_parity, official):
    """Guard against a vacuous parity: the deterministic judge makes ~10% of samples fall back and ~10% succeed
    only on a retry, in our run and in the official one."""
    _, outcome, rows = api_parity[1][(3, None)]
    first_run = [g for g in rows if g.run_index == 0]
    fallbacks = [g for g in first_run if g.status == "fallback"]
    retried_ok = [g for g in first_run if g.status == "ok" and len(g.attempts) > 1]
    assert len(fallbacks) >= 8 and len(retried_ok) >= 8
    assert all(len(g.attempts) == 6 and g.score == 0.0 and "fallback" in g.flags for g in fallbacks)
    official_fallbacks = [sid for sid, rec in official.items() if not is_number(rec["content"][0])]
    assert sorted(official_fallbacks) == sorted(g.sample_id for g in fallbacks)
    assert outcome.stats.calls == sum(len(g.attempts) for g in rows)     # every attempt was a real call


def test_other_configurations_were_graded_from_the_cache(api_parity):
    _, outputs = api_parity
    assert outputs[(3, None)][1].stats.calls > 3 * 218
    for config in [(1, None), (3, "bard"), (1, "bard")]:
        assert outputs[config][1].stats.calls == 0, config


@pytest.fixture(scope="module")
def cli_parity(api_parity, parity_server_url, tmp_path_factory):
    """``python -m mmvet_core grade`` for every configuration, in one database.

    To keep CI fast the database starts with the answers `api_parity` paid for in runs 2 and 3 (k = 1, 2) and no
    run. The 1-run command on all samples asks the judge for real (run 1); the three other commands then find every
    answer they need stored, and run at once. Their outputs are compared with the official ones all the same.
    Returns, per configuration, (output folder, return code, stdout + stderr).
    """
    root = tmp_path_factory.mktemp("cli-parity")
    db = root / "cli.db"
    api_db, cli_db = sqlite3.connect(api_parity[0]), sqlite3.connect(db)
    api_db.backup(cli_db)
    api_db.close()
    cli_db.executescript("DELETE FROM runs; DELETE FROM grades; DELETE FROM judge_cache WHERE k = 0;")
    cli_db.close()

    def start(n_runs: int, subset: str | None) -> tuple[Path, subprocess.Popen, Path]:
        out, log = root / f"out-{n_runs}-{subset}", root / f"log-{n_runs}-{subset}.txt"
        cmd = [sys.executable, "-m", "mmvet_core", "grade", str(RESULTS_FILE), "--runs", str(n_runs),
               "--base-url", parity_server_url, "--db", str(db), "--out", str(out),
               "--concurrency", "32"] + (["--subset", subset] if subset else [])
        with open(log, "w") as f:
            proc = subprocess.Popen(cmd, cwd=root, env=cli_env(OPENAI_API_KEY="sk-test"), stdout=f,
                                    stderr=subprocess.STDOUT)
        return out, proc, log

    first = start(1, None)
    first[1].wait(timeout=120)
    started = {(1, None): first} | {config: start(*config) for config in [(1, "bard"), (3, "bard"), (3, None)]}
    outputs = {}
    for config, (out, proc, log) in started.items():
        outputs[config] = (out, proc.wait(timeout=120), log.read_text())
    return outputs


@pytest.mark.parametrize("n_runs, subset", PARITY_CONFIGS, ids=CONFIG_IDS)
def test_cli_grade_matches_the_official_evaluator(cli_parity, official, n_runs, subset):
    out, returncode, output = cli_parity[(n_runs, subset)]
    assert returncode == 0, output[-2000:]
    assert_outputs_match(out, n_runs, subset, official)
    made = int(output.split("Judge calls: ")[1].split(" made")[0])
    assert (made > 0) == ((n_runs, subset) == (1, None))      # see `cli_parity`: the first command paid


# --- the official retry policy ---------------------------------------------------------------------------------

RETRY_PROMPT_TEMPS = [0.0, 0.0, 0.5, 1.0, 1.5, 2.0]


def test_garbage_then_a_valid_score_on_the_third_retry(store, fake_judge):
    def answer(prompt, temperature):
        return "0.6" if prompt.endswith(RETRY_TEXT) and temperature == 1.0 else "Score:"
    row, calls, _ = grade_one_sample(store, fake_judge, answer)
    assert [c["temperature"] for c in calls] == [0.0, 0.0, 0.5, 1.0]
    assert (row.status, row.score, row.content, row.flags) == ("ok", 0.6, "0.6", [])
    assert [a["retry_prompt"] for a in row.attempts] == [False, True, True, True]
    assert oracle_one(fake_judge)[:3] == (row.judge_model, row.content, row.score)


def test_garbage_always_falls_back_after_five_retries_without_reading_the_last(store, fake_judge):
    def answer(prompt, temperature):
        return "1.0 (sure)" if temperature == 2.0 else "I cannot tell"   # the last answer is never parsed
    row, calls, _ = grade_one_sample(store, fake_judge, answer)
    base = official_question(OFFICIAL_PROMPT, METADATA["v1_0"], "A cat on a mat.")
    assert len(calls) == 6
    assert [c["temperature"] for c in calls] == RETRY_PROMPT_TEMPS
    assert [c["prompt"] for c in calls] == [base] + [base + RETRY_TEXT] * 5
    assert all(c["max_tokens"] == 3 for c in calls)
    assert (row.status, row.score, row.content) == ("fallback", 0.0, "1.0 (sure)")
    assert "fallback" in row.flags
    assert oracle_one(fake_judge)[:3] == (row.judge_model, row.content, row.score)


ANSWERS = [  # the judge's answer to every call -> (status, score, content, calls)
    pytest.param("0.7 because", "ok", 0.7, "0.7", 1, id="score-then-words"),
    pytest.param("1", "ok", 1.0, "1", 1, id="integer-1"),
    pytest.param("0", "ok", 0.0, "0", 1, id="integer-0"),
    pytest.param("0.5\n", "ok", 0.5, "0.5", 1, id="trailing-newline"),
    pytest.param("1e-1", "ok", 0.1, "1e-1", 1, id="exponent"),
    pytest.param("1.5", "fallback", 0.0, "1.5", 6, id="above-1"),
    pytest.param("-0.1", "fallback", 0.0, "-0.1", 6, id="negative"),
    pytest.param(" 0.5", "fallback", 0.0, " 0.5", 6, id="leading-space"),
    pytest.param("0.5\nbecause", "fallback", 0.0, "0.5\nbecause", 6, id="newline-then-words"),
    pytest.param("", "fallback", 0.0, "", 6, id="empty"),
    pytest.param(None, "fallback", 0.0, None, 6, id="null-content"),
]


@pytest.mark.parametrize("answer, status, score, content, n_calls", ANSWERS)
def test_judge_answers_are_parsed_like_the_official_script(store, fake_judge, answer, status, score, content,
                                                          n_calls):
    row, calls, _ = grade_one_sample(store, fake_judge, lambda p, t: answer)
    assert (row.status, row.score, row.content, len(calls)) == (status, score, content, n_calls)
    model, o_content, o_score, o_calls = oracle_one(fake_judge)
    assert (o_content, o_score, len(o_calls)) == (content, score, n_calls)
    assert [c["prompt"] for c in o_calls] == [c["prompt"] for c in calls]
    assert [c["temperature"] for c in o_calls] == [c["temperature"] for c in calls]


def test_nan_is_unparsable_for_us_but_a_score_for_the_official_script(store, fake_judge):
    """The one named difference in parsing (mmvet_core.judging.prompt.parse_score): NaN would poison every average."""
    row, calls, _ = grade_one_sample(store, fake_judge, lambda p, t: "nan")
    assert (row.status, row.score, len(calls)) == ("fallback", 0.0, 6)
    _, content, score, o_calls = oracle_one(fake_judge)
    assert content == "nan" and score != score and len(o_calls) == 1


# --- API failures ------------------------------------------------------------------------------------------------

def test_429_with_retry_after_is_waited_out(store, fake_judge):
    fake_judge.state.fail_429, fake_judge.state.retry_after = 2, 0.05
    row, calls, outcome = grade_one_sample(store, fake_judge, lambda p, t: "0.8")
    assert [c["status"] for c in calls] == [429, 429, 200]
    assert (row.status, row.score, outcome.status) == ("ok", 0.8, "done")


def test_500s_then_success(store, fake_judge):
    fake_judge.state.fail_500 = 2
    row, calls, outcome = grade_one_sample(store, fake_judge, lambda p, t: "0.3")
    assert [c["status"] for c in calls] == [500, 500, 200]
    assert (row.status, row.score, outcome.status) == ("ok", 0.3, "done")


def test_persistent_500_leaves_errors_not_scores_and_resume_grades_only_those(store, fake_judge):
    bench = tiny(5)
    preds = predictions_for(bench)
    settings = settings_for(fake_judge, max_retries=1)
    fake_judge.state.answer_fn = lambda p, t: "0.4"
    fake_judge.state.fail_500 = 4          # one worker: v1_0 and v1_1 get 2 x 500 each (a call + its SDK retry)
    run_id = new_run(store, bench, settings, preds)
    outcome = grade(store, run_id, bench, settings, concurrency=1)
    assert (outcome.status, outcome.errored, outcome.graded) == ("incomplete", 2, 3)
    rows = {g.sample_id: g for g in store.grades(run_id)}
    for sid in ("v1_0", "v1_1"):
        assert (rows[sid].status, rows[sid].score) == ("error", None)
        assert "server error" in rows[sid].error and "500" in rows[sid].error
    assert store.get_run(run_id).status == "incomplete"
    view = load_run_view(store, run_id)
    assert view.effective_scores()["v1_0"] == [None] and not view.scores.complete

    before = len(fake_judge.state.calls)
    outcome = grade(store, run_id, bench, settings, concurrency=1)
    resumed = fake_judge.state.calls[before:]
    assert outcome.status == "done"
    assert samples_called(resumed, preds) == {"v1_0", "v1_1"}
    assert all(g.status == "ok" and g.score == 0.4 for g in store.grades(run_id))


def test_client_timeout_is_an_error_and_visible(store, fake_judge):
    fake_judge.state.slow_calls, fake_judge.state.slow_seconds = 1, 600     # held until the client hangs up
    row, calls, outcome = grade_one_sample(store, fake_judge, lambda p, t: "0.9", timeout=0.3, max_retries=0)
    assert (row.status, row.score) == ("error", None)
    assert "did not answer in time" in row.error
    assert (outcome.status, outcome.errored) == ("incomplete", 1)


@pytest.mark.parametrize("fault, expected", [
    pytest.param({"api_key": "sk-right"}, "API key was rejected", id="401-wrong-key"),
    pytest.param({"served_models": {"gpt-4-0613"}}, "does not serve this model", id="404-unknown-model"),
])
def test_fatal_judge_errors_fail_the_run_quickly(store, fake_judge, fault, expected):
    for name, value in fault.items():
        setattr(fake_judge.state, name, value)
    settings = settings_for(fake_judge, model="gpt-4-0613" if "api_key" in fault else "gpt-nope")
    run_id = new_run(store, V1, settings)
    outcome = grade(store, run_id, V1, settings, key="sk-wrong", concurrency=32)
    assert outcome.status == "failed" and expected in outcome.message
    assert store.get_run(run_id).status == "failed" and expected in store.get_run(run_id).message
    assert outcome.errored <= 32 and len(fake_judge.state.calls) <= 32     # not 218 errors
    assert outcome.graded == 0


def test_unreachable_base_url_fails_the_run_quickly(store):
    settings = JudgeSettings(base_url=f"http://127.0.0.1:{free_port()}/v1")    # nothing listens there
    run_id = new_run(store, V1, settings)
    start = time.monotonic()
    outcome = grade(store, run_id, V1, settings, concurrency=32)
    # not retried: the backoff of one call's 6 retries alone would take 31.5 s, whatever the machine's load
    assert time.monotonic() - start < 20
    assert outcome.status == "failed" and "could not be reached" in outcome.message
    assert outcome.errored <= 32


# --- reasoning-model parameters -------------------------------------------------------------------------------

def test_max_tokens_rejected_switches_to_max_completion_tokens(store, fake_judge):
    fake_judge.state.reject_max_tokens = True
    bench = tiny(12)
    settings = settings_for(fake_judge)
    run_id = new_run(store, bench, settings)
    outcome = grade(store, run_id, bench, settings, concurrency=8)
    assert outcome.status == "done"
    rows = store.grades(run_id)
    assert all(g.status in GRADED for g in rows)
    sent = [a["sent"] for g in rows for a in g.attempts]
    assert sent and all(s.get("max_completion_tokens") == 3 and "max_tokens" not in s for s in sent)
    ok_calls = [c for c in fake_judge.state.calls if c["status"] == 200]
    assert all(c["max_completion_tokens"] == 3 and c["max_tokens"] is None for c in ok_calls)


def test_temperature_rejected_is_dropped_and_recorded(store, fake_judge):
    fake_judge.state.reject_temperature = True
    bench = tiny(12)
    settings = settings_for(fake_judge)
    run_id = new_run(store, bench, settings)
    outcome = grade(store, run_id, bench, settings, concurrency=8)
    assert outcome.status == "done"
    attempts = [a for g in store.grades(run_id) for a in g.attempts]
    assert all("temperature" not in a["sent"] and a["sent"]["max_tokens"] == 3 for a in attempts)
    for g in store.grades(run_id):                                # the policy's temperatures are still recorded
        assert [a["temperature"] for a in g.attempts] == RETRY_PROMPT_TEMPS[:len(g.attempts)]
    assert all(c["temperature"] is None for c in fake_judge.state.calls if c["status"] == 200)


# --- the answer cache ------------------------------------------------------------------------------------------

def test_an_answer_that_arrived_is_kept_when_its_grading_is_cancelled_while_storing_it(pg_url, fake_judge):
    """Stop's grace ends by cancelling the grading (the calls still in flight); an answer that already arrived was
    paid for and is kept all the same. On a database server the storing is awaited in steps (the host budget's
    correction, then the cache): here the first step is held while the grading is cancelled."""
    store = Store(pg_url)
    judge = make_judge(settings_for(fake_judge), "sk-test")
    entered, release = threading.Event(), threading.Event()

    def budget(prompt):
        def settle(reply):
            entered.set()
            release.wait(30)
        return settle

    call = CachedCaller(judge, store, budget=budget)

    async def main() -> None:
        task = asyncio.ensure_future(call("a prompt", 0.0, 0, V1.samples["v1_0"], "A cat on a mat."))
        await asyncio.to_thread(entered.wait, 30)
        task.cancel()
        release.set()
        with pytest.raises(asyncio.CancelledError):
            await task
        await asyncio.to_thread(wait_until, lambda: store.cache_size() == 1, 30, "the answer in the cache")
        await judge.aclose()

    try:
        asyncio.run(main())
        assert len(fake_judge.state.calls) == 1
    finally:
        store.close()


def test_second_run_with_same_predictions_makes_no_call(store, fake_judge):
    bench = tiny(12)
    settings = settings_for(fake_judge)
    first = new_run(store, bench, settings)
    grade(store, first, bench, settings)
    n_calls = len(fake_judge.state.calls)
    assert n_calls >= 12
    second = new_run(store, bench, settings)
    outcome = grade(store, second, bench, settings)
    assert len(fake_judge.state.calls) == n_calls and outcome.stats.calls == 0
    strip = lambda rows: sorted((g.sample_id, g.status, g.score, g.content, g.judge_model) for g in rows)  # noqa: E731
    assert strip(store.grades(second)) == strip(store.grades(first))


def test_a_changed_prediction_calls_the_judge_for_that_sample_only(store, fake_judge):
    bench = tiny(12)
    settings = settings_for(fake_judge)
    preds = predictions_for(bench)
    grade(store, new_run(store, bench, settings, preds), bench, settings)
    before = len(fake_judge.state.calls)
    changed = {**preds, "v1_3": "Something else entirely."}
    outcome = grade(store, new_run(store, bench, settings, changed), bench, settings)
    new_calls = fake_judge.state.calls[before:]
    assert new_calls and samples_called(new_calls, changed) == {"v1_3"}
    assert outcome.stats.calls == len(new_calls)


def test_the_kth_run_reuses_the_kth_answer(store, fake_judge):
    bench = tiny(6)
    settings = settings_for(fake_judge)
    one = grade(store, new_run(store, bench, settings, n_runs=1), bench, settings)
    three = grade(store, new_run(store, bench, settings, n_runs=3), bench, settings)
    assert three.stats.cached == one.stats.calls            # run 1 reuses the 1-run grading's answers ...
    assert three.stats.calls == 2 * one.stats.calls         # ... runs 2 and 3 pay for their own
    before = len(fake_judge.state.calls)
    again = grade(store, new_run(store, bench, settings, n_runs=3), bench, settings)
    assert len(fake_judge.state.calls) == before and again.stats.calls == 0


# --- secrets ---------------------------------------------------------------------------------------------------

SECRET = "sk-SECRET-123"


def test_the_api_key_is_never_written_or_logged(tmp_path, fake_judge, caplog):
    caplog.set_level(logging.DEBUG)
    fake_judge.state.api_key = SECRET
    bench = tiny(6)
    settings = settings_for(fake_judge)

    def assert_no_secret_in_files():
        files = [p for p in tmp_path.rglob("*") if p.is_file()]
        for path in files:
            assert SECRET.encode() not in path.read_bytes(), path
        return files

    store = Store(tmp_path / "grader.db")
    run_id = new_run(store, bench, settings)
    outcome = grade(store, run_id, bench, settings, key=SECRET)
    assert outcome.status == "done"
    assert all(c["auth"] == f"Bearer {SECRET}" for c in fake_judge.state.calls)   # the key was really used
    export_run(load_run_view(store, run_id), tmp_path / "out")
    files = assert_no_secret_in_files()                  # the database, its -wal file and the exports
    assert {"grader.db", "grader.db-wal"} <= {p.name for p in files}
    assert any(p.suffix == ".csv" for p in files) and any(p.suffix == ".json" for p in files)
    for _, rows in store.iter_tables():
        assert SECRET not in json.dumps(rows, default=str)
    store.close()
    assert SECRET not in caplog.text

    # the CLI, with the key in its environment only
    subset_file = tmp_path / "ids.json"
    subset_file.write_text(json.dumps(bench.ids))
    env = cli_env(OPENAI_API_KEY=SECRET)
    proc = run_cli("grade", RESULTS_FILE, "--subset", subset_file, "--base-url", fake_judge.url,
                   "--db", tmp_path / "cli.db", "--out", tmp_path / "cli-out", cwd=tmp_path, env=env)
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert "cli.db" in {p.name for p in assert_no_secret_in_files()}
    assert SECRET not in proc.stdout + proc.stderr


# --- the order of work ----------------------------------------------------------------------------------------

def test_work_order_takes_every_pair_once_and_moves_long_chains_ahead():
    import random
    rng = random.Random(7)
    items = [(f"v1_{i}", r) for r in range(5) for i in range(40)]
    order = WorkOrder(items)
    taken = []
    while (item := order.take()) is not None:
        taken.append(item)
        if rng.random() < 0.3:
            order.observe(item[0], rng.choice([1, 2, 3, 6]))
    assert sorted(taken) == sorted(items) and len(order) == 0
    order = WorkOrder(items)
    first = [order.take() for _ in range(3)]
    order.observe("v1_1", 6)
    order.observe("v1_0", 3)
    assert [order.take() for _ in range(6)] == [("v1_1", r) for r in range(1, 5)] + [("v1_0", 1), ("v1_0", 2)]
    assert first == [("v1_0", 0), ("v1_1", 0), ("v1_2", 0)]


def test_grades_do_not_depend_on_the_order_of_work(store, fake_judge):
    """Runs of samples that needed retries are graded early; each (sample, run) still gets the grade the same
    judge gives it at concurrency 1, where the order is the official run-major one."""
    bench = tiny(30)
    settings = settings_for(fake_judge)
    fast = new_run(store, bench, settings, n_runs=3)
    grade(store, fast, bench, settings, concurrency=16)
    fake_judge.state.calls.clear()
    slow_store = Store(store.path.with_name("sequential.db"))
    slow = new_run(slow_store, bench, settings, n_runs=3)
    grade(slow_store, slow, bench, settings, concurrency=1)
    def key(rows):
        return {(g.sample_id, g.run_index): (g.status, g.score, g.content, len(g.attempts)) for g in rows}
    assert key(store.grades(fast)) == key(slow_store.grades(slow))
    assert any(n > 1 for *_, n in key(store.grades(fast)).values())     # there were chains to move
    slow_store.close()


# --- what goes over the wire ----------------------------------------------------------------------------------

def test_each_request_is_the_official_call(store, fake_judge):
    """Our request body is exactly the one the official script's SDK call sends (its JSON, key for key), with
    the same bearer key, for a first call and a retry."""
    answers = iter(["Score:", "0.7"] * 2)
    row, ours, _ = grade_one_sample(store, fake_judge, lambda p, t: next(answers))
    *_, official = oracle_one(fake_judge)
    assert (row.status, row.score) == ("ok", 0.7)
    assert [c["body"] for c in ours] == [c["body"] for c in official]
    assert [set(c["body"]) for c in ours] == [{"model", "messages", "max_tokens", "temperature"}] * 2
    assert [c["auth"] for c in ours] == [c["auth"] for c in official] == ["Bearer sk-test"] * 2


def test_azure_calls_the_deployment_route_with_the_api_key_header(store, fake_judge):
    fake_judge.state.api_key = SECRET
    bench = tiny(3)
    settings = JudgeSettings(provider="azure", base_url=fake_judge.url.removesuffix("/v1"),
                             api_version="2024-06-01", model="gpt-4-0613")
    run_id = new_run(store, bench, settings)
    outcome = grade(store, run_id, bench, settings, key=SECRET)
    assert outcome.status == "done" and outcome.graded == 3
    calls = fake_judge.state.calls
    assert calls and {c["route"] for c in calls} == {"azure:gpt-4-0613"}
    assert {c["auth"] for c in calls} == {f"Bearer {SECRET}"}      # the fake reports Azure's api-key this way


def test_a_body_that_is_not_a_chat_completion_leaves_samples_errored_and_resume_grades_them(store, fake_judge):
    """A proxy that answers 200 with an HTML page: each sample is errored with what came back, nothing is
    scored, and once the endpoint is fixed a resume grades exactly those samples."""
    fake_judge.state.raw_body = b"<html><body>502 Bad Gateway</body></html>"
    bench = tiny(4)
    settings = settings_for(fake_judge)
    run_id = new_run(store, bench, settings)
    outcome = grade(store, run_id, bench, settings)
    assert (outcome.status, outcome.graded, outcome.errored) == ("incomplete", 0, 4)
    rows = store.grades(run_id)
    assert {g.status for g in rows} == {"error"} and all(g.score is None for g in rows)
    assert all("not a chat completion" in g.error and "502 Bad Gateway" in g.error for g in rows)
    fake_judge.state.raw_body = None
    again = grade(store, run_id, bench, settings)
    assert (again.status, again.graded, again.errored) == ("done", 4, 0)


# --- concurrency -----------------------------------------------------------------------------------------------

def test_the_server_never_sees_more_than_concurrency_requests(store, fake_judge):
    gate = fake_judge.state.gate = CallGate()      # the server holds every call until the test lets one through
    bench = tiny(12)
    settings = settings_for(fake_judge)
    run_id = new_run(store, bench, settings)
    with concurrent.futures.ThreadPoolExecutor(1) as pool:
        grading = pool.submit(grade, store, run_id, bench, settings, concurrency=4)
        try:
            for n in range(1, 9):               # four calls open at once, one let through at a time
                gate.wait_held(4)
                gate.release(1)
                gate.wait_passed(n)
        finally:
            gate.open()
        assert grading.result(timeout=120).status == "done"
    assert len(fake_judge.state.calls) >= 12 and gate.peak_held == 4


# --- MM-Vet v2 -------------------------------------------------------------------------------------------------

V2_TEMPLATE = next(p for p in (SHARED_DATA / "prompts" / "mmvet-v2-judge-prompt.txt",
                               ROOT / "mmvet_core" / "prompts" / "mmvet-v2-judge-prompt.txt")
                   if p.is_file()).read_bytes().decode("utf-8")
V2 = Benchmark(name="tiny-v2", version="v2", samples={
    "v2_0": Sample("v2_0", "What is in the image?<IMG>v2_0_0.png", "a cat<OR>kitten", ("rec",)),
    # the official rule: an <IMG>-separated segment becomes <image> when it ends with ".jpg", "jpeg" or ".png";
    # so "v2_1_1.jpeg\nWhich is bigger?" and "v2_2_0.gif" stay text
    "v2_1": Sample("v2_1", "Compare<IMG>v2_1_0.jpg<IMG>v2_1_1.jpeg\nWhich is bigger?", "left<AND>bigger",
                   ("rec", "seq")),
    "v2_2": Sample("v2_2", "FORBIDDEN question<IMG>v2_2_0.gif", "no", ("rec", "know")),
})
V2_PREDICTIONS = {"v2_0": "A cat.\nIt sleeps.", "v2_1": "The left one.", "v2_2": "No."}


class ContentFiltered(Exception):
    pass


@pytest.fixture
def filtering_judge(monkeypatch):
    """The fake judge, answering 400 (content filter) to any prompt containing FORBIDDEN."""
    original = fake_judge_module.make_app

    def make_app(state):
        app = original(state)
        app.add_exception_handler(ContentFiltered, lambda request, exc: JSONResponse(
            {"error": {"message": "The response was filtered due to the prompt triggering the content management "
                                  "policy.", "type": None, "param": "prompt", "code": "content_filter"}},
            status_code=400))
        return app
    monkeypatch.setattr(fake_judge_module, "make_app", make_app)
    state = FakeState()

    def answer(prompt, temperature):
        if "FORBIDDEN" in prompt:
            raise ContentFiltered()
        return "0.5"
    state.answer_fn = answer
    with FakeJudgeServer(state) as server:
        yield server


def test_v2_prompt_and_bad_request_scores_zero(store, filtering_judge):
    settings = settings_for(filtering_judge)
    run_id = create_run(store, benchmark=V2, spec="tiny-v2", predictions=V2_PREDICTIONS, n_runs=1,
                        settings=settings, model_name="m")
    outcome = grade(store, run_id, V2, settings, concurrency=1)
    prompts = [c["prompt"] for c in filtering_judge.state.calls]
    assert prompts == [
        V2_TEMPLATE + "| What is in the image?<image> | a cat <OR> kitten | A cat.<br>It sleeps. | ",
        V2_TEMPLATE + "| Compare<image>v2_1_1.jpeg<br>Which is bigger? | left <AND> bigger | The left one. | ",
        V2_TEMPLATE + "| FORBIDDEN questionv2_2_0.gif | no | No. | ",
    ]
    rows = {g.sample_id: g for g in store.grades(run_id)}
    assert (rows["v2_0"].status, rows["v2_0"].score) == ("ok", 0.5)
    bad = rows["v2_2"]
    assert (bad.status, bad.score, bad.content, bad.judge_model) == ("bad_request_zero", 0.0, "BadRequestError",
                                                                     "gpt-4-0613")
    assert "bad_request_zero" in bad.flags
    assert outcome.status == "done"


def test_v2_retry_suffix(store, fake_judge):
    fake_judge.state.answer_fn = lambda p, t: "??"
    bench = Benchmark(name="one-v2", version="v2", samples={"v2_0": V2.samples["v2_0"]})
    settings = settings_for(fake_judge)
    grade(store, create_run(store, benchmark=bench, spec="one-v2", predictions={"v2_0": "x"}, n_runs=1,
                            settings=settings, model_name="m"), bench, settings)
    prompts = [c["prompt"] for c in fake_judge.state.calls]
    assert len(prompts) == 6
    assert all(p == prompts[0] + "\n\nPredict the correctness of the answer (digit): " for p in prompts[1:])


# --- the offline baseline judge --------------------------------------------------------------------------------

@pytest.mark.parametrize("answer, prediction, score", [
    pytest.param("Paris", "The capital is paris.", 1.0, id="case-insensitive"),
    pytest.param("milk", "eggs", 0.0, id="absent"),
    pytest.param("cat", "concatenate", 0.0, id="whole-words-only"),
    pytest.param("2", "22 apples", 0.0, id="whole-numbers-only"),
    pytest.param("-1<AND>-5", "x = -1 or x = -5", 1.0, id="AND-all-present"),
    pytest.param("-1<AND>-5", "x = -5", 0.5, id="AND-half-present"),
    pytest.param("cat<AND>dog<AND>bird", "a cat and a dog", 0.7, id="AND-two-of-three-rounded"),
    pytest.param("1.25<OR>=1.25<OR>5/4", "d is 5/4", 1.0, id="OR-any-alternative"),
    pytest.param("Tokyo<AND>Japan<OR>Kyoto", "Tokyo", 0.5, id="OR-best-of-AND-groups"),
    pytest.param("Tokyo<AND>Japan<OR>Kyoto", "Kyoto", 1.0, id="OR-single-alternative"),
    pytest.param("<AND>yes", "yes", 1.0, id="empty-element-ignored"),
    pytest.param("cat<OR>dog", "", 0.0, id="empty-prediction"),
    pytest.param("first\\nsecond", "first second", 1.0, id="literal-backslash-n"),
    pytest.param("The man is riding a red bicycle down the street", "a man riding a bicycle", 0.5,
                 id="long-answer-content-words-3-of-6"),
    pytest.param("The man is riding a red bicycle down the street",
                 "The man is riding a red bicycle down the street", 1.0, id="long-answer-verbatim"),
])
def test_keyword_score(answer, prediction, score):
    assert keyword_score(answer, prediction) == score


def test_a_baseline_run_needs_no_server(store, monkeypatch):
    def no_network(*args, **kwargs):
        raise AssertionError("the baseline judge must not open a connection")
    monkeypatch.setattr(socket.socket, "connect", no_network)
    monkeypatch.setattr(socket, "create_connection", no_network)
    judge = BaselineJudge()
    raw = json.loads(RESULTS_FILE.read_text(encoding="utf-8"))
    run_id = create_run(store, benchmark=V1, spec="mmvet-v1", predictions={i: raw[i] for i in V1.ids}, n_runs=1,
                        settings=judge.settings, model_name=MODEL_NAME)
    outcome = grade(store, run_id, V1, judge.settings, judge=judge)
    assert (outcome.status, outcome.graded) == ("done", 218)
    rows = store.grades(run_id)
    assert all(g.status == "ok" and g.judge_model == "keyword-baseline" for g in rows)
    assert [g.score for g in rows if g.sample_id == "v1_0"] == [keyword_score(V1.samples["v1_0"].answer, raw["v1_0"])]
    assert load_run_view(store, run_id).scores.complete
