"""Grading throughput against the fake judge (run by hand, not in CI).

    python bench/bench_grading.py [--latency 0.1] [--concurrency 32] [--runs 5] [--baseline-samples 40]

Starts ``python -m tests.fake_judge`` as its own process (so its CPU is not counted as ours), then prints side by
side: our wall time grading MM-Vet v1 x `--runs` runs; a sequential, one-call-at-a-time baseline (the official
loop with the synchronous client, timed on `--baseline-samples` samples and extrapolated to the same number of
calls); their ratio; our client CPU per judge call; our peak memory; and a fully cached re-grade (time, calls).
Targets: >= 30x the sequential baseline, <= 2 ms client CPU per call, cached re-grade 0 calls in <= 2 s.
"""
from __future__ import annotations

import argparse
import asyncio
import json
import os
import resource
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

import openai  # noqa: E402  (imported before timing: its import cost is not a per-call cost)

from mmvet_core.inputs.benchmark import load_bundled_v1  # noqa: E402
from mmvet_core.judging.grading import grade_run  # noqa: E402
from mmvet_core.judging.judge import JudgeSettings, make_judge  # noqa: E402
from mmvet_core.runs.lifecycle import create_run  # noqa: E402
from mmvet_core.store import Store  # noqa: E402
from tests.fake_judge import free_port  # noqa: E402
from tests.official_reference import grade_one, load_official_metadata, load_official_prompt  # noqa: E402

DEFAULT_RESULTS = next(p for p in (ROOT / "tests" / "data" / "results" / "llava-v1.5-13b.json",
                                   ROOT / "assets" / "examples" / "llava_llama2_13b_chat.json") if p.is_file())


def cpu_seconds() -> float:
    r = resource.getrusage(resource.RUSAGE_SELF)
    return r.ru_utime + r.ru_stime


def start_server(port: int, latency: float) -> subprocess.Popen:
    proc = subprocess.Popen([sys.executable, "-m", "tests.fake_judge", "--port", str(port), "--latency",
                             str(latency)], cwd=ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    deadline = time.time() + 30
    while True:
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=0.2):
                return proc
        except OSError:
            if time.time() > deadline or proc.poll() is not None:
                proc.kill()
                raise SystemExit("the fake judge did not start")
            time.sleep(0.05)


async def timed_grading(store: Store, run_id: str, benchmark, settings: JudgeSettings, concurrency: int):
    judge = make_judge(settings, "sk-bench")
    try:
        cpu0, t0 = cpu_seconds(), time.perf_counter()
        outcome = await grade_run(store, run_id, benchmark, judge, concurrency=concurrency)
        return outcome, time.perf_counter() - t0, cpu_seconds() - cpu0
    finally:
        await judge.aclose()


def sequential_baseline(url: str, predictions: dict[str, str], n_samples: int) -> tuple[float, int]:
    """The official loop, one call at a time, over the first `n_samples` samples: (seconds, calls)."""
    metadata, prompt = load_official_metadata(), load_official_prompt()
    client = openai.OpenAI(api_key="sk-bench", base_url=url, max_retries=0)
    calls = 0
    create = client.chat.completions.create

    def counted(**kwargs):
        nonlocal calls
        calls += 1
        return create(**kwargs)
    client.chat.completions.create = counted
    grade_one(client, "gpt-4-0613", prompt, metadata["v1_0"], predictions["v1_0"])    # warm-up connection
    calls = 0
    t0 = time.perf_counter()
    for sid in list(metadata)[:n_samples]:
        grade_one(client, "gpt-4-0613", prompt, metadata[sid], predictions[sid])
    elapsed = time.perf_counter() - t0
    client.close()
    return elapsed, calls


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--latency", type=float, default=0.1, help="fake judge latency per call (s)")
    parser.add_argument("--concurrency", type=int, default=32)
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--baseline-samples", type=int, default=40,
                        help="samples the sequential baseline really grades (then extrapolated)")
    parser.add_argument("--results", default=str(DEFAULT_RESULTS))
    args = parser.parse_args()

    benchmark = load_bundled_v1()
    raw = json.loads(Path(args.results).read_text(encoding="utf-8"))
    predictions = {sid: raw[sid] for sid in benchmark.ids}
    port = free_port()
    server = start_server(port, args.latency)
    url = f"http://127.0.0.1:{port}/v1"
    try:
        with tempfile.TemporaryDirectory() as tmp:
            store = Store(Path(tmp) / "bench.db")
            settings = JudgeSettings(base_url=url)

            def new_run() -> str:
                return create_run(store, benchmark=benchmark, spec="mmvet-v1", predictions=predictions,
                                  n_runs=args.runs, settings=settings, model_name="bench")

            outcome, wall, cpu = asyncio.run(timed_grading(store, new_run(), benchmark, settings, args.concurrency))
            calls = outcome.stats.calls
            cached, cached_wall, _ = asyncio.run(timed_grading(store, new_run(), benchmark, settings,
                                                               args.concurrency))
            peak_mb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
            store.close()
        seq_elapsed, seq_calls = sequential_baseline(url, predictions, args.baseline_samples)
    finally:
        server.terminate()
        server.wait(timeout=10)

    per_call = seq_elapsed / seq_calls
    seq_estimate = per_call * calls
    ratio = seq_estimate / wall
    grades = len(benchmark) * args.runs
    rows = [
        ("grades", f"{outcome.graded} ({outcome.status})", f"{grades}"),
        ("judge calls", f"{calls}", f"{calls} (same work)"),
        ("wall time", f"{wall:.2f} s", f"{seq_estimate:.1f} s  (extrapolated: {args.baseline_samples} samples, "
                                        f"{seq_calls} calls in {seq_elapsed:.2f} s = {per_call * 1000:.1f} ms/call)"),
        ("speed-up", f"{ratio:.1f}x  (target >= 30x; ceiling {args.concurrency}x: "
                     f"{args.concurrency} calls always in flight)", "1x"),
        ("client CPU / call", f"{cpu / calls * 1000:.2f} ms  (target <= 2 ms; {cpu:.2f} s in all)", ""),
        ("peak memory (ru_maxrss)", f"{peak_mb:.0f} MB", ""),
        ("cached re-grade", f"{cached_wall:.2f} s, {cached.stats.calls} calls, {cached.stats.cached} answers "
                            f"reused  (target 0 calls, <= 2 s)", ""),
    ]
    print(f"MM-Vet v1 x {args.runs} runs, fake judge latency {args.latency} s, concurrency {args.concurrency}; "
          f"{os.cpu_count()} CPUs, load average {os.getloadavg()[0]:.1f} (other processes slow every figure)")
    print(f"{'':26}{'ours (grade_run)':44}sequential baseline (official loop, sync client)")
    for name, ours, seq in rows:
        print(f"{name:26}{ours:44}{seq}")


if __name__ == "__main__":
    main()
