"""How fast the leaderboard is with many entries (run by hand; prints its figures).

    python bench/bench_leaderboard.py [--entries 1600] [--groups 1] [--copies] [--http] [--browser]

Fills a fresh store with N synthetic entries (the frozen copy of a real published run, llava-v1.5-13b's official
grades, with per-sample scores redrawn per entry so that totals spread from weak to strong; with ``--copies``
every entry has the same grades, as 1,600 copies of one run), split over `--groups` rank groups (judges), every
copy checked by the board's schema and verified, then measures through `GradingService`:

- the cold start: the service start (every entry decoded and checked), the first read of the board, the time
  until every group is ranked (the background build), and how long any read took meanwhile;
- opening the board again (cached until the board changes) and the table cells the view sends;
- filtering and sorting by several columns;
- the CSV and JSON downloads;
- one more entry published and verified by the host (a group changes by one entry: incremental), then the next
  read; one entry unpublished by its owner, then the next read;
- 200 more distinct entries landing at once (a restore): reads while the background rebuilds, and the time
  until they are ranked.

With ``--http`` it also starts ``python app.py`` on that database and times ``/leaderboard`` through the HTTP API
(gradio_client): the first call, then (the board ranked) the median of ten calls for the first page and a middle
page of 100 and of 500 rows, and the walk through the whole board with ``next_offset``.

With ``--browser`` it also starts ``python app.py`` on that database (a subprocess, as a host runs it) and, in
headless Chromium, times opening ``/?board=…`` until every row is in the table (the page's first load, the
board's cold ranks included, then a second visit with the ranks cached), and sorting: clicking the ``total``
header (the table's own sort) and choosing "total" in "Sort by" (a server round trip).
"""
from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from contextlib import contextmanager
from pathlib import Path
from typing import Iterator

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from mmvet_core.board.entries import new_entry_id, owner_hash  # noqa: E402
from mmvet_core.board.rows import TABLE_COLUMNS, format_rank  # noqa: E402
from mmvet_core.board.snapshot import judge_key, make_snapshot  # noqa: E402
from mmvet_core.board.filters import rows_csv  # noqa: E402
from mmvet_core.board.schema import recompute_totals  # noqa: E402
from mmvet_core.service import BenchmarkChoice, GradingService, ServiceSettings  # noqa: E402

GRADES = ROOT / "assets" / "reference" / "llava-v1.5-13b_gpt-4-grade-3runs.json"


def timed(fn, repeat: int = 1) -> tuple[float, object]:
    times, out = [], None
    for _ in range(repeat):
        t0 = time.perf_counter()
        out = fn()
        times.append(time.perf_counter() - t0)
    return statistics.median(times), out


def fill(svc: GradingService, n: int, groups: int, *, copies: bool = False, seed: int = 0,
         prefix: str = "model") -> None:
    """`n` verified entries in `groups` rank groups, their frozen copies valid by the board's schema."""
    run = svc.runs.open_grade_file(str(GRADES), BenchmarkChoice(), "bench")
    template = make_snapshot(lb_view(svc, run))[0]
    ids = template["sample_ids"]
    rng = np.random.default_rng(seed)
    same = {sid: [float(v)] for sid, v in zip(ids, np.round(np.clip(rng.normal(0.4, 0.35, len(ids)), 0, 1), 1))}
    for i in range(n):
        p = rng.uniform(0.1, 0.7)
        scores = same if copies else \
            {sid: [float(v)] for sid, v in zip(ids, np.round(np.clip(rng.normal(p, 0.35, len(ids)), 0, 1), 1))}
        judge = "gpt-4-0613" if i % groups == 0 else f"judge-{i % groups}"
        kind = "official" if judge == "gpt-4-0613" else "successor"
        meta = recompute_totals({**template, "runs": 1, "judge": judge, "judge_key": judge_key(judge, kind),
                                 "judge_kind": kind, "metric_note": None if kind == "official" else "successor",
                                 "provenance": {"source": "graded", "judge": judge, "endpoints": ["api.openai.com"],
                                                "verified_by": "server"}}, scores)
        meta.pop("grades_sha", None)
        svc.store.add_board_version(new_entry_id(), run_id=f"r{i}", owner_hash=owner_hash(f"{prefix}{i}"),
                                    name=f"{prefix}-{seed}-{i:04d}", link="", meta=meta, scores=scores)


def lb_view(svc: GradingService, run_id: str):
    from mmvet_core.runs.lifecycle import load_run_view
    return load_run_view(svc.store, run_id)


