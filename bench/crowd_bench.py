"""A crowd of share-link viewers, a visitor with 1,000 runs and a million-cell grade file (issue 20, holes 1 and 3):
what they cost the app and another visitor.

Run by hand (not in CI), from the repository root:

    python bench/crowd_bench.py                    # 50 viewers, 1,000 runs, a million-cell workbook
    python bench/crowd_bench.py --viewers 100 --runs 2000 --seconds 30 --bomb-cells 0

What it does:
1. starts a fake OpenAI-compatible judge (`python -m tests.fake_judge`, `--latency` per call) as the server's judge;
2. stores `--runs` finished runs of one visitor in a fresh data folder (the official LLaVA-1.5-13b grade file,
   opened once, copied by SQL), then starts the app as a subprocess (`python app.py`) in the host
   configuration of docs/hosting.md (the server's key, one trusted proxy hop);
3. My runs: times `/my_runs` for that visitor, first call (each shown run's total computed once) and then the
   median of 5 (what every later page load costs);
4. a grade file of `--bomb-cells` cells in two rows (`tests/hostile_files.py`; 0 skips it) opened by an attacker
   while another visitor asks their own run's status back to back: how long until the refusal, that visitor's
   status p50 / max meanwhile, and how much the app's memory (its process tree) rose;
5. starts a run on the server's judge that grades for the whole measurement, then for `--seconds` each: another
   visitor asks their own run's status 5 times a second, without viewers and then with `--viewers` viewers polling
   the running run once a second (`tests/crowd.py`, in its own process, each viewer from its own address); prints
   the app's CPU (psutil, % of one core) and that visitor's status p50 / p99, and the viewers' own p50 / p99.
"""
from __future__ import annotations

import argparse
import json
import os
import secrets
import signal
import sqlite3
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

import psutil

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from bench.load_test import free_port, wait_http  # noqa: E402
from tests.crowd import StatusClient, percentile  # noqa: E402

GRADES = ROOT / "tests" / "data" / "official-grades" / "llava-v1.5-13b_gpt-4-grade-3runs.json"
RESULTS = ROOT / "tests" / "data" / "results" / "llava-v1.5-13b.json"


def store_runs(db: Path, owner: str, n: int) -> None:
    """`n` finished runs of `owner`: one grade file opened as a run, then copied row for row by SQL."""
    from mmvet_core.inputs.benchmark import load_bundled_v1
    from mmvet_core.scores.graded import read_grade_file
    from mmvet_core.runs.lifecycle import create_grade_view
    from mmvet_core.store import Store, new_run_id

    bench = load_bundled_v1()
    store = Store(db)
    first = create_grade_view(store, read_grade_file(GRADES, bench), benchmark=bench, spec="mmvet-v1", owner=owner)
    keeping = hasattr(store, "keep_run")          # (so that the bench also runs on the code before issue 20)
    if keeping:
        store.keep_run(first, "bench-visitor")
    store.close()
    conn = sqlite3.connect(db)
    with conn:
        for i in range(n - 1):
            rid = new_run_id()
            conn.execute("INSERT INTO runs SELECT ?, created_at + ?, updated_at + ?, model_name || ?, benchmark, n_runs,"
                         " judge, status, message, results_format, predictions, owner, fingerprint FROM runs WHERE id = ?",
                         (rid, i + 1, i + 1, f" #{i + 1}", first))
            conn.execute("INSERT INTO grades SELECT ?, sample_id, run_index, status, score, content, judge_model,"
                         " attempts, error, flags, updated_at FROM grades WHERE run_id = ?", (rid, first))
            if keeping:
                conn.execute("INSERT INTO run_keeping (run_id, visitor, opened_at) VALUES (?, 'bench-visitor', ?)",
                             (rid, time.time()))
    conn.close()


def cpu_during(proc: psutil.Process, seconds: float) -> float:
    """% of one core `proc` and its children used over the next `seconds`."""
    def total() -> float:
        t = proc.cpu_times()
        s = t.user + t.system
        for c in proc.children(recursive=True):
            try:
                ct = c.cpu_times()
                s += ct.user + ct.system
            except psutil.Error:
                pass
        return s
    t0, c0 = time.monotonic(), total()
    time.sleep(seconds)
    return 100 * (total() - c0) / (time.monotonic() - t0)


