"""The Leaderboard in the running app: a visitor publishes runs from their run card, filters the board, overlays two
radars and opens an entry's card (headless Chromium); attacks through the page and through the HTTP API
(gradio_client): publishing, renaming, unpublishing or hiding someone else's run, a script in a name, a
``javascript:`` link. One app and one page for the module."""
from __future__ import annotations

import csv
import io
import json
import re
from pathlib import Path
from urllib.parse import quote

import pytest

from mmvet_core.board.rows import ESTIMATE_COLUMN, TABLE_COLUMNS
from gradio_client import handle_file
from tests.api_client import ApiClient
from tests.held_calls import HeldCalls
from gradio_client.exceptions import AppError
from playwright.sync_api import expect

from app import BENCH_BUNDLED
from tests.app_fixtures import (  # noqa: F401  (fixtures)
    browser, fake_server, host_app, new_page, open_grade_file, reopen, upload_results, wait_progress,
)

REFERENCE = Path(__file__).resolve().parents[1] / "assets" / "reference"
GRADES_13B = REFERENCE / "llava-v1.5-13b_gpt-4-grade-3runs.json"
GRADES_7B = REFERENCE / "llava-v1.5-7b_gpt-4-grade-3runs.json"
GRADES_7B_1RUN = REFERENCE / "llava-v1.5-7b_gpt-4-grade-1runs.json"
HOST_SECRET = "host-secret-for-tests"
EVIL_NAME = '<img src=x onerror="window.__pwned=1"><script>window.__pwned=2</script>'
PROVENANCE = 6     # the provenance column once chosen: after the six leading ones (rank … judge)
OWNER, INTRUDER = "api-owner-token-A", "api-intruder-token-B"


@pytest.fixture(scope="module")
def board_app(fake_server, tmp_path_factory):
    """The app with a host secret (the host's hide control exists) and the fake judge as its judge."""
    with host_app(fake_server, tmp_path_factory, "board-app", host_secret=HOST_SECRET, publish_per_hour=30) as app:
        yield app


@pytest.fixture(scope="module")
def page(board_app, browser):
    p = new_page(browser, board_app.url)
    yield p
    p.context.close()


@pytest.fixture(scope="module")
def client(board_app):
    return ApiClient(board_app.url, verbose=False, download_files=False)


def publish_from_card(page, name: str, link: str = "") -> None:
    """Publish the run just opened (never published) from its card."""
    control = page.locator("#publish-control")
    expect(control).to_be_visible()
    # the control shows this run, not the previous one (whose "version 1: on the leaderboard" would otherwise pass
    # the check below before this click is even handled)
    expect(page.locator("#publish-state")).to_have_text("Not on the leaderboard.")
    page.locator("#publish-name input, #publish-name textarea").first.fill(name)
    page.locator("#publish-link input, #publish-link textarea").first.fill(link)
    page.locator("#publish-button").click()
    expect(page.locator("#publish-state")).to_contain_text(re.compile(r"version 1: on the leaderboard"))


def open_board(page, url: str, board: str) -> None:
    page.goto(f"{url}?board={quote(board, safe='')}")
    expect(page.locator("#board-table [role=grid]")).to_be_visible()


def show_column(page, name: str) -> None:
    """Add a column to the board's leading ones (the visitor's column choice)."""
    section = page.locator("#board-columns-section")
    if not page.locator("#board-columns").is_visible():
        section.get_by_text("More columns").click()
    page.locator("#board-columns").get_by_label(name, exact=True).check()
    expect(page.locator("#board-table [role=columnheader]").filter(has_text=name)).to_have_count(1)


def row_count(page) -> int:
    return int(page.locator("#board-table [role=grid]").get_attribute("aria-rowcount")) - 1


