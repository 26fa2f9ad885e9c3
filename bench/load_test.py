"""Load test of the app as a public Space: many visitors grading at once, one of them on a slow, failing judge.

Run by hand (not in CI), from the repository root:

    python bench/load_test.py                       # 8 visitors, 1 on the bad judge
    python bench/load_test.py --visitors 12 --bad-visitors 2 --runs 1 --healthy-latency 0.05 --bad-latency 2

What it does:
1. starts two fake OpenAI-compatible judges as subprocesses (`python -m tests.fake_judge`): a healthy one and a
   bad one (slow, and answering 500 to a share of the calls);
2. starts the app as a subprocess (`python app.py`) on a free port with a temporary data dir, no server key
   (visitors bring their own) and `MMVET_RUN_CONCURRENCY`;
3. simulates visitors with `gradio_client` in threads (each its own IP via X-Forwarded-For, its own owner
   token, its own key). Each grades a different results file: the real v1 files and LLaVA's raw answers file,
   every one with a visitor-specific suffix on each prediction, so prompts differ and nothing is answered from
   the app's judge cache across visitors. Healthy visitors use the healthy judge, bad visitors the bad one.
   Each polls /status every 0.25 s: time to first grade (done >= 1) and time to completion. A warm-up run
   first pays the app's one-time costs (the judge SDK's import, ...) so that the load and the baseline compare
   alike; /status is polled over Gradio's REST API with one session per visitor (`--poll-with gradio_client`
   to use the client, which costs the bench machine far more CPU);
4. when every healthy visitor is finished, stops the bad visitors' runs (reporting how far they got);
5. grades ONE healthy visitor alone (fresh suffix, same file) as the baseline, and checks that every healthy
   visitor under load finished within `--max-slowdown` (1.5x) of the time alone. It also prints throughput
   (grades/s alone vs. together), the spread between healthy visitors, and the CPU used by the app, the judges
   and the bench; `--profile FILE` records the app with py-spy (`pip install py-spy`) during the load phase.
"""
from __future__ import annotations

import argparse
import json
import os
import secrets
import shutil
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
RESULTS_DIR = Path(__file__).resolve().parents[1] / "tests" / "data" / "results"
SOURCES = ["llava-v1.5-13b.json", "llava-v1.5-7b.json", "llava-v1.5-7b-rerun.json", "llava_llama2_13b_chat.json",
           "llava-v1.5-13b.answers.jsonl"]
TERMINAL = {"done", "stopped", "failed", "incomplete"}


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def wait_http(url: str, timeout: float = 120.0, proc: subprocess.Popen | None = None) -> None:
    deadline = time.time() + timeout
    while True:
        try:
            with urllib.request.urlopen(url, timeout=2) as r:
                if r.status < 500:
                    return
        except OSError:
            pass
        if proc is not None and proc.poll() is not None:
            raise RuntimeError(f"process exited with {proc.returncode} before {url} answered")
        if time.time() > deadline:
            raise TimeoutError(f"{url} did not answer in {timeout:.0f} s")
        time.sleep(0.2)


def make_variant(source: Path, tag: str, out_dir: Path) -> Path:
    """`source` with " [tag]" appended to every prediction, in the source's own format."""
    out = out_dir / f"{source.stem}-{tag}{source.suffix}"
    if source.suffix == ".jsonl":
        lines = []
        for line in source.read_text(encoding="utf-8").splitlines():
            if line.strip():
                rec = json.loads(line)
                rec["text"] = f"{rec['text']} [{tag}]"
                lines.append(json.dumps(rec, ensure_ascii=False))
        out.write_text("\n".join(lines) + "\n", encoding="utf-8")
    else:
        preds = json.loads(source.read_text(encoding="utf-8"))
        out.write_text(json.dumps({k: f"{v} [{tag}]" for k, v in preds.items()}, ensure_ascii=False),
                       encoding="utf-8")
    return out