def tree_rss(proc: psutil.Process) -> int:
    """Resident memory of `proc` and its children (the app's parse workers)."""
    total = proc.memory_info().rss
    for child in proc.children(recursive=True):
        try:
            total += child.memory_info().rss
        except psutil.Error:
            pass
    return total


def bomb_phase(url: str, app: psutil.Process, mine: str, tmp: Path, cells: int) -> None:
    """Issue 20, hole 1: an attacker opens a grade file of `cells` cells while another visitor polls their run."""
    from gradio_client import Client, handle_file

    from tests.hostile_files import write_wide_xlsx

    bomb = write_wide_xlsx(tmp / "model_MMVet_gpt-4-turbo.xlsx", cells)
    attacker = Client(url, headers={"X-Forwarded-For": "203.0.113.66"}, verbose=False, download_files=False)
    done, waits, base, peak = threading.Event(), [], tree_rss(app), [0]

    def poll() -> None:
        me = StatusClient(url, ip="203.0.113.77")
        try:
            while not done.is_set():
                waits.append(me.timed(mine))
                time.sleep(0.1)
        finally:
            me.close()

    def sample() -> None:
        while not done.is_set():
            peak[0] = max(peak[0], tree_rss(app))
            time.sleep(0.05)

    threads = [threading.Thread(target=poll), threading.Thread(target=sample)]
    for t in threads:
        t.start()
    time.sleep(1)
    t0 = time.perf_counter()
    try:
        attacker.predict(handle_file(str(bomb)), "MM-Vet v1 (bundled, 218 samples)", None, "", "All samples",
                         secrets.token_urlsafe(18), api_name="/view_grades")
        outcome = "NOT refused"
    except Exception as e:  # noqa: BLE001 — the refusal is what is measured
        outcome = "refused: " + str(e).splitlines()[0][:120]
    took = time.perf_counter() - t0
    time.sleep(0.5)
    done.set()
    for t in threads:
        t.join(60)
    print(f"a {bomb.stat().st_size / 1e3:.0f} KB grade file of {cells:,} cells: {outcome} after {took:.2f} s; "
          f"the app's memory rose by {(peak[0] - base) / 1e6:.0f} MB; another visitor's status p50 "
          f"{percentile(waits, 50):.3f} s, max {max(waits):.3f} s ({len(waits)} calls)")