def test_publish_filter_and_overlay_two_radars(board_app, page):
    run13 = open_grade_file(page, GRADES_13B)
    publish_from_card(page, "LLaVA-1.5 13B", "https://github.com/haotian-liu/LLaVA")
    assert board_app.svc.board.entry_of_run(run13, board_app.store.get_run(run13).owner)["version"] == 1
    run7 = open_grade_file(page, GRADES_7B)
    publish_from_card(page, EVIL_NAME)                      # a script in a name: kept, shown as text

    open_board(page, board_app.url, "judge=official&benchmark=v1&refs=0")
    expect(page.locator("#leaderboard-section")).to_contain_text("paired bootstrap")
    # a group heading row, then the two entries
    expect(page.locator("#board-table [role=grid]")).to_have_attribute("aria-rowcount", "4")
    expect(page.locator('#board-table [data-testid="cell-0-1"]')).to_have_text(
        re.compile(r"^\s*▸ gpt-4 · MM-Vet v1 · not ranked"))
    show_column(page, "provenance")
    # grade files name their judge; nobody verified it: listed, marked, not ranked (issue 26, attack 1)
    expect(page.locator('#board-table [data-testid="cell-1-1"]')).to_have_text("LLaVA-1.5 13B")
    for r in (1, 2):
        expect(page.locator(f'#board-table [data-testid="cell-{r}-0"]')).to_have_text("—")
        expect(page.locator(f'#board-table [data-testid="cell-{r}-{PROVENANCE}"]')).to_have_text(
            "imported, judge not verified")
    # the host vouches for both in the page (MMVET_HOST_SECRET), the second click made while the first still runs,
    # and both are ranked (regression: Gradio's default trigger dropped the second click)
    page.locator("#board-host").get_by_text("Host: hide or verify an entry").click()
    page.locator("#board-host-secret input").fill(HOST_SECRET)
    with HeldCalls(board_app.svc.board, "verify_entry") as held:
        for run in (run13, run7):
            entry = board_app.svc.board.entry_of_run(run, board_app.store.get_run(run).owner)["entry"]
            page.locator("#board-host-entry input, #board-host-entry textarea").first.fill(entry)
            page.locator("#board-verify").click()
            held.wait_entered(1)                # the second click is made while the first is held on the server
    expect(page.locator('#board-table [data-testid="cell-1-0"]')).to_have_text("1")
    expect(page.locator('#board-table [data-testid="cell-2-0"]')).to_have_text("2")
    expect(page.locator('#board-table [data-testid="cell-2-1"]')).to_have_text(EVIL_NAME)
    expect(page.locator(f'#board-table [data-testid="cell-1-{PROVENANCE}"]')).to_have_text(
        "imported, verified by the host")
    assert "board=" in page.locator("#board-link textarea").input_value()

    # two quick clicks: the second is made while the first is still on the server (held there), and both rows
    # are overlaid; the card is the second's (regression: the second click was dropped, or its answer, computed
    # from the overlays the page showed when it was made, replaced the first row's)
    with HeldCalls(board_app.svc.board, "board_entry") as held:
        page.locator('#board-table [data-testid="cell-1-1"]').click()
        held.wait_entered(1)
        page.locator('#board-table [data-testid="cell-2-1"]').click()
        held.wait_entered(2)                    # the second click reached the server before the first answered
    legend = page.locator("#board-radar-caps .legendtext")
    expect(legend).to_have_count(2)
    assert legend.nth(0).text_content() == "LLaVA-1.5 13B (gpt-4)"
    expect(page.locator("#board-radar-ints .legendtext")).to_have_count(2)
    expect(page.locator("#board-card-name")).to_have_text(EVIL_NAME)
    expect(page.locator("#board-samples [role=grid]")).to_have_attribute("aria-rowcount", "219")

    page.locator("#board-query input, #board-query textarea").first.fill("13B")
    page.locator("#board-query input, #board-query textarea").first.press("Enter")
    expect(page.locator("#board-table [role=grid]")).to_have_attribute("aria-rowcount", "3")   # heading + row
    expect(page.locator("#board-link textarea")).to_have_value(re.compile(r"q%3D13B"))
    assert page.evaluate("window.__pwned") is None
    assert page.locator("#leaderboard-section img[src='x'], #leaderboard-section script").count() == 0

    page.locator("#board-download-button").click()               # the filtered table, as CSV and JSON
    files = page.locator("#board-downloads a")
    expect(files).to_have_count(2)
    csv_text = page.request.get(files.nth(0).get_attribute("href")).text()
    assert csv_text.splitlines()[0].startswith("rank,name,total,95% CI,official-equivalent (estimate),judge,"
                                               "rank group,estimate check,kind,provenance,benchmark,runs,rec,")
    assert [(r[0], r[1], r[9]) for r in csv.reader(io.StringIO(csv_text))][1:] == \
        [("1", "LLaVA-1.5 13B", "imported, verified by the host")]


