"""Issue 33, parts 1-2: nobody rewrites a judge's check, and the successor board shows only what was verified.

Each test performs one attack of the issue's table (rows 1-5) through the service, as a visitor would, against the
fake judge server over real HTTP, and shows that it now holds:

1. a visitor grades the public reference predictions with the server's judge under the names a check uses
   (``judge-check <set>``), overrides every grade, and starts the check again (public and private host);
2. the same with the visitor's own key at the server judge's base URL (the answer cache and the check are the
   key's own);
3. the victim's card, ``/status``, the leaderboard (and MCP, which reads the card) show one stored estimate;
4. a visitor's endpoint that knows the public official grades, checked under a name that claims to be the
   server's judge, is never presented as a successor nor gives estimates;
5. no visitor's endpoint host name, nor the host's own gateway address, is shown to anyone.
"""
from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from mmvet_core.inputs.benchmark import load_bundled_v1
from mmvet_core.successors.judgecheck import REFERENCE_DIR, current_check, load_manifest, load_references
from mmvet_core.service import JUDGE_HOST, JUDGE_OWN, JudgeChoice, ServiceError
from tests.fake_judge import FakeJudgeServer, free_port, official_grades_answer
from tests.service_helpers import ALL, HOST_KEY, RESULTS, VISITOR_KEY, close, make_service, tagged, wait_check, \
    wait_done

HOST = JudgeChoice(JUDGE_HOST)
#: The victim: a model no check holds (the non-default rerun of LLaVA-1.5-7b; official total 30.7).
VICTIM = REFERENCE_DIR / "llava-v1.5-7b-rerun.json"


def _service(tmp_path, fake_judge, *, private: bool = True, data: Path | None = None):
    """The host's judge ``judge-b`` answers the official grades + 0.1 (a successor that drifts, correctably), for
    every reference set (the victim's answers are the non-default one's). `data`: a data folder to start from (a
    copy of it)."""
    fake_judge.state.answer_fn = official_grades_answer(0.1, which="all")
    if data is not None:
        shutil.copytree(data, tmp_path / "data")
    return make_service(tmp_path, fake_judge.url, judge_model="judge-b", allow_private_endpoints=private)


@pytest.fixture(scope="module")
def judge_port() -> int:
    return free_port()


@pytest.fixture(scope="module")
def answered(tmp_path_factory, judge_port) -> Path:
    """A data folder where the server's judge has answered its check's 1,308 prompts (paid once for the module):
    a test's service starts from a copy, and its `_host_check` makes the check from those stored answers, with
    no call (as the host's second `judge-check` does)."""
    tmp = tmp_path_factory.mktemp("answered")
    with FakeJudgeServer(port=judge_port) as judge:
        svc = _service(tmp, judge)
        try:
            _host_check(svc)
        finally:
            close(svc)
    return tmp / "data"


@pytest.fixture
def fake_judge(answered, judge_port):
    """The host's judge for one test (its own call log), at the address the stored answers were given at."""
    with FakeJudgeServer(port=judge_port) as server:
        yield server


def _host_check(svc):
    """The host checks its judge (the answers stored in `answered`: no call) and the check is correctable."""
    svc.judges.check_judge(HOST, "host-owner", "host-visitor")
    wait_check(svc, HOST, "host-owner")
    check = current_check(svc.store, svc.settings.host_settings())
    assert check is not None and check.correctable
    return check


def _grade(svc, path, choice, owner, visitor, name=""):
    run_id, _ = svc.runs.start(str(path), ALL, 1, choice, owner=owner, visitor=visitor, model_name=name)
    status = wait_done(svc, run_id)
    assert status["complete"], status
    return run_id


def _estimate(svc, run_id) -> dict:
    return svc.reading.status(run_id)["card"]["official_equivalent_estimate"]


def _poison(svc, choice, owner, visitor, sets: int) -> list[str]:
    """The attack of row 1: grade the reference predictions under the check's run names, then override every
    grade with the official one − 0.2 (as the issue's visitor did). Returns the poisoned runs."""
    bench = load_bundled_v1()
    runs = []
    for src, ref in list(zip(load_manifest(), load_references(which="all")))[:sets]:
        run_id = _grade(svc, REFERENCE_DIR / src.predictions, choice, owner, visitor, name=f"judge-check {ref.model}")
        for sid in bench.ids:
            official = [v for v in ref.official[sid] if v is not None]
            value = max(0.0, round(sum(official) / len(official) - 0.2, 3))
            svc.runs.override(run_id, owner, sid, value, "poison")
        runs.append(run_id)
    return runs


