"""A CLI grading killed with SIGKILL mid-run loses nothing it paid for and pays for nothing twice.

Every judge answer is committed the moment it arrives (`mmvet_core.store.Store.put_answer`), so rerunning the
same command resumes the run: the grades equal those of an uninterrupted run, and the judge is asked again only
for what was in flight when the process died.
"""
from __future__ import annotations

import hashlib
import json
import os
import signal
import sqlite3
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path

from tests.conftest import cli_env
from tests.call_gate import CallGate
from tests.fake_judge import FakeJudgeServer, FakeState
from tests.official_reference import RETRY_TEXT, SHARED_DATA, load_official_metadata, sample_by_question

ROOT = Path(__file__).resolve().parents[1]
RESULTS_FILE = next(p for p in (SHARED_DATA / "results" / "llava-v1.5-7b.json",
                                ROOT / "assets" / "examples" / "llava_llama2_13b_chat.json") if p.is_file())
N_RUNS, CONCURRENCY = 2, 4
KILL_AFTER_GRADES = 260            # of 436: into the second run, so some samples are finished


def grade_command(url: str, db: Path, out: Path, concurrency: int) -> list[str]:
    return [sys.executable, "-m", "mmvet_core", "grade", str(RESULTS_FILE), "--runs", str(N_RUNS),
            "--base-url", url, "--db", str(db), "--out", str(out), "--concurrency", str(concurrency)]


def run_to_completion(cmd: list[str], cwd: Path) -> subprocess.CompletedProcess:
    proc = subprocess.run(cmd, cwd=cwd, env=cli_env(OPENAI_API_KEY="sk-test"), capture_output=True, text=True,
                          timeout=180)
    assert proc.returncode == 0, proc.stderr[-2000:]
    return proc


def count_graded(db: Path) -> int:
    try:
        with sqlite3.connect(db, timeout=30) as conn:
            return conn.execute("SELECT COUNT(*) FROM grades WHERE status IN ('ok', 'fallback')").fetchone()[0]
    except sqlite3.OperationalError:        # not created yet
        return 0


def stored_state(db: Path) -> tuple[set[tuple[str, int]], Counter]:
    """(sample, run) pairs graded, and how many answers are stored per (prompt sha, temperature)."""
    with sqlite3.connect(db) as conn:
        graded = {(sid, r) for sid, r in conn.execute(
            "SELECT sample_id, run_index FROM grades WHERE status IN ('ok', 'fallback')")}
        answers = Counter(conn.execute("SELECT prompt_sha, temperature FROM judge_cache").fetchall())
    return graded, answers


def call_key(call: dict) -> tuple[str, float]:
    return hashlib.sha256(call["prompt"].encode("utf-8")).hexdigest(), call["temperature"]


def test_a_killed_grading_resumes_without_paying_twice(tmp_path):
    predictions = json.loads(RESULTS_FILE.read_text(encoding="utf-8"))
    index = sample_by_question(load_official_metadata(), predictions)

    def sample_of(call: dict) -> str:
        return index[call["prompt"].removesuffix(RETRY_TEXT)]

    # The uninterrupted reference runs at the same time on a server of its own, into its own database
    # (its concurrency does not change what is asked).
    # The judge of the command under test answers 20 calls at a time, only while fewer than KILL_AFTER_GRADES
    # grades are stored: the kill comes mid-run (with calls in flight) however fast or slow the machine is.
    gate = CallGate()
    with FakeJudgeServer(FakeState(latency=0.05)) as ref_server, FakeJudgeServer(FakeState(gate=gate)) as server, \
            open(tmp_path / "ref.log", "w") as ref_log:
        ref_proc = subprocess.Popen(grade_command(ref_server.url, tmp_path / "ref.db", tmp_path / "ref", 32),
                                    cwd=tmp_path, env=cli_env(OPENAI_API_KEY="sk-test"), stdout=ref_log,
                                    stderr=subprocess.STDOUT)

        # the command under test, killed with SIGKILL once some grades are stored ...
        calls = server.state.calls
        db, out = tmp_path / "killed.db", tmp_path / "killed"
        cmd = grade_command(server.url, db, out, CONCURRENCY)
        proc = subprocess.Popen(cmd, cwd=tmp_path, env=cli_env(OPENAI_API_KEY="sk-test"),
                                stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        deadline = time.monotonic() + 120
        while count_graded(db) < KILL_AFTER_GRADES:
            assert proc.poll() is None, "the grading finished before it could be killed"
            assert time.monotonic() < deadline, "no progress"
            if gate.passes == 0:
                gate.release(20)
            time.sleep(0.02)
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait(timeout=10)
        server.wait_quiet()                   # requests in flight at the kill reach the server's log
        gate.open()
        before_kill = list(calls)
        graded_before, stored_before = stored_state(db)
        assert KILL_AFTER_GRADES <= len(graded_before) < N_RUNS * 218

        # ... and rerun to completion
        run_to_completion(cmd, tmp_path)
        after_kill = calls[len(before_kill):]
        assert ref_proc.wait(timeout=180) == 0, (tmp_path / "ref.log").read_text()[-2000:]
        reference = list(ref_server.state.calls)

    # the final grades are those of the uninterrupted run
    name = f"{RESULTS_FILE.stem}_gpt-4-0613-grade-{N_RUNS}runs.json"
    assert json.loads((out / name).read_text()) == json.loads((tmp_path / "ref" / name).read_text())

    # nothing stored before the kill was asked again; only answers lost in flight were paid twice
    assert Counter(map(call_key, after_kill)) + stored_before == Counter(map(call_key, reference))
    lost_in_flight = len(before_kill) - sum(stored_before.values())
    assert 0 <= lost_in_flight <= CONCURRENCY
    assert len(before_kill) + len(after_kill) == len(reference) + lost_in_flight

    # zero calls for a (sample, run) graded before the kill (both runs of a sample ask the same questions)
    per_run = {sid: n // N_RUNS for sid, n in Counter(map(sample_of, reference)).items()}
    asked_after = Counter(map(sample_of, after_kill))
    graded_runs = Counter(sid for sid, _ in graded_before)
    for sid, n_graded in graded_runs.items():
        assert asked_after[sid] <= per_run[sid] * (N_RUNS - n_graded), sid
    assert any(n == N_RUNS for n in graded_runs.values())          # some samples were finished before the kill
