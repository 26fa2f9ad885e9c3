"""Screenshots of every view of the app, in Debian's headless Chromium: `python bench/screenshots.py [OUT_DIR]`
(default `bench/screenshots/`). The app runs in-process with the repository's fake OpenAI-compatible judge as the
server's judge, so no key or network is needed. Look at them after any change to the layout.

Views: the empty page, a loaded file, grading (first viewport at 1440×900), the results, a sample's detail, an
override, My runs, the shared (read-only) view, the Bard set with an overlay, the Compare view, and the phone
(390×844) before and after grading.
"""
from __future__ import annotations

import os
import re
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
os.environ.setdefault("GRADIO_ANALYTICS_ENABLED", "False")

from playwright.sync_api import expect, sync_playwright  # noqa: E402

from tests.app_fixtures import (CHROMIUM, CHROMIUM_ARGS, HOST_KEY, OFFICIAL_GRADES, RESULTS_DIR,  # noqa: E402
                                open_grade_file, start_app, stop_app, wait_loaded)
from tests.fake_judge import FakeJudgeServer, FakeState  # noqa: E402

expect.set_options(timeout=60_000)


def shoot(page, out: Path, name: str, full: bool = False) -> None:
    page.wait_for_timeout(600)          # plotly's transitions
    page.screenshot(path=str(out / f"{name}.png"), full_page=full)
    print(out / f"{name}.png")


def main() -> None:
    out = Path(sys.argv[1]) if len(sys.argv) > 1 else ROOT / "bench" / "screenshots"
    out.mkdir(parents=True, exist_ok=True)
    for old in out.glob("*.png"):
        old.unlink()
    tmp = Path(tempfile.mkdtemp(prefix="mmvet-shots-"))
    os.environ["GRADIO_TEMP_DIR"] = str(tmp / "gradio")
    with FakeJudgeServer(FakeState(latency=0.05)) as judge, sync_playwright() as p:
        app = start_app(tmp / "data", host_key=HOST_KEY, host_base_url=judge.url, run_concurrency=8)
        browser = p.chromium.launch(executable_path=CHROMIUM, headless=True, args=CHROMIUM_ARGS)
        try:
            ctx = browser.new_context(viewport={"width": 1440, "height": 900})
            page = ctx.new_page()
            page.goto(app.url)
            wait_loaded(page)
            shoot(page, out, "01-empty")
            page.locator("#example-button").click()
            expect(page.locator("#validation-report textarea")).to_have_value(re.compile("218 of 218"))
            page.locator("#runs input[type=number]").fill("2")
            page.locator("#runs input[type=number]").press("Enter")
            expect(page.locator("#estimate textarea")).to_have_value(re.compile("436 judge calls"))
            shoot(page, out, "02-file-loaded")
            page.locator("#grade-button").click()
            expect(page.locator("#progress-text")).to_have_text(re.compile(r"running: [1-9]\d+ / 436"))
            shoot(page, out, "03-grading-first-viewport")
            expect(page.locator("#progress-text")).to_have_text(re.compile(r"^done: 436 / 436"))
            shoot(page, out, "04-results", full=True)
            page.locator('#samples-table [data-testid="cell-3-0"]').click()
            expect(page.locator("#detail-id textarea")).to_have_value("v1_3")
            page.locator("#detail-id").scroll_into_view_if_needed()
            shoot(page, out, "05-sample-detail")
            page.locator("#override-score input[type=number]").fill("1")
            page.locator("#override-reason textarea").fill("checked by hand")
            page.locator("#override-button").click()
            expect(page.locator("#detail-flags textarea")).to_have_value(re.compile("overridden"))
            shoot(page, out, "06-override-toast")
            page.locator("#my-runs").scroll_into_view_if_needed()
            shoot(page, out, "07-my-runs")
            run_url = page.url

            viewer = browser.new_context(viewport={"width": 1440, "height": 900}).new_page()
            viewer.goto(run_url)
            wait_loaded(viewer)
            expect(viewer.locator("#run-card")).to_be_visible()
            shoot(viewer, out, "08-shared-view")
            viewer.context.close()

            # the Bard set, graded by the offline baseline, with the paper's Bard overlaid
            page.goto(app.url)
            wait_loaded(page)
            page.locator("#benchmark-accordion").get_by_text("Benchmark:").first.click()
            page.locator("#subset").get_by_text("Bard set (168)").click()
            page.locator("#judge-choice").get_by_text("Offline baseline (not MM-Vet)").click()
            page.locator("#results-file input[type=file]").set_input_files(str(RESULTS_DIR / "llava-v1.5-7b.json"))
            expect(page.locator("#validation-report textarea")).to_have_value(re.compile("168 of 168"))
            page.locator("#grade-button").click()
            expect(page.locator("#progress-text")).to_have_text(re.compile(r"^done: 168 / 168"))
            page.locator("#overlays input").click()
            page.get_by_role("option", name="Bard", exact=True).click()
            page.keyboard.press("Escape")
            page.locator("#radar-capabilities").scroll_into_view_if_needed()
            shoot(page, out, "09-bard-overlay")

            open_grade_file(page, OFFICIAL_GRADES / "llava-v1.5-13b_gpt-4-grade-3runs.json")
            open_grade_file(page, OFFICIAL_GRADES / "llava-v1.5-7b_gpt-4-grade-3runs.json")
            page.locator("#compare-section").get_by_text("Compare runs and grade files").first.click()
            page.locator("#compare-refresh").click()
            page.locator("#compare-runs input").click()
            for option in page.get_by_role("option").all()[:2]:
                option.click()
            page.keyboard.press("Escape")
            page.locator("#compare-button").click()
            expect(page.locator("#compare-report textarea")).not_to_have_value("")
            page.locator("#compare-section").scroll_into_view_if_needed()
            shoot(page, out, "10-compare", full=True)

            phone = browser.new_context(viewport={"width": 390, "height": 844}).new_page()
            phone.goto(app.url)
            wait_loaded(phone)
            shoot(phone, out, "11-phone-empty")
            phone.goto(run_url)
            wait_loaded(phone)
            expect(phone.locator("#run-card")).to_be_visible()
            shoot(phone, out, "12-phone-run", full=True)
            phone.context.close()
        finally:
            browser.close()
            stop_app(app)


if __name__ == "__main__":
    main()
