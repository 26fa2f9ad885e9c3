"""Hostile visitors against the judge path of the app (issue 9 rows 7, 9, 10, 11, 12): each test performs the
attack over real HTTP (gradio_client against the app launched in-process, fake judges on 127.0.0.1)."""
from __future__ import annotations

import json
import urllib.request

import pytest

from tests.fake_judge import FakeJudgeServer, FakeState
from tests.test_app_hosting import (HOST_KEY, RESULTS, VISITOR_KEY, AppError, _close, _launch, grade, owner,
                                    status, variant, wait_end, wait_for)


@pytest.fixture
def host_judge():
    with FakeJudgeServer(FakeState(api_key=HOST_KEY)) as srv:
        yield srv


def _app(tmp_path, host_url, **kw):
    from mmvet_core.judging.budget import BudgetLimits

    kw.setdefault("limits", BudgetLimits(per_visitor_daily=10, global_daily=10_000))
    kw.setdefault("run_concurrency", 4)
    kw.setdefault("max_runs_per_visitor", 0)
    return _launch(tmp_path, host_url, **kw)


def _paid(srv: FakeJudgeServer) -> int:
    return len(srv.state.completed_calls())


# --- row 9: forged X-Forwarded-For -----------------------------------------------------------------------------
@pytest.mark.parametrize("hops", [0, 1])
def test_rotating_x_forwarded_for_does_not_multiply_the_budget(tmp_path, host_judge, hops):
    """One client sends each grade request with a new X-Forwarded-For (with one trusted proxy: entries prepended
    before the proxy's own). Before: each value was a new visitor (1,200 calls against a cap of 300)."""
    from app import JUDGE_HOST

    app = _app(tmp_path, host_judge.url, trusted_proxy_hops=hops)
    try:
        for i in range(4):
            forged = f"198.51.100.{i + 1}" if hops == 0 else f"198.51.100.{i + 1}, 203.0.113.7"
            c = app.client(forged)
            run_id = grade(c, JUDGE_HOST, owner_tok=owner(), results=variant(tmp_path, f"xff{hops}-{i}"))
            wait_end(c, run_id)
        assert _paid(host_judge) <= 10                  # the per-visitor cap, whatever the header said
    finally:
        _close(app)


# --- row 11: the salt of visitor ids is private ---------------------------------------------------------------
def _strings(node) -> list[str]:
    if isinstance(node, str):
        return [node]
    if isinstance(node, dict):
        return [s for v in node.values() for s in _strings(v)] + [k for k in node if isinstance(k, str)]
    if isinstance(node, list):
        return [s for v in node for s in _strings(v)]
    return []


def test_config_does_not_publish_the_salt_of_visitor_ids(tmp_path, host_judge):
    """Before: the salt was the BrowserState secret, which /config publishes; every usage row could be matched to
    its IP address by hashing candidate addresses with it."""
    from app import JUDGE_HOST
    from mmvet_core.judging.budget import visitor_id

    app = _app(tmp_path, host_judge.url)
    try:
        c = app.client()
        wait_end(c, grade(c, JUDGE_HOST, owner_tok=owner(), results=variant(tmp_path, "salt")))
        usage = dict(app.svc.store.iter_tables())["usage"]
        stored = {row["visitor"] for row in usage}
        assert stored
        with urllib.request.urlopen(app.url + "config") as r:
            config = json.loads(r.read())
        candidates = set(_strings(config))
        assert any(len(s) >= 32 for s in candidates)            # the browser-state secret is in there
        recomputed = {visitor_id(ip, s) for s in candidates for ip in ("127.0.0.1", "localhost", "unknown")}
        assert not stored & recomputed
        salt = (app.data_dir / ".visitor-salt").read_text().strip()
        assert salt not in json.dumps(config)
    finally:
        _close(app)


# --- row 12: SSRF through the visitor's endpoint, and redaction ---------------------------------------------------
def test_a_visitor_endpoint_on_loopback_is_refused_before_any_request(tmp_path, host_judge):
    from app import JUDGE_OWN

    with FakeJudgeServer(FakeState()) as internal:
        app = _app(tmp_path, host_judge.url, allow_private_endpoints=False)
        try:
            c = app.client()
            for url in (internal.url, internal.url.replace("127.0.0.1", "localhost"),
                        internal.url.replace("/v1", "/internal"), "file:///etc/passwd", "gopher://127.0.0.1:6379/"):
                with pytest.raises(AppError) as info:
                    grade(c, JUDGE_OWN, owner_tok=owner(), url=url, key=VISITOR_KEY)
                assert "does not call" in str(info.value) or "http" in str(info.value), url
                assert "hunter2" not in str(info.value)
            assert internal.state.calls == []                       # not one request reached it
            assert app.run_count() == 0
        finally:
            _close(app)