@dataclass
class Visitor:
    name: str
    source: str
    path: Path
    judge_url: str
    bad: bool
    ip: str
    owner: str = field(default_factory=lambda: secrets.token_urlsafe(18))
    key: str = field(default_factory=lambda: "sk-VISITOR-" + secrets.token_hex(8))
    run_id: str = ""
    t_started: float | None = None      # /grade answered (upload, checks, run created, job started)
    t_first: float | None = None
    t_done: float | None = None
    status: str = "?"
    done: int = 0
    total: int = 0
    error: str | None = None
    stop_after_first: bool = False       # the warm-up visitor
    finished: threading.Event = field(default_factory=threading.Event)


class Fleet:
    """The subprocesses: two fake judges and the app."""

    def __init__(self, args, tmp: Path):
        self.args, self.tmp, self.procs = args, tmp, []
        self.log_dir = tmp / "logs"
        self.log_dir.mkdir()

    def _spawn(self, name: str, cmd: list[str], env: dict) -> subprocess.Popen:
        log = open(self.log_dir / f"{name}.log", "wb")
        p = subprocess.Popen(cmd, cwd=ROOT, env=env, stdout=log, stderr=subprocess.STDOUT,
                             start_new_session=True)
        self.procs.append(p)
        return p

    def start_judge(self, name: str, latency: float, fail_ratio: float = 0.0) -> str:
        port = free_port()
        cmd = [sys.executable, "-m", "tests.fake_judge", "--port", str(port), "--latency", str(latency)]
        if fail_ratio:
            cmd += ["--fail-500-ratio", str(fail_ratio)]
        p = self._spawn(name, cmd, dict(os.environ))
        wait_http(f"http://127.0.0.1:{port}/v1/models", 60, p)
        return f"http://127.0.0.1:{port}/v1"

    def start_app(self) -> tuple[str, subprocess.Popen]:
        port = free_port()
        env = {k: v for k, v in os.environ.items()
               if not k.startswith(("OPENAI_", "AZURE_OPENAI_")) and k != "SPACE_HOST"}
        env.update(GRADIO_SERVER_PORT=str(port), GRADIO_SERVER_NAME="127.0.0.1",
                   MMVET_DATA_DIR=str(self.tmp / "data"), GRADIO_TEMP_DIR=str(self.tmp / "gradio-tmp"),
                   GRADIO_ANALYTICS_ENABLED="False", HF_HUB_DISABLE_TELEMETRY="1", HF_HUB_OFFLINE="1",
                   MMVET_RUN_CONCURRENCY=str(self.args.concurrency), PYTHONUNBUFFERED="1",
                   # visitors are told apart by X-Forwarded-For, as a proxy appends it; their judges are on
                   # 127.0.0.1 (a private deployment's allowance)
                   MMVET_TRUSTED_PROXY_HOPS="1", MMVET_ALLOW_PRIVATE_ENDPOINTS="1")
        p = self._spawn("app", [sys.executable, "app.py"], env)
        url = f"http://127.0.0.1:{port}/"
        wait_http(url + "gradio_api/info", 180, p)
        return url, p

    def stop(self) -> None:
        for p in reversed(self.procs):
            if p.poll() is None:
                os.killpg(p.pid, signal.SIGTERM)
        for p in self.procs:
            try:
                p.wait(10)
            except subprocess.TimeoutExpired:
                os.killpg(p.pid, signal.SIGKILL)


class StatusPoller:
    """/status through Gradio's plain REST API (POST /gradio_api/call/status, then read the SSE answer): the same
    queued endpoint `gradio_client` calls, at a fraction of the client-side CPU, so the bench's own polling
    does not starve the app it measures (2-core machines). Like `gradio_client`, it keeps one session for all
    its calls (a call without a session makes Gradio build a new session state, which costs the server more)."""

    def __init__(self, app_url: str, headers: dict):
        from tests.crowd import StatusClient       # the crowd's client: one session, the REST call and its SSE

        self.client = StatusClient(app_url)
        self.client.http.headers.update(headers)

    def __call__(self, run_id: str) -> dict:
        return self.client.status(run_id)

    def close(self) -> None:
        self.client.http.close()


