"""Hosting a public Space: budgets, key secrecy, read-only share views, private runs, upload limits, fairness.

Everything goes through real HTTP: the app is launched in-process on a free port (as ``python app.py`` does)
and driven with `gradio_client`; the judges are `FakeJudgeServer`s (real OpenAI-compatible servers on
127.0.0.1) that log every request with its Authorization header. Different visitors are simulated with
different ``X-Forwarded-For`` headers (the app is configured with one trusted proxy hop, so the header's last
entry is the visitor's address).
"""
from __future__ import annotations

import os

os.environ.setdefault("GRADIO_ANALYTICS_ENABLED", "False")
os.environ.setdefault("HF_HUB_DISABLE_TELEMETRY", "1")
os.environ.setdefault("HF_HUB_OFFLINE", "1")

import json
import logging
import re
import secrets
import time
import urllib.request
import zipfile
from pathlib import Path

import pytest

from tests.app_fixtures import wait_http
from tests.call_gate import CallGate
from tests.fake_judge import FakeJudgeServer, FakeState, free_port

gradio_client = pytest.importorskip("gradio_client")
from gradio_client import handle_file  # noqa: E402
from tests.api_client import ApiClient  # noqa: E402
from gradio_client.exceptions import AppError  # noqa: E402

RESULTS = Path(__file__).resolve().parent / "data" / "results" / "llava-v1.5-13b.json"
HOST_KEY = "sk-HOST-" + secrets.token_hex(12)
VISITOR_KEY = "sk-VISITOR-" + secrets.token_hex(12)
TERMINAL = {"done", "stopped", "failed", "incomplete"}



# --- app and fake judges ---------------------------------------------------------------------------------
class App:
    def __init__(self, demo, url: str, data_dir: Path, temp_dir: Path):
        self.demo, self.url, self.data_dir, self.temp_dir = demo, url, data_dir, temp_dir

    @property
    def svc(self):
        return self.demo.svc

    def client(self, ip: str | None = None) -> ApiClient:
        headers = {"X-Forwarded-For": ip} if ip else None
        return ApiClient(self.url, headers=headers, verbose=False, download_files=False)

    def run_count(self) -> int:
        return len(dict(self.svc.store.iter_tables())["runs"])

    def wait_idle(self, timeout: float = 120) -> None:
        deadline = time.time() + timeout
        while self.svc.jobs.running_count():
            assert time.time() < deadline, "grading jobs still running"
            time.sleep(0.05)


def _launch(tmp: Path, host_url: str, **kw) -> App:
    """The app as `python app.py` launches it (queue limit, max_file_size, allowed paths), on a free port."""
    import app as app_module

    settings = app_module.AppSettings(data_dir=tmp / "data", host_key=HOST_KEY, host_base_url=host_url, **kw)
    demo = app_module.build_demo(settings)
    demo.queue(**app_module.queue_options())
    port = free_port()
    if hasattr(app_module, "launch_options"):
        options = app_module.launch_options(settings)
    else:
        options = dict(ssr_mode=False, max_file_size=f"{settings.max_upload_mb}mb",
                       allowed_paths=[str(settings.data_dir / "exports"), str(settings.data_dir / "uploads")])
    demo.launch(server_name="127.0.0.1", server_port=port, prevent_thread_lock=True, quiet=True, **options)
    url = f"http://127.0.0.1:{port}/"
    wait_http(url + "gradio_api/info")
    return App(demo, url, settings.data_dir, tmp / "gradio-tmp")


def _close(app: App) -> None:
    app.wait_idle()
    app.svc.jobs.shutdown()
    app.demo.close()
    app.svc.store.close()


@pytest.fixture(scope="module")
def host_judge():
    """The server's own judge: only accepts the host's key."""
    with FakeJudgeServer(FakeState(api_key=HOST_KEY)) as srv:
        yield srv


@pytest.fixture(scope="module")
def visitor_judge():
    """A visitor's own endpoint: only accepts the visitor's key."""
    with FakeJudgeServer(FakeState(api_key=VISITOR_KEY)) as srv:
        yield srv


