"""Issue 12 in the app, in a real headless Chromium: a run waiting out the judge account's rate limit says so
(with the reset time) and still ends with every grade; "Judge calls: Batch API" grades through the judge's Batch
endpoint (the test server's) and the run card says so."""
from __future__ import annotations

import re

import pytest
from playwright.sync_api import expect

from tests.app_fixtures import HOST_KEY, RESULTS_DIR, browser, new_page, start_app, stop_app  # noqa: F401
from tests.fake_judge import FakeJudgeServer, FakeState

LLAVA_13B = RESULTS_DIR / "llava-v1.5-13b.json"


@pytest.fixture
def app_with(tmp_path):
    apps = []

    def _start(judge: FakeJudgeServer, **kwargs):
        app = start_app(tmp_path / f"data{len(apps)}", host_key=HOST_KEY, host_base_url=judge.url, **kwargs)
        apps.append(app)
        return app

    yield _start
    for app in apps:
        stop_app(app)


def grade_example(page) -> None:
    page.locator("#example-button").click()
    expect(page.locator("#validation-report textarea")).to_have_value(re.compile("218 of 218"))
    page.locator("#grade-button").click()


def test_progress_says_it_waits_for_the_rate_limit_and_the_run_still_finishes(app_with, browser):
    # the account is rate-limited (429, retry-after 2 s: the whole account pauses, again after each retry) until the
    # page has said until when, however long the page takes; then the limit lifts and the run ends with every grade
    with FakeJudgeServer(FakeState(fail_429=10**9, retry_after=2.0, latency=0.01)) as judge:
        app = app_with(judge, run_concurrency=8)
        page = new_page(browser, app.url)
        try:
            grade_example(page)
            expect(page.locator("#progress-text")).to_have_text(
                re.compile(r"running: \d+ / 218 .*waiting for the rate limit: the judge account's limit resets at "
                           r"\d\d:\d\d:\d\d UTC"), timeout=120_000)
            with judge.state.lock:
                judge.state.fail_429 = 0
            expect(page.locator("#progress-text")).to_have_text(re.compile(r"^done: 218 / 218 grades"),
                                                                timeout=180_000)
            run_id = page.url.rsplit("run=", 1)[1]
            view = app.view(run_id)
            assert view.n_graded == 218 and not view.flag_counts().get("error")
            assert any(c.get("status") == 429 for c in judge.state.calls)       # none of them cost a grade
        finally:
            page.context.close()


def test_batch_api_choice_grades_through_the_batch_endpoint(app_with, browser):
    with FakeJudgeServer() as judge:
        app = app_with(judge, batch_poll=0.2)
        page = new_page(browser, app.url)
        try:
            page.locator("#mode input").click()
            page.get_by_role("option", name=re.compile("Batch API")).click()
            page.locator("#example-button").click()
            expect(page.locator("#estimate textarea")).to_have_value(re.compile(r"with the Batch API.*Batch API chosen"))
            page.locator("#grade-button").click()
            expect(page.locator("#progress-text")).to_have_text(re.compile(r"^done: 218 / 218"), timeout=180_000)
            expect(page.locator("#run-card")).to_contain_text("Batch API")
            run_id = page.url.rsplit("run=", 1)[1]
            assert app.view(run_id).n_graded == 218
            assert len(judge.state.batch_requests) >= 218            # every first call went through a batch
            assert not [c for c in judge.state.calls if c.get("route") == "openai" and c.get("status") == 200]
        finally:
            page.context.close()
