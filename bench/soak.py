"""Soak test of the app as a public Space: an hour of page opens, follows, scripts and publishes, compressed into a
few minutes, with the app's memory sampled throughout and after the crowd leaves (issue 26, item 6).

Run by hand (not in CI), from the repository root:

    python bench/soak.py                                  # 4 minutes of traffic, then 2 minutes idle
    python bench/soak.py --minutes 8 --pages 4 --idle 180
    python bench/soak.py --root /path/to/another/checkout  # the same traffic against another version

What it does:
1. starts the fake OpenAI-compatible judge (``python -m tests.fake_judge``, 50 ms per answer) and the app as a
   host runs it (``python app.py`` from ``--root``: the server's key, one trusted proxy hop, defaults otherwise);
2. for ``--minutes``, from many addresses (X-Forwarded-For):
   - ``--pages`` browser tabs (headless Chromium) open and close in turn: the front page, the share link of a
     finished run, or of a running run (the page then follows it live), each staying 2-6 s;
   - graders start a run of the server's judge every few seconds (answers tagged, so no answer is cached) and
     publish it to the leaderboard when it ends;
   - scripts read /status and /leaderboard, each call with a session of its own (as a new gradio_client does);
   - vanished clients join the queue and leave without reading the answer;
3. stops the traffic and waits ``--idle`` seconds;
4. prints the app's resident memory (its process and children): at start, after a warm-up, its peak, at the end
   of the traffic and after the idle time, with the counts of each kind of traffic; ``--csv`` writes the samples.

"Comes back down": the end-of-idle figure is well under the peak (the sessions gone clients left are forgotten and
the memory handed back to the system), and the peak does not grow with the length of the soak.
"""
from __future__ import annotations

import argparse
import json
import os
import random
import secrets
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

import httpx
import psutil

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
from bench.load_test import free_port, wait_http  # noqa: E402

RESULTS = ROOT / "tests" / "data" / "results" / "llava-v1.5-13b.json"
CHROMIUM = "/usr/bin/chromium"
CHROMIUM_ARGS = ["--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
                 "--disable-background-networking", "--disable-component-update", "--disable-sync"]
BASELINE = "Offline baseline (not MM-Vet)"
SERVER = "Server's judge"
BENCH = "MM-Vet v1 (bundled, 218 samples)"


class Memory:
    """The app's resident memory (process and children), sampled every `every` seconds."""

    def __init__(self, pid: int, every: float = 1.0):
        self.proc, self.every = psutil.Process(pid), every
        self.samples: list[tuple[float, int]] = []
        self._stop = threading.Event()
        self.t0 = time.monotonic()
        threading.Thread(target=self._run, daemon=True).start()

    def rss(self) -> int:
        total = 0
        for p in [self.proc, *self.proc.children(recursive=True)]:
            try:
                total += p.memory_info().rss
            except psutil.Error:
                pass
        return total

    def _run(self) -> None:
        while not self._stop.is_set():
            self.samples.append((time.monotonic() - self.t0, self.rss()))
            self._stop.wait(self.every)

    def now(self) -> int:
        return self.samples[-1][1] if self.samples else self.rss()

    def peak(self) -> int:
        return max(m for _, m in self.samples)

    def stop(self) -> None:
        self._stop.set()


