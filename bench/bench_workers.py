"""Grading workers on one database (issue 24), measured. Run by hand (not in CI), from the repository root:

    python bench/bench_workers.py                    # every scenario (about 5 minutes on an idle machine)
    python bench/bench_workers.py limit takeover     # some of them: limit takeover status

- spread (issue 31): one account limit of 20 requests/s with a 1.0 s judge; the embedded default, then 1, 2 and 4
  workers; two runs of v1 x 3 at once, then one alone: share of the limit, 429s per call, calls made, wall time (one
  run: against the physical floor 654 / 20 = 32.7 s, and against the calls it made / 20), grades per worker, the
  answers of each second (a slow start shows as a ramp), the machine's load average. The judge answers a bare
  score to every prompt (``--answers parsable``, as GPT-4 does with the official prompt: a grade is one call, so
  654 calls make a run and 654 / 20 s is its floor); ``--answers mixed`` keeps the test judge's 20 % of
  unparsable first answers (about 1,050 calls a run: the official re-asks).

It starts a PostgreSQL server of its own (tests/pg_server.py: Debian's postgresql package) and the fake judge as
a process (`python -m tests.fake_judge`), queues runs as the app does with ``MMVET_WORKERS=external``
(`workers.LeasedJobs`), and runs real workers (`python -m mmvet_core worker`) as processes. It prints:

- limit: a judge enforcing 20 requests/s (429 + retry-after-ms + x-ratelimit-* headers, 0.1 s latency), three
  runs of MM-Vet v1 queued at once (different predictions: no answer shared), graded by 1 worker, then by 3
  workers pacing through the database: answered calls per second against the limit (target >= 95 %) and 429
  answers per graded call (target <= 0.25), wall time.
- takeover: two workers, one run; the worker grading it is killed (SIGKILL) mid-run; the time from the kill to
  the other worker's claim and to its first grade stored (the run moving again), with the default lease and a
  short one.
- status: the app's status call (`svc.reading.status`, what a script's /status and every open page read) on a
  finished run of 218 grades and on a run while it grades, with the store in SQLite and in PostgreSQL: median
  and 95th percentile over many calls.
"""
from __future__ import annotations

import argparse
import os
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from bench.bench_speed import Judge, limited_figures, show  # noqa: E402
from mmvet_core.inputs.benchmark import load_bundled_v1  # noqa: E402
from mmvet_core.judging.judge import JudgeSettings, make_judge  # noqa: E402
from mmvet_core.runs.lifecycle import create_run  # noqa: E402
from mmvet_core.store import Store  # noqa: E402
from mmvet_core.runs.workers import EXTERNAL, LEASE_SECONDS, make_jobs  # noqa: E402
from tests.pg_server import PostgresServer  # noqa: E402

RESULTS = ROOT / "tests" / "data" / "results" / "llava-v1.5-13b.json"
SCENARIOS = ["spread", "limit", "takeover", "status"]
V1 = load_bundled_v1()


def predictions(tag: str) -> dict[str, str]:
    import json
    raw = json.loads(RESULTS.read_text(encoding="utf-8"))
    return {sid: f"{raw.get(sid, '')} [{tag}]" for sid in V1.ids}


def queue_runs(url: str, judge_url: str, tags: list[str], n_runs: int = 1) -> list[str]:
    """Runs queued for the workers as the app queues them (host key, MMVET_WORKERS=external)."""
    store = Store(url)
    jobs = make_jobs(store, workers=EXTERNAL)
    settings = JudgeSettings(base_url=judge_url)
    ids = []
    for tag in tags:
        run_id = create_run(store, benchmark=V1, spec="mmvet-v1", predictions=predictions(tag), n_runs=n_runs,
                            settings=settings, model_name=f"bench-{tag}", owner="bench")
        jobs.start(run_id, V1, make_judge(settings, "sk-bench"), concurrency=256, visitor=tag, host=True)
        ids.append(run_id)
    jobs.shutdown()
    store.close()
    return ids


def worker_grades(procs: list[subprocess.Popen]) -> list[int]:
    """The grades each stopped worker says it stored (its last line)."""
    import re
    out = []
    for p in procs:
        text = Path(p.args_log).read_text() if hasattr(p, "args_log") else ""
        found = re.findall(r"(\d+) grade\(s\)", text)
        out.append(int(found[-1]) if found else -1)
    return out


