"""`grade --batch` (mmvet_core/judging/batch.py) against the fake judge's Files and Batch APIs: the same grades as live
grading, the official retries in rounds, no call made twice, and a run killed between submission and completion
resumes its batch instead of paying again."""
from __future__ import annotations

import asyncio
import json
import os
import signal
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

from mmvet_core.judging.batch import BatchGrader, batch_line, custom_id
from mmvet_core.judging.estimate import estimate_cost
from mmvet_core.judging.judge import JudgeSettings, make_judge
from tests.cli_run import run_cli
from tests.conftest import cli_env
from tests.fake_judge import FakeJudgeServer, FakeState
from tests.test_grading import RESULTS_FILE, V1, new_run, predictions_for, tiny


def cli(tmp: Path, url: str, db: str, out: str, *extra: str, wait: bool = True):
    cmd = [sys.executable, "-m", "mmvet_core", "grade", str(RESULTS_FILE), "--runs", "3", "--base-url", url,
           "--db", str(tmp / db), "--out", str(tmp / out), *extra]
    if wait:                                    # the command in this process (tests/cli_run.py)
        return run_cli(*cmd[3:], cwd=tmp, env=cli_env(OPENAI_API_KEY="sk-test"))
    return subprocess.Popen(cmd, cwd=tmp, env=cli_env(OPENAI_API_KEY="sk-test"), stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, text=True)


def batch_rows(db: Path) -> list[tuple]:
    """The (status, batch id) rows of the CLI's batches table, [] before the table is there."""
    if not db.exists():
        return []
    conn = sqlite3.connect(db, timeout=30)
    try:
        return conn.execute("SELECT status, batch_id FROM batches").fetchall()
    except sqlite3.OperationalError:          # no such table yet
        return []
    finally:
        conn.close()


def grade_json(folder: Path) -> dict:
    (path,) = folder.glob("*-grade-3runs.json")
    return json.loads(path.read_text(encoding="utf-8"))


def test_batch_grades_v1_x3_like_live_grading_and_makes_each_call_once(tmp_path):
    with FakeJudgeServer() as live:
        proc = cli(tmp_path, live.url, "live.db", "live")
        live_calls = sorted(json.dumps([c["prompt"], c["temperature"]]) for c in live.state.calls)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    with FakeJudgeServer() as server:
        proc = cli(tmp_path, server.url, "batch.db", "batch", "--batch", "--batch-poll", "0.05")
        state = server.state
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert grade_json(tmp_path / "batch") == grade_json(tmp_path / "live")      # same grades, same scores
    # the grade JSON, both official CSVs and the 95% intervals
    assert sorted((tmp_path / "batch").iterdir()) and len(list((tmp_path / "batch").iterdir())) == 4
    assert state.calls == []                                                    # nothing sent live
    sent = sorted(json.dumps([r["body"]["messages"][-1]["content"], r["body"]["temperature"]])
                  for r in state.batch_requests)
    assert sent == live_calls                                                   # the same calls, each once
    # the official retries ran in rounds: the first calls, then each re-ask at the next temperature
    assert len(state.batches) == 6 and "round 2: batch" in proc.stdout
    assert f"Judge calls: {len(sent)} made" in proc.stdout


def test_a_batch_run_killed_between_submission_and_completion_resumes_without_paying_again(tmp_path):
    with FakeJudgeServer(FakeState(batch_hold=True)) as server:
        state = server.state
        first = cli(tmp_path, server.url, "batch.db", "out", "--batch", "--batch-poll", "0.05", wait=False)
        deadline = time.time() + 120
        while not (state.batches and any(bid for _, bid in batch_rows(tmp_path / "batch.db"))):  # id stored
            assert first.poll() is None, first.stdout.read()
            assert time.time() < deadline, "no batch submitted"
            time.sleep(0.05)
        os.kill(first.pid, signal.SIGKILL)                   # (it is polling the batch in progress)
        first.wait(30)
        assert list(state.batches) == ["batch_fake1"] and state.batch_requests == []
        assert batch_rows(tmp_path / "batch.db") == [("submitted", "batch_fake1")]    # it outlived the kill
        state.batch_hold = False
        again = cli(tmp_path, server.url, "batch.db", "out", "--batch", "--batch-poll", "0.05")
        assert again.returncode == 0, again.stdout + again.stderr
        assert "batch batch_fake1: completed" in again.stdout          # the submitted batch was resumed ...
        first_round = [b for b in state.batches.values() if b["input_file_id"] == "file-fake1"]
        assert len(first_round) == 1                                    # ... not submitted again
        keys = [json.dumps([r["body"]["messages"][-1]["content"], r["body"]["temperature"], r["custom_id"]])
                for r in state.batch_requests]
        assert len(keys) == len(set(keys))                              # no call made twice
    assert "done: 654 grades" in again.stdout


