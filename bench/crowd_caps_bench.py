"""Issue 33, parts 3: what a crowd of followers and `null`-limit board reads cost another visitor, before, during and
after (the other visitor's latency and the app's memory), with the stream caps and the page cap in place.

Run by hand (not in CI), from the repository root:

    python bench/crowd_caps_bench.py                          # 2,000 followers from 20 addresses; 100 null-limit reads
    python bench/crowd_caps_bench.py --followers 500 --addresses 5 --entries 2000 --board-reads 50

What it does:
1. starts a fake OpenAI-compatible judge (`python -m tests.fake_judge`, 1 s per call) as the server's judge and
   stores `--entries` leaderboard entries (frozen copies, valid by the board's schema: `bench_leaderboard.fill`)
   in a fresh data folder, then starts the app as a subprocess (`python app.py`) in the host configuration of
   docs/hosting.md (the server's key, one trusted proxy hop, default limits);
2. another visitor opens a finished run of theirs (a grade file) and a run is started on the server's judge that
   grades for the whole measurement;
3. **followers**: `--followers` pages following that run, from `--addresses` addresses (in a separate process:
   each page holds its heartbeat stream open and polls the run's /status every 2 s, as a page following a run
   does); prints how many were let in and how many refused (429), and the other visitor's share-link latency
   (`/status` of their run and the page ``/?run=``, p50 / max of 10) and the app's memory (its process tree's
   RSS) before, during, 20 s after all closed and `--after` seconds after (once gone sessions are forgotten);
4. **board reads**: `--board-reads` calls of `/leaderboard` with ``limit: null`` from 10 addresses, 10 at once;
   prints the largest answer, and the other visitor's `/my_runs` p50 / max and the app's memory before, during
   and after.
"""
from __future__ import annotations

import argparse
import asyncio
import json
import os
import secrets
import signal
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

from bench.crowd_bench import GRADES, RESULTS, tree_rss  # noqa: E402
from bench.load_test import free_port, wait_http  # noqa: E402
from tests.crowd import StatusClient  # noqa: E402

BENCH = "MM-Vet v1 (bundled, 218 samples)"


# ---- the crowd (its own process) ------------------------------------------------------------------------------
async def _follower(url: str, ip: str, run_id: str, seconds: float, stats: dict) -> None:
    import httpx

    session = secrets.token_hex(8)
    async with httpx.AsyncClient(base_url=url, headers={"X-Forwarded-For": ip}, timeout=30) as http:
        try:
            async with http.stream("GET", f"gradio_api/heartbeat/{session}") as beat:
                if beat.status_code != 200:
                    stats["refused"] += 1
                    return
                stats["open"] += 1
                end = time.monotonic() + seconds
                lines = beat.aiter_lines()
                await lines.__anext__()
                while time.monotonic() < end:               # a page following its run: the run's status
                    r = await http.post("gradio_api/call/status", json={"data": [run_id], "session_hash": session})
                    if r.status_code == 200:
                        event = r.json()["event_id"]
                        async with http.stream("GET", f"gradio_api/call/status/{event}") as answer:
                            async for _ in answer.aiter_lines():
                                pass
                        stats["polls"] += 1
                    else:
                        stats["poll_refused"] += 1
                    await asyncio.sleep(2)
                stats["open"] -= 1
        except Exception as e:  # noqa: BLE001 — counted, the bench goes on
            stats["errors"] += 1
            stats["last_error"] = f"{type(e).__name__}: {e}"[:200]


async def _crowd(url: str, run_id: str, followers: int, addresses: int, seconds: float) -> dict:
    stats = {"open": 0, "refused": 0, "polls": 0, "poll_refused": 0, "errors": 0, "peak_open": 0}
    tasks = [asyncio.create_task(_follower(url, f"198.51.{100 + i % addresses}.{1 + i % addresses}", run_id,
                                           seconds, stats)) for i in range(followers)]

    async def peak():
        while not all(t.done() for t in tasks):
            stats["peak_open"] = max(stats["peak_open"], stats["open"])
            await asyncio.sleep(0.2)
    await asyncio.gather(peak(), *tasks)
    return stats


def crowd_main(argv: list[str]) -> None:
    url, run_id, followers, addresses, seconds = argv[0], argv[1], int(argv[2]), int(argv[3]), float(argv[4])
    import resource
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
    print(json.dumps(asyncio.run(_crowd(url, run_id, followers, addresses, seconds))), flush=True)