def scenario_spread(pg: PostgresServer, tmp: Path, args) -> None:
    """Issue 31's figures: one account limit (20 requests/s, 1.0 s latency, the judge enforcing it); 1, 2 and 4
    workers; two runs of v1 x 3 (654 calls each) at once, then one alone; and the embedded default (SQLite, the
    app's process, no worker) the same way."""
    floor = 654 / args.rps
    for n_workers in args.spread:
        for n_runs in (2, 1):
            load = os.getloadavg()[0]
            judge = Judge(tmp, "--latency", "1.0", "--rps", str(args.rps), "--answers", args.answers)
            tags = [f"s{n_workers}-{n_runs}-{i}" for i in range(n_runs)]
            per_worker = ""
            try:
                if n_workers == 0:
                    wall, outcomes = embedded_runs(tmp, judge.url, tags)
                else:
                    url = pg.new_database()
                    store = Store(url)
                    workers = start_workers(n_workers, url, judge.url, tmp,
                                            *(["--slices", str(args.slices)] if args.slices else []))
                    wait_workers(store, n_workers)
                    t0 = time.monotonic()
                    ids = queue_runs(url, judge.url, tags, n_runs=3)
                    wait_runs(store, ids)
                    wall = time.monotonic() - t0
                    stop_workers(workers)
                    per_worker = " ".join(map(str, worker_grades(workers)))
                    outcomes = [f"{store.get_run(r).status} {store.get_run(r).message}" for r in ids]
                    store.close()
                stats = judge.stats()
            finally:
                judge.stop()
            who = "embedded default (SQLite, in the app's process)" if n_workers == 0 else f"{n_workers} worker(s)"
            made = stats["ok"] / args.rps
            rows = [("runs", "; ".join(outcomes)),
                    ("wall (queued to last grade)", f"{wall:.1f} s" + (f" = {wall / floor:.2f}x the floor "
                                                                       f"{floor:.1f} s (target <= 1.2x); "
                                                                       f"{wall / made:.2f}x the {made:.1f} s of the "
                                                                       f"calls it made" if n_runs == 1 else "")),
                    ("calls made", f"{stats['ok']} answered + {stats['rate_limited']} refused (429) for "
                                   f"{654 * n_runs} grades ({args.answers} answers)")]
            rows += limited_figures(stats, wall, 654 * n_runs, rps=args.rps)
            if per_worker:
                rows.append(("grades per worker", per_worker))
            rows.append(("answers per second", " ".join(map(str, stats["ok_per_second"]))))
            rows.append(("load average (1 min) before, after", f"{load:.1f}, {os.getloadavg()[0]:.1f} on "
                                                                 f"{os.cpu_count()} CPUs"))
            show(f"{who}, {n_runs} run(s) of v1 x 3 at once, {args.rps:g} requests/s, 1.0 s latency", rows)


def embedded_runs(tmp: Path, judge_url: str, tags: list[str]) -> tuple[float, list[str]]:
    from mmvet_core.service import GradingService, ServiceSettings

    svc = GradingService(ServiceSettings(data_dir=tmp / f"embedded-{time.time_ns()}", host_key="sk-bench",
                                         host_base_url=judge_url))
    settings = JudgeSettings(base_url=judge_url)
    t0 = time.monotonic()
    ids = []
    for tag in tags:
        run_id = create_run(svc.store, benchmark=V1, spec="mmvet-v1", predictions=predictions(tag), n_runs=3,
                            settings=settings, model_name=tag, owner="bench")
        svc.jobs.start(run_id, V1, make_judge(settings, "sk-bench"), concurrency=256, host=True, visitor=tag)
        ids.append(run_id)
    for run_id in ids:
        svc.jobs.wait(run_id, 1800)
    wall = time.monotonic() - t0
    outcomes = [f"{svc.store.get_run(r).status} {svc.store.get_run(r).message}" for r in ids]
    svc.jobs.shutdown()
    svc.store.close()
    return wall, outcomes


def wait_workers(store: Store, n: int) -> None:
    while len(store.live_workers(30)) < n:
        time.sleep(0.1)


