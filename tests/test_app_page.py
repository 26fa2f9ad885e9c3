"""The page in the shape of a Space (issue 29 parts 2-5): tabs, each with its main numbers in the first viewport at
1440×900 and usable at 390×844; the judge check as a report; a leaderboard that leads with its numbers, its rank
groups marked; the official judge's shutdown said on arrival; and one estimate, rounded once, on every surface.

One app for the module: the host's judge is judge-b (the fake judge answering each reference sample's official
grade + 0.1), the host also offers judge-c (``MMVET_SERVER_JUDGES``); judge-b is checked and a run of llava-v1.5-7b
graded by it is published, through the service (what the browser does is tested elsewhere). The browser tests open
one page per viewport and check several things in it (they are expensive).
"""
from __future__ import annotations

import asyncio
import csv
import io
import json
import re
import subprocess
import sys
import urllib.request
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from mmvet_core.board.rows import ESTIMATE_COLUMN, TABLE_COLUMNS
from mmvet_core.board.filters import rows_csv
from mmvet_core.service import JUDGE_HOST, JudgeChoice
from tests.app_fixtures import HOST_KEY, RESULTS_DIR, browser, new_page, start_app, stop_app  # noqa: F401
from tests.conftest import cli_env
from tests.fake_judge import FakeJudgeServer, FakeState, official_grades_answer
from tests.service_helpers import ALL, wait_check, wait_done

ROOT = Path(__file__).resolve().parents[1]
NUMBERS = re.compile(r"(\d+\.\d) \[(\d+\.\d), (\d+\.\d)\]")


@pytest.fixture(scope="module")
def judge():
    with FakeJudgeServer(FakeState(answer_fn=official_grades_answer(0.1))) as server:
        yield server


@pytest.fixture(scope="module")
def app(judge, tmp_path_factory):
    mp = pytest.MonkeyPatch()
    tmp = tmp_path_factory.mktemp("page")
    mp.setenv("GRADIO_TEMP_DIR", str(tmp / "gradio-tmp"))
    handle = start_app(tmp / "data", host_key=HOST_KEY, host_base_url=judge.url, judge_model="judge-b",
                       server_judges=("judge-c",), run_concurrency=8)
    try:
        yield handle
    finally:
        handle.wait_idle()
        stop_app(handle)
        mp.undo()


@pytest.fixture(scope="module")
def published(app):
    """(run id, check id): judge-b checked, a run of llava-v1.5-7b graded by it and published."""
    svc = app.svc
    svc.judges.check_judge(JudgeChoice(JUDGE_HOST), "host", "v")
    wait_check(svc, JudgeChoice(JUDGE_HOST), owner="host")
    run_id, _ = svc.runs.start(str(RESULTS_DIR / "llava-v1.5-7b.json"), ALL, 1, JudgeChoice(JUDGE_HOST),
                               owner="alice", visitor="v")
    wait_done(svc, run_id)
    svc.board.publish(run_id, "llava 7b by judge-b", "", "alice", visitor="v")
    [row] = svc.judges.judge_board()
    return run_id, row.check_id


def inside(box, width: int, height: int | None = None) -> bool:
    """The element's box lies within the viewport's width (and its first `height` pixels)."""
    return box is not None and box["x"] >= 0 and box["x"] + box["width"] <= width + 0.5 and (
        height is None or (box["y"] >= 0 and box["y"] + box["height"] <= height + 0.5))


