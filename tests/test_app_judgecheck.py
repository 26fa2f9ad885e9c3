"""The judge check in the app (Chromium): before grading, a visitor checks the chosen judge against the bundled
reference answers with official GPT-4-0613 grades; a second check costs nothing; a judge that refuses the key
says why; a checked judge's run carries its official-equivalent estimate on the run card, the radar's hover and
the share view; the successor board lists the checked judges with a link to each report. The server's judge and
the visitor's judges are our fake OpenAI-compatible judge over HTTP."""
from __future__ import annotations

import re

from playwright.sync_api import expect

from tests.app_fixtures import (app_server, browser, fake_server, new_page, page,  # noqa: F401
                                text_of, upload_results, wait_progress)
from tests.fake_judge import FakeJudgeServer, FakeState, official_grades_answer
from tests.held_calls import HeldCalls, called_from, not_called_from

LLAVA_7B = __import__("pathlib").Path(__file__).resolve().parent / "data" / "results" / "llava-v1.5-7b.json"


def open_check(page) -> None:
    """The Judges tab (it checks the judge chosen on the Grade tab)."""
    page.get_by_role("tab", name="Judges").click()
    expect(page.locator("#judge-check-button")).to_be_visible()


def open_grade(page) -> None:
    page.get_by_role("tab", name="Grade").click()
    expect(page.locator("#judge-choice")).to_be_visible()


def expect_report(page, text, judge, **options) -> None:
    """The check's report comes to contain `text`; if it does not, the failure says what the page said (its toasts),
    what its judge fields held and how many calls `judge` received (a check that never started, seen under load)."""
    try:
        expect(page.locator("#judge-check-report")).to_contain_text(text, **options)
    except AssertionError as e:
        toasts = page.locator('[data-testid="toast-text"]').all_inner_texts()
        fields = [page.locator(f"#{f} textarea, #{f} input").first.input_value()
                  for f in ("base-url", "judge-model", "api-key")]
        raise AssertionError(f"{e}\ntoasts: {toasts}; fields: {fields}; judge calls: {len(judge.state.calls)}") \
            from None


def test_check_the_servers_judge_then_again_for_free(page, fake_server):
    open_check(page)
    n0 = len(fake_server.state.calls)
    # parsable answers: the default check's 1243 distinct prompts fit one visitor's daily budget of host calls
    # (the default fake judge's garbage answers would take the official re-asks beyond it)
    fake_server.state.answer_fn = official_grades_answer()
    try:
        page.locator("#judge-check-button").click()
        report = page.locator("#judge-check-report")
        expect(report).to_contain_text(re.compile(r"checking: \d+ / 1308 reference grades"))
        # the report: the verdict first, then the numbers as tables
        expect(page.locator("#judge-check-verdict")).to_have_text(
            re.compile(r"^\s*(Close to|Drifts from) the official judge"), timeout=180_000)
    finally:
        fake_server.state.answer_fn = None
    text = report.inner_text()
    assert re.search(r"Judge check of gpt-4-0613 at this server's endpoint \(official prompt\): 1308 of 1308 reference "
                     r"grades, 6 reference models \(llava-v1\.5-13b, llava-v1\.5-7b, ", text), text
    expect(page.locator("#judge-check-columns")).to_contain_text("Δ̄ GPT-4 self")
    expect(page.locator("#judge-check-references [role=row], #judge-check-references tr")).to_have_count(7)
    assert "/v1" not in text and "127.0.0.1" not in text     # the server's endpoint is never named by its address
    assert re.search(r"Check [\w-]+ of \d{4}-\d\d-\d\d", text) and "Leave-one-model-out" in text
    made = len(fake_server.state.calls) - n0
    assert made >= 1243                          # 1308 grades, 1243 distinct prompts
    started = page.locator('[data-testid="toast-text"]').filter(has_text="Checking gpt-4-0613")
    expect(started).to_have_count(0)              # the first check's toast has gone (a 1308-call check outlasts it)
    page.locator("#judge-check-button").click()   # the same judge again: every answer is stored
    expect(started).to_have_count(1)
    expect(report).to_contain_text("Judge check of gpt-4-0613")
    assert len(fake_server.state.calls) - n0 == made
    open_grade(page)