# ---- the measurements ------------------------------------------------------------------------------------------
def share_link_latency(url: str, me: StatusClient, run_id: str, n: int = 10) -> tuple[float, float]:
    """(p50, max) seconds of the other visitor opening their share link: the page ``/?run=`` and its /status."""
    import httpx
    waits = []
    for _ in range(n):
        t = time.perf_counter()
        try:
            httpx.get(url + f"?run={run_id}", headers={"X-Forwarded-For": "203.0.113.77"}, timeout=120)
            me.status(run_id)
            waits.append(time.perf_counter() - t)
        except Exception:  # noqa: BLE001 — a timeout is a figure
            waits.append(float("inf"))
        time.sleep(0.2)
    return statistics.median(waits), max(waits)


def my_runs_latency(me: StatusClient, owner: str, n: int = 10) -> tuple[float, float]:
    waits = []
    for _ in range(n):
        t = time.perf_counter()
        me.call("my_runs", owner)
        waits.append(time.perf_counter() - t)
        time.sleep(0.1)
    return statistics.median(waits), max(waits)


def fill_board(data: Path, n: int) -> None:
    from bench.bench_leaderboard import fill
    from mmvet_core.service import GradingService, ServiceSettings

    svc = GradingService(ServiceSettings(data_dir=data))
    try:
        fill(svc, n, groups=10)
    finally:
        svc.jobs.shutdown()
        svc.store.close()