def wait_ranked(svc: GradingService, timeout: float = 600) -> tuple[float, float, int]:
    """Read the board in a loop until every entry is ranked: (seconds until then, slowest read, reads)."""
    t0 = time.perf_counter()
    slowest, reads = 0.0, 0
    while True:
        t = time.perf_counter()
        rows = svc.board.board_rows()
        slowest, reads = max(slowest, time.perf_counter() - t), reads + 1
        if all(r.rank or r.reference or not r.verified for r in rows) and not svc.board.book.pending():
            return time.perf_counter() - t0, slowest, reads
        if time.perf_counter() - t0 > timeout:
            raise TimeoutError("the board was not ranked in time")
        time.sleep(0.05)


@contextmanager
def running_app(data_dir: Path) -> Iterator[str]:
    """``python app.py`` on the database in `data_dir` (a subprocess, as a host runs it, no judge variables):
    its URL once it answers; stopped when the block ends."""
    from tests.app_fixtures import wait_http
    from tests.fake_judge import free_port

    port = free_port()
    env = {**os.environ, "MMVET_DATA_DIR": str(data_dir), "GRADIO_SERVER_NAME": "127.0.0.1",
           "GRADIO_SERVER_PORT": str(port), "GRADIO_ANALYTICS_ENABLED": "False", "HF_HUB_OFFLINE": "1"}
    env = {k: v for k, v in env.items() if not k.startswith(("OPENAI_", "AZURE_OPENAI_"))}
    app = subprocess.Popen([sys.executable, "app.py"], cwd=ROOT, env=env, stdout=subprocess.DEVNULL,
                           stderr=subprocess.DEVNULL)
    try:
        url = f"http://127.0.0.1:{port}/"
        wait_http(url + "gradio_api/info", timeout=120)
        yield url
    finally:
        app.terminate()
        app.wait(20)


def browser_figures(data_dir: Path, n_rows: int) -> None:
    from playwright.sync_api import expect, sync_playwright

    from tests.app_fixtures import CHROMIUM, CHROMIUM_ARGS
    from mmvet_app.leaderboard import PAGE_ROWS

    with running_app(data_dir) as url:
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
                header = page.locator("#board-table [role=columnheader]").nth(TABLE_COLUMNS.index("total"))
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