def test_redirects_and_upstream_bodies_never_reach_the_visitor(tmp_path, host_judge):
    """A visitor's endpoint answering 307 to an internal page (re-sending the POST) and one answering HTTP 200
    with an internal page: the run fails with a generic reason; the page's text is shown nowhere."""
    from app import JUDGE_OWN

    with FakeJudgeServer(FakeState()) as internal, \
            FakeJudgeServer(FakeState(redirect_to="")) as redirector, \
            FakeJudgeServer(FakeState(raw_body=b"INTERNAL-ONLY: db password hunter2")) as leaky:
        redirector.state.redirect_to = internal.url.replace("/v1", "/internal")
        app = _app(tmp_path, host_judge.url, allow_private_endpoints=True)
        try:
            c = app.client()
            run_id = grade(c, JUDGE_OWN, owner_tok=owner(), url=redirector.url, key=VISITOR_KEY)
            st = wait_end(c, run_id)
            assert st["status"] == "failed" and "redirect" in st["message"]
            assert [x for x in internal.state.calls if x.get("route") == "internal"] == []
            run_id = grade(c, JUDGE_OWN, owner_tok=owner(), url=leaky.url, key=VISITOR_KEY)
            st = wait_end(c, run_id)
            sample = c.predict(run_id, "v1_0", api_name="/sample")
            assert "hunter2" not in json.dumps(st) + json.dumps(sample)
            assert "hidden" in json.dumps(sample) or "hidden" in st["message"]
        finally:
            _close(app)


def test_a_host_judge_error_echoing_the_key_is_redacted(tmp_path):
    from app import JUDGE_HOST

    with FakeJudgeServer(FakeState(echo_key=True)) as host:
        app = _app(tmp_path, host.url)
        try:
            c = app.client()
            run_id = grade(c, JUDGE_HOST, owner_tok=owner())
            st = wait_end(c, run_id)
            sample = c.predict(run_id, "v1_0", api_name="/sample")
            seen = json.dumps(st) + json.dumps(sample)
            assert st["status"] == "failed"
            assert HOST_KEY not in seen and "Incorrect API key provided" not in seen
        finally:
            _close(app)


# --- row 10: the prediction length for the host's judge ----------------------------------------------------------
def test_padded_predictions_are_refused_for_the_hosts_judge(tmp_path, host_judge):
    from app import JUDGE_HOST

    preds = json.loads(RESULTS.read_text())
    padded = tmp_path / "padded.json"
    padded.write_text(json.dumps({k: v + " padding" * 25_000 for k, v in preds.items()}))
    app = _app(tmp_path, host_judge.url)
    try:
        with pytest.raises(AppError, match="longer than this server's judge accepts"):
            grade(app.client(), JUDGE_HOST, owner_tok=owner(), results=padded)
        assert _paid(host_judge) == 0
    finally:
        _close(app)


# --- row 7: run slots on resume and per visitor -------------------------------------------------------------------
def test_resume_and_start_respect_the_run_caps(tmp_path, host_judge):
    """Before: /resume ignored MMVET_MAX_ACTIVE_RUNS (5 running with a cap of 2), and one visitor could fill
    every slot."""
    from app import JUDGE_OWN

    with FakeJudgeServer(FakeState(hang=True)) as slow:
        app = _app(tmp_path, host_judge.url, allow_private_endpoints=True, max_active_runs=2, max_runs_per_visitor=1,
                   trusted_proxy_hops=1)
        try:
            alice, bob, carol = app.client("203.0.113.1"), app.client("203.0.113.2"), app.client("203.0.113.3")
            toks = {who: owner() for who in ("alice", "bob", "carol")}
            a1 = grade(alice, JUDGE_OWN, owner_tok=toks["alice"], url=slow.url, key=VISITOR_KEY)
            with pytest.raises(AppError, match="You already have 1"):     # another job (the same one is a/1)
                grade(alice, JUDGE_OWN, owner_tok=toks["alice"], url=slow.url, key=VISITOR_KEY,
                      results=variant(tmp_path, "alice-2"))
            grade(bob, JUDGE_OWN, owner_tok=toks["bob"], url=slow.url, key=VISITOR_KEY)
            with pytest.raises(AppError, match="as many runs"):
                grade(carol, JUDGE_OWN, owner_tok=toks["carol"], url=slow.url, key=VISITOR_KEY)
            alice.predict(a1, toks["alice"], api_name="/stop")
            wait_for(alice, a1, lambda s: s["status"] == "stopped")
            grade(carol, JUDGE_OWN, owner_tok=toks["carol"], url=slow.url, key=VISITOR_KEY)   # the freed slot
            with pytest.raises(AppError, match="as many runs"):
                alice.predict(a1, JUDGE_OWN, slow.url, "gpt-4-0613", VISITOR_KEY, toks["alice"], api_name="/resume")
            assert status(alice, a1)["status"] == "stopped"
            assert app.svc.jobs.running_count() == 2
        finally:
            for run in app.svc.store.list_runs(toks["bob"]) + app.svc.store.list_runs(toks["carol"]):
                app.svc.jobs.stop(run.id)
            _close(app)