def test_at_1440_the_board_leads_with_its_numbers_and_the_check_is_a_report(app, published, browser):
    run_id, check_id = published
    card = app.svc.reading.card(app.svc.reading.view(run_id))["official_equivalent"]
    est = NUMBERS.search(card).group(0)                                   # "31.0 [29.7, 32.3]"
    page = new_page(browser, app.url + "?board=all", viewport=(1440, 900))
    try:
        # on arrival: the shutdown in one line, with the way forward; no "exactly as the official evaluator"
        arrival = page.locator("#arrival")
        assert "gpt-4-0613 was shut down on 2026-10-23" in arrival.inner_text()
        assert inside(arrival.bounding_box(), 1440, 900) and "exactly as" not in page.locator("#header").inner_text()
        # ?board= opens the Leaderboard tab: the first entry's total, interval and estimate in the first viewport
        assert page.get_by_role("tab", name="Leaderboard").get_attribute("aria-selected") == "true"
        table = page.locator("#board-table")
        row = table.get_by_role("row").filter(has_text="llava 7b by judge-b")
        row.first.wait_for()
        for text in ("38.7", "[33.6, 43.8]", f"{est} · in-sample", "judge-b"):
            cell = row.first.get_by_role("gridcell").filter(has_text=text).first
            assert inside(cell.bounding_box(), 1440, 900), text
        # the rank group is marked: a tinted heading row naming judge, endpoint and benchmark, above its entries
        # (the endpoint by its kind and a digest, never its address: issue 33)
        heading = table.get_by_role("row").filter(has_text=re.compile(
            r"▸ judge-b · this server's judge #[0-9a-f]{4} · MM-Vet v1")).first
        assert f"127.0.0.1:{judge_port(app)}" not in table.inner_text()
        assert inside(heading.bounding_box(), 1440, 900)
        assert heading.bounding_box()["y"] < row.first.bounding_box()["y"]
        tint = heading.get_by_role("gridcell").nth(1).evaluate("e => getComputedStyle(e).backgroundColor")
        plain = row.first.get_by_role("gridcell").nth(1).evaluate("e => getComputedStyle(e).backgroundColor")
        assert tint != plain
        papers = table.get_by_role("row").filter(has_text="▸ gpt-4-0613 (paper) · MM-Vet v1").first
        assert papers.count() == 1
        # the rest behind a column choice
        assert table.get_by_role("columnheader").filter(has_text="provenance").count() == 0
        page.locator("#board-columns-section").get_by_text("More columns").click()
        page.locator("#board-columns").get_by_label("provenance").check()
        page.wait_for_function("() => [...document.querySelectorAll('#board-table [role=columnheader]')]"
                               ".some(h => h.textContent.includes('provenance'))")

        # ?check= opens the Judges tab with that check's report: verdict and both tables in the first viewport
        page.goto(app.url + f"?check={check_id}")
        page.locator("#judge-check-verdict").wait_for()
        assert page.get_by_role("tab", name="Judges").get_attribute("aria-selected") == "true"
        verdict = page.locator("#judge-check-verdict")
        assert verdict.inner_text().startswith("Drifts from the official judge")
        for elem in ("#judge-check-verdict", "#judge-check-columns", "#judge-check-references"):
            assert inside(page.locator(elem).bounding_box(), 1440, 900), elem
        refs = page.locator("#judge-check-references")
        assert refs.get_by_role("row").count() == 1 + 6          # a header and the six references
        # each column fits its table: no cell's text overflows its cell
        assert page.evaluate("() => [...document.querySelectorAll('#judge-check-report td')]"
                             ".every(td => td.scrollWidth <= td.clientWidth + 1)")
        for plot in ("#judge-check-lomo", "#judge-check-shifts"):
            page.locator(f"{plot} .js-plotly-plot").wait_for()
        # the host's choice of judges, each with its check status
        page.get_by_role("tab", name="Grade").click()
        assert "judge-b · checked: drifts" in page.locator("#server-judge").inner_text() or \
            "judge-b · checked: drifts" in page.locator("#server-judge input").input_value()
    finally:
        page.context.close()


def test_at_390_grade_and_the_score_need_no_sideways_scrolling(app, published, browser):
    run_id, _ = published
    page = new_page(browser, app.url, viewport=(390, 844))
    try:
        no_sideways = "() => document.documentElement.scrollWidth <= window.innerWidth"
        assert page.evaluate(no_sideways)
        grade = page.locator("#grade-button")
        grade.scroll_into_view_if_needed()
        assert inside(grade.bounding_box(), 390)
        # switching the judge away from the server's and back shows the host's judges again (a NameError once)
        choice = page.locator("#judge-choice")
        choice.get_by_label("My own key / endpoint").check()
        page.locator("#api-key").wait_for(state="visible")
        page.locator("#server-judge").wait_for(state="hidden")
        choice.get_by_label("Server's judge").check()
        page.locator("#server-judge").wait_for(state="visible")
        page.locator("#api-key").wait_for(state="hidden")
        page.goto(app.url + f"?run={run_id}")
        total = page.locator("#total-score textarea, #total-score input").first
        page.wait_for_function("() => { const t = document.querySelector('#total-score textarea, #total-score "
                               "input'); return t && t.value.startsWith('Total: 38.7'); }")
        total.scroll_into_view_if_needed()
        assert inside(page.locator("#total-score").bounding_box(), 390) and page.evaluate(no_sideways)
        for tab in ("Leaderboard", "Judges", "About"):             # every tab reachable, none scrolls sideways
            page.get_by_role("tab", name=tab).click()
            assert page.evaluate(no_sideways), tab
    finally:
        page.context.close()