class Traffic:
    """The crowd: counters and the runs it made."""

    def __init__(self, url: str, preds: dict):
        self.url, self.preds = url, preds
        self.stop = threading.Event()
        self.lock = threading.Lock()
        self.counts = {"page opens": 0, "follows": 0, "runs started": 0, "published": 0, "script calls": 0,
                       "vanished calls": 0, "errors": 0}
        self.running: list[str] = []
        self.finished: list[str] = []
        self.path: str | None = None

    def count(self, what: str, n: int = 1) -> None:
        with self.lock:
            self.counts[what] += n

    def client(self) -> httpx.Client:
        ip = f"198.51.{random.randint(0, 255)}.{random.randint(1, 254)}"
        return httpx.Client(base_url=self.url, headers={"X-Forwarded-For": ip}, timeout=120)

    def call(self, http: httpx.Client, api: str, data: list, session: str | None = None):
        r = http.post(f"gradio_api/call/{api}", json={"data": data, "session_hash": session or secrets.token_hex(8)})
        r.raise_for_status()
        with http.stream("GET", f"gradio_api/call/{api}/{r.json()['event_id']}") as s:
            event = None
            for line in s.iter_lines():
                if line.startswith("event:"):
                    event = line.split(":", 1)[1].strip()
                elif line.startswith("data:") and event in ("complete", "error"):
                    if event == "error":
                        raise RuntimeError(f"/{api}: {line[:200]}")
                    return json.loads(line[5:])[0]
        raise RuntimeError(f"/{api}: no answer")

    def upload(self, http: httpx.Client, tag: str) -> dict:
        body = json.dumps({k: f"{v} [{tag}]" for k, v in self.preds.items()}).encode()
        [path] = http.post("gradio_api/upload", files={"files": (f"soak-{tag}.json", body)}).json()
        return {"path": path, "meta": {"_type": "gradio.FileData"}, "orig_name": f"soak-{tag}.json"}

    # ---- actors ----
    def grader(self, every: float) -> None:
        while not self.stop.wait(random.uniform(0.5, 1.5) * every):
            try:
                with self.client() as http:
                    owner = "soak-" + secrets.token_hex(6)
                    tag = secrets.token_hex(4)
                    run = self.call(http, "grade", [self.upload(http, tag), BENCH, None, "", "All samples", 1, SERVER,
                                                    "", "", "", owner, "", "live"])
                    self.count("runs started")
                    with self.lock:
                        self.running.append(run["run_id"])
                    while not self.stop.is_set():
                        st = self.call(http, "status", [run["run_id"]])
                        if st["status"] != "running":
                            break
                        self.stop.wait(2.0)
                    with self.lock:
                        self.running.remove(run["run_id"])
                        self.finished.append(run["run_id"])
                    if st["status"] == "done":
                        self.call(http, "publish", [run["run_id"], f"soak model {tag}", "", owner, False])
                        self.count("published")
            except Exception as e:  # noqa: BLE001 — counted
                self.count("errors")
                print(f"grader: {e}"[:200], flush=True)

    def script(self) -> None:
        while not self.stop.wait(random.uniform(0.2, 0.8)):
            try:
                with self.client() as http:          # a new client, a new session, as naive scripts do
                    with self.lock:
                        runs = self.finished[-20:] + self.running
                    if runs and random.random() < 0.6:
                        self.call(http, "status", [random.choice(runs)])
                    else:
                        self.call(http, "leaderboard", ["", "", "", "", "rank", False, True, 0, 100])
                    self.count("script calls")
            except Exception as e:  # noqa: BLE001
                self.count("errors")
                print(f"script: {e}"[:200], flush=True)

    def vanished(self) -> None:
        while not self.stop.wait(random.uniform(0.5, 2.0)):
            try:
                with self.client() as http:          # joins the queue, never reads the answer
                    http.post("gradio_api/call/leaderboard",
                              json={"data": ["", "", "", "", "rank", False, True, 0, 100]})
                    self.count("vanished calls")
            except Exception:  # noqa: BLE001
                self.count("errors")

    def pages(self, n: int) -> None:
        from playwright.sync_api import sync_playwright

        with sync_playwright() as p:
            browser = p.chromium.launch(executable_path=CHROMIUM, headless=True, args=CHROMIUM_ARGS)
            try:
                tabs: list = []
                while not self.stop.is_set():
                    with self.lock:
                        running, finished = list(self.running), list(self.finished[-50:])
                    roll = random.random()
                    if running and roll < 0.4:
                        target, kind = f"?run={random.choice(running)}", "follows"
                    elif finished and roll < 0.8:
                        target, kind = f"?run={random.choice(finished)}", None
                    else:
                        target, kind = "", None
                    ctx = browser.new_context(extra_http_headers={
                        "X-Forwarded-For": f"203.0.{random.randint(0, 255)}.{random.randint(1, 254)}"})
                    page = ctx.new_page()
                    page.set_default_timeout(60_000)
                    try:
                        page.goto(self.url + target)
                        page.wait_for_selector("body[data-mmvet-loaded]", state="attached")
                        self.count("page opens")
                        if kind:
                            self.count(kind)
                    except Exception as e:  # noqa: BLE001
                        self.count("errors")
                        print(f"page: {e}"[:200], flush=True)
                    tabs.append((time.monotonic() + random.uniform(2, 6), ctx))
                    while len(tabs) >= n or (tabs and tabs[0][0] < time.monotonic()):
                        until, old = tabs.pop(0)
                        time.sleep(max(0.0, until - time.monotonic()))
                        old.close()
                for _, ctx in tabs:
                    ctx.close()
            finally:
                browser.close()


