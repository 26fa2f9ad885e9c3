"""How fast the leaderboard is with many entries (run by hand; prints its figures).

    python bench/bench_leaderboard.py [--entries 1000] [--groups 1] [--browser]

Fills a fresh store with N synthetic entries (the frozen copy of a real published run, llava-v1.5-13b's official
grades, with per-sample scores redrawn per entry so that totals spread from weak to strong), split over
`--groups` rank groups (judges), then measures through `GradingService`:

- the first read of the board (loading every entry and the paired-bootstrap ranks of every group: cold);
- opening the board again (cached until the board changes) and the table cells the view sends;
- filtering and sorting by several columns;
- the CSV and JSON downloads;
- publishing one more entry, then reading the board again (ranks recomputed).

With ``--browser`` it also starts ``python app.py`` on that database (a subprocess, as a host runs it) and, in
headless Chromium, times opening ``/?board=…`` until every row is in the table (the page's first load, the
board's cold ranks included, then a second visit with the ranks cached), and sorting: clicking the ``total``
header (the table's own sort) and choosing "total" in "Sort by" (a server round trip).
"""
from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from mmvet_core import leaderboard as lb  # noqa: E402
from mmvet_core.service import BenchmarkChoice, GradingService, ServiceSettings  # noqa: E402

GRADES = ROOT / "assets" / "reference" / "llava-v1.5-13b_gpt-4-grade-3runs.json"


def timed(fn, repeat: int = 1) -> tuple[float, object]:
    times, out = [], None
    for _ in range(repeat):
        t0 = time.perf_counter()
        out = fn()
        times.append(time.perf_counter() - t0)
    return statistics.median(times), out


def fill(svc: GradingService, n: int, groups: int) -> None:
    run = svc.open_grade_file(str(GRADES), BenchmarkChoice(), "bench")
    entry = svc.publish(run, "template", "", "bench", visitor="bench")["entry"]
    template = lb.load_entry(svc.store, entry)
    svc.store.update_board_entry(entry, hidden=1)
    ids = template.meta["sample_ids"]
    rng = np.random.default_rng(0)
    for i in range(n):
        p = rng.uniform(0.1, 0.7)
        scores = {sid: [float(v) for v in np.round(np.clip(rng.normal(p, 0.35, 1), 0, 1), 1)] for sid in ids}
        total = 100 * float(np.mean([v[0] for v in scores.values()]))
        judge = "gpt-4-0613" if i % groups == 0 else f"judge-{i % groups}"
        kind = "official" if judge == "gpt-4-0613" else "successor"
        meta = {**template.meta, "total": round(total, 1), "ci": [total - 5.5, total + 5.5], "runs": 1,
                "judge": judge, "judge_key": lb.judge_key(judge, kind), "judge_kind": kind,
                "capabilities": {c: round(float(rng.uniform(0, 80)), 1) for c in lb.SIX}}
        svc.store.add_board_version(lb.new_entry_id(), run_id=f"r{i}", owner_hash=lb.owner_hash(f"o{i}"),
                                    name=f"model-{i:04d}", link="", meta=meta, scores=scores)


