"""The app's "view a grade file" with every toolkit's graded file, in headless Chromium: no judge call, the numbers
of the official aggregation of the file's scores, the judge shown and a non-official metric labelled.

The graded files are built in the exact layouts VLMEvalKit and lmms-eval write (tests/toolkit_writers.py) from
LLaVA-1.5-13B's real predictions and the real per-sample scores of its official 1-run grade file (total 36.1).
"""
from __future__ import annotations

import json
import re

import pytest
from playwright.sync_api import expect

from mmvet_core.inputs.benchmark import load_bundled_v1
from tests import toolkit_writers as tw
from tests.app_fixtures import (  # noqa: F401  (fixtures)
    OFFICIAL_GRADES, RESULTS_DIR, app_server, browser, fake_server, new_page, open_grade_file,
)

BENCH = load_bundled_v1()
PREDS = json.loads((RESULTS_DIR / "llava-v1.5-13b.json").read_text(encoding="utf-8"))
SCORES = {s: e["score"][0] for s, e in
          json.loads((OFFICIAL_GRADES / "llava-v1.5-13b_gpt-4-grade-1runs.json").read_text()).items()}


def text_of(page, elem_id: str) -> str:
    return page.locator(f"#{elem_id} textarea").input_value()


# generous: the first chart loads plotly.js, and the machine may be busy with other test runs
TIMEOUT_MS = 90_000


@pytest.fixture(scope="module")
def page(app_server, browser):
    p = new_page(browser, app_server.url, timeout_ms=TIMEOUT_MS)
    yield p
    p.context.close()


def view(page, path) -> str:
    """Drop `path` on the grade-file box and wait for the run it opens; returns the run id."""
    return open_grade_file(page, path, TIMEOUT_MS)


def lmms_file(tmp_path, judges):
    folder = tmp_path / "liuhaotian__llava-v1.5-13b"
    folder.mkdir(exist_ok=True)
    return tw.lmms_v07_jsonl(folder / "20260301_samples_mmvet.jsonl", PREDS, BENCH, SCORES, judges)


CASES = [
    pytest.param(lambda d: tw.vlmevalkit(d / "llava-v1.5-13b_MMVet_gpt-4-turbo.xlsx", PREDS, BENCH, SCORES),
                 "judge gpt-4-turbo", "VLMEvalKit's MM-Vet prompt", id="vlmevalkit-xlsx"),
    pytest.param(lambda d: tw.vlmevalkit(d / "llava-v1.5-13b_MMVet_gpt-4-turbo.json", PREDS, BENCH, SCORES),
                 "judge gpt-4-turbo", "VLMEvalKit's MM-Vet prompt", id="vlmevalkit-json"),
    pytest.param(lambda d: lmms_file(d, "gpt-4o-2024-11-20"), "judge gpt-4o-2024-11-20",
                 "lmms-eval's MM-Vet prompt", id="lmms-eval-v0.7"),
    pytest.param(lambda d: lmms_file(d, {sid: "gpt-4-0613" if n < 113 else "gpt-4-turbo-2024-04-09"
                                         for n, sid in enumerate(BENCH.ids)}),
                 "judge mixed judges: 113 grades by gpt-4-0613, 105 by gpt-4-turbo-2024-04-09",
                 "lmms-eval's MM-Vet prompt", id="lmms-eval-mixed-judges"),
]


@pytest.mark.parametrize("make, judge, prompt", CASES)
def test_a_toolkits_graded_file_shows_with_its_judge_labelled_and_no_judge_call(make, judge, prompt, page,
                                                                               app_server, fake_server, tmp_path):
    calls = len(fake_server.state.calls)
    run_id = view(page, make(tmp_path))
    total = page.locator("#total-score textarea")
    expect(total).to_have_value(re.compile(r"^Total: 36\.1 over 1 run\(s\) · " + re.escape(judge)
                                           + r" · NOT the official MM-Vet metric"), timeout=TIMEOUT_MS)
    assert prompt in text_of(page, "total-score")
    expect(page.locator("#radar-capabilities .js-plotly-plot")).to_be_visible(timeout=TIMEOUT_MS)
    expect(page.locator("#radar-integrations .js-plotly-plot")).to_be_visible(timeout=TIMEOUT_MS)
    expect(page.locator("#samples-table [role=grid]")).to_have_attribute("aria-rowcount", "219",  # 218 + header
                                                                       timeout=TIMEOUT_MS)
    assert len(fake_server.state.calls) == calls                    # viewing grades never calls the judge
    run = app_server.view(run_id)
    assert run.scores.total.mean == 36.1 and run.run.predictions == PREDS   # every sample, its prediction too
    assert run.metric_note in text_of(page, "total-score")


def test_the_official_grade_file_is_labelled_as_the_official_metric(page):
    view(page, OFFICIAL_GRADES / "llava-v1.5-7b-rerun_gpt-4-0613-grade-1runs.json")
    expect(page.locator("#total-score textarea")).to_have_value(
        re.compile(r"· judge gpt-4-0613 · official MM-Vet metric · 95% interval over samples \[25\.2, 36\.5\]$"),
        timeout=TIMEOUT_MS)


def test_a_misaligned_file_is_refused_with_a_toast_and_the_page_keeps_its_run(page, tmp_path):
    run_id = view(page, OFFICIAL_GRADES / "llava-v1.5-13b_gpt-4-grade-1runs.json")
    path = tw.vlmevalkit(tmp_path / "m_MMVet_gpt-4-turbo.csv", PREDS, BENCH, SCORES)
    path.write_text(path.read_text().replace('"0","What is x in the equation?"',
                                             '"9","What is x in the equation?"', 1))
    page.locator("#grade-json-file button[aria-label='Clear']").click()
    page.locator("#grade-json-file input[type=file]").set_input_files(str(path))
    expect(page.locator('[data-testid="toast-text"]').filter(has_text="do not match")).to_be_visible(
        timeout=TIMEOUT_MS)
    assert text_of(page, "share-link").endswith(run_id)


def test_the_api_reports_the_judge_and_the_note_of_a_viewed_grade_file(app_server, tmp_path):
    from gradio_client import handle_file
    from tests.api_client import ApiClient

    from app import BENCH_BUNDLED

    client = ApiClient(app_server.url, verbose=False, download_files=False)
    path = tw.vlmevalkit(tmp_path / "llava-v1.5-13b_MMVet_gpt-4-turbo.tsv", PREDS, BENCH, SCORES)
    run_id = client.predict(f=handle_file(str(path)), bench_c=BENCH_BUNDLED, bench_f=None, hub="",
                            sub="All samples", owner_tok="grade-file-owner", api_name="/view_grades")["run_id"]
    st = client.predict(run_id, api_name="/status")
    assert (st["status"], st["done"], round(st["total_score"], 1), st["judge"]) == ("done", 218, 36.1, "gpt-4-turbo")
    assert st["metric_note"].startswith("NOT the official MM-Vet metric")
    detail = client.predict(run_id, "v1_1", api_name="/sample")
    assert detail["prediction"] == PREDS["v1_1"]                     # what the judge graded
    run = detail["runs"][0]
    assert (run["judge_model"], run["score"], run["status"]) == ("gpt-4-turbo", SCORES["v1_1"], "ok")
    assert run["content"] == tw.vlmevalkit_frame(PREDS, BENCH, SCORES)["log"][1]     # VLMEvalKit's judge log