def test_sort_by_a_column_and_the_entry_card_link_is_inert_https(board_app, page):
    open_board(page, board_app.url, "refs=0")
    first = page.locator("#board-table [role=row]").nth(2)         # (after the header and the group heading)
    expect(first).to_contain_text("LLaVA-1.5 13B")                 # by rank
    page.locator("#board-sort input").click()
    page.get_by_role("option", name="name", exact=True).click()
    expect(first).to_contain_text(EVIL_NAME)                       # "<img…" sorts before "llava…"
    expect(page.locator("#board-link textarea")).to_have_value(re.compile(r"sort%3Dname"))

    open_board(page, board_app.url, "q=LLaVA-1.5 13B&refs=0")
    page.locator('#board-table [data-testid="cell-1-1"]').click()
    link = page.locator("#board-card-link")
    expect(link).to_have_attribute("href", "https://github.com/haotian-liu/LLaVA")
    assert "noopener" in link.get_attribute("rel") and "nofollow" in link.get_attribute("rel")


def test_a_javascript_link_is_refused_in_the_page(board_app, page):
    reopen(page, board_app.url)                     # no ?board=: the board is filled when its tab opens
    expect(page.locator("#board-table [role=grid]")).to_have_count(0)
    page.get_by_role("tab", name="Leaderboard").click()
    expect(page.locator('#board-table [data-testid="cell-1-1"]')).to_have_text("LLaVA-1.5 13B")
    page.get_by_role("tab", name="Grade").click()
    open_grade_file(page, GRADES_7B_1RUN)
    page.locator("#publish-name input, #publish-name textarea").first.fill("bad link")
    page.locator("#publish-link input, #publish-link textarea").first.fill("javascript:window.__pwned=3")
    page.locator("#publish-button").click()
    expect(page.get_by_text("Only https:// links are accepted")).to_be_visible()
    expect(page.locator("#publish-state")).to_have_text("Not on the leaderboard.")
    assert not [r for r in board_app.svc.board.board_rows() if r.name == "bad link"]


# --- through the HTTP API (gradio_client) -------------------------------------------------------------------
def api_run(client, owner: str, grades=GRADES_13B) -> str:
    return client.predict(handle_file(str(grades)), BENCH_BUNDLED, None, "", "All samples", owner,
                          api_name="/view_grades")["run_id"]


def test_api_attacks_on_someone_elses_run_and_entry(board_app, client):
    # the page's owner published 13B's official grades: the same grades under another owner are refused
    copied = api_run(client, OWNER, GRADES_13B)
    with pytest.raises(AppError, match="already on the board as “LLaVA-1.5 13B”"):
        client.predict(copied, "LLaVA 1.5 13B (official)", "", OWNER, False, api_name="/publish")
    with pytest.raises(AppError, match="looks the same"):
        client.predict(copied, "LLaVA-1.5 13В", "", OWNER, False, api_name="/publish")      # a Cyrillic В
    run = api_run(client, OWNER, GRADES_7B_1RUN)
    for who in (INTRUDER, ""):
        with pytest.raises(AppError, match="owner"):
            client.predict(run, "stolen", "", who, False, api_name="/publish")
    row = client.predict(run, "api entry", "", OWNER, False, api_name="/publish")
    entry = row["entry"]
    assert (row["rank"], row["name"], row["verified"]) == (None, "api entry", False)
    assert row["provenance"] == "imported, judge not verified"
    with pytest.raises(AppError, match="host"):
        client.predict(entry, "guess", True, api_name="/verify_entry")
    assert client.predict(entry, HOST_SECRET, True, api_name="/verify_entry").endswith("(imported, verified by the host).")
    with pytest.raises(AppError, match="owner"):
        client.predict(entry, "pwned", "", INTRUDER, api_name="/rename_entry")
    with pytest.raises(AppError, match="owner"):
        client.predict(entry, INTRUDER, api_name="/unpublish")
    with pytest.raises(AppError, match="host"):
        client.predict(entry, "guess", True, api_name="/hide_entry")
    with pytest.raises(AppError, match="already on the board"):
        client.predict(run, "twice", "", OWNER, False, api_name="/publish")
    board = client.predict(board="q=api entry&refs=0", api_name="/leaderboard")["entries"]
    assert [(e["entry"], e["name"]) for e in board] == [(entry, "api entry")]

    assert client.predict(entry, HOST_SECRET, True, api_name="/hide_entry").endswith("hidden.")
    assert client.predict(board="q=api entry", api_name="/leaderboard")["entries"] == []
    client.predict(entry, HOST_SECRET, False, api_name="/hide_entry")
    assert client.predict(entry, OWNER, api_name="/unpublish")
    assert client.predict(board="q=api entry", api_name="/leaderboard")["entries"] == []