def test_a_batch_whose_creation_was_interrupted_is_found_by_its_file(store):
    """Killed after the batch was created but before its id was stored: the restart finds it by its input file."""
    bench = tiny(3)
    with FakeJudgeServer() as server:
        settings = JudgeSettings(base_url=server.url)
        run_id = new_run(store, bench, settings, predictions_for(bench, "0.5"))

        async def go():
            judge = make_judge(settings, "sk-test")
            grader = BatchGrader(store, run_id, bench, judge, poll=0.05)
            _, needs = await grader._replay(store.get_run(run_id))
            bid = store.add_batch(run_id, 0, {k: [n.k, n.temperature] for k, n in needs.items()})
            lines = "".join(json.dumps(batch_line(judge, n)) + "\n" for n in needs.values()).encode()
            uploaded = await judge._client.files.create(file=("x.jsonl", lines), purpose="batch")
            store.update_batch(bid, input_file_id=uploaded.id)
            await judge._client.batches.create(input_file_id=uploaded.id, endpoint="/v1/chat/completions",
                                               completion_window="24h")
            # ... killed here; a new process:
            outcome = await BatchGrader(store, run_id, bench, make_judge(settings, "sk-test"), poll=0.05).run()
            await judge.aclose()
            return outcome
        outcome = asyncio.run(go())
        assert outcome.status == "done" and outcome.graded == 3
        assert len(server.state.batches) == 1 and len(server.state.batch_requests) == 3


def test_the_estimate_shows_the_batch_price():
    est = estimate_cost(V1, predictions_for(V1), 3, "gpt-4-0613")
    assert est.batch_cost_usd == est.cost_usd / 2
    text = est.summary("gpt-4-0613")
    assert f"${est.cost_usd:.2f}" in text and f"${est.batch_cost_usd:.2f} with the Batch API" in text


def test_custom_ids_are_unique_per_call():
    assert custom_id("s", 0.0, 0) != custom_id("s", 0.0, 1) != custom_id("s", 0.5, 1)


def test_batch_against_an_endpoint_without_a_batch_api_names_it_and_its_total_says_partial(tmp_path):
    """Issue 19, item 3. Before: "the endpoint does not serve this model (or the base URL is wrong)", then
    "Total: 39.1 …" from the grades that happened to be cached, and "0 reused" although they were reused."""
    def grade(url, runs, *extra):
        return run_cli("grade", RESULTS_FILE, "--runs", runs, "--base-url", url, "--db", tmp_path / "g.db",
                       "--out", tmp_path / f"out{runs}", *extra, cwd=tmp_path, env=cli_env(OPENAI_API_KEY="sk-test"))

    with FakeJudgeServer(FakeState(batch_api=False)) as server:
        assert grade(server.url, 1).returncode == 0          # live: run 1's answers are stored
        n_live = len(server.state.calls)
        proc = grade(server.url, 2, "--batch", "--batch-poll", "0.05")
        assert len(server.state.calls) == n_live             # nothing graded live behind the user's back
    out = proc.stdout + proc.stderr
    assert proc.returncode == 1, out
    assert "this endpoint has no Batch API (POST /v1/files answered HTTP 404" in out and "grade live" in out
    assert "does not serve this model" not in out
    assert f"0 made (0 answered), {n_live} reused" in out          # run 1's stored answers (re-asks included)
    [total] = [line for line in out.splitlines() if line.startswith("Total:")]
    assert "(partial, 218 of 436 grades: not a final score)" in total
    assert "PARTIAL: 218 of 436 grades" in next((tmp_path / "out2").glob("*-note-2runs.txt")).read_text()
    assert not list((tmp_path / "out2").glob("*.csv"))               # no official CSV of a partial run