@pytest.fixture(scope="module")
def app(host_judge, tmp_path_factory):
    tmp = tmp_path_factory.mktemp("hosting")
    mp = pytest.MonkeyPatch()
    mp.setenv("GRADIO_TEMP_DIR", str(tmp / "gradio-tmp"))
    from mmvet_core.judging.budget import BudgetLimits

    # visitors are told apart by X-Forwarded-For as a proxy would append it (one trusted hop); their endpoints
    # are fake judges on 127.0.0.1 (a private deployment's allowance)
    a = _launch(tmp, host_judge.url, max_upload_mb=1, run_concurrency=8,
                limits=BudgetLimits(per_visitor_daily=50, global_daily=1000, tokens_per_visitor_daily=0,
                                    tokens_global_daily=0),
                trusted_proxy_hops=1, allow_private_endpoints=True, max_runs_per_visitor=0)
    try:
        yield a
    finally:
        _close(a)
        mp.undo()


@pytest.fixture(autouse=True)
def _fresh_logs(request):
    """Each test starts with empty call logs on the module's fake judges."""
    for name in ("host_judge", "visitor_judge"):
        if name in request.fixturenames:
            srv = request.getfixturevalue(name)
            with srv.state.lock:
                srv.state.calls.clear()
    yield


# --- helpers -----------------------------------------------------------------------------------------------
def owner() -> str:
    return secrets.token_urlsafe(18)


def variant(tmp_path: Path, tag: str, source: Path = RESULTS) -> Path:
    """The real results with a per-test suffix on every prediction: different prompts, so the app's judge-answer
    cache (shared by identical judge configurations) cannot answer them from an earlier test."""
    preds = json.loads(source.read_text(encoding="utf-8"))
    path = tmp_path / f"{source.stem}-{tag}.json"
    path.write_text(json.dumps({k: f"{v} [{tag}]" for k, v in preds.items()}), encoding="utf-8")
    return path


def grade(client: ApiClient, judge: str, *, owner_tok: str, url: str = "", key: str = "",
          results: Path = RESULTS, bench: str | None = None, bench_file=None) -> str:
    from app import BENCH_BUNDLED

    return client.predict(
        handle_file(str(results)), bench or BENCH_BUNDLED, bench_file, "", "All samples", 1, judge, url,
        "gpt-4-0613", key, owner_tok, api_name="/grade")["run_id"]


def status(client: ApiClient, run_id: str) -> dict:
    return client.predict(run_id, api_name="/status")


def wait_for(client: ApiClient, run_id: str, cond, timeout: float = 180.0) -> dict:
    deadline = time.time() + timeout
    while True:
        st = status(client, run_id)
        if cond(st):
            return st
        assert time.time() < deadline, f"timed out; last status {st['status']} {st['done']}/{st['total']}"
        time.sleep(0.1)


def wait_end(client: ApiClient, run_id: str, timeout: float = 180.0) -> dict:
    return wait_for(client, run_id, lambda s: s["status"] in TERMINAL, timeout)


def auths(srv: FakeJudgeServer) -> set[str]:
    with srv.state.lock:
        return {c["auth"] for c in srv.state.calls}