def test_api_script_in_a_name_and_javascript_link(board_app, client):
    run = api_run(client, OWNER, GRADES_7B_1RUN)
    evil = '<svg onload="window.__pwned=4"><script>window.__pwned=5</script>'
    with pytest.raises(AppError, match="looks the same"):      # the page's owner has that name
        client.predict(run, EVIL_NAME, "", OWNER, False, api_name="/publish")
    for link in ("javascript:alert(document.cookie)", "JAVASCRIPT:alert(1)", "data:text/html,<script>x</script>",
                 'https://x.org/"><script>alert(1)</script>'):
        with pytest.raises(AppError, match="link"):
            client.predict(run, "name", link, OWNER, False, api_name="/publish")
    row = client.predict(run, evil, "", OWNER, False, api_name="/publish")
    assert row["name"] == evil and row["link"] == ""
    with pytest.raises(AppError, match="https"):
        client.predict(row["entry"], "x", "javascript:alert(1)", OWNER, api_name="/rename_entry")
    got = client.predict(row["entry"], api_name="/leaderboard_entry")
    assert got["row"]["name"] == evil and got["row"]["link"] == ""


def test_api_leaderboard_is_the_table_of_the_view(board_app, client):
    table = client.predict(board="judge=official&benchmark=v1", api_name="/leaderboard")
    assert table["rank_note"].startswith("Rank “2–4” means")
    assert table == board_app.svc.board.leaderboard_json("judge=official&benchmark=v1", limit=100)
    refs = [e for e in table["entries"] if e["reference"]]
    assert refs and all(e["rank"] is None and e["judge"] == "gpt-4-0613 (paper)" for e in refs)


def test_api_leaderboard_pages_through_every_row_exactly_once(board_app, client):
    """The API answers a page (100 rows unless asked; Gradio post-processes every value of an answer: the whole
    board of 1,600 entries took a second): a script passes `next_offset` back until it is null and gets every row
    of the filter exactly once, in the board's order."""
    whole = board_app.svc.board.leaderboard_json("sort=total&desc=1")["entries"]
    assert len(whole) > 2 * 7                                # (the entries and the paper's rows)
    pages, offset = [], 0
    while offset is not None:
        pages.append(client.predict(board="sort=total&desc=1", offset=offset, limit=7, api_name="/leaderboard"))
        offset = pages[-1]["next_offset"]
    assert [len(p["entries"]) for p in pages[:-1]] == [7] * (len(pages) - 1) and 1 <= len(pages[-1]["entries"]) <= 7
    assert {p["count"] for p in pages} == {len(whole)}
    assert [e for p in pages for e in p["entries"]] == whole
    beyond = client.predict(board="sort=total&desc=1", offset=len(whole) + 5, api_name="/leaderboard")
    assert (beyond["entries"], beyond["next_offset"], beyond["count"]) == ([], None, len(whole))
    clamped = client.predict(board="sort=total&desc=1", limit=100_000, api_name="/leaderboard")
    assert clamped["limit"] == 500 and clamped["entries"] == whole[:500]
    with pytest.raises(AppError, match="offset must be a whole number"):
        client.predict(board="sort=total&desc=1", offset="1e999", api_name="/leaderboard")