def test_the_estimate_is_the_same_digits_on_every_surface(app, published):
    """Issue 29 part 4: card 7.4 [5.0, 9.7] vs board 7.4 [4.9, 9.8] — the board computed its estimate with 300
    bootstrap draws, the card with 1000. Now one computation: the card, the board, the CSV download, the
    /leaderboard API, MCP read_leaderboard and `leaderboard show --json` give the same estimate and bounds."""
    run_id, _ = published
    svc = app.svc
    card = svc.reading.card(svc.reading.view(run_id))
    card_numbers = tuple(NUMBERS.search(card["official_equivalent"]).groups())
    surfaces = {}
    [row] = [r for r in svc.board.leaderboard() if r.entry]
    surfaces["board"] = tuple(NUMBERS.search(row.cells()[TABLE_COLUMNS.index(ESTIMATE_COLUMN)]).groups())
    parsed = list(csv.DictReader(io.StringIO(rows_csv(svc.board.leaderboard()))))
    surfaces["csv"] = tuple(NUMBERS.search(parsed[0][ESTIMATE_COLUMN]).groups())

    def triple(entry: dict) -> tuple:
        return tuple(f"{v:.1f}" for v in entry["official_equivalent"])

    from tests.api_client import ApiClient
    api = ApiClient(app.url, verbose=False).predict(references=False, api_name="/leaderboard")
    surfaces["/leaderboard"] = triple(api["entries"][0])
    with ThreadPoolExecutor(1) as pool:      # (the module's sync Playwright holds this thread's event loop)
        surfaces["MCP"] = triple(pool.submit(asyncio.run, read_leaderboard(app)).result()["entries"][0])
    db = app.settings.data_dir / "mmvet-grader.db"
    shown = subprocess.run([sys.executable, "-m", "mmvet_core", "leaderboard", "show", "--json", "--db", str(db)],
                           capture_output=True, text=True, env=cli_env(), cwd=ROOT, timeout=300)
    assert shown.returncode == 0, shown.stderr
    cli_entry = json.loads(shown.stdout)["entries"][0]
    surfaces["show --json"] = triple(cli_entry)
    assert cli_entry["official_equivalent_label"] == "in-sample"
    table = subprocess.run([sys.executable, "-m", "mmvet_core", "leaderboard", "show", "--db", str(db)],
                           capture_output=True, text=True, env=cli_env(), cwd=ROOT, timeout=300).stdout
    surfaces["show"] = tuple(NUMBERS.search(table.split("llava 7b")[0].splitlines()[-1][30:]).groups())
    assert surfaces == {k: card_numbers for k in surfaces}, (card_numbers, surfaces)


async def read_leaderboard(app) -> dict:
    from mcp import ClientSession
    from mcp.client.sse import sse_client

    async with sse_client(app.url + "gradio_api/mcp/sse") as (read, write):
        async with ClientSession(read, write) as session:
            await session.initialize()
            res = await session.call_tool("read_leaderboard", {"references": False})
            return json.loads("".join(c.text for c in res.content if c.type == "text"))


def judge_port(app) -> int:
    return int(app.settings.host_base_url.rsplit(":", 1)[1].split("/")[0])


def test_a_server_judge_the_host_does_not_offer_is_refused(app):
    """MMVET_SERVER_JUDGES is an allow-list: judge-c is offered, gpt-4o is not (and never reaches the judge)."""
    svc = app.svc
    assert svc.inputs.judge_for(JudgeChoice(JUDGE_HOST, host_model="judge-c"))[0].model == "judge-c"
    from mmvet_core.service import ServiceError
    with pytest.raises(ServiceError, match="not gpt-4o"):
        svc.inputs.judge_for(JudgeChoice(JUDGE_HOST, host_model="gpt-4o"))
    labels = dict((name, label) for label, name in svc.judges.server_judge_choices())
    assert list(labels) == ["judge-b", "judge-c"] and labels["judge-c"] == "judge-c · not checked yet"


def test_no_event_tracks_the_status_of_a_layout_container_and_the_run_redraws_track_none(app):
    """The page's configuration as served: Gradio 6.31's page updates, on every status change of any event, the
    loading status of every progress target of every event that ran, snapshotting a container's whole subtree
    (`mmvet_app.common.quiet_statuses`). So no event has the tab set, a column or a row among its progress targets
    (the tab set is an output of the load events, the run panel of the run's redraws), and the redraws of a
    grading run and its stream, which show no progress, track none. Their outputs stay what they were."""
    with urllib.request.urlopen(app.url + "config", timeout=30) as r:
        cfg = json.load(r)
    comps = {c["id"]: c for c in cfg["components"]}
    elem = {c.get("props", {}).get("elem_id"): c["id"] for c in cfg["components"]}
    layout = {"tabs", "tabitem", "column", "row", "group", "accordion", "form"}
    targets = {d["id"]: d["outputs"] if d.get("show_progress_on") is None else d["show_progress_on"]
               for d in cfg["dependencies"]}
    held = {i: [comps[c]["type"] for c in t if comps[c]["type"] in layout] for i, t in targets.items()}
    assert not any(held.values()), {i: h for i, h in held.items() if h}
    redraws = [d for d in cfg["dependencies"] if elem["run-panel"] in d["outputs"] or elem["tabs"] in d["outputs"]
               or d["outputs"] == [elem["run-version"]]]
    assert len(redraws) >= 6, len(redraws)      # open, tick, closed, follow, the two loads
    assert all(targets[d["id"]] == [] or d["show_progress"] != "hidden" for d in redraws)
    whole_run = [d for d in redraws if len(d["outputs"]) > 40]        # the opening and the redraw of a change
    assert len(whole_run) == 2 and all(targets[d["id"]] == [] for d in whole_run)