def test_a_rejected_key_says_why_the_check_stopped(page):
    with FakeJudgeServer(FakeState(api_key="sk-right")) as other:
        open_grade(page)
        page.locator("#judge-choice").get_by_text("My own key / endpoint", exact=True).click()
        page.locator("#base-url textarea, #base-url input").first.fill(other.url)
        page.locator("#api-key input").fill("sk-wrong")
        open_check(page)
        page.locator("#judge-check-button").click()
        expect_report(page, re.compile(r"The check stopped: .*the API key was rejected"), other)
        assert 0 < len(other.state.calls) <= 32
        open_grade(page)


def test_a_poll_answered_after_a_click_on_check_never_hides_the_check(page, app_server):
    """The report's poll, made just before a click on Check and answered after the click's own answer (a busy
    server: seen in CI), neither puts "no check stored" over the check just started nor stops following it."""
    judges = app_server.svc.judges
    is_poll = called_from("check_text")                       # the report's poll (a tick) reads the board...
    not_event = not_called_from("fields_text", "check_judge", "on_load", "import_check")   # ...not an event's
    with FakeJudgeServer(FakeState(api_key="sk-right")) as other:
        with HeldCalls(judges, "judge_board", when=lambda: is_poll() and not_event()) as held:
            open_grade(page)
            page.locator("#judge-choice").get_by_text("My own key / endpoint", exact=True).click()
            page.locator("#base-url textarea, #base-url input").first.fill(other.url)
            page.locator("#api-key input").fill("sk-late")
            open_check(page)               # a field's event starts the poll; its first read is held on the server
            held.wait_entered(1)
            page.locator("#judge-check-button").click()
            expect(page.locator("#judge-check-report")).to_contain_text(
                re.compile(r"checking: \d+ / 1308|The check stopped"))      # the click's answer came first
        expect_report(page, re.compile(r"The check stopped: .*the API key was rejected"), other)   # then the poll's
        open_grade(page)


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
def test_a_checked_judge_gives_an_estimate_on_the_card_the_radar_and_the_share_view_and_a_board_row(
        page, app_server, browser):
    """Issue 17 parts 4-5 in the browser, under issue 33's rules: a visitor's own judge-b answers each reference
    sample's official grade + 0.1. The visitor's check is theirs alone (its report says so; their board lists it
    unranked as their own, unverified endpoint). Once the host has checked that endpoint too (the host vouches for
    it), a run of llava-v1.5-7b graded by it (every answer already stored by the visitor's check) shows the
    labelled estimate on the run card (its interval holds the official 31.1), in the radar's hover and on the
    read-only share page; another reader opens the host's check by its link, never the visitor's."""
    from mmvet_core.successors.judgecheck import HOST, check_prompt_id

    with FakeJudgeServer(FakeState(answer_fn=official_grades_answer(0.1), model_reported="judge-b")) as own:
        open_grade(page)
        page.locator("#judge-choice").get_by_text("My own key / endpoint", exact=True).click()
        page.locator("#base-url textarea, #base-url input").first.fill(own.url)
        page.locator("#judge-model textarea, #judge-model input").first.fill("judge-b")
        page.locator("#api-key input").fill("sk-own")
        open_check(page)
        expect(page.locator("#judge-check-cost")).to_contain_text("1308 judge calls at most")
        page.locator("#judge-check-button").click()
        report = page.locator("#judge-check-report")
        expect_report(page, re.compile(r"Judge check of judge-b .*1308 of 1308 reference grades"), own,
                      timeout=180_000)
        total = page.locator("#judge-check-columns tr").filter(has_text="total").first
        assert re.search(r"total\s+1308\s.*\+7\.\d \[\+\d\.\d, \+\d\.\d\]", total.inner_text().replace("\n", " "))
        expect(report).to_contain_text("seen by you only")
        assert "127.0.0.1" not in report.inner_text()
        checked = len(own.state.calls)

        # the visitor's board: their own check, after the server's, unverified and without estimates
        row = page.locator("#judge-board [role=row]").filter(has_text="judge-b")
        expect(row).to_have_count(1)
        expect(row).to_contain_text(re.compile(r"\+7\.\d \[\+\d\.\d, \+\d\.\d\]"))
        expect(row).to_contain_text("your endpoint (private host), unverified")
        own_link = row.locator("a", has_text="report").get_attribute("href")
        assert re.fullmatch(r"\?check=[\w-]{24}", own_link)
        expect(page.locator("#board-csv")).to_be_visible()
        open_grade(page)

        # the host checks that endpoint too (as its CLI's `judge-check --base-url` stores it): it vouches for it
        [mine] = [c for c in app_server.store.judge_checks() if c["id"] == own_link.split("=")[1]]
        vouched = app_server.store.put_judge_check(_host_fingerprint(mine["judge"]), mine["judge"], mine["result"],
                                                   prompt=check_prompt_id(), refs=mine["refs"], scope=HOST)

        # grade llava-v1.5-7b with the checked judge: every answer is already stored
        upload_results(page, LLAVA_7B)
        expect(page.locator("#validation-report textarea")).to_have_value(re.compile(r"218 of 218"))
        page.locator("#grade-button").click()
        wait_progress(page, r"^done: 218 / 218")
        assert len(own.state.calls) == checked
    card = page.locator("#card-equivalent")
    expect(card).to_contain_text(re.compile(r"official-equivalent estimate: \d+\.\d \[\d+\.\d, \d+\.\d\]"))
    text = card.inner_text()
    low, high = map(float, re.search(r"\[(\d+\.\d), (\d+\.\d)\]", text).groups())
    assert low <= 31.1 <= high and "not the official MM-Vet metric" in text
    assert f"check {vouched[:8]}" in text                  # the host's check, never the visitor's own
    # llava-v1.5-7b is one of the check's references (issue 23): said, and left out of its own correction
    expect(page.locator("#card-equivalent-label")).to_have_text("in-sample")
    assert "IN-SAMPLE: these answers are the check's reference llava-v1.5-7b" in text
    # the radar's hover says it too, once plotly has drawn it (the card can come first on a busy machine)
    page.wait_for_function("() => (document.querySelector('#radar-capabilities .js-plotly-plot')?.data?.[0]?.text"
                           " || []).some(t => t.includes('official-equivalent estimate')"
                           " && t.includes('not the official MM-Vet metric'))")

    run_id = re.search(r"[?&]run=([\w-]+)", page.url).group(1)
    expect(page.locator("#share-link").locator("textarea, input").first).to_have_value(re.compile(run_id))
    share = text_of(page, "share-link")                  # the link of this run, not of the one opened before
    visitor = new_page(browser, share)                   # another visitor: the read-only share view
    try:
        expect(visitor.locator("#card-equivalent")).to_contain_text(text.splitlines()[0])
        expect(visitor.locator("#card-equivalent-label")).to_have_text("in-sample")   # the share view says it too
    finally:
        visitor.context.close()
    reader = new_page(browser, app_server.url + f"?check={vouched}")    # the host's check: anyone reads it
    try:
        expect(reader.locator("#judge-check-report")).to_contain_text(
            re.compile(r"Judge check of judge-b at an endpoint the host checked \(private host\) \(official prompt\)"))
        assert reader.get_by_role("tab", name="Judges").get_attribute("aria-selected") == "true"
        assert own.url not in reader.locator("#judge-check-report").inner_text()   # never the address
        reader.goto(app_server.url + own_link)            # the visitor's own check: theirs alone
        expect(reader.locator('[data-testid="toast-text"]').filter(
            has_text="This link's judge check does not exist")).to_have_count(1)      # said once
    finally:
        reader.context.close()


def _host_fingerprint(judge: dict) -> str:
    """The fingerprint the server's check of this judge is stored under (`judgecheck.check_fingerprint`)."""
    from mmvet_core.judging.judge import JudgeSettings
    from mmvet_core.successors.judgecheck import check_fingerprint
    return check_fingerprint(JudgeSettings(**{k: v for k, v in judge.items() if k in JudgeSettings.__dataclass_fields__}))
