"""The README's screenshot: `python bench/readme_screenshot.py [OUT_PNG]` (default `docs/img/app.png`).

What the README's first command shows: the app with no key (the offline keyword baseline is the default judge),
the official example loaded and graded once, in Debian's headless Chromium. The page 1280 pixels wide, from its top
down to the radars (the file, the settings, the score with its interval, the run card and both radars), reduced to
a 256-colour PNG so that the front page stays light. Run it again after any change to the layout.
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

from PIL import Image  # noqa: E402
from playwright.sync_api import expect, sync_playwright  # noqa: E402

from tests.app_fixtures import CHROMIUM, CHROMIUM_ARGS, start_app, stop_app, wait_loaded  # noqa: E402

expect.set_options(timeout=120_000)
WIDTH, HEIGHT = 1280, 900


def main() -> None:
    out = Path(sys.argv[1]) if len(sys.argv) > 1 else ROOT / "docs" / "img" / "app.png"
    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix="mmvet-readme-shot-"))
    os.environ["GRADIO_TEMP_DIR"] = str(tmp / "gradio")
    for var in ("OPENAI_API_KEY", "OPENAI_BASE_URL", "AZURE_OPENAI_API_KEY"):
        os.environ.pop(var, None)                 # as after `pip install ... && python app.py` with no key
    with sync_playwright() as p:
        app = start_app(tmp / "data")
        browser = p.chromium.launch(executable_path=CHROMIUM, headless=True, args=CHROMIUM_ARGS)
        try:
            page = browser.new_context(viewport={"width": WIDTH, "height": HEIGHT}).new_page()
            page.goto(app.url)
            wait_loaded(page)
            page.locator("#example-button").click()
            expect(page.locator("#validation-report textarea")).to_have_value(re.compile("218 of 218"))
            page.locator("#grade-button").click()
            expect(page.locator("#progress-text")).to_have_text(re.compile(r"^done: 218 / 218"))
            expect(page.locator("#radar-capabilities .js-plotly-plot").first).to_be_visible()
            page.wait_for_timeout(800)            # plotly's transitions end; nothing else is awaited by time
            box = page.locator("#radar-capabilities").bounding_box()
            bottom = box["y"] + box["height"] + page.evaluate("window.scrollY") + 12
            raw = tmp / "raw.png"
            page.screenshot(path=str(raw), full_page=True, clip={"x": 0, "y": 0, "width": WIDTH, "height": bottom})
        finally:
            browser.close()
            stop_app(app)
    Image.open(raw).convert("RGB").quantize(colors=256, method=Image.Quantize.MEDIANCUT).save(out, optimize=True)
    print(f"{out} ({out.stat().st_size // 1024} KB)")


if __name__ == "__main__":
    main()