# --- row 1: overrides under the check's run names ------------------------------------------------------------
@pytest.mark.parametrize("private", [False, True], ids=["public-host", "private-host"])
def test_overriding_runs_named_like_a_checks_runs_changes_no_check_and_no_estimate(
        tmp_path, answered, fake_judge, private):
    """Before: the check found the visitor's runs by name and fingerprint and read their overrides (a victim's
    estimate 30.0 → 51.5). Now the check reads its own runs' judge answers only: started again by the attacker
    it adds nothing, and the victim's estimate stays what it was."""
    svc = _service(tmp_path, fake_judge, private=private, data=answered)
    try:
        before = _host_check(svc)
        victim = _grade(svc, VICTIM, HOST, "victim", "victim-visitor")
        estimate = _estimate(svc, victim)
        assert estimate["available"]

        poisoned = _poison(svc, HOST, "attacker", "attacker-visitor", sets=2)
        assert all(svc.reading.view(r).n_overrides == 218 for r in poisoned)
        calls = len(fake_judge.state.chat_calls())
        svc.judges.check_judge(HOST, "attacker", "attacker-visitor")
        wait_check(svc, HOST, "attacker")
        assert len(fake_judge.state.chat_calls()) == calls            # every answer was the check's already

        after = current_check(svc.store, svc.settings.host_settings())
        assert after.check_id == before.check_id and after.pairs == before.pairs
        assert after.total.shift == before.total.shift and after.total.delta_bar == before.total.delta_bar
        assert _estimate(svc, victim) == estimate

        # the check's own runs belong to no session: nobody can override, resume or delete them
        check_runs = [r for r in svc.store.list_runs("") if r.fingerprint.startswith("judge-check:")]
        assert len(check_runs) == 6
        for owner in ("", "attacker"):
            with pytest.raises(ServiceError):
                svc.runs.override(check_runs[0].id, owner, load_bundled_v1().ids[0], 0.0, "poison")
            with pytest.raises(ServiceError):
                svc.runs.delete(check_runs[0].id, owner)
    finally:
        close(svc)


# --- row 2: the visitor's own key at the server judge's base URL ---------------------------------------------
def test_a_visitors_key_at_the_servers_url_pays_for_its_own_check_and_never_touches_the_servers(
        tmp_path, answered, fake_judge):
    """Before: the visitor's check was answered from the host's cache (0 calls) and its overrides changed the
    server's check. Now the visitor's key gets no answer the host paid for (and the host none of the
    visitor's), and their check is their own: the server's check and its estimates stay as they were."""
    svc = _service(tmp_path, fake_judge, data=answered)
    try:
        before = _host_check(svc)
        victim = _grade(svc, VICTIM, HOST, "victim", "victim-visitor")
        estimate = _estimate(svc, victim)
        own = JudgeChoice(JUDGE_OWN, base_url=fake_judge.url, model="judge-b", api_key=VISITOR_KEY)

        _poison(svc, own, "attacker", "attacker-visitor", sets=1)
        paid_by_visitor = [c for c in fake_judge.state.chat_calls() if c["auth"] == f"Bearer {VISITOR_KEY}"]
        assert len(paid_by_visitor) >= 218                  # the host's answers to those prompts were not served

        message = svc.judges.check_judge(own, "attacker", "attacker-visitor")
        assert "your check, seen by you only" in message
        report = wait_check(svc, own, "attacker")
        assert "seen by you only" in report and fake_judge.url not in report
        paid_by_visitor = [c for c in fake_judge.state.chat_calls() if c["auth"] == f"Bearer {VISITOR_KEY}"]
        assert len(paid_by_visitor) >= 1243                 # every distinct reference prompt, paid by the key

        after = current_check(svc.store, svc.settings.host_settings())
        assert after.check_id == before.check_id and after.pairs == before.pairs
        assert _estimate(svc, victim) == estimate
        assert [r.check_id for r in svc.judges.judge_board()] == [before.check_id]

        # and the other way round: answers the visitor's key paid for never reach the host's runs
        fresh = tagged(tmp_path, "visitor-first")
        theirs = _grade(svc, fresh, own, "attacker", "attacker-visitor")
        # (and the server's check makes no estimate of answers another key got at the server's endpoint)
        assert "visitor's own key at this server's endpoint" in _estimate(svc, theirs)["reason"]
        host_calls = len([c for c in fake_judge.state.chat_calls() if c["auth"] == f"Bearer {HOST_KEY}"])
        _grade(svc, fresh, HOST, "victim", "victim-visitor")
        assert len([c for c in fake_judge.state.chat_calls() if c["auth"] == f"Bearer {HOST_KEY}"]) >= host_calls + 218
    finally:
        close(svc)


