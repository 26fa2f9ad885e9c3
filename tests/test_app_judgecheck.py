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
    expect(report).to_have_value(re.compile(r"^checking: \d+ / 436 reference grades"))
    expect(report).to_have_value(re.compile(r"^Judge check of gpt-4-0613 at 127\.0\.0\.1 \(official prompt\) on "
                                            r"llava-v1\.5-13b, llava-v1\.5-7b: 436 of 436 reference grades"))
    text = report.input_value()
    assert "Δ̄ GPT-4 self" in text and re.search(r"(Close to|Drifts from) the official judge", text)
    assert "/v1" not in text                      # the server's endpoint is named by its host only
    made = len(fake_server.state.calls) - n0
    assert made >= 436
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


# --- issue 17: the judge picker and the retired-judge message ---------------------------------------------------
HOSTILE_NAME = '<img src=x onerror="window.__pwned=1">judge-z'


def test_the_judge_picker_and_the_retired_judge_message_in_place(page, app_server):
    """An endpoint after OpenAI's shutdown of gpt-4-0613: the judge field lists what it serves with the dates, Grade
    with the official judge says so in place (no call, no run, no error badge), a picked judge grades and is
    flagged on the run card. A model name from the endpoint is shown as text, never as markup."""
    from tests.test_app_ux import error_badges

    with FakeJudgeServer(FakeState.after_gpt4()) as judge:
        judge.state.model_list.append({"id": HOSTILE_NAME})
        page.locator("#judge-choice").get_by_text("My own key / endpoint", exact=True).click()
        page.locator("#base-url textarea, #base-url input").first.fill(judge.url)
        page.locator("#api-key input").fill("sk-visitor")
        page.locator("#api-key input").blur()
        facts = page.locator("#judge-facts")
        expect(facts).to_contain_text("was shut down by OpenAI on 2026-10-23")   # the default judge, before Grade
        page.locator("#judge-picker input").click()
        options = page.get_by_role("option")
        expect(options.filter(has_text="judge-b · shutdown 2026-12-11")).to_have_count(1)
        expect(options.filter(has_text="judge-c")).to_have_count(1)
        expect(options.filter(has_text=HOSTILE_NAME)).to_have_count(1)          # as text
        assert not options.filter(has_text="text-embedding").count()
        page.keyboard.press("Escape")

        page.locator("#example-button").click()
        expect(page.locator("#validation-report textarea")).to_have_value(re.compile("218 of 218"))
        page.locator("#grade-button").click()
        unavailable = page.locator("#judge-unavailable")
        expect(unavailable).to_contain_text("The official MM-Vet judge gpt-4-0613 was shut down by OpenAI on "
                                            "2026-10-23")
        expect(unavailable).to_contain_text("the official MM-Vet metric can no longer be recomputed")
        expect(unavailable).to_contain_text("judge-b (shutdown 2026-12-11), judge-c")
        expect(unavailable).to_contain_text(HOSTILE_NAME)
        expect(page.locator('[data-testid="toast-text"]').filter(has_text="Nothing was graded")).to_have_count(1)
        assert error_badges(page) == 0
        assert page.evaluate("window.__pwned") is None and "run=" not in page.url
        assert judge.state.chat_calls() == []                     # nothing called, nothing substituted

        page.locator("#judge-picker input").click()
        page.get_by_role("option").filter(has_text="judge-b").click()
        expect(page.locator("#judge-model input, #judge-model textarea").first).to_have_value("judge-b")
        expect(facts).to_contain_text("grades by judge-b cannot be re-run after 2026-12-11")
        page.locator("#grade-button").click()
        expect(page).to_have_url(re.compile(r"\?run="))
        expect(unavailable).to_be_hidden()
        expect(page.locator("#progress-text")).to_have_text(re.compile(r"^done: 218 / 218"))
        expect(page.locator("#run-card")).to_contain_text("grades by judge-b cannot be re-run after 2026-12-11")
        assert {c["model"] for c in judge.state.chat_calls()} == {"judge-b"}
        app_server.wait_idle()
