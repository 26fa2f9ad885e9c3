"""End-to-end benchmark (run by hand, not in CI): grading MM-Vet v1 x 5 runs (1,090 grades) in the browser vs the CLI.

Both grade ``llava-v1.5-13b.json`` against the same zero-latency fake judge (``python -m tests.fake_judge``, a
separate process), each with a fresh database, at the same concurrency (16: the CLI's default and the app's
``MMVET_RUN_CONCURRENCY`` default).

- Browser: ``python app.py`` as a subprocess (GRADIO_SERVER_PORT, MMVET_DATA_DIR, OPENAI_API_KEY/OPENAI_BASE_URL
  pointing at the fake judge), headless Debian Chromium; time from the click on Grade until the progress says
  ``done: 1090 / 1090`` and the total is shown. The app process's RSS is sampled with psutil every 50 ms.
- CLI: ``python -m mmvet_core grade ... --runs 5 --base-url <fake> --db <fresh tmp>``, whole process wall time
  (Python start-up included: that is what a user waits for).

Targets (issue 29): the API within 1.1x and the browser within 1.3x of the CLI's wall time, and the page's first
rows (its progress counting a grade) within 1 s of the first grade stored in the app's database (read every 10 ms).

    python bench/bench_app_e2e.py                  # the figures
    python bench/bench_app_e2e.py --repeat 3       # three rounds of CLI, API, browser in turn, and the median ratios
"""
from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request
from pathlib import Path

import psutil

ROOT = Path(__file__).resolve().parent.parent
RESULTS = Path(__file__).resolve().parents[1] / "tests" / "data" / "results" / "llava-v1.5-13b.json"
RUNS = 5

sys.path.insert(0, str(ROOT))
from tests.app_fixtures import CHROMIUM, CHROMIUM_ARGS, wait_loaded  # noqa: E402
from tests.fake_judge import free_port  # noqa: E402


def base_env(**extra) -> dict:
    env = {**os.environ, "GRADIO_ANALYTICS_ENABLED": "False", "HF_HUB_DISABLE_TELEMETRY": "1",
           "HF_HUB_OFFLINE": "1", "PYTHONUNBUFFERED": "1"}
    env.update({k: str(v) for k, v in extra.items()})
    return env


def wait_http(url: str, timeout: float = 90.0) -> None:
    deadline = time.time() + timeout
    while True:
        try:
            with urllib.request.urlopen(url, timeout=2):
                return
        except OSError:
            if time.time() > deadline:
                raise TimeoutError(f"{url} did not answer")
            time.sleep(0.1)


class Fake:
    """The fake judge as its own process."""

    def __init__(self, latency: float = 0.0):
        self.port = free_port()
        self.proc = subprocess.Popen([sys.executable, "-m", "tests.fake_judge", "--port", str(self.port),
                                      "--latency", str(latency)], cwd=ROOT, env=base_env(),
                                     stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
        self.url = json.loads(self.proc.stdout.readline())["url"]
        wait_http(self.url + "/models")

    def close(self) -> None:
        self.proc.terminate()
        self.proc.wait(10)


class App:
    """``python app.py`` as a subprocess with a fresh data dir; the fake judge is the server's judge."""

    def __init__(self, fake: Fake, data_dir: Path, concurrency: int = 16):
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}/"
        env = base_env(GRADIO_SERVER_PORT=self.port, GRADIO_SERVER_NAME="127.0.0.1", MMVET_DATA_DIR=data_dir,
                       OPENAI_API_KEY="sk-test", OPENAI_BASE_URL=fake.url, MMVET_RUN_CONCURRENCY=concurrency,
                       GRADIO_TEMP_DIR=data_dir / "gradio-tmp")
        self.log = open(data_dir.parent / "app.log", "w")
        self.proc = subprocess.Popen([sys.executable, "app.py"], cwd=ROOT, env=env, stdout=self.log,
                                     stderr=subprocess.STDOUT)
        wait_http(self.url + "gradio_api/info")
        self.ps = psutil.Process(self.proc.pid)

    def rss(self) -> int:
        try:
            procs = [self.ps] + self.ps.children(recursive=True)
            return sum(p.memory_info().rss for p in procs)
        except psutil.Error:
            return 0

    def close(self) -> None:
        self.proc.terminate()
        try:
            self.proc.wait(10)
        except subprocess.TimeoutExpired:
            self.proc.kill()
        self.log.close()