def visit(v: Visitor, app_url: str, args, t_start: threading.Event | None = None) -> None:
    """One visitor: grade, then poll /status every 0.25 s until the run ends (or `v.finished` is set)."""
    from gradio_client import Client, handle_file

    from app import BENCH_BUNDLED, JUDGE_OWN

    poller = None
    try:
        client = Client(app_url, headers={"X-Forwarded-For": v.ip}, verbose=False, download_files=False)
        if args.poll_with == "http":
            poller = StatusPoller(app_url, {"X-Forwarded-For": v.ip})
        else:
            def poller(run_id):
                return client.predict(run_id, api_name="/status")
        if t_start is not None:
            t_start.wait()
        t0 = time.perf_counter()
        v.run_id = client.predict(
            handle_file(str(v.path)), BENCH_BUNDLED, None, "", "All samples", args.runs, JUDGE_OWN, v.judge_url,
            "gpt-4-0613", v.key, v.owner, api_name="/grade")["run_id"]
        v.t_started = time.perf_counter() - t0
        while not v.finished.is_set():
            st = poller(v.run_id)
            now = time.perf_counter() - t0
            v.status, v.done, v.total = st["status"], st["done"], st["total"]
            if v.t_first is None and st["done"] >= 1:
                v.t_first = now
                if v.stop_after_first:
                    v.finished.set()
            if st["status"] in TERMINAL and st["status"] != "created":
                v.t_done = now
                break
            time.sleep(args.poll)
        if v.finished.is_set() and v.t_done is None:   # told to give up: stop the run as its owner would
            client.predict(v.run_id, v.owner, api_name="/stop")
            deadline = time.time() + 60
            while time.time() < deadline:
                st = poller(v.run_id)
                v.status, v.done = st["status"], st["done"]
                if st["status"] in TERMINAL:
                    break
                time.sleep(0.5)
            v.status = f"{v.status} (by bench)"
    except Exception as e:  # report, never hang the bench
        v.error = f"{type(e).__name__}: {e}"
    finally:
        if isinstance(poller, StatusPoller):
            poller.close()
        v.finished.set()


def cpu_seconds(psutil, procs: dict) -> dict[str, float] | None:
    """User+system CPU seconds used so far by each named process (or list of processes)."""
    if psutil is None:
        return None
    out = {}
    for name, pids in procs.items():
        total = 0.0
        for pid in pids if isinstance(pids, list) else [pids]:
            try:
                t = psutil.Process(pid).cpu_times()
                total += t.user + t.system
            except psutil.Error:
                pass
        out[name] = total
    return out


