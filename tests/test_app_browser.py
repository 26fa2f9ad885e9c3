"""End-to-end tests of the app in a real headless Chromium (Debian's, through sync Playwright).

The app runs in-process with a fake OpenAI-compatible judge as the server's judge. One grading of LLaVA-1.5-13B
(2 runs) is shared by the tests that inspect, override and share it; stop/resume uses another results file so
the answer cache does not short-cut it.
"""
from __future__ import annotations

import re
import time

import pytest
from playwright.sync_api import expect

from mmvet_core.runs import views
from tests.app_fixtures import (  # noqa: F401  (fixtures)
    OFFICIAL_GRADES, RESULTS_DIR, V2_RESULTS, app_server, browser, fake_server, new_page, open_grade_file,
    progress_text, set_runs, text_of, upload_results, wait_progress,
)
from tests.call_gate import CallGate
from tests.waiting import wait_until

LLAVA_13B = RESULTS_DIR / "llava-v1.5-13b.json"
LLAVA_7B = RESULTS_DIR / "llava-v1.5-7b.json"
OFFICIAL_13B_GRADES = OFFICIAL_GRADES / "llava-v1.5-13b_gpt-4-grade-1runs.json"

STEP = 30                             # judge calls let through at a time while the page watches rows stream in


# --- page helpers ---------------------------------------------------------------------------------------------


def rowcount(page, elem_id: str) -> int:
    """Rows of a (virtualized) Gradio Dataframe, header included, from its aria-rowcount."""
    value = page.evaluate(
        "id => { const g = document.querySelector(`#${id} [role=grid]`);"
        " return g ? g.getAttribute('aria-rowcount') : null; }", elem_id)
    return int(value) if value else 0










def run_id_of(page) -> str:
    expect(page.locator("#share-link textarea")).to_have_value(re.compile(r"^https?://[^/]+/\?run=[\w-]{24}$"))
    return text_of(page, "share-link").rsplit("run=", 1)[1]


def toast_texts(page) -> list[str]:
    return page.locator('[data-testid="toast-text"]').all_inner_texts()


# --- the shared graded run --------------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def other_page(app_server, browser):
    """A second visitor's page (its own browser context), shared by the error and stop/resume tests."""
    page = new_page(browser, app_server.url)
    yield page
    page.context.close()


@pytest.fixture(scope="module")
def owner_page(browser):
    page = None

    def _get(url):
        nonlocal page
        if page is None:
            page = new_page(browser, url)
        return page

    yield _get
    if page is not None:
        page.context.close()


