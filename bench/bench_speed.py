"""Speed where users are (issue 12): default settings against a slow judge, rate-limited judges, the app's shared
host key, and a cached re-grade. Run by hand (not in CI), from the repository root:

    python bench/bench_speed.py                      # every scenario (about 4 minutes)
    python bench/bench_speed.py latency rps          # some of them: latency rps tpm app cached

Every scenario starts the fake judge (`python -m tests.fake_judge`) as its own process and runs our CLI as a user
does (`python -m mmvet_core grade`, default settings, wall time from process start), then prints its figures:

- latency: no rate limit, a 1 s judge, v1 x 3 runs: ours against a 32-thread client sending the same calls (a plain
  ThreadPoolExecutor over the synchronous openai SDK, each task grading one sample and run the official way).
  Target: at most half its wall time.
- rps: a judge enforcing 20 requests/s (429 + retry-after-ms + x-ratelimit-* headers), 0.1 s latency, v1 x 3:
  one invocation finishes (exit 0) at >= 90% of the limit with <= 0.25 429s per graded call.
- tpm: the same with a tokens-per-minute limit (its bucket holds a minute of tokens, as OpenAI's does).
- app: two visitors of the app (`python app.py`) on the host's key against the 20 requests/s judge, at once:
  both finish, together at >= 90% of the limit.
- cached: a re-grade of v1 x 5 whose answers are all stored: 0 calls, < 1 s from process start.
"""
from __future__ import annotations

import argparse
import json
import os
import re
import secrets
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from bench.load_test import free_port, make_variant, wait_http  # noqa: E402

RESULTS = ROOT / "tests" / "data" / "results" / "llava-v1.5-13b.json"
SCENARIOS = ["latency", "rps", "tpm", "app", "cached"]


class Judge:
    """The fake judge as a process, with its /fake/stats."""

    def __init__(self, tmp: Path, *args: str):
        self.port = free_port()
        self.log = open(tmp / f"judge-{self.port}.log", "wb")
        self.proc = subprocess.Popen([sys.executable, "-m", "tests.fake_judge", "--port", str(self.port), *args],
                                     cwd=ROOT, stdout=self.log, stderr=subprocess.STDOUT, start_new_session=True)
        wait_http(f"{self.url}/models", 60, self.proc)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}/v1"

    def stats(self) -> dict:
        with urllib.request.urlopen(f"http://127.0.0.1:{self.port}/fake/stats", timeout=30) as r:
            return json.loads(r.read())

    def reset(self) -> None:
        urllib.request.urlopen(urllib.request.Request(f"http://127.0.0.1:{self.port}/fake/reset", method="POST"),
                               timeout=30).read()

    def stop(self) -> None:
        if self.proc.poll() is None:
            os.killpg(self.proc.pid, signal.SIGTERM)
            self.proc.wait(10)
        self.log.close()


def cli_env(**extra: str) -> dict:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("OPENAI_", "AZURE_OPENAI_"))}
    env["PYTHONPATH"] = str(ROOT)
    return {**env, **extra}


def run_cli(tmp: Path, url: str, runs: int, db: str = "bench.db", results: Path = RESULTS) -> tuple[int, float, str]:
    """Our CLI with default settings: (exit code, wall seconds from process start, output)."""
    t0 = time.perf_counter()
    proc = subprocess.run([sys.executable, "-m", "mmvet_core", "grade", str(results), "--runs", str(runs),
                           "--base-url", url, "--db", str(tmp / db), "--out", str(tmp / "out")],
                          cwd=tmp, env=cli_env(OPENAI_API_KEY="sk-bench"), capture_output=True, text=True)
    return proc.returncode, time.perf_counter() - t0, proc.stdout + proc.stderr


def made_calls(output: str) -> str:
    m = re.search(r"Judge calls: (\d+) made, (\d+) reused", output)
    return f"{m[1]} made, {m[2]} reused" if m else "?"


def reference_32_threads(url: str, runs: int) -> tuple[float, int]:
    """A 32-thread client sending the same calls: each task grades one (sample, run) the official way (the
    official prompt and retries), over the synchronous openai SDK. (wall seconds, grades)."""
    import openai

    from tests.official_reference import grade_one, load_official_metadata, load_official_prompt

    metadata, prompt = load_official_metadata(), load_official_prompt()
    predictions = json.loads(RESULTS.read_text(encoding="utf-8"))
    client = openai.OpenAI(api_key="sk-bench", base_url=url)
    tasks = [(sid, r) for r in range(runs) for sid in metadata]
    t0 = time.perf_counter()
    with ThreadPoolExecutor(32) as pool:
        done = list(pool.map(lambda t: grade_one(client, "gpt-4-0613", prompt, metadata[t[0]], predictions[t[0]]),
                             tasks))
    wall = time.perf_counter() - t0
    client.close()
    return wall, len(done)