# --- row 3: one stored estimate on every surface ---------------------------------------------------------------
def test_the_card_status_and_leaderboard_read_one_stored_estimate_also_after_the_check_changes(
        tmp_path, answered, fake_judge):
    """Before: after the check changed, the victim's card kept 30.0 while the board showed 51.5. Now the card
    (and MCP, which reads it), /status and the leaderboard read one stored estimate per run and check: the same
    numbers, and the same new ones once the server's check grows."""
    svc = _service(tmp_path, fake_judge, data=answered)
    try:
        first = _host_check(svc)
        victim = _grade(svc, VICTIM, HOST, "victim", "victim-visitor")
        entry = svc.board.publish(victim, "victim model", "", "victim", visitor="victim-visitor")["entry"]

        def surfaces():
            status = svc.reading.status(victim)["card"]["official_equivalent_estimate"]
            card = svc.reading.card(svc.reading.view(victim))["official_equivalent_estimate"]
            [row] = [r for r in svc.board.leaderboard() if r.entry == entry]
            total = status["columns"][0]
            assert status == card
            assert row.official_equivalent == [round(total["estimate"], 1), round(total["low"], 1),
                                               round(total["high"], 1)]
            assert row.official_equivalent_check == status["check"]
            return status

        one = surfaces()
        assert one["check_id"] == first.check_id and one["label"] == ""
        assert one["columns"][0]["low"] <= 30.7 <= one["columns"][0]["high"]     # the victim's official total
        # the server's check grows (the host adds the non-default set): every surface moves to it together
        svc.judges.check_judge(HOST, "host-owner", "host-visitor", references="all")
        wait_check(svc, HOST, "host-owner")
        grown = current_check(svc.store, svc.settings.host_settings())
        assert grown.check_id != first.check_id
        two = surfaces()
        assert two["check_id"] == grown.check_id and two["label"] == "in-sample"   # the victim is now a reference
        stored = svc.store._query(__import__("sqlalchemy").text("SELECT check_id FROM estimates"))
        assert sorted(r[0] for r in stored) == sorted([first.check_id, grown.check_id])   # one per check
    finally:
        close(svc)


# --- rows 4 and 5: a visitor's endpoint that knows the public answers ----------------------------------------
@pytest.fixture
def evil_judge():
    """A visitor's endpoint: the official grades for the public reference prompts, 1.0 for everything else."""
    with FakeJudgeServer() as srv:
        srv.state.answer_fn = official_grades_answer(0.0, which="all", otherwise=lambda prompt, t: "1.0")
        yield srv


def test_a_visitors_endpoint_is_never_a_ranked_successor_nor_makes_estimates(
        tmp_path, answered, fake_judge, evil_judge):
    """Before: checked as "gpt-4o (this server's judge)", it ranked first on the successor board (Δ̄ 0.003,
    "close") and its runs got estimates (94.4) on the leaderboard. Now the name is refused, its check is its
    owner's alone, listed after the server's checks, unranked and unverified, and no run of it gets an estimate."""
    svc = _service(tmp_path, fake_judge, data=answered)
    try:
        host = _host_check(svc)
        claim = JudgeChoice(JUDGE_OWN, base_url=evil_judge.url, model="gpt-4o (this server's judge)", api_key="sk-x")
        with pytest.raises(ServiceError, match="not a model id"):
            svc.judges.check_judge(claim, "visitor", "evil")
        own = JudgeChoice(JUDGE_OWN, base_url=evil_judge.url, model="gpt-4o", api_key="sk-x")
        svc.judges.check_judge(own, "visitor", "evil")
        wait_check(svc, own, "visitor")

        for who in ("", "someone-else"):
            assert [(r.check_id, r.judge, r.endpoint, r.verified) for r in svc.judges.judge_board(owner=who)] == \
                [(host.check_id, "judge-b", "this server's judge", True)]
        board = svc.judges.judge_board(owner="visitor")
        assert [r.check_id for r in board][0] == host.check_id             # the server's check comes first
        mine = board[1]
        assert (mine.judge, mine.verified, mine.estimates) == ("gpt-4o", False, False)
        assert mine.endpoint == "your endpoint (private host), unverified" and mine.delta_bar < 0.01
        assert svc.judges.check_report(mine.check_id) == "" == svc.judges.check_report(mine.check_id, "someone-else")
        assert "seen by you only" in svc.judges.check_report(mine.check_id, "visitor")
        assert mine.check_id not in Path(svc.judges.judge_board_csv()).read_text()

        run_id = _grade(svc, RESULTS, own, "visitor", "evil")
        estimate = _estimate(svc, run_id)
        assert not estimate["available"] and "made by this server" in estimate["reason"]
        entry = svc.board.publish(run_id, "evil model", "", "visitor", visitor="evil")
        assert entry["official_equivalent"] is None and not entry["verified"]
    finally:
        close(svc)