@pytest.fixture(scope="module")
def graded(app_server, fake_server, owner_page):
    """View an official grade file, then upload LLaVA-1.5-13B and grade it with 2 runs; record what the page
    showed while it streamed in.

    Viewing the official grades first is a real use of the page, and it also loads plotly.js (the first chart
    freezes a slow browser for seconds, which would otherwise hide the first second of streaming)."""
    page = owner_page(app_server.url)
    n_calls = len(fake_server.state.calls)
    open_grade_file(page, OFFICIAL_13B_GRADES)
    expect(page.locator("#total-score textarea")).to_have_value(re.compile(r"^Total: 36\.1 over 1 run"))
    expect(page.locator("#radar-capabilities .js-plotly-plot")).to_be_visible()
    imported_run = run_id_of(page)
    assert len(fake_server.state.calls) == n_calls          # viewing grades never calls the judge

    upload_results(page, LLAVA_13B)
    expect(page.locator("#validation-report textarea")).to_have_value(re.compile(r"218 of 218"))
    report = text_of(page, "validation-report")
    set_runs(page, 2)
    expect(page.locator("#estimate textarea")).to_have_value(re.compile(r"436 judge calls"))

    # The judge answers only the calls the test lets through: three batches of STEP calls, each followed by
    # waiting until the page shows more rows than before (never all: 3 x STEP calls grade fewer than 218 samples),
    # so the page is sure to show the run streaming in, however slow it is to look; then every call goes through.
    gate = fake_server.state.gate = CallGate()
    calls_before = len(fake_server.state.calls)
    counts, totals = [], []
    try:
        page.locator("#grade-button").click()
        expect(page.locator("#share-link textarea")).not_to_have_value(re.compile(imported_run))
        wait_progress(page, r"/ 436")                          # the new run is shown (the imported one had 218)
        gate.wait_held(1)
        shown = rowcount(page, "samples-table")
        for _ in range(3):
            gate.release(STEP)
            page.wait_for_function(
                "([id, n]) => { const g = document.querySelector(`#${id} [role=grid]`);"
                " return g && Number(g.getAttribute('aria-rowcount')) > n; }",
                arg=["samples-table", max(shown, 1)], timeout=60_000)
            shown = rowcount(page, "samples-table")
            counts.append(shown)
            totals.append(text_of(page, "total-score"))
        gate.open()
        # the rest at full speed: the rows shown never go down until the end
        deadline = time.monotonic() + 300
        while not progress_text(page).startswith("done: 436 / 436"):     # (not the previous view's "done")
            if time.monotonic() > deadline:
                pytest.fail(f"grading did not finish; progress: {progress_text(page)!r}")
            counts.append(rowcount(page, "samples-table"))
            time.sleep(0.05)
        # the table shown once the final refresh has landed
        expect(page.locator("#samples-table [role=grid]")).to_have_attribute("aria-rowcount", "219")
    finally:
        gate.open()
        fake_server.state.gate = None
    run_id = run_id_of(page)
    app_server.wait_idle()
    return {"page": page, "run_id": run_id, "report": report, "counts": counts, "totals": totals,
            "calls": fake_server.state.calls[calls_before:]}


def test_validation_report_mentions_218(graded):
    assert "218 of 218 samples matched" in graded["report"]
    assert "ready to grade" in graded["report"]


def test_rows_stream_in_and_total_matches_the_store(graded, app_server):
    page, run_id = graded["page"], graded["run_id"]
    counts = graded["counts"]
    # three growing partial tables while the judge answered a batch at a time, then never fewer rows until the end
    assert 1 < counts[0] < counts[1] < counts[2] < 219, counts
    assert counts == sorted(counts), counts
    # a partial total was shown before the end
    assert all("partial" in t for t in graded["totals"]), graded["totals"]

    view = app_server.view(run_id)
    assert view.run.status == "done" and view.n_graded == 436
    assert view.run.n_runs == 2 and view.run.judge["base_url"] == app_server.settings.host_base_url
    expected = views.total_text(view)
    expect(page.locator("#total-score textarea")).to_have_value(expected)
    assert f"Total: {view.scores.total.mean:.1f} ± {view.scores.total.std:.1f} over 2 run(s)" in expected
    assert re.search(r"done: 436 / 436 grades", progress_text(page))
    # the judge saw each prompt at temperature 0 twice at most (once per run), never more
    firsts = [c["prompt"] for c in graded["calls"] if c["temperature"] == 0.0 and c["status"] == 200]
    assert max(firsts.count(p) for p in set(firsts)) == 2


def _open_first_flagged(page, app_server, run_id):
    """Filter to flagged samples, click the first row's id cell; returns the sample id shown."""
    view = app_server.view(run_id)
    flagged = views.sample_rows(view, views.SampleFilter(flagged_only=True))
    assert flagged, "the fake judge flags about 10% of samples as fallback"
    page.locator("#filter-flagged input[type=checkbox]").check()
    expect(page.locator("#samples-table [role=grid]")).to_have_attribute("aria-rowcount", str(len(flagged) + 1))
    cell = page.locator('#samples-table [data-testid="cell-0-0"]')
    expect(cell).to_have_text(flagged[0][0])
    cell.click()
    expect(page.locator("#detail-id textarea")).to_have_value(flagged[0][0])
    return flagged[0][0]