def browser_figures(data_dir: Path, n_rows: int) -> None:
    import os
    import subprocess

    from playwright.sync_api import expect, sync_playwright

    from tests.app_fixtures import CHROMIUM, CHROMIUM_ARGS, wait_http
    from tests.fake_judge import free_port
    from ui.leaderboard import PAGE_ROWS

    port = free_port()
    env = {**os.environ, "MMVET_DATA_DIR": str(data_dir), "GRADIO_SERVER_NAME": "127.0.0.1",
           "GRADIO_SERVER_PORT": str(port), "GRADIO_ANALYTICS_ENABLED": "False", "HF_HUB_OFFLINE": "1"}
    env = {k: v for k, v in env.items() if not k.startswith(("OPENAI_", "AZURE_OPENAI_"))}
    app = subprocess.Popen([sys.executable, "app.py"], cwd=ROOT, env=env, stdout=subprocess.DEVNULL,
                           stderr=subprocess.DEVNULL)
    try:
        url = f"http://127.0.0.1:{port}/"
        wait_http(url + "gradio_api/info", timeout=120)
        with sync_playwright() as p:
            browser = p.chromium.launch(executable_path=CHROMIUM, headless=True, args=CHROMIUM_ARGS)
            page = browser.new_page(viewport={"width": 1400, "height": 1000})
            grid = page.locator("#board-table [role=grid]")
            for visit in ("first visit (cold ranks)", "second visit (ranks cached)"):
                t0 = time.perf_counter()
                page.goto(url + "?board=all")
                page.wait_for_selector("body[data-mmvet-loaded]", state="attached", timeout=120_000)
                t_page = time.perf_counter() - t0
                shown = min(n_rows, PAGE_ROWS)
                expect(grid).to_have_attribute("aria-rowcount", str(shown + 1), timeout=120_000)
                print(f"browser, {visit}: page loaded (its own load mark) {t_page:.2f} s; the first page ({shown} "
                      f"of {n_rows} rows) in the table {time.perf_counter() - t0:.2f} s after opening the link")
            first_row = page.locator("#board-table [role=row]").nth(1)
            before = first_row.inner_text()
            t0 = time.perf_counter()
            page.locator("#board-sort input").click()
            page.get_by_role("option", name="name", exact=True).click()
            expect(first_row).not_to_have_text(before, timeout=30_000)
            print(f"browser: 'Sort by' name (server round trip) until the first row changes: "
                  f"{time.perf_counter() - t0:.2f} s")
            for how in ("Sort descending",):
                before = first_row.inner_text()
                header = page.locator("#board-table [role=columnheader]").nth(6)      # total
                t0 = time.perf_counter()
                header.hover()
                header.locator("button[aria-label='Open cell menu']").click()
                page.get_by_text(how, exact=True).first.click()
                expect(first_row).not_to_have_text(before, timeout=30_000)
                print(f"browser: 'total' header menu, {how}, until the first row changes: "
                      f"{time.perf_counter() - t0:.2f} s (menu clicks included); first row now: "
                      f"{' '.join(first_row.inner_text().split()[:3])}")
            before = first_row.inner_text()
            t0 = time.perf_counter()
            page.locator("#board-next").click()
            expect(first_row).not_to_have_text(before, timeout=30_000)
            print(f"browser: Next page (server round trip) until the first row changes: "
                  f"{time.perf_counter() - t0:.2f} s; {page.locator('#board-count').inner_text()}")
            browser.close()
    finally:
        app.terminate()
        app.wait(20)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--entries", type=int, default=1000)
    ap.add_argument("--groups", type=int, default=1, help="rank groups (judges) the entries are split over")
    ap.add_argument("--browser", action="store_true", help="also time the view in headless Chromium (app.py)")
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        svc = GradingService(ServiceSettings(data_dir=Path(tmp), publish_per_hour=10**6))
        t_fill, _ = timed(lambda: fill(svc, args.entries, args.groups))
        print(f"{args.entries} entries in {args.groups} rank group(s); filled the store in {t_fill:.1f} s")
        cold, rows = timed(svc.board_rows)
        print(f"first read of the board (load + ranks): {cold * 1000:.0f} ms, {len(rows)} rows "
              f"({len(rows) - args.entries} paper reference rows)")
        warm, _ = timed(lambda: [r.cells() for r in svc.leaderboard()], repeat=5)
        print(f"open the board again (filter + sort by rank + table cells): {warm * 1000:.1f} ms")
        for sort, desc in (("total", True), ("name", False), ("math", True), ("date", False)):
            t, out = timed(lambda: [r.cells() for r in svc.leaderboard({"sort": sort, "descending": desc})],
                           repeat=5)
            print(f"sort by {sort}{' (descending)' if desc else ''}: {t * 1000:.1f} ms ({len(out)} rows)")
        t, out = timed(lambda: svc.leaderboard("judge=official&q=model-00"), repeat=5)
        print(f"filter judge=official, name contains 'model-00': {t * 1000:.1f} ms ({len(out)} rows)")
        t, text = timed(lambda: lb.rows_csv(svc.leaderboard()), repeat=3)
        print(f"CSV download: {t * 1000:.1f} ms ({len(text) / 1e3:.0f} kB)")
        t, data = timed(lambda: svc.leaderboard_json(), repeat=3)
        print(f"JSON (API) table: {t * 1000:.1f} ms ({len(data['entries'])} rows)")
        run = svc.open_grade_file(str(GRADES), BenchmarkChoice(), "late")
        t_pub, _ = timed(lambda: svc.publish(run, "one more", "", "late", visitor="late"))
        t_after, _ = timed(svc.board_rows)
        print(f"publish one more entry: {t_pub * 1000:.0f} ms; next read of the board (ranks recomputed): "
              f"{t_after * 1000:.0f} ms")
        n_rows = len(svc.board_rows())
        svc.jobs.shutdown()
        svc.store.close()
        if args.browser:
            browser_figures(Path(tmp), n_rows)


if __name__ == "__main__":
    main()
