""""Safe to host": hostile text in results files and benchmark metadata never runs or loads anything.

A custom benchmark (uploaded through the Benchmark accordion) and a results file carry script tags, event-handler
attributes, javascript: links, remote images and HTML links in questions, ground truths, predictions, a sample id,
an unknown id and the model name (the file name). After grading with the offline baseline and opening every
sample's detail, in the owner's page and in a shared read-only view: no script ran (``window.__pwned`` is
undefined, no dialog), no request left 127.0.0.1, and the raw text is shown literally.
"""
from __future__ import annotations

import re
from urllib.parse import urlsplit

import pytest
from playwright.sync_api import expect

from app import BENCH_UPLOAD, JUDGE_BASELINE
from tests.app_fixtures import (  # noqa: F401  (fixtures)
    app_server, browser, fake_server, new_context, tracked_page, wait_loaded, write_json)


EVIL_ID = 'v1_6<img src=x onerror="window.__pwned=6">'
QUESTIONS = {
    "v1_0": "<script>window.__pwned=10</script>What is in the image?",
    "v1_1": '**Bold?** <img src=x onerror="window.__pwned=11"> [docs](javascript:window.__pwned=12)',
    "v1_2": '![q](http://evil.example/q.png) <iframe src="http://evil.example/frame"></iframe> Count them.',
    "v1_3": "<svg onload=\"window.__pwned=13\"></svg> # Heading\n- item\n<b>bold</b>",
    "v1_4": "What does the sign say? <a href=\"http://evil.example\">here</a>",
    "v1_5": '<style>body{background:url(http://evil.example/bg.png)}</style>$$\\href{javascript:window.__pwned=15}{x}$$',
    EVIL_ID: "Plain question for a hostile id.",
}
ANSWERS = {
    "v1_0": "<b>cat</b>",
    "v1_1": '<img src="http://evil.example/a.png">',
    "v1_2": "3<OR>three",
    "v1_3": "[a](javascript:window.__pwned=23)",
    "v1_4": "STOP",
    "v1_5": "x",
    EVIL_ID: "<script>window.__pwned=26</script>",
}
PREDICTIONS = {
    "v1_0": "<script>window.__pwned=1</script>",
    "v1_1": '<img src=x onerror="window.__pwned=2">',
    "v1_2": "[click](javascript:window.__pwned=3)",
    "v1_3": "![img](http://evil.example/x.png)",
    "v1_4": '<a href="http://evil.example">x</a>',
    "v1_5": '<iframe srcdoc="<script>parent.__pwned=5</script>"></iframe> three <b>STOP</b>',
    EVIL_ID: '"><img src=x onerror=window.__pwned=7> <details open ontoggle="window.__pwned=8">',
}
CAPS = {"v1_0": ["rec"], "v1_1": ["ocr"], "v1_2": ["rec", "math"], "v1_3": ["gen"], "v1_4": ["ocr", "know"],
        "v1_5": ["spat"], EVIL_ID: ["rec"]}
UNKNOWN_ID = "<script>window.__pwned=9</script>"
# lmms-eval logs carry the model name inside the file: it reaches the charts and the download file names
MODEL_NAME = '../../../../escaped/<a href="http://evil.example">m</a><img src=x onerror=window.__pwned=30>'



#: Elements only the payloads would create (Gradio's own svg icons are fine, an svg with onload is not).
INJECTED = ("script, iframe, details, img[src='x'], img[src*='evil'], [onerror], [onload], [ontoggle], "
            "[srcdoc], a[href^='javascript'], a[href*='evil']")


def _is_foreign(url: str, base: str) -> bool:
    """A request that is not to the app itself (other host or port), or to the path of an injected <img src=x>."""
    u, b = urlsplit(url), urlsplit(base)
    if u.scheme in ("data", "blob", "about"):
        return False
    return u.netloc != b.netloc or u.path.rstrip("/").endswith("/x")


@pytest.fixture(scope="module")
def hostile_files(tmp_path_factory):
    d = tmp_path_factory.mktemp("xss")
    meta = {sid: {"imagename": f"{sid.split('<')[0]}.png", "question": q, "answer": ANSWERS[sid],
                  "capability": CAPS[sid], "imagesource": "<script>window.__pwned=40</script>"}
            for sid, q in QUESTIONS.items()}
    bench = write_json(d / "hostile-bench.json", meta)
    logs = [{"doc": {"question_id": sid}, "doc_id": i, "filtered_resps": [pred]}
            for i, (sid, pred) in enumerate({**PREDICTIONS, UNKNOWN_ID: "extra"}.items())]
    results = write_json(d / "hostile-lmms-eval.json", {"model_name": MODEL_NAME, "logs": logs})
    return bench, results


class Watch:
    """Everything a page did that it should not: foreign requests, dialogs, page errors."""

    def __init__(self, page, base_url):
        self.foreign, self.dialogs, self.errors = [], [], []
        page.context.on("request", lambda r: self.foreign.append(r.url) if _is_foreign(r.url, base_url) else None)
        page.on("dialog", lambda d: (self.dialogs.append(d.message), d.dismiss()))
        page.on("pageerror", lambda e: self.errors.append(str(e)))

    def assert_clean(self, page):
        assert page.evaluate("typeof window.__pwned") == "undefined"
        for frame in page.frames:
            assert frame.evaluate("typeof window.__pwned") == "undefined"
        assert self.foreign == [], self.foreign
        assert self.dialogs == []


def open_page(browser, url):
    return tracked_page(new_context(browser))


def text_of(page, elem_id):
    return page.locator(f"#{elem_id}").locator("textarea, input").first.input_value()


