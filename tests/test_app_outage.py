"""A database outage mid-run, seen from an open page and from a script (issue 29, part 6).

The app runs on a real PostgreSQL server of this module's own (tests/pg_server.py), which the test stops while a
run grades: the judge holds its calls (tests/call_gate.py), so the run is mid-way however fast or slow the machine
is. Before, the page froze on "running … ETA 35 s" for good and scripts got Gradio's generic "The upstream Gradio app
has raised an exception". Now the page says the store is unreachable and that nothing is lost, a script's call is
answered with the same words, and once the database is back the page follows the run to its end by itself.
"""
from __future__ import annotations

import re

import pytest
from playwright.sync_api import expect

from mmvet_core.runs import views
from mmvet_core.store import STORE_UNREACHABLE
from tests.app_fixtures import (  # noqa: F401  (fixtures)
    RESULTS_DIR, browser, fake_server, host_app, new_page, upload_results, wait_progress,
)
from tests.call_gate import CallGate
from tests.pg_server import PostgresServer

LLAVA_13B = RESULTS_DIR / "llava-v1.5-13b.json"
STEP = 30                   # judge calls answered before the outage


@pytest.fixture(scope="module")
def own_pg():
    """A PostgreSQL server this module stops and starts (not the session's, which other tests use)."""
    with PostgresServer() as server:
        yield server


@pytest.fixture(scope="module")
def pg_app(own_pg, fake_server, tmp_path_factory):
    """The app on a database of `own_pg`, the fake judge as its host judge."""
    with host_app(fake_server, tmp_path_factory, name="outage", database_url=own_pg.new_database()) as app:
        yield app


def test_a_page_says_the_store_is_unreachable_then_follows_the_run_to_its_end(pg_app, own_pg, fake_server,
                                                                              browser):
    from tests.api_client import ApiClient

    state = fake_server.state
    gate = state.gate = CallGate()
    page = new_page(browser, pg_app.url)
    try:
        upload_results(page, LLAVA_13B)
        expect(page.locator("#validation-report textarea")).to_have_value(re.compile(r"218 of 218"))
        gate.release(STEP)
        page.locator("#grade-button").click()
        gate.wait_passed(STEP)
        # every answer let through is stored before the database stops: each of the run's calls waits at the
        # gate (a grade written during the outage would end the run as failed, never followed to done)
        gate.wait_held(pg_app.settings.run_concurrency)
        wait_progress(page, r"^running: [1-9]\d* / 218")
        expect(page.locator("#share-link textarea")).to_have_value(re.compile(r"\?run=[\w-]{24}$"))
        run_id = page.locator("#share-link textarea").input_value().rsplit("run=", 1)[1]

        own_pg.halt()
        try:
            # the page says it in place of the frozen progress, and that nothing is lost
            note = page.locator("#progress-text")
            expect(note).to_contain_text(STORE_UNREACHABLE[0].upper() + STORE_UNREACHABLE[1:], ignore_case=False)
            expect(note).to_contain_text("follows the run again")
            # a script is told the same, not Gradio's generic "The upstream Gradio app has raised an exception"
            client = ApiClient(pg_app.url, verbose=False, download_files=False)
            with pytest.raises(Exception) as refused:
                client.predict(run_id, api_name="/status")
            assert STORE_UNREACHABLE in str(refused.value).lower()
            assert "upstream gradio app" not in str(refused.value).lower()
        finally:
            own_pg.resume()

        # the database is back: the page follows the run by itself (no reload, no click) to its end
        gate.open()
        wait_progress(page, r"^done: 218 / 218")
        pg_app.wait_idle()
        final = pg_app.view(run_id)
        assert final.run.status == "done" and final.n_graded == 218
        expect(page.locator("#total-score textarea")).to_have_value(views.total_text(final))
        expect(page.locator("#progress-text")).not_to_contain_text("unreachable")
    finally:
        gate.open()
        state.gate = None
        page.context.close()
