"""The judge check in the app (Chromium): before grading, a visitor checks the chosen judge against the bundled
reference answers with official GPT-4-0613 grades; a second check costs nothing; a judge that refuses the key
says why. The server's judge and the visitor's judge are both our fake OpenAI-compatible judge over HTTP."""
from __future__ import annotations

import re

from playwright.sync_api import expect

from tests.app_fixtures import app_server, browser, fake_server, new_page, page  # noqa: F401
from tests.fake_judge import FakeJudgeServer, FakeState

expect.set_options(timeout=60_000)


def open_check(page) -> None:
    if not page.locator("#judge-check-button").is_visible():
        page.locator("#judge-check-section").get_by_text("Check this judge first").first.click()


def test_check_the_servers_judge_then_again_for_free(page, fake_server):
    open_check(page)
    n0 = len(fake_server.state.calls)
    page.locator("#judge-check-button").click()
    report = page.locator("#judge-check-report textarea")
    expect(report).to_have_value(re.compile(r"^checking: \d+ / 654 reference grades"))
    expect(report).to_have_value(re.compile(r"^Judge check of gpt-4-0613 at 127\.0\.0\.1 \(official prompt\) on "
                                            r"llava-v1\.5-13b, llava-v1\.5-7b, internlm-xcomposer2-vl-7b: 654 of 654 reference grades"))
    text = report.input_value()
    assert "Δ̄ GPT-4 self" in text and re.search(r"(Close to|Drifts from) the official judge", text)
    assert "/v1" not in text                      # the server's endpoint is named by its host only
    made = len(fake_server.state.calls) - n0
    assert made >= 627                           # 654 grades, 627 distinct prompts
    page.locator("#judge-check-button").click()   # the same judge again: every answer is stored
    expect(page.locator('[data-testid="toast-text"]').filter(has_text="Checking gpt-4-0613")).to_have_count(2)
    expect(report).to_have_value(re.compile(r"^Judge check of gpt-4-0613"))
    assert len(fake_server.state.calls) - n0 == made


def test_a_rejected_key_says_why_the_check_stopped(page):
    with FakeJudgeServer(FakeState(api_key="sk-right")) as other:
        page.locator("#judge-choice").get_by_text("My own key / endpoint", exact=True).click()
        page.locator("#base-url textarea, #base-url input").first.fill(other.url)
        page.locator("#api-key input").fill("sk-wrong")
        open_check(page)
        page.locator("#judge-check-button").click()
        report = page.locator("#judge-check-report textarea")
        expect(report).to_have_value(re.compile(r"The check stopped: .*the API key was rejected"))
        assert 0 < len(other.state.calls) <= 32
