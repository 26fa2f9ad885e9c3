"""The app's Compare view in a real headless Chromium: two of the visitor's runs (the official 13b and 7b grade
files, viewed in the app) compared, with the issue's figures on screen, the charts drawn and the exports written."""
from __future__ import annotations

import csv
import json
import re
from pathlib import Path

from playwright.sync_api import expect

from tests.app_fixtures import (  # noqa: F401  (fixtures)
    OFFICIAL_GRADES, app_server, browser, fake_server, new_page, open_grade_file, page, wait_loaded,
)

B13 = OFFICIAL_GRADES / "llava-v1.5-13b_gpt-4-grade-3runs.json"
B7 = OFFICIAL_GRADES / "llava-v1.5-7b_gpt-4-grade-3runs.json"



def view_grade_file(page, path: Path, total: str) -> str:
    run_id = open_grade_file(page, path)
    expect(page.locator("#total-score textarea")).to_have_value(re.compile(rf"^Total: {total}"))
    return run_id


def toast_texts(page) -> list[str]:
    return page.locator('[data-testid="toast-text"]').all_inner_texts()



def test_compare_two_runs_in_the_browser(page, app_server, fake_server):
    n_calls = len(fake_server.state.calls)
    run_7b = view_grade_file(page, B7, "31.1")
    run_13b = view_grade_file(page, B13, "36.3")
    page.locator("#compare-section").get_by_text("Compare runs and grade files").click()
    page.locator("#compare-refresh").click()
    for run_id in (run_7b, run_13b):                    # the reference first
        pick(page, run_id)
    page.locator("#compare-button").click()
    report = page.locator("#compare-report textarea")
    expect(report).to_have_value(re.compile(r"^Compared 218 samples"))
    text = report.input_value()
    assert "Δ̄ 0.116 · B − A +5.2 [+1.7, +9.0]" in text
    assert "beyond sampling noise" in text
    expect(page.locator("#compare-scatter .js-plotly-plot")).to_be_visible()
    expect(page.locator("#compare-radar .js-plotly-plot")).to_be_visible()
    expect(page.locator("#compare-summary [role=grid]")).to_have_attribute("aria-rowcount", "3")
    expect(page.locator("#compare-columns [role=grid]")).to_have_attribute("aria-rowcount", str(1 + 1 + 6 + 16))
    expect(page.locator("#compare-downloads")).to_contain_text("comparison.json")
    # the exports the page offers
    exports = sorted((app_server.settings.data_dir / "exports").glob("compare-*/comparison.json"))
    data = json.loads(exports[-1].read_text())
    assert data["n_common"] == 218 and round(data["pairs"][0]["delta_bar"], 3) == 0.116
    rows = list(csv.reader((exports[-1].parent / "comparison.csv").open()))
    assert rows[0][0] == "set" and len(rows) == 1 + 2 * 23
    assert len(fake_server.state.calls) == n_calls       # comparing never calls the judge


def pick(page, run_id: str) -> None:
    page.locator("#compare-runs").locator("input").click()
    page.get_by_role("option", name=re.compile(run_id[:6])).click()


def test_one_set_is_a_warning_that_leaves_the_page_as_it_was(page, app_server):
    page.reload()
    wait_loaded(page)
    page.locator("#compare-section").get_by_text("Compare runs and grade files").click()
    page.locator("#compare-refresh").click()
    run_id = app_server.store.list_runs(_owner_of(app_server))[0].id
    pick(page, run_id)
    page.locator("#compare-button").click()
    expect(page.locator('[data-testid="toast-text"]').first).to_contain_text("at least two")
    assert page.locator("#compare-report textarea").input_value() == ""
    expect(page.locator("#compare-scatter .js-plotly-plot")).to_have_count(0)


def _owner_of(app_server) -> str:
    """The only owner with runs in this module's app (the page's visitor)."""
    rows = app_server.store._query("SELECT DISTINCT owner FROM runs WHERE owner != ''")
    assert len(rows) == 1
    return rows[0].owner