class FirstGrade(threading.Thread):
    """When the app's database first holds a grade of the run (its SQLite file read every 10 ms, from the click)."""

    def __init__(self, db: Path, every: float = 0.01):
        super().__init__(daemon=True)
        self.db, self.every, self.at = db, every, None
        self._halt = threading.Event()

    def run(self) -> None:
        import sqlite3
        conn = sqlite3.connect(f"file:{self.db}?mode=ro", uri=True, timeout=5)
        try:
            while not self._halt.is_set() and self.at is None:
                try:
                    if conn.execute("SELECT 1 FROM grades LIMIT 1").fetchone():
                        self.at = time.perf_counter()
                except sqlite3.Error:
                    pass
                time.sleep(self.every)
        finally:
            conn.close()

    def stop(self) -> float | None:
        self._halt.set()
        self.join()
        return self.at


class RssSampler(threading.Thread):
    def __init__(self, app: App, every: float = 0.05):
        super().__init__(daemon=True)
        self.app, self.every, self.peak, self.samples = app, every, 0, 0
        self._halt = threading.Event()

    def run(self) -> None:
        while not self._halt.is_set():
            self.peak = max(self.peak, self.app.rss())
            self.samples += 1
            time.sleep(self.every)

    def stop(self) -> int:
        self._halt.set()
        self.join()
        return self.peak


def cpu_seconds(procs) -> float:
    total = 0.0
    for proc in procs:
        try:
            t = proc.cpu_times()
            total += t.user + t.system
        except psutil.Error:
            pass
    return total


def tree(pid: int, exclude: set[int] = frozenset()) -> list[psutil.Process]:
    root = psutil.Process(pid)
    return [p for p in [root] + root.children(recursive=True) if p.pid not in exclude]


def text_of(page, elem_id: str) -> str:
    return page.locator(f"#{elem_id}").locator("textarea, input").first.input_value()


def open_app(browser, url):
    page = browser.new_context(viewport={"width": 1400, "height": 1000}).new_page()
    page.set_default_timeout(60_000)
    page.goto(url)
    wait_loaded(page)
    return page


def prepare(page, runs: int) -> None:
    page.locator("#results-file input[type=file]").set_input_files(str(RESULTS))
    box = page.locator("#runs input[type=number]")
    box.fill(str(runs))
    box.press("Enter")
    page.wait_for_function(
        "n => (document.querySelector('#estimate textarea') || {}).value?.startsWith(n + ' judge calls')",
        arg=str(218 * runs))


def browser_run(fake: Fake, tmp: Path) -> dict:
    from playwright.sync_api import sync_playwright

    app = App(fake, tmp / "app-data")
    try:
        with sync_playwright() as p:
            browser = p.chromium.launch(executable_path=CHROMIUM, headless=True, args=CHROMIUM_ARGS)
            page = open_app(browser, app.url)
            prepare(page, RUNS)
            rss_before = app.rss()
            sampler = RssSampler(app)
            sampler.start()
            total = 218 * RUNS
            browser_procs = tree(os.getpid(), exclude={app.proc.pid, fake.proc.pid, os.getpid()})
            app_cpu0, browser_cpu0 = cpu_seconds(tree(app.proc.pid)), cpu_seconds(browser_procs)
            first_grade = FirstGrade(tmp / "app-data" / "mmvet-grader.db")
            first_grade.start()
            t0 = time.perf_counter()
            page.locator("#grade-button").click()
            # issue 19.6: the run's address (?run=) once Grade is clicked (was 2.5-6 s: a second parse)
            page.wait_for_function("() => location.search.includes('run=')", polling=20, timeout=60_000)
            address = time.perf_counter() - t0
            # the page's first rows: the progress counts a grade (the first redraw with grades in it)
            page.wait_for_function(
                "() => /: [1-9][0-9]* \\/ /.test((document.querySelector('#progress-text') || {}).textContent || '')",
                polling=20, timeout=600_000)
            first_rows = time.perf_counter()
            page.wait_for_function(
                "n => { const p = document.querySelector('#progress-text');"
                " const t = document.querySelector('#total-score textarea');"
                " return p && p.textContent.startsWith(`done: ${n} / ${n}`) && t && /^Total: \\d/.test(t.value); }",
                arg=total, polling=50, timeout=600_000)
            wall = time.perf_counter() - t0
            app_cpu = cpu_seconds(tree(app.proc.pid)) - app_cpu0
            browser_cpu = cpu_seconds(browser_procs) - browser_cpu0
            peak = sampler.stop()
            stored = first_grade.stop()
            shown = text_of(page, "total-score")
            browser.close()
        return {"wall": wall, "address": address, "first_rows": first_rows - t0,
                "first_grade": None if stored is None else stored - t0,
                "rss_before": rss_before, "rss_peak": peak, "rss_samples": sampler.samples,
                "total": shown, "app_cpu": app_cpu, "browser_cpu": browser_cpu}
    finally:
        app.close()