def limited_figures(stats: dict, wall: float, grades: int, rps: float | None = None, tpm: float | None = None):
    span = (stats["last_ok"] or 0) - (stats["first"] or 0)
    rows = [("answered calls", f"{stats['ok']}"), ("429s", f"{stats['rate_limited']}  "
                                                          f"({stats['rate_limited'] / grades:.3f} per graded call, "
                                                          f"target <= 0.25)")]
    if rps:
        rate = (stats["ok"] - 1) / span if span > 0 else 0
        allowed = rps + rps * span                        # the bucket holds one second and refills rps a second
        rows += [("answered calls / s", f"{rate:.2f} = {rate / rps:.0%} of the limit {rps:g}/s  (target >= 90%)"),
                 ("share of what the server allowed", f"{stats['ok'] / allowed:.0%}  "
                                                          f"({stats['ok']} of {allowed:.0f} in {span:.1f} s)")]
    if tpm:
        per_min = stats["ok_tokens"] / span * 60 if span > 0 else 0
        allowed = tpm + tpm / 60 * span                   # the bucket holds one minute of tokens
        rows += [("tokens / min", f"{per_min:,.0f} ({per_min / tpm:.0%} of the limit {tpm:,.0f}; the first "
                                  f"minute's full bucket lets a short run above it)"),
                 ("share of what the server allowed", f"{stats['ok_tokens'] / allowed:.0%}  (target >= 90%: "
                                                          f"{stats['ok_tokens']:,} of {allowed:,.0f} tokens in "
                                                          f"{span:.1f} s)")]
    return rows


def show(title: str, rows: list[tuple[str, str]]) -> None:
    print(f"\n## {title}")
    for name, value in rows:
        print(f"  {name:34}{value}")
    sys.stdout.flush()


def scenario_latency(tmp: Path, args) -> None:
    judge = Judge(tmp, "--latency", str(args.latency))
    try:
        code, wall, out = run_cli(tmp, judge.url, args.runs, db="latency.db")
        ours = judge.stats()
        judge.reset()
        ref_wall, ref_grades = reference_32_threads(judge.url, args.runs)
        ref = judge.stats()
    finally:
        judge.stop()
    show(f"no rate limit, {args.latency:g} s judge, v1 x {args.runs} (default settings)", [
        ("ours: exit code, wall", f"{code}, {wall:.1f} s from process start  ({made_calls(out)} calls; "
                                  f"peak {ours['peak_in_flight']} in flight)"),
        ("32-thread client: wall", f"{ref_wall:.1f} s  ({ref['ok']} calls, {ref_grades} grades)"),
        ("ours / 32 threads", f"{wall / ref_wall:.2f}  (target <= 0.50)"),
    ])


def scenario_limited(tmp: Path, args, kind: str) -> None:
    limit = ["--rps", str(args.rps)] if kind == "rps" else ["--tpm", str(args.tpm)]
    judge = Judge(tmp, "--latency", "0.1", *limit)
    try:
        code, wall, out = run_cli(tmp, judge.url, args.runs, db=f"{kind}.db")
        stats = judge.stats()
    finally:
        judge.stop()
    grades = 218 * args.runs
    done = re.search(r"^(\w+): (\d+) grades", out, re.M)
    title = (f"{args.rps:g} requests/s limit" if kind == "rps" else f"{args.tpm:,.0f} tokens/min limit") + \
        f", 0.1 s judge, v1 x {args.runs} (default settings, one invocation)"
    show(title, [("exit code, outcome, wall", f"{code}, {done[0] if done else out[-300:]!r}, {wall:.1f} s")]
         + limited_figures(stats, wall, grades, rps=args.rps if kind == "rps" else None,
                           tpm=args.tpm if kind == "tpm" else None))