def main() -> None:
    if len(sys.argv) > 1 and sys.argv[1] == "--crowd":
        return crowd_main(sys.argv[2:])
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--followers", type=int, default=2000)
    ap.add_argument("--addresses", type=int, default=20)
    ap.add_argument("--seconds", type=float, default=30.0, help="how long each follower follows")
    ap.add_argument("--entries", type=int, default=5000, help="leaderboard entries (0: skip the board reads)")
    ap.add_argument("--board-reads", type=int, default=100)
    ap.add_argument("--after", type=float, default=150.0,
                    help="seconds after the crowd closed for the last memory figure (sessions are forgotten after "
                         "MMVET_SESSION_IDLE_S / MMVET_CLOSED_PAGE_S and a sweep)")
    ap.add_argument("--crowds", type=int, default=1,
                    help="crowds one after the other (each waits --after): what the crowds keep must not add up")
    args = ap.parse_args()
    tmp = Path(tempfile.mkdtemp(prefix="crowd-caps-"))
    procs: list[subprocess.Popen] = []
    try:
        env = {k: v for k, v in os.environ.items() if not k.startswith(("OPENAI_", "AZURE_OPENAI_", "MMVET_"))}
        jport = free_port()
        procs.append(subprocess.Popen([sys.executable, "-m", "tests.fake_judge", "--port", str(jport), "--latency",
                                       "1.0"], cwd=ROOT, env=env, stdout=subprocess.DEVNULL,
                                      stderr=subprocess.DEVNULL, start_new_session=True))
        wait_http(f"http://127.0.0.1:{jport}/v1/models", 60, procs[-1])
        (tmp / "data").mkdir()
        if args.entries:
            t0 = time.perf_counter()
            fill_board(tmp / "data", args.entries)
            print(f"stored {args.entries} leaderboard entries in {time.perf_counter() - t0:.0f} s")
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
        wait_http(url + "gradio_api/info", 300, procs[-1])
        app = psutil.Process(procs[-1].pid)

        from gradio_client import Client, handle_file
        owner = secrets.token_urlsafe(18)
        c = Client(url, headers={"X-Forwarded-For": "203.0.113.77"}, verbose=False, download_files=False)
        mine = c.predict(handle_file(str(GRADES)), BENCH, None, "", "All samples", owner,
                         api_name="/view_grades")["run_id"]
        tagged = tmp / "tagged.json"
        tagged.write_text(json.dumps({k: f"{v} [{secrets.token_hex(4)}]"
                                      for k, v in json.loads(RESULTS.read_text(encoding="utf-8")).items()}))
        g = Client(url, headers={"X-Forwarded-For": "203.0.113.55"}, verbose=False, download_files=False)
        running = g.predict(handle_file(str(tagged)), BENCH, None, "", "All samples", 1, "Server's judge", "", "",
                            "", secrets.token_urlsafe(18), api_name="/grade")["run_id"]
        me = StatusClient(url, ip="203.0.113.77", timeout=120)
        mb = lambda: tree_rss(app) / 1e6  # noqa: E731

        # ---- followers (`--crowds` times: what a crowd keeps is bounded, a second adds no second share) ----
        for n in range(1, args.crowds + 1):
            which = f"crowd {n} of {args.crowds}: " if args.crowds > 1 else ""
            p50, worst = share_link_latency(url, me, mine)
            print(f"{which}followers, before: share link p50 {p50 * 1000:.0f} ms, max {worst * 1000:.0f} ms; "
                  f"app memory {mb():.0f} MB, {app.num_threads()} threads")
            crowd = subprocess.Popen([sys.executable, str(Path(__file__).resolve()), "--crowd", url, running,
                                      str(args.followers), str(args.addresses), str(args.seconds)], cwd=ROOT,
                                     env={**os.environ, "PYTHONPATH": str(ROOT)}, stdout=subprocess.PIPE, text=True)
            time.sleep(min(10.0, args.seconds / 2))
            peak = [mb()]
            sampler_done = threading.Event()

            def sample():
                while not sampler_done.is_set():
                    peak[0] = max(peak[0], mb())
                    time.sleep(0.5)
            sampler = threading.Thread(target=sample)
            sampler.start()
            p50, worst = share_link_latency(url, me, mine)
            print(f"{which}followers, during ({args.followers} pages from {args.addresses} addresses): share link "
                  f"p50 {p50 * 1000:.0f} ms, max {worst * 1000:.0f} ms; app memory {mb():.0f} MB, "
                  f"{app.num_threads()} threads")
            out, _ = crowd.communicate(timeout=args.seconds + 600)
            sampler_done.set()
            sampler.join()
            stats = json.loads(out.strip().splitlines()[-1])
            print(f"  the crowd: {stats['peak_open']} pages open at most, {stats['refused']} refused (429), "
                  f"{stats['polls']} status polls answered, {stats['poll_refused']} refused, {stats['errors']} "
                  f"errors; peak app memory {peak[0]:.0f} MB")
            for wait in (20, args.after):
                time.sleep(wait if wait == 20 else max(0, wait - 20))
                p50, worst = share_link_latency(url, me, mine)
                print(f"{which}followers, {wait:.0f} s after all closed: share link p50 {p50 * 1000:.0f} ms, max "
                      f"{worst * 1000:.0f} ms; app memory {mb():.0f} MB, {app.num_threads()} threads")

        # ---- null-limit board reads ----
        if args.entries and args.board_reads:
            p50, worst = my_runs_latency(me, owner)
            print(f"board reads, before: my_runs p50 {p50 * 1000:.0f} ms, max {worst * 1000:.0f} ms; "
                  f"app memory {mb():.0f} MB")
            sizes, results, lat = [], [], []

            def reader(i: int) -> None:
                import httpx
                with httpx.Client(base_url=url, headers={"X-Forwarded-For": f"198.18.9.{i + 1}"},
                                  timeout=300) as http:
                    for _ in range(args.board_reads // 10):
                        r = http.post("gradio_api/call/leaderboard",
                                      json={"data": ["", "", "", "", "rank", False, True, 0, None]})
                        if r.status_code != 200:
                            results.append(r.status_code)
                            continue
                        event = r.json()["event_id"]
                        body = http.get(f"gradio_api/call/leaderboard/{event}").text
                        sizes.append(len(body.encode()))
                        results.append(200)
            readers = [threading.Thread(target=reader, args=(i,)) for i in range(10)]
            for t in readers:
                t.start()
            time.sleep(0.5)
            during = [my_runs_latency(me, owner, n=5)]
            mem_during = mb()
            for t in readers:
                t.join()
            print(f"board reads, during ({args.board_reads} calls with limit null, 10 addresses): my_runs p50 "
                  f"{during[0][0] * 1000:.0f} ms, max {during[0][1] * 1000:.0f} ms; app memory {mem_during:.0f} MB; "
                  f"answers {results.count(200)} (largest {max(sizes) / 1e6:.2f} MB), "
                  f"{len(results) - results.count(200)} refused")
            time.sleep(5)
            p50, worst = my_runs_latency(me, owner)
            print(f"board reads, after: my_runs p50 {p50 * 1000:.0f} ms, max {worst * 1000:.0f} ms; "
                  f"app memory {mb():.0f} MB")
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