def api_run(fake: Fake, tmp: Path) -> dict:
    """The same grading through the app's API (gradio_client /grade, then /status polled every 0.2 s): the app's
    own overhead without a browser rendering every refresh."""
    from gradio_client import Client, handle_file

    app = App(fake, tmp / "api-data")
    try:
        client = Client(app.url, verbose=False, download_files=False)
        t0 = time.perf_counter()
        run_id = client.predict(
            results=handle_file(str(RESULTS)), bench_c="MM-Vet v1 (bundled, 218 samples)", bench_f=None, hub="",
            sub="All samples", n_runs=RUNS, judge_c="Server's judge", url="", model="gpt-4-0613", key="",
            owner_tok="bench", api_name="/grade")["run_id"]
        while (st := client.predict(run_id, api_name="/status"))["status"] == "running":
            time.sleep(0.2)
        return {"wall": time.perf_counter() - t0, "status": st["status"], "total": st["total_score"]}
    finally:
        app.close()


def cli_run(fake: Fake, tmp: Path) -> dict:
    cmd = [sys.executable, "-m", "mmvet_core", "grade", str(RESULTS), "--runs", str(RUNS), "--base-url", fake.url,
           "--db", str(tmp / "cli.db"), "--out", str(tmp / "cli-out")]
    t0 = time.perf_counter()
    out = subprocess.run(cmd, cwd=ROOT, env=base_env(OPENAI_API_KEY="sk-test"), capture_output=True, text=True)
    wall = time.perf_counter() - t0
    if out.returncode != 0:
        raise RuntimeError(f"CLI failed ({out.returncode}): {out.stderr[-2000:]}")
    total = re.search(r"^Total: .*$", out.stdout, re.M)
    return {"wall": wall, "total": total.group(0) if total else "?"}


def report(cli: dict, api: dict, web: dict) -> None:
    print(f"  CLI     : {cli['wall']:6.2f} s   ({cli['total']})")
    print(f"  app API : {api['wall']:6.2f} s   (/grade, then /status until not running: {api['status']}, "
          f"total {api['total']:.1f})")
    print(f"  browser : {web['wall']:6.2f} s   (click -> done + total shown; {web['total'][:40]}...)")
    print(f"            click -> ?run= in the address: {web['address']:.2f} s")
    lag = None if web["first_grade"] is None else web["first_rows"] - web["first_grade"]
    print(f"            click -> first grade stored: "
          f"{'?' if web['first_grade'] is None else format(web['first_grade'], '.2f')} s, first rows on the page: "
          f"{web['first_rows']:.2f} s -> first rows {'?' if lag is None else format(lag, '.2f')} s after the "
          f"first stored grade (target: within 1 s)")
    print(f"            CPU during the browser run: app {web['app_cpu']:.1f} s, "
          f"Chromium {web['browser_cpu']:.1f} s (on {psutil.cpu_count()} cores)")
    print(f"            app RSS: {web['rss_before'] / 2**20:.0f} MiB before the click, peak "
          f"{web['rss_peak'] / 2**20:.0f} MiB during grading ({web['rss_samples']} samples)")
    print(f"  ratios to the CLI: API {api['wall'] / cli['wall']:.2f}x (target <= 1.1x), "
          f"browser {web['wall'] / cli['wall']:.2f}x (target <= 1.3x)")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=1,
                        help="measure CLI, API and browser this many times, in turn (the machine's load moves)")
    args = parser.parse_args()
    rows = []
    for i in range(args.repeat):
        with tempfile.TemporaryDirectory(prefix="mmvet-e2e-") as d:
            tmp = Path(d)
            load_start = os.getloadavg()[0]
            fake = Fake()
            try:
                cli = cli_run(fake, tmp)
                api = api_run(fake, tmp)
                web = browser_run(fake, tmp)
            finally:
                fake.close()
        print(f"[{i + 1}/{args.repeat}] grading MM-Vet v1 x {RUNS} runs = {218 * RUNS} grades, zero-latency fake "
              f"judge, concurrency 16, {psutil.cpu_count()} CPUs, load average {load_start:.1f} at the start, "
              f"{os.getloadavg()[0]:.1f} at the end", flush=True)
        report(cli, api, web)
        rows.append((cli, api, web))
    if len(rows) > 1:
        api_r = sorted(a["wall"] / c["wall"] for c, a, _ in rows)
        web_r = sorted(w["wall"] / c["wall"] for c, _, w in rows)
        lags = sorted(w["first_rows"] - w["first_grade"] for _, _, w in rows if w["first_grade"] is not None)
        print(f"over {len(rows)} rounds: API/CLI {api_r[len(api_r) // 2]:.2f}x median "
              f"({api_r[0]:.2f}-{api_r[-1]:.2f}), browser/CLI {web_r[len(web_r) // 2]:.2f}x median "
              f"({web_r[0]:.2f}-{web_r[-1]:.2f}), first rows after the first stored grade "
              f"{lags[len(lags) // 2]:.2f} s median ({lags[0]:.2f}-{lags[-1]:.2f})" if lags else "")


if __name__ == "__main__":
    main()