# --- issue 23: the official-equivalent estimate on the board and an extrapolated run's label -------------------
def test_an_extrapolated_run_is_labelled_on_its_card_and_the_board_shows_its_estimate(board_app, page, tmp_path):
    """A visitor's own judge-b (answering each reference sample's official grade + 0.1) has a check at its
    endpoint. A model whose answers judge-b grades 0 everywhere lies far below the references' official totals
    (21.6 to 60.9): its card labels the estimate "extrapolated" and names the check; published, its board row
    shows the estimate, the label and the check in the estimate column, and the paper's rows say "official
    metric" there."""
    from mmvet_core.inputs.benchmark import load_bundled_v1
    from mmvet_core.judging.judge import JudgeSettings
    from mmvet_core.successors.judgecheck import assess_judge, check_prompt_id, check_settings, load_references
    from tests.fake_judge import FakeJudgeServer, FakeState, official_grades_answer, simulate_grades

    answer = official_grades_answer(0.1)
    bench = load_bundled_v1()
    blank = tmp_path / "blank-model.json"
    blank.write_text(json.dumps({sid: "I cannot see the image." for sid in bench.ids}), encoding="utf-8")
    with FakeJudgeServer(FakeState(answer_fn=answer, model_reported="judge-b")) as own:
        # judge-b's check at this endpoint, stored as a check run from the app stores it (the check itself is
        # tested in test_app_judgecheck.py; its 1308 grades would only slow this test)
        refs = load_references()
        settings = check_settings(JudgeSettings(base_url=own.url, model="judge-b"))
        check = assess_judge(bench, refs, {r.model: simulate_grades(answer, r.predictions) for r in refs},
                             settings.to_dict(), resamples=300)
        check_id = board_app.store.put_judge_check(settings.fingerprint(), settings.to_dict(), check.to_dict(),
                                                   prompt=check_prompt_id(), refs=check.references)
        reopen(page, board_app.url)
        page.locator("#judge-choice").get_by_text("My own key / endpoint", exact=True).click()
        page.locator("#base-url textarea, #base-url input").first.fill(own.url)
        page.locator("#judge-model textarea, #judge-model input").first.fill("judge-b")
        page.locator("#api-key input").fill("sk-own")
        upload_results(page, blank)
        expect(page.locator("#validation-report textarea")).to_have_value(re.compile(r"218 of 218"))
        page.locator("#grade-button").click()
        wait_progress(page, r"^done: 218 / 218")
    # every answer a refusal: unlike the references in kind too (issue 30), said with the reason
    expect(page.locator("#card-equivalent-label")).to_have_text("extrapolated, unlike the references")
    card = page.locator("#card-equivalent")
    expect(card).to_contain_text("EXTRAPOLATED: ")
    expect(card).to_contain_text("UNLIKE THE REFERENCES: refusals or empty answers 100 % (references 0–")
    expect(card).to_contain_text(re.compile(rf"corrected per grade by check {check_id[:8]} \(\d{{4}}-\d\d-\d\d; "
                                            r"6 reference models, official totals 21\.6–60\.9\)"))
    publish_from_card(page, "Blank model")
    open_board(page, board_app.url, "q=Blank model&refs=0")
    column = TABLE_COLUMNS.index(ESTIMATE_COLUMN)
    cell = page.locator(f'#board-table [data-testid="cell-1-{column}"]')    # the estimate column, under its heading
    expect(cell).to_have_text(re.compile(r"^\s*\d+\.\d \[\d+\.\d, \d+\.\d\] · extrapolated · unlike the references: "
                                         r"refusals or empty answers 100 % \(references 0–\d+ %\)"))
    show_column(page, "estimate check")                                    # the check it rests on, on request
    expect(page.locator('#board-table [data-testid="cell-1-6"]')).to_have_text(re.compile(rf"^\s*check {check_id[:8]} "))
    expect(page.locator("#board-table [role=columnheader]").nth(column)).to_contain_text(ESTIMATE_COLUMN)
    open_board(page, board_app.url, "judge=official&benchmark=v1")           # the paper's rows
    expect(page.locator(f'#board-table [data-testid="cell-1-{column}"]')).to_have_text("official metric")