# --- budget ------------------------------------------------------------------------------------------------
def test_budget_stops_visitor_then_own_key_finishes_and_global_cap_stops_others(app, host_judge, visitor_judge,
                                                                                 tmp_path):
    from app import JUDGE_HOST, JUDGE_OWN
    from mmvet_core.judging.budget import today, visitor_id

    alice, tok = app.client("203.0.113.7"), owner()
    run_id = grade(alice, JUDGE_HOST, owner_tok=tok, results=variant(tmp_path, "alice"))
    st = wait_end(alice, run_id)
    assert st["status"] == "stopped", st
    assert "own API key" in st["message"] and "50" in st["message"], st["message"]
    assert 0 < len(host_judge.state.calls) <= 50
    assert 0 < st["done"] < st["total"]                 # grades so far are kept

    # The visitor brings their own key and endpoint: the run finishes there, and only there.
    before_host = len(host_judge.state.calls)
    alice.predict(run_id, JUDGE_OWN, visitor_judge.url, "gpt-4-0613", VISITOR_KEY, tok, api_name="/resume")
    st = wait_end(alice, run_id)
    assert st["status"] == "done", st
    assert st["done"] == st["total"] == 218
    assert len(host_judge.state.calls) == before_host  # nothing more charged to the host
    assert auths(visitor_judge) == {f"Bearer {VISITOR_KEY}"}
    assert f"Bearer {VISITOR_KEY}" not in auths(host_judge)

    # The global cap: other visitors already used all but 20 of today's 1000 host calls.
    others, used = visitor_id("others", "test"), app.svc.store.usage(today())
    seeded = 1000 - 20 - used
    app.svc.store.add_usage(today(), others, seeded)
    try:
        bob = app.client("198.51.100.23")
        host_judge.state.calls.clear()
        st = wait_end(bob, grade(bob, JUDGE_HOST, owner_tok=owner(), results=variant(tmp_path, "bob")))
        assert st["status"] == "stopped", st
        assert "daily budget" in st["message"] and "own API key" in st["message"], st["message"]
        assert 0 < len(host_judge.state.calls) <= 20
        assert app.svc.store.usage(today()) <= 1000
        # ...and it stays shut for a third visitor, who is told the same without a single host call.
        carol = app.client("192.0.2.99")
        host_judge.state.calls.clear()
        st = wait_end(carol, grade(carol, JUDGE_HOST, owner_tok=owner(), results=variant(tmp_path, "carol")))
        assert st["status"] == "stopped" and "daily budget" in st["message"], st
        assert host_judge.state.calls == []
    finally:
        app.svc.store.add_usage(today(), others, -seeded)   # the other tests of this module use the host key


# --- keys never leak --------------------------------------------------------------------------------------
def _files_under(root: Path):
    return [p for p in root.rglob("*") if p.is_file()] if root.exists() else []


def test_keys_never_leak(app, host_judge, visitor_judge, tmp_path, capfd, caplog):
    from app import JUDGE_HOST, JUDGE_OWN

    caplog.set_level(logging.DEBUG)
    for noisy in ("httpcore", "hpack"):                # transport traces of the test's own clients
        caplog.set_level(logging.INFO, logger=noisy)
    # The judges answer a few calls and hold the rest until the test has pressed Stop: the runs below are still
    # grading when they are stopped, however fast or busy the machine is.
    probe_gate, own_gate = CallGate(), CallGate()
    with FakeJudgeServer(FakeState(gate=probe_gate)) as attacker:   # a visitor's endpoint: logs any key it gets
        c, tok = app.client("203.0.113.50"), owner()
        # The host judge ignores any base URL sent with it: calls reach only the host's endpoint.
        host_run = grade(c, JUDGE_HOST, owner_tok=tok, url=attacker.url, key="sk-ignored",
                         results=variant(tmp_path, "keys-host"))
        wait_end(c, host_run)
        c.predict(host_run, JUDGE_HOST, attacker.url, "gpt-4-0613", "", tok, api_name="/resume")
        wait_end(c, host_run)
        assert host_judge.state.calls and auths(host_judge) == {f"Bearer {HOST_KEY}"}
        assert attacker.state.calls == []

        # A visitor's own key goes to their endpoint only.
        own_gate.release(30)          # a few samples (each is graded by several judge runs), then held
        visitor_judge.state.gate = own_gate
        try:
            own_run = grade(c, JUDGE_OWN, owner_tok=tok, url=visitor_judge.url, key=VISITOR_KEY,
                            results=variant(tmp_path, "keys-own"))
            wait_for(c, own_run, lambda s: s["done"] >= 3)
            c.predict(own_run, tok, api_name="/stop")
            own_gate.open()             # the calls in flight answer within the stop's grace
            assert wait_end(c, own_run)["status"] == "stopped"
        finally:
            own_gate.open()
            visitor_judge.state.gate = None
        assert auths(visitor_judge) == {f"Bearer {VISITOR_KEY}"}
        assert f"Bearer {VISITOR_KEY}" not in auths(host_judge)

        # A run against a visitor-chosen endpoint, resumed with "Server's judge": still never the host's key.
        probe_gate.release(3)
        probe = grade(c, JUDGE_OWN, owner_tok=tok, url=attacker.url, key="", results=variant(tmp_path, "probe"))
        wait_for(c, probe, lambda s: s["done"] >= 3)
        c.predict(probe, tok, api_name="/stop")
        probe_gate.open()
        done = wait_end(c, probe)["done"]
        c.predict(probe, JUDGE_HOST, "", "gpt-4-0613", "", tok, api_name="/resume")
        wait_for(c, probe, lambda s: s["done"] >= done + 3)
        c.predict(probe, tok, api_name="/stop")
        wait_end(c, probe)
        assert attacker.state.calls
        assert not any(HOST_KEY in a or VISITOR_KEY in a for a in auths(attacker))

    # Everything a stranger or the operator can read: API answers, exports, the page, the disk, the logs.
    seen = []
    for rid in (host_run, own_run, probe):
        seen.append(json.dumps(status(c, rid)))
        seen.append(json.dumps(c.predict(rid, "v1_0", api_name="/sample")))
    for rid in (host_run, own_run):      # an override (owner only), then the exports the page offers
        seen.append(json.dumps(c.predict(rid, "v1_0", 0.5, "test", tok, api_name="/override"), default=str))
        app.svc.reading.downloads(app.svc.reading.view(rid))
    assert _files_under(app.data_dir / "exports"), "the exports (with run.json) should have been written"
    for path in ("", "config", "gradio_api/info", "gradio_api/config"):
        try:
            with urllib.request.urlopen(app.url + path, timeout=10) as r:
                seen.append(r.read().decode("utf-8", "replace"))
        except OSError:
            pass
    app.wait_idle()
    files = _files_under(app.data_dir) + _files_under(app.temp_dir)
    db = app.data_dir / "mmvet-grader.db"
    assert db in files
    out, err = capfd.readouterr()
    texts = seen + [out, err, caplog.text] + [json.dumps(list(app.svc.store.iter_tables()), default=str)]
    for key in (HOST_KEY, VISITOR_KEY):
        bkey = key.encode()
        for p in files:
            assert bkey not in p.read_bytes(), f"{key[:10]}… found in {p}"
        for t in texts:
            assert key not in t