def start_workers(n: int, url: str, judge_url: str, tmp: Path, *extra: str) -> list[subprocess.Popen]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("OPENAI_", "AZURE_OPENAI_", "MMVET_"))}
    env.update(PYTHONPATH=str(ROOT), MMVET_DATABASE_URL=url, OPENAI_API_KEY="sk-bench", OPENAI_BASE_URL=judge_url,
               MMVET_DATA_DIR=str(tmp / "worker-data"), MMVET_BUDGET_GLOBAL="0", MMVET_BUDGET_PER_VISITOR="0",
               MMVET_TOKENS_GLOBAL="0", MMVET_TOKENS_PER_VISITOR="0")
    procs = []
    for _ in range(n):
        log = tmp / f"worker-{time.time_ns()}.log"
        proc = subprocess.Popen([sys.executable, "-m", "mmvet_core", "worker", "--poll", "0.2", *extra], cwd=ROOT,
                                env=env, stdout=open(log, "w"), stderr=subprocess.STDOUT, start_new_session=True)
        proc.args_log = str(log)
        procs.append(proc)
    return procs


def stop_workers(procs: list[subprocess.Popen]) -> None:
    for p in procs:
        if p.poll() is None:
            os.killpg(p.pid, signal.SIGTERM)
    for p in procs:
        p.wait(30)


def wait_runs(store: Store, ids: list[str], timeout: float = 1800) -> float:
    t0 = time.monotonic()
    while any(store.get_run(r).status not in ("done", "failed", "stopped", "incomplete") for r in ids):
        if time.monotonic() - t0 > timeout:
            raise TimeoutError("the runs did not finish")
        time.sleep(0.2)
    return time.monotonic() - t0


def scenario_limit(pg: PostgresServer, tmp: Path, args) -> None:
    for n_workers in args.workers:
        judge = Judge(tmp, "--latency", "0.1", "--rps", str(args.rps))
        url = pg.new_database()
        store = Store(url)
        try:
            ids = queue_runs(url, judge.url, [f"w{n_workers}-run{i}" for i in range(3)])
            workers = start_workers(n_workers, url, judge.url, tmp)
            try:
                wall = wait_runs(store, ids)
            finally:
                stop_workers(workers)
            stats = judge.stats()
            outcomes = [f"{store.get_run(r).status} {store.get_run(r).message}" for r in ids]
        finally:
            judge.stop()
            store.close()
        show(f"{n_workers} worker(s), 3 runs of v1 queued at once, judge enforcing {args.rps:g} requests/s, "
             f"0.1 s latency", [("runs", "; ".join(outcomes)), ("wall (workers' start to last grade)",
                                                                  f"{wall:.1f} s")]
             + [(name, value.replace("target >= 90%", "target >= 95%"))
                for name, value in limited_figures(stats, wall, 218 * 3, rps=args.rps)]
             + [("answers per second", " ".join(map(str, stats["ok_per_second"])))])


def scenario_takeover(pg: PostgresServer, tmp: Path, args) -> None:
    import sqlalchemy as sa

    from mmvet_core.store import _schema as t

    for lease in (LEASE_SECONDS, 3.0):
        judge = Judge(tmp, "--latency", "0.05")
        url = pg.new_database()
        store = Store(url)
        try:
            (run_id,) = queue_runs(url, judge.url, [f"takeover-{lease:g}"])
            workers = start_workers(2, url, judge.url, tmp, "--lease", str(lease))
            try:
                while len(store.grades(run_id, evidence_for=None)) < 60:
                    time.sleep(0.05)
                holder = store.queued_run(run_id)["holder"]
                dying = next(p for p in workers if f":{p.pid}:" in holder)
                os.killpg(dying.pid, signal.SIGKILL)
                killed = time.time()
                dying.wait(10)
                while (row := store.queued_run(run_id)) is not None and row["claims"] < 2:
                    time.sleep(0.01)
                claimed = row["claimed_at"] if row else None
                while not store._query(sa.select(sa.func.count()).select_from(t.grades).where(
                        t.grades.c.run_id == run_id, t.grades.c.updated_at > (claimed or killed)))[0][0]:
                    time.sleep(0.01)
                moved = store._query(sa.select(sa.func.min(t.grades.c.updated_at)).where(
                    t.grades.c.run_id == run_id, t.grades.c.updated_at > (claimed or killed)))[0][0]
                wall = wait_runs(store, [run_id])
            finally:
                stop_workers(workers)
            stats = judge.stats()
            status = store.get_run(run_id)
            stored = store.cache_size()
        finally:
            judge.stop()
            store.close()
        show(f"a worker killed mid-run (SIGKILL), lease {lease:g} s, 2 workers, v1 x 1, 0.05 s judge", [
            ("kill -> claimed by the other worker", f"{claimed - killed:.2f} s"),
            ("kill -> its first grade stored", f"{moved - killed:.2f} s  (the run moving again)"),
            ("outcome", f"{status.status}: {status.message}, {wall:.1f} s after the run moved again"),
            ("judge answers", f"{stats['ok']} given, {stored} stored: {stats['ok'] - stored} asked twice (answers "
                              f"in flight at the kill)"),
        ])