def mb(n: int) -> str:
    return f"{n / 1e6:,.0f} MB"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--minutes", type=float, default=4.0, help="minutes of traffic")
    ap.add_argument("--idle", type=float, default=120.0, help="seconds of quiet after the traffic")
    ap.add_argument("--pages", type=int, default=3, help="browser tabs open at once (0: no browser)")
    ap.add_argument("--scripts", type=int, default=4, help="script clients")
    ap.add_argument("--graders", type=int, default=2, help="visitors grading and publishing")
    ap.add_argument("--root", type=Path, default=ROOT, help="the checkout whose app.py runs")
    ap.add_argument("--csv", type=Path, help="write the memory samples (seconds, bytes)")
    args = ap.parse_args()

    work = Path(tempfile.mkdtemp(prefix="mmvet-soak-"))
    judge_port, app_port = free_port(), free_port()
    env = {**os.environ, "GRADIO_ANALYTICS_ENABLED": "False", "HF_HUB_OFFLINE": "1", "PYTHONPATH": str(ROOT)}
    judge = subprocess.Popen([sys.executable, "-m", "tests.fake_judge", "--port", str(judge_port),
                              "--latency", "0.05"], cwd=ROOT, env=env, stdout=subprocess.DEVNULL,
                             stderr=subprocess.DEVNULL)
    app_env = {**env, "PYTHONPATH": str(args.root), "MMVET_DATA_DIR": str(work / "data"),
               "GRADIO_TEMP_DIR": str(work / "gradio-tmp"), "GRADIO_SERVER_NAME": "127.0.0.1",
               "GRADIO_SERVER_PORT": str(app_port), "OPENAI_API_KEY": "sk-soak",
               "OPENAI_BASE_URL": f"http://127.0.0.1:{judge_port}/v1", "MMVET_TRUSTED_PROXY_HOPS": "1",
               "MMVET_RUN_CONCURRENCY": "8", "MMVET_PUBLISH_PER_HOUR": "1000"}
    app = subprocess.Popen([sys.executable, "app.py"], cwd=args.root, env=app_env, stdout=subprocess.DEVNULL,
                           stderr=subprocess.DEVNULL)
    url = f"http://127.0.0.1:{app_port}/"
    try:
        wait_http(f"http://127.0.0.1:{judge_port}/v1/models", proc=judge)
        wait_http(url + "gradio_api/info", timeout=180, proc=app)
        mem = Memory(app.pid)
        start = mem.rss()
        traffic = Traffic(url, json.loads(RESULTS.read_text(encoding="utf-8")))
        with traffic.client() as http:               # warm-up: one run, one page
            traffic.call(http, "grade", [traffic.upload(http, "warm"), BENCH, None, "", "All samples", 1, BASELINE,
                                         "", "", "", "soak-warm", "", "live"])
        actors = [threading.Thread(target=traffic.pages, args=(args.pages,), daemon=True)] if args.pages else []
        actors += [threading.Thread(target=traffic.grader, args=(8.0,), daemon=True) for _ in range(args.graders)]
        actors += [threading.Thread(target=traffic.script, daemon=True) for _ in range(args.scripts)]
        actors += [threading.Thread(target=traffic.vanished, daemon=True)]
        time.sleep(5)
        warm = mem.now()
        t0 = time.monotonic()
        for a in actors:
            a.start()
        marks = []
        while time.monotonic() - t0 < args.minutes * 60:
            time.sleep(30)
            marks.append((round((time.monotonic() - t0) / 60, 1), mem.now()))
            print(f"  {marks[-1][0]:4.1f} min: {mb(marks[-1][1])}  {traffic.counts}", flush=True)
        traffic.stop.set()
        for a in actors:
            a.join(120)
        end = mem.now()
        peak = mem.peak()
        time.sleep(args.idle)
        after = mem.now()
        mem.stop()
        print(json.dumps({"minutes": args.minutes, "idle_s": args.idle, **traffic.counts}))
        print(f"app memory: start {mb(start)} · after warm-up {mb(warm)} · peak {mb(peak)} · end of traffic "
              f"{mb(end)} · after {args.idle:.0f} s idle {mb(after)}")
        print("per 30 s: " + ", ".join(f"{m} min {mb(v)}" for m, v in marks))
        if args.csv:
            args.csv.write_text("seconds,bytes\n" + "".join(f"{t:.1f},{m}\n" for t, m in mem.samples))
    finally:
        for proc in (app, judge):
            proc.send_signal(signal.SIGTERM)
            try:
                proc.wait(20)
            except subprocess.TimeoutExpired:
                proc.kill()
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