def test_visitor_key_without_base_url_never_falls_back_to_the_hosts_endpoint(monkeypatch, tmp_path, host_judge):
    """A host configures its endpoint with OPENAI_BASE_URL (`AppSettings.from_env`); the SDK would send a key
    given with no base URL there. "Empty = OpenAI" must mean OpenAI, so the visitor's key never reaches it."""
    import asyncio

    from app import JUDGE_HOST, JUDGE_OWN, OPENAI_PUBLIC_URL, AppSettings
    from mmvet_core.judging.judge import make_judge
    from mmvet_core.service import GradingService, JudgeChoice

    monkeypatch.setenv("OPENAI_BASE_URL", host_judge.url)
    monkeypatch.setenv("OPENAI_API_KEY", HOST_KEY)
    svc = GradingService(AppSettings(data_dir=tmp_path, host_key=HOST_KEY, host_base_url=host_judge.url,
                                     allow_private_endpoints=True))
    jset, key, uses_host = svc.inputs.judge_for(JudgeChoice(JUDGE_OWN, "  ", "gpt-4-0613", VISITOR_KEY))
    assert (key, uses_host) == (VISITOR_KEY, False)
    judge = make_judge(jset, key)
    try:
        assert str(judge._client.base_url).rstrip("/") == OPENAI_PUBLIC_URL
        assert judge._client.api_key == VISITOR_KEY
    finally:
        asyncio.run(judge.aclose())
    # and a URL sent along with "Server's judge" is ignored
    jset, key, uses_host = svc.inputs.judge_for(JudgeChoice(JUDGE_HOST, "http://evil.example/v1", "other-model", ""))
    assert (jset.base_url, jset.model, key, uses_host) == (host_judge.url, "gpt-4-0613", HOST_KEY, True)
    svc.jobs.shutdown()
    svc.store.close()