def scenario_status(pg: PostgresServer, tmp: Path, args) -> None:
    from mmvet_core.service import GradingService, ServiceSettings

    rows = []
    judge = Judge(tmp, "--latency", "0.2")
    try:
        for name, url in (("SQLite", None), ("PostgreSQL", pg.new_database())):
            data = tmp / f"status-{name}"
            svc = GradingService(ServiceSettings(data_dir=data, database_url=url, host_key="sk-bench",
                                                 host_base_url=judge.url))
            settings = JudgeSettings(base_url=judge.url)
            done = create_run(svc.store, benchmark=V1, spec="mmvet-v1", predictions=predictions(f"s-{name}"),
                              n_runs=1, settings=settings, model_name="done", owner="bench")
            svc.jobs.start(done, V1, make_judge(settings, "sk-bench"), host=True)
            svc.jobs.wait(done, 600)
            svc.reading.status(done)
            finished = timed(lambda: svc.reading.status(done), args.calls)
            live = create_run(svc.store, benchmark=V1, spec="mmvet-v1", predictions=predictions(f"l-{name}"),
                              n_runs=1, settings=settings, model_name="live", owner="bench")
            svc.jobs.start(live, V1, make_judge(settings, "sk-bench"), concurrency=8, host=True)
            while svc.reading.status(live)["done"] < 5:
                time.sleep(0.05)
            grading = timed(lambda: svc.reading.status(live), min(args.calls, 300))
            svc.jobs.shutdown()
            svc.store.close()
            rows.append((f"{name}: finished run, 218 grades", fmt(finished)))
            rows.append((f"{name}: run while it grades", fmt(grading)))
    finally:
        judge.stop()
    show("the app's status call (svc.reading.status, in the app's process)", rows)


def timed(fn, n: int) -> list[float]:
    out = []
    for _ in range(n):
        t0 = time.perf_counter()
        fn()
        out.append(time.perf_counter() - t0)
    return out


def fmt(samples: list[float]) -> str:
    q = statistics.quantiles(samples, n=20)
    return f"median {statistics.median(samples) * 1000:.2f} ms, p95 {q[-1] * 1000:.2f} ms ({len(samples)} calls)"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("scenarios", nargs="*", choices=SCENARIOS + [[]], default=[])
    parser.add_argument("--rps", type=float, default=20.0)
    parser.add_argument("--calls", type=int, default=1000, help="status calls timed per case")
    parser.add_argument("--spread", type=lambda t: [int(n) for n in t.split(",")], default=[0, 1, 2, 4],
                        help="the 'spread' scenario's numbers of workers (default 0,1,2,4; 0: the embedded default, "
                             "in the app's process)")
    parser.add_argument("--answers", choices=["parsable", "mixed"], default="parsable",
                        help="the 'spread' judge's answers: parsable (default, a real judge's) or mixed (the test "
                             "judge's 20%% of unparsable first answers)")
    parser.add_argument("--slices", type=int, default=0, help="the workers' --slices (default: theirs)")
    parser.add_argument("--workers", type=lambda t: [int(n) for n in t.split(",")], default=[1, 3],
                        help="the 'limit' scenario's numbers of workers (default 1,3)")
    args = parser.parse_args()
    print(f"{os.cpu_count()} CPUs, load average {os.getloadavg()[0]:.1f} (other processes slow every figure)")
    tmp = Path(tempfile.mkdtemp(prefix="bench-workers-"))
    with PostgresServer() as pg:
        for name in args.scenarios or SCENARIOS:
            {"spread": scenario_spread, "limit": scenario_limit, "takeover": scenario_takeover,
             "status": scenario_status}[name](pg, tmp, args)


if __name__ == "__main__":
    main()