def scenario_app(tmp: Path, args) -> None:
    from gradio_client import Client, handle_file

    from app import BENCH_BUNDLED, JUDGE_HOST

    judge = Judge(tmp, "--latency", "0.1", "--rps", str(args.rps))
    port = free_port()
    env = {k: v for k, v in os.environ.items() if not k.startswith(("OPENAI_", "AZURE_OPENAI_")) and k != "SPACE_HOST"}
    env.update(GRADIO_SERVER_PORT=str(port), GRADIO_SERVER_NAME="127.0.0.1", MMVET_DATA_DIR=str(tmp / "app-data"),
               GRADIO_TEMP_DIR=str(tmp / "gradio-tmp"), GRADIO_ANALYTICS_ENABLED="False", HF_HUB_OFFLINE="1",
               OPENAI_API_KEY="sk-host", OPENAI_BASE_URL=judge.url, PYTHONUNBUFFERED="1")
    log = open(tmp / "app.log", "wb")
    app = subprocess.Popen([sys.executable, "app.py"], cwd=ROOT, env=env, stdout=log, stderr=subprocess.STDOUT,
                           start_new_session=True)
    results: dict[str, dict] = {}
    try:
        url = f"http://127.0.0.1:{port}/"
        wait_http(url + "gradio_api/info", 180, app)
        files = [make_variant(RESULTS, f"visitor{i}", tmp) for i in range(2)]
        start = threading.Barrier(2)

        def visit(i: int) -> None:
            client = Client(url, headers={"X-Forwarded-For": f"10.0.0.{i + 1}"}, verbose=False,
                            download_files=False)
            owner = secrets.token_urlsafe(18)
            start.wait()
            t0 = time.perf_counter()
            run_id = client.predict(
                handle_file(str(files[i])), BENCH_BUNDLED, None, "", "All samples", args.app_runs, JUDGE_HOST, "",
                "gpt-4-0613", "", owner, api_name="/grade")["run_id"]
            while True:
                st = client.predict(run_id, api_name="/status")
                if st["status"] in {"done", "stopped", "failed", "incomplete"}:
                    results[f"visitor {i + 1}"] = {"status": st["status"], "done": st["done"], "total": st["total"],
                                                   "wall": time.perf_counter() - t0}
                    return
                time.sleep(0.5)

        threads = [threading.Thread(target=visit, args=(i,)) for i in range(2)]
        for t in threads:
            t.start()
        for t in threads:
            t.join(900)
        stats = judge.stats()
    finally:
        if app.poll() is None:
            os.killpg(app.pid, signal.SIGTERM)
            app.wait(15)
        log.close()
        judge.stop()
    rows = [(name, f"{r['status']}, {r['done']}/{r['total']} grades in {r['wall']:.1f} s")
            for name, r in sorted(results.items())]
    show(f"two app visitors on the host key at once, {args.rps:g} requests/s limit, 0.1 s judge, "
         f"v1 x {args.app_runs} each", rows + limited_figures(stats, 0, 218 * args.app_runs * 2, rps=args.rps)
         + [("answers per second", " ".join(map(str, stats["ok_per_second"])))])


def scenario_cached(tmp: Path, args) -> None:
    judge = Judge(tmp)
    try:
        first = run_cli(tmp, judge.url, 5, db="cached.db")
        judge.reset()
        again = [run_cli(tmp, judge.url, 5, db="cached.db") for _ in range(3)]
        stats = judge.stats()
    finally:
        judge.stop()
    walls = sorted(w for _, w, _ in again)
    show("cached re-grade, v1 x 5 (every answer stored), 3 times", [
        ("first grading", f"exit {first[0]}, {first[1]:.1f} s"),
        ("re-grade: exit codes", ", ".join(str(code) for code, _, _ in again)),
        ("re-grade: wall from process start", f"best {walls[0]:.2f} s, median {walls[1]:.2f} s  (target < 1 s)"),
        ("re-grade: calls", f"{made_calls(again[-1][2])}; the judge saw {stats['calls']} in all 3  (target 0)"),
    ])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("scenarios", nargs="*", choices=SCENARIOS + [[]], default=SCENARIOS)
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--latency", type=float, default=1.0, help="judge latency of the 'latency' scenario")
    parser.add_argument("--rps", type=float, default=20.0)
    parser.add_argument("--tpm", type=float, default=450_000.0)
    parser.add_argument("--app-runs", type=int, default=1, help="judge runs of each app visitor")
    args = parser.parse_args()
    print(f"{os.cpu_count()} CPUs, load average {os.getloadavg()[0]:.1f} (other processes slow every figure)")
    tmp = Path(tempfile.mkdtemp(prefix="bench-speed-"))
    try:
        for name in args.scenarios or SCENARIOS:
            if name == "latency":
                scenario_latency(tmp, args)
            elif name in ("rps", "tpm"):
                scenario_limited(tmp, args, name)
            elif name == "app":
                scenario_app(tmp, args)
            elif name == "cached":
                scenario_cached(tmp, args)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()
