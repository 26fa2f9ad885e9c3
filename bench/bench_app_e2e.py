"""End-to-end benchmark (run by hand, not in CI): grading MM-Vet v1 x 5 runs (1,090 grades) in the browser vs the CLI.

Both grade ``llava-v1.5-13b.json`` against the same zero-latency fake judge (``python -m tests.fake_judge``, a
separate process), each with a fresh database, at the same concurrency (16: the CLI's default and the app's
``MMVET_RUN_CONCURRENCY`` default).

- Browser: ``python app.py`` as a subprocess (GRADIO_SERVER_PORT, MMVET_DATA_DIR, OPENAI_API_KEY/OPENAI_BASE_URL
  pointing at the fake judge), headless Debian Chromium; time from the click on Grade until the progress says
  ``done: 1090 / 1090`` and the total is shown. The app process's RSS is sampled with psutil every 50 ms.
- CLI: ``python -m mmvet_core grade ... --runs 5 --base-url <fake> --db <fresh tmp>``, whole process wall time
  (Python start-up included: that is what a user waits for).

Target: the browser within 3 s of the CLI.

    python bench/bench_app_e2e.py                  # the figures
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
            t0 = time.perf_counter()
            page.locator("#grade-button").click()
            # issue 19.6: the run's address (?run=) once Grade is clicked (was 2.5-6 s: a second parse)
            page.wait_for_function("() => location.search.includes('run=')", polling=20, timeout=60_000)
            address = time.perf_counter() - t0
            page.wait_for_function(
                "n => { const p = document.querySelector('#progress-text');"
                " const t = document.querySelector('#total-score textarea');"
                " return p && p.textContent.startsWith(`done: ${n} / ${n}`) && t && /^Total: \\d/.test(t.value); }",
                arg=total, polling=50, timeout=600_000)
            wall = time.perf_counter() - t0
            app_cpu = cpu_seconds(tree(app.proc.pid)) - app_cpu0
            browser_cpu = cpu_seconds(browser_procs) - browser_cpu0
            peak = sampler.stop()
            shown = text_of(page, "total-score")
            browser.close()
        return {"wall": wall, "address": address,
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


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="mmvet-e2e-") as d:
        tmp = Path(d)
        fake = Fake()
        try:
            cli = cli_run(fake, tmp)
            api = api_run(fake, tmp)
            web = browser_run(fake, tmp)
        finally:
            fake.close()
        load = os.getloadavg()
        print(f"grading MM-Vet v1 x {RUNS} runs = {218 * RUNS} grades, zero-latency fake judge, "
              f"concurrency 16, {psutil.cpu_count()} CPUs, load avg {load[0]:.1f}")
        print(f"  CLI     : {cli['wall']:6.2f} s   ({cli['total']})")
        print(f"  app API : {api['wall']:6.2f} s   (/grade, then /status until not running: {api['status']}, "
              f"total {api['total']:.1f})")
        print(f"  browser : {web['wall']:6.2f} s   (click -> done + total shown; {web['total']})")
        print(f"            click -> ?run= in the address: {web['address']:.2f} s")
        diff = web["wall"] - cli["wall"]
        print(f"            CPU during the browser run: app {web['app_cpu']:.1f} s, "
              f"Chromium {web['browser_cpu']:.1f} s (on {psutil.cpu_count()} cores)")
        print(f"  browser - CLI = {diff:+.2f} s  (target: within 3 s) -> {'OK' if diff <= 3 else 'OVER'}")
        print(f"  app RSS: {web['rss_before'] / 2**20:.0f} MiB before the click, peak "
              f"{web['rss_peak'] / 2**20:.0f} MiB during grading ({web['rss_samples']} samples)")


if __name__ == "__main__":
    main()