def test_click_a_row_shows_the_sample_and_every_judge_answer(graded, app_server):
    page, run_id = graded["page"], graded["run_id"]
    sid = _open_first_flagged(page, app_server, run_id)
    view = app_server.view(run_id)
    sample = view.benchmark.samples[sid]
    assert text_of(page, "detail-question") == sample.question
    assert text_of(page, "detail-truth") == sample.answer
    assert text_of(page, "detail-prediction") == view.run.predictions[sid]
    assert "fallback" in text_of(page, "detail-flags")

    attempts = [a for r in range(2) for a in view.grades[(sid, r)].attempts]
    assert len(attempts) == 12      # a fallback: 1 call + 5 retries, in each of the 2 runs
    expect(page.locator("#detail-attempts [role=grid]")).to_have_attribute("aria-rowcount", str(len(attempts) + 1))
    shown = page.locator('#detail-attempts [data-testid$="-4"][role=gridcell]').all_inner_texts()
    judge_answers = {c["answer"] for c in graded["calls"] if sid_row_in(c["prompt"], view, sid)}
    assert judge_answers and judge_answers <= {a["content"] for a in attempts}
    assert shown and set(s.strip() for s in shown) <= judge_answers
    assert {"I cannot", "Sorry, no"} & set(s.strip() for s in shown)
    # filter off again for the next tests
    page.locator("#filter-flagged input[type=checkbox]").uncheck()
    expect(page.locator("#samples-table [role=grid]")).to_have_attribute("aria-rowcount", "219")


def sid_row_in(prompt: str, view, sid: str) -> bool:
    s = view.benchmark.samples[sid]
    return s.question in prompt and view.run.predictions[sid] in prompt


def test_override_changes_the_total(graded, app_server):
    page, run_id = graded["page"], graded["run_id"]
    sid = text_of(page, "detail-id") or _open_first_flagged(page, app_server, run_id)
    before_view = app_server.view(run_id)
    before = text_of(page, "total-score")
    assert before == views.total_text(before_view)
    current = before_view.effective_scores()[sid][0]
    new_score = 0.0 if current and current > 0.5 else 1.0

    # the score starts empty (not a 0 that one click would apply): Override without a score is refused
    score_box = page.locator("#override-score input[type=number]")
    assert score_box.input_value() == ""
    page.locator("#override-reason textarea").fill("the judge could not parse; checked by hand")
    page.locator("#override-button").click()
    expect(page.locator('[data-testid="toast-text"]').filter(has_text="between 0 and 1")).to_have_count(1)
    assert app_server.view(run_id).overrides == before_view.overrides
    score_box.fill(str(new_score))
    page.locator("#override-button").click()
    expect(page.locator("#detail-flags textarea")).to_have_value(re.compile(r"override"))
    after_view = app_server.view(run_id)
    assert after_view.overrides[sid] == (new_score, "the judge could not parse; checked by hand")
    expect(page.locator("#total-score textarea")).to_have_value(views.total_text(after_view))
    assert text_of(page, "total-score") != before
    assert after_view.scores.total.mean != before_view.scores.total.mean


def test_share_link_is_read_only_in_another_browser(graded, app_server, browser):
    run_id = graded["run_id"]
    share_url = text_of(graded["page"], "share-link")
    assert share_url == f"{app_server.url}?run={run_id}"
    expect(graded["page"].locator("#read-only-note")).to_be_hidden()     # the owner's own page
    expected = views.total_text(app_server.view(run_id))
    viewer = new_page(browser, share_url)
    try:
        expect(viewer.locator("#total-score textarea")).to_have_value(expected)
        expect(viewer.locator("#grade-button")).to_be_hidden()
        expect(viewer.locator("#override-button")).to_be_hidden()
        expect(viewer.locator("#stop-button")).to_be_hidden()
        expect(viewer.locator("#read-only-note")).to_contain_text("read-only")
        expect(viewer.locator("#samples-table [role=grid]")).to_have_attribute("aria-rowcount", "219")
        # the viewer can still inspect a sample
        viewer.locator('#samples-table [data-testid="cell-0-0"]').click()
        expect(viewer.locator("#detail-id textarea")).to_have_value("v1_0")
    finally:
        viewer.context.close()