# --- share view is read-only ------------------------------------------------------------------------------
def test_share_view_is_read_only(app, visitor_judge, tmp_path):
    from app import JUDGE_OWN

    c, tok = app.client("203.0.113.60"), owner()
    stranger = app.client("198.51.100.60")
    # the judge answers 20 calls and holds the rest: the run is still grading after the 8 refused calls below,
    # however long they take
    gate = visitor_judge.state.gate = CallGate()
    gate.release(20)
    try:
        run_id = grade(c, JUDGE_OWN, owner_tok=tok, url=visitor_judge.url, key=VISITOR_KEY,
                       results=variant(tmp_path, "share"))
        wait_for(c, run_id, lambda s: s["done"] >= 1)
        for bad in ("", owner()):
            with pytest.raises(AppError, match="read-only"):
                stranger.predict(run_id, bad, api_name="/stop")
            with pytest.raises(AppError, match="read-only"):
                stranger.predict(run_id, JUDGE_OWN, visitor_judge.url, "gpt-4-0613", VISITOR_KEY, bad,
                                 api_name="/resume")
            with pytest.raises(AppError, match="read-only"):
                stranger.predict(run_id, "v1_0", 1.0, "mine now", bad, api_name="/override")
            with pytest.raises(AppError, match="read-only"):
                stranger.predict(run_id, "v1_0", bad, api_name="/clear_override")
        assert status(stranger, run_id)["status"] == "running"   # the refused stop did nothing
        assert app.svc.store.overrides(run_id) == {}

        c.predict(run_id, tok, api_name="/stop")
        gate.open()                 # the calls in flight answer within the stop's grace
        st = wait_end(c, run_id)
        assert st["status"] == "stopped" and st["done"] < st["total"]
    finally:
        gate.open()
        visitor_judge.state.gate = None
    done = st["done"]
    c.predict(run_id, JUDGE_OWN, visitor_judge.url, "gpt-4-0613", VISITOR_KEY, tok, api_name="/resume")
    assert status(c, run_id)["status"] in ("running", "done")    # never the stale "stopped"
    wait_for(c, run_id, lambda s: s["done"] > done + 5)     # the owner's resume took effect
    c.predict(run_id, tok, api_name="/stop")
    assert wait_end(c, run_id)["status"] in ("stopped", "done")
    c.predict(run_id, "v1_0", 1.0, "checked by hand", tok, api_name="/override")
    assert app.svc.store.overrides(run_id) == {"v1_0": (1.0, "checked by hand")}


# --- runs are private -------------------------------------------------------------------------------------
def test_runs_are_private(app):
    from app import JUDGE_BASELINE

    c = app.client()
    for missing in (secrets.token_urlsafe(18), "", "../mmvet-grader.db", "1' OR '1'='1"):
        with pytest.raises(AppError, match="No such run"):
            status(c, missing)
        with pytest.raises(AppError):
            c.predict(missing, "v1_0", api_name="/sample")
    run_id = grade(c, JUDGE_BASELINE, owner_tok=owner())
    assert re.fullmatch(r"[A-Za-z0-9_-]+", run_id), run_id
    assert len(run_id) * 6 >= 128, run_id             # URL-safe base64: 6 bits per character
    assert wait_end(c, run_id)["status"] == "done"


# --- upload limits ----------------------------------------------------------------------------------------
def _snapshot(app: App) -> tuple[int, set[Path]]:
    return app.run_count(), set(_files_under(app.data_dir / "uploads"))


def test_oversized_results_file_is_refused(app, tmp_path):
    from app import BENCH_BUNDLED, JUDGE_BASELINE

    big = tmp_path / "big-results.json"
    filler = "x" * 10_000
    big.write_text(json.dumps({f"v1_{i}": filler for i in range(210)}))     # ~2.1 MB
    assert big.stat().st_size > 2_000_000
    before = _snapshot(app)
    c = app.client()
    for api in ("/grade", "/validate"):
        with pytest.raises(Exception) as exc:
            if api == "/grade":
                grade(c, JUDGE_BASELINE, owner_tok=owner(), results=big)
            else:
                c.predict(handle_file(str(big)), BENCH_BUNDLED, None, "", "All samples", 1, JUDGE_BASELINE,
                          "gpt-4-0613", api_name="/validate")
        msg = str(exc.value).lower()
        assert any(w in msg for w in ("limit", "too large", "maximum", "exceeds", "413")), msg
    # Gradio's server refuses it too (not only the client, which read the limit from the app's config).
    import httpx

    with big.open("rb") as f:
        r = httpx.post(app.url + "gradio_api/upload", files={"files": ("big-results.json", f)}, timeout=30)
    assert r.status_code == 413, (r.status_code, r.text[:200])
    assert "size" in r.text.lower()
    assert not list(app.temp_dir.rglob("big-results.json"))
    assert _snapshot(app) == before