def test_no_endpoint_address_is_shown_on_the_board_or_in_a_report(tmp_path, answered, fake_judge, evil_judge):
    """Before: a visitor's endpoint on an internal host name was shown to every visitor on the successor board
    and in the report. Now a visitor's endpoint reads as its kind (to its owner only), and the server's own
    gateway as "this server's judge", on the board, its CSV, the API's rows and every report."""
    from mmvet_core.successors.judgecheck import HOST as HOST_KIND, VISITOR, assess_judge, check_owner_hash

    svc = _service(tmp_path, fake_judge, data=answered)
    try:
        host = _host_check(svc)
        port = evil_judge.url.split(":")[-1].split("/")[0]
        local = JudgeChoice(JUDGE_OWN, base_url=f"http://localhost:{port}/v1", model="gpt-4o", api_key="sk-x")
        svc.judges.check_judge(local, "visitor", "evil")
        report = wait_check(svc, local, "visitor")
        # a check stored for an internal name (one this test machine cannot resolve), as the was
        bench, refs = load_bundled_v1(), load_references()
        result = assess_judge(bench, refs, {r.model: {sid: [0.5] for sid in bench.ids} for r in refs},
                              {"model": "judge-x", "base_url": "http://gpu-judge-07.corp.internal:8000/v1"},
                              resamples=200)
        corp = svc.store.put_judge_check("fp-corp", result.judge, result.to_dict(), refs=result.references,
                                         scope=VISITOR, owner_hash=check_owner_hash("visitor"))

        shown = [report, svc.judges.check_report(host.check_id), svc.judges.check_report(corp, "visitor"),
                 Path(svc.judges.judge_board_csv()).read_text(),
                 json.dumps([r.to_dict() for r in svc.judges.judge_board(owner="visitor")]),
                 svc.judges.judge_check_text(HOST, "host-owner")[0]]
        for text in shown:
            for address in ("localhost", "127.0.0.1", "gpu-judge-07", "corp.internal", f":{port}"):
                assert address not in text
        kinds = {r.check_id: r.endpoint for r in svc.judges.judge_board(owner="visitor")}
        assert kinds[host.check_id] == "this server's judge"
        assert kinds[corp] == "your endpoint (private host), unverified"
        assert "Judge check of judge-b at this server's endpoint" in svc.judges.check_report(host.check_id)
        assert {c["scope"] for c in svc.store.judge_checks()} == {HOST_KIND, VISITOR}
    finally:
        close(svc)


def test_a_check_stored_before_checks_said_who_made_them_is_trusted_by_nothing(tmp_path, fake_judge):
    """A check stored by an earlier release (scope "") may be a poisoned one: no estimate, no board row, no
    report rests on it (the host's `judge-check` makes it again at no cost: its answers are stored)."""
    from mmvet_core.successors.judgecheck import assess_judge, check_fingerprint, check_prompt_id, check_settings

    svc = _service(tmp_path, fake_judge)
    try:
        settings = check_settings(svc.settings.host_settings())
        bench, refs = load_bundled_v1(), load_references()
        result = assess_judge(bench, refs, {r.model: {sid: [0.5] for sid in bench.ids} for r in refs},
                              settings.to_dict(), resamples=200)
        old = svc.store.put_judge_check(check_fingerprint(settings), settings.to_dict(), result.to_dict(),
                                        prompt=check_prompt_id(), refs=result.references, scope="")
        assert current_check(svc.store, settings) is None
        assert svc.judges.judge_board() == [] and svc.judges.check_report(old) == ""
        assert svc.judges.judge_check_text(HOST, "host-owner") == ("", False)
    finally:
        close(svc)