def test_malformed_file_shows_an_error_and_the_page_keeps_working(other_page, tmp_path):
    bad = tmp_path / "truncated.json"
    bad.write_text('{"v1_0": ', encoding="utf-8")
    page = other_page
    errors = []

    def on_error(e):
        errors.append(str(e))

    page.on("pageerror", on_error)
    try:
        upload_results(page, LLAVA_13B)
        expect(page.locator("#validation-report textarea")).to_have_value(re.compile(r"218 of 218"))
        upload_results(page, bad)
        toast = page.locator('[data-testid="toast-text"]')
        expect(toast.first).to_contain_text("malformed JSON")
        assert "truncated.json" in toast.first.inner_text()
        # the previous file's report is gone, not left under the toast as if it described this file
        expect(page.locator("#validation-report textarea")).to_have_value("")
        assert text_of(page, "estimate") == ""
        # grading it is refused with a message too, and no run is created
        page.locator("#grade-button").click()
        expect(toast.filter(has_text="malformed JSON")).to_have_count(2)
        assert "run=" not in page.url                      # no run was opened
        # the page still works: a valid file validates
        upload_results(page, LLAVA_13B)
        expect(page.locator("#validation-report textarea")).to_have_value(re.compile(r"218 of 218"))
        assert not errors, errors
    finally:
        page.remove_listener("pageerror", on_error)


def test_v2_results_against_v1_say_wrong_benchmark(other_page):
    page = other_page
    upload_results(page, V2_RESULTS)
    expect(page.locator("#validation-report textarea")).to_have_value(re.compile(r"wrong benchmark"))
    report = text_of(page, "validation-report")
    assert "None of the 517 ids match mmvet-v1" in report
    assert "NOT ready to grade" in report
    page.locator("#grade-button").click()
    expect(page.locator('[data-testid="toast-text"]').filter(has_text="wrong benchmark")).to_have_count(1)
    assert "run=" not in page.url


def test_stop_mid_run_then_resume_without_paying_twice(app_server, fake_server, other_page):
    page = other_page
    state = fake_server.state
    # the judge answers STEP calls and holds the rest: the run is still grading when Stop arrives, however long the
    # page takes (the held calls are cancelled after the stop's grace, unanswered)
    gate = state.gate = CallGate()
    try:
        upload_results(page, LLAVA_7B)
        expect(page.locator("#validation-report textarea")).to_have_value(re.compile(r"218 of 218"))
        n0, ok0 = len(state.calls), len(state.completed_calls())
        gate.release(STEP)
        page.locator("#grade-button").click()
        wait_until(lambda: len(state.completed_calls()) >= ok0 + STEP, what="the calls let through were answered")
        wait_progress(page, r"running: [1-9]\d* / 218")
        run_id = run_id_of(page)
        page.locator("#stop-button").click()
        wait_progress(page, r"^stopped: \d+ / 218")
        assert not app_server.svc.jobs.is_running(run_id)
        stopped = app_server.view(run_id)
        assert stopped.run.status == "stopped"
        assert 0 < stopped.n_graded < 218
        answered = {(c["prompt"], c["temperature"]) for c in state.calls[n0:] if c.get("status") == 200}
        assert answered      # (fewer than the grades: a prediction identical to 13b's reuses the cached answer)
        n1 = len(state.calls)

        gate.open()
        page.locator("#resume-button").click()
        wait_progress(page, r"^done: 218 / 218")
        app_server.wait_idle()
        resumed = state.calls[n1:]
        assert resumed, "resume made no judge call"
        again = [c for c in resumed if (c["prompt"], c["temperature"]) in answered]
        assert not again, f"{len(again)} judge calls repeated a question already answered"
        final = app_server.view(run_id)
        assert final.run.status == "done" and final.n_graded == 218
        expect(page.locator("#total-score textarea")).to_have_value(views.total_text(final))
    finally:
        gate.open()
        state.gate = None