def _zip(path: Path, entries: dict[str, bytes | int]) -> Path:
    with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED, compresslevel=9) as z:
        for name, data in entries.items():
            if isinstance(data, int):                # a run of zeros, written in chunks
                with z.open(name, "w", force_zip64=True) as f:
                    chunk = b"\0" * (1 << 20)
                    for _ in range(data // len(chunk)):
                        f.write(chunk)
            else:
                z.writestr(name, data)
    return path


@pytest.mark.parametrize("kind", ["bomb", "traversal"])
def test_hostile_benchmark_zip_is_refused(app, tmp_path, kind):
    from app import BENCH_UPLOAD, JUDGE_BASELINE

    meta = Path(__file__).resolve().parents[1] / "assets" / "mm-vet.json"
    meta_bytes = meta.read_bytes() if meta.exists() else b"{}"
    if kind == "bomb":
        z = _zip(tmp_path / "mm-vet.zip", {"mm-vet/mm-vet.json": meta_bytes, "mm-vet/images/v1_0.jpg": 200 << 20})
    else:
        z = _zip(tmp_path / "mm-vet.zip", {"mm-vet/mm-vet.json": meta_bytes, "../evil.txt": b"pwned",
                                           "mm-vet/../../evil2.txt": b"pwned",
                                           "../../../../evil3.txt": b"pwned"})
    assert z.stat().st_size < 1_000_000                 # under the upload limit: our own checks must refuse it
    before_runs = app.run_count()
    c = app.client()
    with pytest.raises(AppError) as exc:
        grade(c, JUDGE_BASELINE, owner_tok=owner(), bench=BENCH_UPLOAD, bench_file=handle_file(str(z)))
    msg = str(exc.value)
    assert msg.startswith("Benchmark:"), msg
    assert ("more than the allowed" in msg or "bomb" in msg) if kind == "bomb" else (
        "traversal" in msg or ".." in msg), msg
    assert app.run_count() == before_runs
    uploads = app.data_dir / "uploads"
    assert sum(p.stat().st_size for p in _files_under(uploads)) < 1_000_000   # nothing big was written
    roots = {tmp_path, app.data_dir, app.data_dir.parent, app.temp_dir, app.temp_dir.parent, Path.cwd()}
    for root in roots:
        for evil in ("evil.txt", "evil2.txt", "evil3.txt"):
            for p in (root.rglob(evil) if root != Path.cwd() else [q for q in [root / evil] if q.exists()]):
                assert uploads in p.parents, f"extracted outside {uploads}: {p}"


# --- fairness ----------------------------------------------------------------------------------------------
def test_a_slow_failing_judge_does_not_hold_back_a_healthy_run(app, visitor_judge, tmp_path):
    from app import JUDGE_OWN

    # the slow failing judge lets 60 calls through (500s after 1 s each) and holds the rest: its run cannot end
    # before the healthy one, however fast or slow the machine
    gate = CallGate()
    gate.release(60)
    with FakeJudgeServer(FakeState(latency=1.0, fail_500=150, gate=gate)) as bad:
        slow_c, slow_tok = app.client("203.0.113.70"), owner()
        fast_c, fast_tok = app.client("198.51.100.70"), owner()
        slow = grade(slow_c, JUDGE_OWN, owner_tok=slow_tok, url=bad.url, key="sk-slow",
                     results=variant(tmp_path, "slow"))
        fast = grade(fast_c, JUDGE_OWN, owner_tok=fast_tok, url=visitor_judge.url, key=VISITOR_KEY,
                     results=variant(tmp_path, "fast"))
        st = wait_end(fast_c, fast)
        assert st["status"] == "done" and st["done"] == 218, st
        other = status(slow_c, slow)
        assert other["status"] == "running" and other["done"] < other["total"], other
        slow_c.predict(slow, slow_tok, api_name="/stop")
        bad.state.latency = 0.0     # a graceful stop lets the samples in flight finish: do not wait on them
        gate.open()
        assert wait_end(slow_c, slow)["status"] == "stopped"
        app.wait_idle()