def check_every_detail(page, run_view):
    """Click each sample row and check the detail boxes hold the raw text, literally."""
    grid = page.locator("#samples-table [role=grid]")
    expect(grid).to_have_attribute("aria-rowcount", str(len(QUESTIONS) + 1))
    for i, sid in enumerate(run_view.benchmark.ids):
        cell = page.locator(f'#samples-table [data-testid="cell-{i}-0"]')
        expect(cell).to_have_text(sid)                        # the id cell shows the raw text
        assert cell.locator(INJECTED).count() == 0
        # the question and answer columns hold the hostile texts (shortened), as text
        expect(page.locator(f'#samples-table [data-testid="cell-{i}-3"]')).to_contain_text(
            " ".join(QUESTIONS[sid].split())[:20])
        assert page.locator("#samples-table").locator(INJECTED).count() == 0
        cell.click()
        expect(page.locator("#detail-id textarea")).to_have_value(sid)
        expect(page.locator("#detail-question textarea")).to_have_value(QUESTIONS[sid])
        expect(page.locator("#detail-truth textarea")).to_have_value(ANSWERS[sid])
        expect(page.locator("#detail-prediction textarea")).to_have_value(PREDICTIONS[sid])
        # the raw text is what is shown: nothing of it became markup anywhere in the detail group
        detail = page.locator("#sample-detail")
        assert detail.locator(INJECTED).count() == 0
        assert detail.locator("a[href^='javascript'], a[href*='evil']").count() == 0
        expect(page.locator("#detail-attempts [role=grid]")).to_have_attribute("aria-rowcount", "2")


def test_hostile_text_is_inert_for_the_owner_and_for_viewers(app_server, browser, hostile_files):
    bench, results = hostile_files
    page = open_page(browser, app_server.url)
    watch = Watch(page, app_server.url)
    try:
        page.goto(app_server.url)
        wait_loaded(page)
        # custom benchmark through the Benchmark accordion
        page.get_by_role("button", name=re.compile(r"^Benchmark")).click()
        page.locator("#benchmark-choice label", has_text=BENCH_UPLOAD).click()
        page.locator("#benchmark-file input[type=file]").set_input_files(str(bench))
        page.locator("#judge-choice label", has_text=JUDGE_BASELINE).click()
        page.locator("#results-file input[type=file]").set_input_files(str(results))
        expect(page.locator("#estimate textarea")).to_have_value(re.compile("no calls, no cost"))

        # the validation report shows the hostile unknown id as text
        expect(page.locator("#validation-report textarea")).to_have_value(re.compile(r"7 of 7 samples matched"))
        report = text_of(page, "validation-report")
        assert UNKNOWN_ID in report and "Ids not in the benchmark (1)" in report
        assert page.locator("#validation-report").locator(INJECTED).count() == 0

        page.locator("#grade-button").click()
        expect(page.locator("#progress-text")).to_have_text(re.compile(r"^done: 7 / 7"))
        expect(page).to_have_url(re.compile(r"\?run=[\w-]{24}$"))
        run_id = page.url.rsplit("run=", 1)[1]
        view = app_server.view(run_id)
        assert view.run.judge["provider"] == "baseline" and view.run.results_format == "lmms-eval-json"
        assert not set("/\\<>") & set(view.run.model_name)      # a file-safe name, shown as such
        assert set(view.benchmark.ids) == set(QUESTIONS)
        assert view.benchmark.samples["v1_0"].question == QUESTIONS["v1_0"]
        expect(page.locator("#total-score textarea")).to_have_value(re.compile("NOT the MM-Vet metric"))

        check_every_detail(page, view)
        # the model name (from the file name) reaches charts and downloads as text
        expect(page.locator("#radar-capabilities .js-plotly-plot")).to_be_visible()
        assert page.locator("#radar-capabilities, #radar-integrations").locator(INJECTED).count() == 0
        assert "evil" not in page.evaluate("[...document.querySelectorAll('style')].map(s => s.textContent).join()")
        expect(page.locator("#downloads")).to_contain_text(re.compile(r"_mmvet-grades\s*\.zip"))
        exports = app_server.settings.data_dir / "exports" / run_id
        assert len(list(exports.glob("*.json"))) == 2 and len(list(exports.glob("*.zip"))) == 1   # + run.json
        tmp_root = app_server.settings.data_dir.parent.parent
        assert not list(tmp_root.rglob("escaped*")), "a download was written outside the exports folder"
        # the owner renames the model with markup: the run card, My runs and the exports keep it as text
        page.locator("#rename-box textarea, #rename-box input").first.fill(MODEL_NAME)
        page.locator("#rename-button").click()
        expect(page.locator("#run-card #card-model")).to_have_text(MODEL_NAME)
        expect(page.locator("#my-runs-table")).to_contain_text(MODEL_NAME)
        assert page.locator("#run-card, #my-runs-table, #downloads").locator(INJECTED).count() == 0
        expect(page.locator("#downloads")).to_contain_text("a_img_src=x_onerror")   # re-exported, file-safe name
        assert not list(tmp_root.rglob("escaped*")), "a download was written outside the exports folder"
        page.wait_for_timeout(300)                 # give any injected handler a chance to fire
        watch.assert_clean(page)
        assert watch.errors == []
    finally:
        page.context.close()

    # a visitor of the share link (read-only view, another browser context)
    viewer = open_page(browser, app_server.url)
    vwatch = Watch(viewer, app_server.url)
    try:
        viewer.goto(f"{app_server.url}?run={run_id}")
        expect(viewer.locator("#grade-button")).to_be_hidden()
        check_every_detail(viewer, view)
        viewer.wait_for_timeout(300)
        vwatch.assert_clean(viewer)
        assert vwatch.errors == []
    finally:
        viewer.context.close()