def visitor_waits(url: str, run_id: str, seconds: float) -> list[float]:
    me = StatusClient(url, ip="203.0.113.77")
    out, end = [], time.monotonic() + seconds
    try:
        while time.monotonic() < end:
            out.append(me.timed(run_id))
            time.sleep(0.2)
    finally:
        me.close()
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--viewers", type=int, default=50)
    ap.add_argument("--runs", type=int, default=1000)
    ap.add_argument("--seconds", type=float, default=20.0)
    ap.add_argument("--latency", type=float, default=1.0, help="fake judge seconds per call (the run must last)")
    ap.add_argument("--bomb-cells", type=int, default=1_000_000, help="cells of the hostile grade file (0: none)")
    args = ap.parse_args()
    tmp = Path(tempfile.mkdtemp(prefix="crowd-bench-"))
    procs: list[subprocess.Popen] = []
    try:
        env = {k: v for k, v in os.environ.items() if not k.startswith(("OPENAI_", "AZURE_OPENAI_"))}
        jport = free_port()
        procs.append(subprocess.Popen([sys.executable, "-m", "tests.fake_judge", "--port", str(jport), "--latency",
                                       str(args.latency)], cwd=ROOT, env=env, stdout=subprocess.DEVNULL,
                                      stderr=subprocess.DEVNULL, start_new_session=True))
        wait_http(f"http://127.0.0.1:{jport}/v1/models", 60, procs[-1])
        owner = secrets.token_urlsafe(18)
        t0 = time.perf_counter()
        (tmp / "data").mkdir()
        store_runs(tmp / "data" / "mmvet-grader.db", owner, args.runs)
        print(f"stored {args.runs} runs of one visitor in {time.perf_counter() - t0:.1f} s")
        port = free_port()
        env.update(GRADIO_SERVER_PORT=str(port), GRADIO_SERVER_NAME="127.0.0.1", MMVET_DATA_DIR=str(tmp / "data"),
                   GRADIO_TEMP_DIR=str(tmp / "gradio-tmp"), GRADIO_ANALYTICS_ENABLED="False",
                   HF_HUB_DISABLE_TELEMETRY="1", HF_HUB_OFFLINE="1", PYTHONUNBUFFERED="1",
                   OPENAI_API_KEY="sk-bench", OPENAI_BASE_URL=f"http://127.0.0.1:{jport}/v1",
                   MMVET_TRUSTED_PROXY_HOPS="1", MMVET_RUN_CONCURRENCY="4")
        log = open(tmp / "app.log", "wb")
        procs.append(subprocess.Popen([sys.executable, "app.py"], cwd=ROOT, env=env, stdout=log,
                                      stderr=subprocess.STDOUT, start_new_session=True))
        url = f"http://127.0.0.1:{port}/"
        wait_http(url + "gradio_api/info", 180, procs[-1])
        app = psutil.Process(procs[-1].pid)

        # My runs with N runs
        me = StatusClient(url, ip="203.0.113.77")
        t = time.perf_counter()
        listed = me.call("my_runs", owner)
        cold = time.perf_counter() - t
        warm = []
        for _ in range(5):
            t = time.perf_counter()
            me.call("my_runs", owner)
            warm.append(time.perf_counter() - t)
        print(f"My runs with {args.runs} runs ({len(listed)} listed): first open {cold:.3f} s, then "
              f"{statistics.median(warm):.3f} s (median of 5, /my_runs over HTTP)")

        # a visitor's own finished run, and a run grading on the server's judge for the whole measurement
        from gradio_client import Client, handle_file
        c = Client(url, headers={"X-Forwarded-For": "203.0.113.77"}, verbose=False, download_files=False)
        mine = c.predict(handle_file(str(GRADES)), "MM-Vet v1 (bundled, 218 samples)", None, "", "All samples",
                         owner, api_name="/view_grades")["run_id"]
        if args.bomb_cells:
            bomb_phase(url, app, mine, tmp, args.bomb_cells)
        preds = json.loads(RESULTS.read_text(encoding="utf-8"))
        tagged = tmp / "tagged.json"
        tagged.write_text(json.dumps({k: f"{v} [{secrets.token_hex(4)}]" for k, v in preds.items()}))
        g = Client(url, headers={"X-Forwarded-For": "203.0.113.55"}, verbose=False, download_files=False)
        running = g.predict(handle_file(str(tagged)), "MM-Vet v1 (bundled, 218 samples)", None, "", "All samples", 1,
                            "Server's judge", "", "", "", secrets.token_urlsafe(18), api_name="/grade")["run_id"]
        me.status(mine)
        time.sleep(2)

        def phase(label: str, crowd: subprocess.Popen | None) -> None:
            cpu: list[float] = []
            th = threading.Thread(target=lambda: cpu.append(cpu_during(app, args.seconds - 2)))
            th.start()
            waits = visitor_waits(url, mine, args.seconds - 2)
            th.join()
            state = me.status(running)["status"]
            print(f"{label}: app CPU {cpu[0]:.0f}% of one core; another visitor's status p50 "
                  f"{percentile(waits, 50):.3f} s, p99 {percentile(waits, 99):.3f} s, max {max(waits):.3f} s "
                  f"({len(waits)} calls); the watched run is {state}")

        phase("without viewers", None)
        crowd = subprocess.Popen([sys.executable, "-m", "tests.crowd", url, running, str(args.viewers),
                                  str(args.seconds + 2)], cwd=ROOT, env={**os.environ, "PYTHONPATH": str(ROOT)},
                                 stdout=subprocess.PIPE, text=True)
        time.sleep(2)
        phase(f"with {args.viewers} viewers polling once a second", crowd)
        out, _ = crowd.communicate(timeout=300)
        v = json.loads(out.strip().splitlines()[-1])
        print(f"the viewers: {v['calls']} status calls, {v['served']} of {args.viewers} served, "
              f"{v['n_errors']} errors, p50 {v['p50']:.3f} s, p99 {v['p99']:.3f} s")
        me.close()
    finally:
        for p in reversed(procs):
            if p.poll() is None:
                os.killpg(p.pid, signal.SIGTERM)
        for p in procs:
            try:
                p.wait(10)
            except subprocess.TimeoutExpired:
                os.killpg(p.pid, signal.SIGKILL)


if __name__ == "__main__":
    main()