def fmt(x: float | None) -> str:
    return f"{x:7.2f}" if x is not None else "      -"


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--visitors", type=int, default=8, help="simulated visitors at once (default 8)")
    ap.add_argument("--bad-visitors", type=int, default=1, help="how many of them use the bad judge (default 1)")
    ap.add_argument("--runs", type=int, default=1, help="judge runs per visitor (the paper uses 5; default 1)")
    ap.add_argument("--healthy-latency", type=float, default=0.05, help="healthy judge latency in s (0.05)")
    ap.add_argument("--bad-latency", type=float, default=2.0, help="bad judge latency in s (2.0)")
    ap.add_argument("--bad-fail-500-ratio", type=float, default=0.3, help="share of 500s from the bad judge (0.3)")
    ap.add_argument("--concurrency", type=int, default=16, help="MMVET_RUN_CONCURRENCY of the app (16)")
    ap.add_argument("--poll", type=float, default=0.25, help="/status poll interval in s (0.25)")
    ap.add_argument("--poll-with", choices=["http", "gradio_client"], default="http",
                    help="poll /status with plain HTTP (default; light on the bench's CPU) or gradio_client")
    ap.add_argument("--max-slowdown", type=float, default=1.5, help="allowed slowdown under load (1.5)")
    ap.add_argument("--timeout", type=float, default=900, help="give up on healthy visitors after this (s)")
    ap.add_argument("--keep", action="store_true", help="keep the temp dir (logs, database)")
    ap.add_argument("--profile", metavar="FILE", help="py-spy the app during the load phase (collapsed stacks)")
    args = ap.parse_args()

    os.environ["GRADIO_ANALYTICS_ENABLED"] = "False"
    os.environ["HF_HUB_DISABLE_TELEMETRY"] = "1"
    sys.path.insert(0, str(ROOT))
    os.chdir(ROOT)
    tmp = Path(tempfile.mkdtemp(prefix="mmvet-load-"))
    fleet = Fleet(args, tmp)
    try:
        import psutil
    except ImportError:
        psutil = None
    try:
        t = time.perf_counter()
        healthy_url = fleet.start_judge("judge-healthy", args.healthy_latency)
        bad_url = fleet.start_judge("judge-bad", args.bad_latency, args.bad_fail_500_ratio)
        app_url, app_proc = fleet.start_app()
        print(f"started 2 fake judges and the app in {time.perf_counter() - t:.1f} s: {app_url} "
              f"(run concurrency {args.concurrency}, {args.runs} judge run(s) per visitor)", flush=True)
        files = tmp / "results"
        files.mkdir()
        n_bad = min(args.bad_visitors, args.visitors)
        visitors = []
        for i in range(args.visitors):
            src = RESULTS_DIR / SOURCES[i % len(SOURCES)]
            bad = i >= args.visitors - n_bad
            visitors.append(Visitor(name=f"v{i + 1}{' (bad)' if bad else ''}", source=src.name,
                                    path=make_variant(src, f"visitor-{i + 1}", files),
                                    judge_url=bad_url if bad else healthy_url, bad=bad, ip=f"10.1.0.{i + 1}"))
        # -- warm-up: the first run of a fresh app pays one-time costs (imports, connection setup) that the
        # baseline below would not; one warm-up run, stopped at its first grade, pays them before measuring.
        warm = Visitor(name="warm-up", source=SOURCES[0], judge_url=healthy_url, bad=False, ip="10.3.0.1",
                       path=make_variant(RESULTS_DIR / SOURCES[0], "warm-up", files), stop_after_first=True)
        visit(warm, app_url, args)
        if warm.error:
            raise RuntimeError(f"warm-up failed: {warm.error}")
        print(f"warm-up run: /grade answered after {fmt(warm.t_started).strip()} s, first grade after "
              f"{fmt(warm.t_first).strip()} s", flush=True)

        procs = {"app": app_proc.pid, "judges": [p.pid for p in fleet.procs if p is not app_proc],
                 "bench (clients)": os.getpid()}
        cpu0 = cpu_seconds(psutil, procs)
        spy = None
        if args.profile:
            spy = subprocess.Popen(["py-spy", "record", "--pid", str(app_proc.pid), "--rate", "50", "--format",
                                    "raw", "--nonblocking", "-o", args.profile], stdout=subprocess.DEVNULL,
                                   stderr=subprocess.DEVNULL)

        # -- everyone at once ------------------------------------------------------------------------------
        go = threading.Event()
        threads = [threading.Thread(target=visit, args=(v, app_url, args, go), daemon=True) for v in visitors]
        for th in threads:
            th.start()
        time.sleep(1.0)        # let every client fetch the app's config first, so they start together
        t_load = time.perf_counter()
        go.set()
        deadline = time.time() + args.timeout
        for v in visitors:
            if not v.bad:
                v.finished.wait(max(0.0, deadline - time.time()))
        wall = time.perf_counter() - t_load
        for v in visitors:
            v.finished.set()       # bad visitors still running: stop them now
        for th in threads:
            th.join(90)
        cpu1 = cpu_seconds(psutil, procs)
        if spy is not None:
            spy.send_signal(signal.SIGINT)
            spy.wait(30)

        # -- one healthy visitor alone ---------------------------------------------------------------------
        first_healthy = next(v for v in visitors if not v.bad)
        src = RESULTS_DIR / first_healthy.source
        alone = Visitor(name="alone", source=src.name, path=make_variant(src, "alone", files),
                        judge_url=healthy_url, bad=False, ip="10.2.0.1")
        visit(alone, app_url, args)

        # -- report ----------------------------------------------------------------------------------------
        ref = alone.t_done
        print()
        print(f"{'visitor':<10} {'results file':<30} {'judge':<8} {'/grade(s)':>9} {'first(s)':>8} {'done(s)':>8} "
              f"{'grades':>9} {'status':<20} {'x alone':>7}")
        print("-" * 118)
        ok = alone.t_done is not None and alone.status == "done"
        for v in visitors + [alone]:
            ratio = v.t_done / ref if (v.t_done and ref and not v.bad) else None
            judge = "bad" if v.bad else "healthy"
            status = v.error[:40] if v.error else v.status
            print(f"{v.name:<10} {v.source:<30} {judge:<8} {fmt(v.t_started):>9} {fmt(v.t_first):>8} "
                  f"{fmt(v.t_done):>8} "
                  f"{v.done:>4}/{v.total:<4} {status:<20} {'-' if ratio is None else f'{ratio:.2f}x':>7}")
            if v is not alone and not v.bad:
                ok = ok and v.error is None and v.status == "done" and ratio is not None \
                    and ratio <= args.max_slowdown
        healthy = [v for v in visitors if not v.bad and v.t_done]
        print("-" * 118)
        if healthy:
            print(f"healthy under load: first grade median {statistics.median(v.t_first for v in healthy):.2f} s, "
                  f"completion median {statistics.median(v.t_done for v in healthy):.2f} s, "
                  f"max {max(v.t_done for v in healthy):.2f} s; alone: first {fmt(alone.t_first).strip()} s, "
                  f"completion {fmt(alone.t_done).strip()} s")
        if healthy and alone.t_done:
            grades_load = sum(v.done for v in healthy) / max(v.t_done for v in healthy)
            grades_alone = alone.done / alone.t_done
            spread = max(v.t_done for v in healthy) / min(v.t_done for v in healthy)
            print(f"throughput: {grades_alone:.0f} grades/s alone, {grades_load:.0f} grades/s for the healthy "
                  f"visitors together under load ({grades_load / grades_alone:.2f}x); slowest/fastest healthy "
                  f"visitor {spread:.2f}x")
            if grades_load < 1.2 * grades_alone:
                print("diagnosis: the load adds almost no throughput over one run alone, so a run alone already "
                      "saturates the app (CPU-bound, not waiting on its judge): N runs then take about N times as "
                      "long, shared evenly. The 1.5x target needs runs that wait on their judge (real judge "
                      "latencies; try --healthy-latency 1) and a CPU to spare.")
        if cpu0 and cpu1:
            used = ", ".join(f"{k} {cpu1[k] - cpu0[k]:.1f} s" for k in cpu0)
            print(f"CPU during the load phase ({wall:.1f} s wall, {os.cpu_count()} cores): {used}")
        if args.profile:
            print(f"py-spy profile of the app (collapsed stacks): {args.profile}")
        print(f"VERDICT: {'PASS' if ok else 'FAIL'} - every healthy visitor under load finished within "
              f"{args.max_slowdown}x the time alone" + ("" if ok else " (not all did)"))
        return 0 if ok else 1
    finally:
        fleet.stop()
        if args.keep:
            print(f"kept {tmp}")
        else:
            shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