def http_figures(data_dir: Path) -> None:
    from gradio_client import Client

    with running_app(data_dir) as url:
        client = Client(url, verbose=False, download_files=False)

        def page(offset: int = 0, limit: int = 100) -> dict:
            return client.predict(board="refs=0", offset=offset, limit=limit, api_name="/leaderboard")

        t, first = timed(page)
        ranked = sum(1 for e in first["entries"] if e["rank"])
        print(f"HTTP /leaderboard, first call after the app started: {t * 1000:.0f} ms (first page: "
              f"{len(first['entries'])} of {first['count']} rows, {ranked} ranked)")
        for _ in range(600):
            out = page(first["count"] - 1, 1)       # the last row is ranked once its group is
            if all(e["rank"] for e in out["entries"]):
                break
            time.sleep(0.2)
        count = first["count"]
        t, out = timed(lambda: page(0, 1), repeat=10)
        print(f"HTTP /leaderboard, a page of 1 row (the cost of any call through Gradio's queue), median of 10: "
              f"{t * 1000:.0f} ms")
        for limit in (100, 500):
            for where, offset in (("first page", 0), ("a middle page", (count // 2) // limit * limit)):
                t, out = timed(lambda: page(offset, limit), repeat=10)
                print(f"HTTP /leaderboard, ranked board, {where} (offset {offset}, limit {limit}), median of 10: "
                      f"{t * 1000:.0f} ms ({len(out['entries'])} rows)")

            def walk() -> list:
                rows, offset = [], 0
                while offset is not None:
                    out = page(offset, limit)
                    rows += out["entries"]
                    offset = out["next_offset"]
                return rows

            t, rows = timed(walk, repeat=3)
            ids = {e["entry"] for e in rows}
            assert len(rows) == len(ids) == count, "the walk must give every row exactly once"
            print(f"HTTP /leaderboard, the whole board through next_offset, limit {limit}: {t:.2f} s, median of 3 "
                  f"({-(-count // limit)} calls, {len(rows)} rows, each once)")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--entries", type=int, default=1600)
    ap.add_argument("--groups", type=int, default=1, help="rank groups (judges) the entries are split over")
    ap.add_argument("--copies", action="store_true", help="every entry with the same grades (copies of one run)")
    ap.add_argument("--http", action="store_true", help="also time /leaderboard over HTTP (app.py)")
    ap.add_argument("--browser", action="store_true", help="also time the view in headless Chromium (app.py)")
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        svc = GradingService(ServiceSettings(data_dir=Path(tmp), publish_per_hour=10**6, host_secret="bench"))
        t_fill, _ = timed(lambda: fill(svc, args.entries, args.groups, copies=args.copies))
        kind = "copies of one run" if args.copies else "distinct grade sets"
        print(f"{args.entries} entries ({kind}) in {args.groups} rank group(s); filled the store in {t_fill:.1f} s "
              f"(load average {os.getloadavg()[0]:.1f} on {os.cpu_count()} cores: wall times scale with it)")
        svc.jobs.shutdown()
        svc.store.close()
        t_start, svc = timed(lambda: GradingService(ServiceSettings(data_dir=Path(tmp), publish_per_hour=10**6,
                                                                    host_secret="bench")))
        cold, rows = timed(svc.board.board_rows)
        print(f"service start (every entry decoded and checked before the first reader): {t_start:.1f} s; first "
              f"read of the board: {cold * 1000:.1f} ms, {len(rows)} rows ({len(rows) - args.entries} paper "
              f"reference rows), {sum(1 for r in rows if r.rank)} ranked at once")
        ready, slowest, reads = wait_ranked(svc)
        print(f"every group ranked {ready:.2f} s later ({svc.board.book.background_builds} background build(s)); "
              f"slowest of {reads} reads meanwhile: {slowest * 1000:.1f} ms")
        warm, _ = timed(lambda: [r.cells() for r in svc.board.leaderboard()], repeat=5)
        print(f"open the board again (filter + sort by rank + table cells): {warm * 1000:.1f} ms")
        for sort, desc in (("total", True), ("name", False), ("math", True), ("date", False)):
            t, out = timed(lambda: [r.cells() for r in svc.board.leaderboard({"sort": sort, "descending": desc})],
                           repeat=5)
            print(f"sort by {sort}{' (descending)' if desc else ''}: {t * 1000:.1f} ms ({len(out)} rows)")
        t, out = timed(lambda: svc.board.leaderboard("judge=official&q=model-0-00"), repeat=5)
        print(f"filter judge=official, name contains 'model-0-00': {t * 1000:.1f} ms ({len(out)} rows)")
        t, text = timed(lambda: rows_csv(svc.board.leaderboard()), repeat=3)
        print(f"CSV download: {t * 1000:.1f} ms ({len(text) / 1e3:.0f} kB)")
        t, data = timed(lambda: svc.board.leaderboard_json(), repeat=3)
        print(f"JSON table, every row: {t * 1000:.1f} ms ({len(data['entries'])} rows)")
        for offset in (0, data["count"] // 2):
            t, out = timed(lambda: svc.board.leaderboard_json(offset=offset, limit=100), repeat=5)
            print(f"JSON (API) page of 100 rows at offset {offset}: {t * 1000:.1f} ms ({len(out['entries'])} rows)")

        run = svc.runs.open_grade_file(str(GRADES), BenchmarkChoice(), "late")
        t_pub, row = timed(lambda: svc.board.publish(run, "one more", "", "late", visitor="late"))
        t_ver, _ = timed(lambda: svc.board.verify_entry(row["entry"], "bench", visitor="host"))
        t_after, rows = timed(svc.board.board_rows)
        one = next(r for r in rows if r.entry == row["entry"])
        print(f"publish one more entry: {t_pub * 1000:.0f} ms (imported: listed, not ranked); the host verifies "
              f"it: {t_ver * 1000:.0f} ms (its group changes by one entry); next read: {t_after * 1000:.1f} ms, "
              f"its rank {format_rank(one.rank)} of {one.group_size}")
        t_un, _ = timed(lambda: svc.board.unpublish(row["entry"], "late", visitor="late"))
        t_after, _ = timed(svc.board.board_rows)
        print(f"unpublish it: {t_un * 1000:.0f} ms; next read: {t_after * 1000:.1f} ms; background builds so far: "
              f"{svc.board.book.background_builds}")

        t_fill, _ = timed(lambda: fill(svc, 200, 1, seed=1, prefix="restored"))
        t_read, rows = timed(svc.board.board_rows)
        ready, slowest, reads = wait_ranked(svc)
        print(f"200 more distinct entries land at once ({t_fill:.1f} s to write): the next read {t_read * 1000:.0f} "
              f"ms ({sum(1 for r in rows if r.rank_note.startswith('ranking'))} rows 'ranking…'); all ranked "
              f"{ready:.2f} s later; slowest of {reads} reads meanwhile {slowest * 1000:.1f} ms")
        n_rows = len(svc.board.board_rows())
        svc.jobs.shutdown()
        svc.store.close()
        if args.http:
            http_figures(Path(tmp))
        if args.browser:
            browser_figures(Path(tmp), n_rows)


if __name__ == "__main__":
    main()
