"""Judges (`mmvet_core.service.judges`): after the official judge's shutdown (issue 17, parts 1-2) what the judge
field offers, the stop before any paid call, the shutdown flag on the run card; the judge check, the successor
board and the official-equivalent estimate (a real store, the fake judge server over HTTP)."""
from __future__ import annotations

import time
from pathlib import Path

import pytest

from mmvet_core.service import (BENCH_BUNDLED, JUDGE_BASELINE, JUDGE_HOST, JUDGE_OWN, BenchmarkChoice,
                                GradingService, JudgeChoice, JudgeUnavailable, ServiceError, ServiceSettings)
from tests.fake_judge import FakeJudgeServer, FakeState
from tests.service_helpers import HOST_KEY, RESULTS, close, make_service, wait_check, wait_done
from tests.service_helpers import estimate_paragraph
from tests.cli_run import run_cli

ALL = BenchmarkChoice(BENCH_BUNDLED)


@pytest.fixture

def after_gpt4():
    with FakeJudgeServer(FakeState.after_gpt4()) as server:
        yield server


@pytest.fixture
def svc(tmp_path, after_gpt4):
    s = GradingService(ServiceSettings(data_dir=tmp_path / "data", host_key="sk-host", host_base_url=after_gpt4.url,
                                       allow_private_endpoints=True, run_concurrency=8))
    yield s
    s.jobs.shutdown()
    s.store.close()


@pytest.mark.parametrize("choice", [
    pytest.param(lambda url: JudgeChoice(JUDGE_HOST), id="host-judge"),
    pytest.param(lambda url: JudgeChoice(JUDGE_OWN, base_url=url, api_key="sk-visitor"), id="own-default-model"),
    pytest.param(lambda url: JudgeChoice(JUDGE_OWN, base_url=url, model="gpt-4", api_key="sk-visitor"),
                 id="own-gpt-4-alias"),
])
def test_the_shut_down_official_judge_is_refused_before_any_call_and_no_run_is_made(svc, after_gpt4, choice):
    with pytest.raises(JudgeUnavailable) as err:
        svc.runs.start(str(RESULTS), ALL, 1, choice(after_gpt4.url), owner="me", visitor="v")
    text = str(err.value)
    assert "shut down by OpenAI on 2026-10-23" in text and "can no longer be recomputed" in text
    assert "judge-b (shutdown 2026-12-11), judge-c" in text and "Check this judge first" in text
    assert [m.name for m in err.value.models.chat_models()] == ["judge-b", "judge-c"]
    assert after_gpt4.state.chat_calls() == []                 # nothing called, nothing substituted
    assert svc.reading.runs_of("me") == []


def test_a_judge_with_an_announced_shutdown_is_recorded_and_flagged_on_the_card(svc, after_gpt4):
    choice = JudgeChoice(JUDGE_OWN, base_url=after_gpt4.url, model="judge-b", api_key="sk-visitor")
    run_id, started = svc.runs.start(str(RESULTS), ALL, 1, choice, owner="me", visitor="v")
    assert started
    deadline = time.time() + 60
    while svc.jobs.is_running(run_id):
        assert time.time() < deadline
        time.sleep(0.02)
    card = svc.reading.status(run_id)["card"]
    assert card["judge_shutdown_date"] == "2026-12-11"
    assert "judge-b" in card["judge_shutdown_note"] and "2026-12-11" in card["judge_shutdown_note"]
    assert svc.judges.judge_note(run_id) == card["judge_shutdown_note"]
    assert card["status"] == "done"


def test_the_judge_field_offers_what_the_endpoint_serves_with_the_facts(svc, after_gpt4):
    models, rows = svc.judges.offered(JudgeChoice(JUDGE_HOST))
    assert [(r.name, r.shutdown_date and r.shutdown_date.isoformat()) for r in rows] == [
        ("judge-b", "2026-12-11"), ("judge-c", None)]
    assert rows[0].label() == "judge-b · shutdown 2026-12-11"
    svc.judges.offered(JudgeChoice(JUDGE_HOST))
    assert len(after_gpt4.state.list_calls) == 1                # read once, then reused
    models, rows = svc.judges.offered(JudgeChoice(JUDGE_BASELINE))
    assert not models.known and rows == []


def test_a_visitors_private_endpoint_is_not_listed_on_a_public_host(tmp_path, after_gpt4):
    svc = GradingService(ServiceSettings(data_dir=tmp_path / "data"))
    try:
        with pytest.raises(ServiceError, match="Base URL refused"):
            svc.judges.offered(JudgeChoice(JUDGE_OWN, base_url=after_gpt4.url, api_key="sk-visitor"))
        assert after_gpt4.state.list_calls == []
    finally:
        svc.jobs.shutdown()
        svc.store.close()


# ---- the judge check, the successor board, the estimate ----
@pytest.fixture
def host_svc(tmp_path, fake_judge):
    s = make_service(tmp_path, fake_judge.url)
    yield s
    close(s)


def test_judge_check_runs_in_the_background_and_its_report_stays(host_svc, fake_judge):
    from tests.fake_judge import official_grades_answer
    svc = host_svc
    # parsable answers: the default check's 1243 distinct prompts fit one visitor's daily budget of host calls
    # (the default fake judge's garbage answers would take the official re-asks beyond it)
    fake_judge.state.answer_fn = official_grades_answer()
    with pytest.raises(ServiceError, match="offline baseline is what the check compares"):
        svc.judges.check_judge(JudgeChoice(JUDGE_BASELINE), "me", "v")
    assert svc.judges.check_judge(JudgeChoice(JUDGE_HOST), "me", "v").startswith("Checking gpt-4-0613")
    deadline = time.time() + 60
    while (state := svc.judges.judge_check_text(JudgeChoice(JUDGE_HOST), "me"))[1]:
        assert state[0].startswith("checking: ") and time.time() < deadline
        time.sleep(0.05)
    text, running = svc.judges.judge_check_text(JudgeChoice(JUDGE_HOST), "me")
    assert not running and "1308 of 1308 reference grades" in " ".join(text.split()) and "Check " in text
    assert svc.reading.runs_of("me") == []            # the check's runs are not the visitor's runs


def test_a_checked_judge_gives_runs_an_estimate_on_the_card_and_in_the_downloads_and_a_board_row(tmp_path, fake_judge):
    """Issue 17 parts 4-5 through the service: the host's judge (judge-b) answers the official grades + 0.1; after
    its check, a run of llava-v1.5-7b graded by it carries the labelled estimate (card, run.json, its own CSV), and
    the board lists the judge with its interval and a link to the report."""
    from tests.fake_judge import official_grades_answer
    fake_judge.state.answer_fn = official_grades_answer(0.1)
    svc = GradingService(ServiceSettings(data_dir=tmp_path / "d", host_key=HOST_KEY, host_base_url=fake_judge.url,
                                         judge_model="judge-b", allow_private_endpoints=True, run_concurrency=8))
    try:
        _estimate_card_and_board(svc, fake_judge)
    finally:
        svc.jobs.shutdown()
        svc.store.close()


def _estimate_card_and_board(svc, fake_judge):
    assert "1308 judge calls at most" in svc.judges.check_cost() and "llava-v1.5-7b-rerun" in svc.judges.check_cost()
    svc.judges.check_judge(JudgeChoice(JUDGE_HOST), "me", "v")
    report = wait_check(svc, JudgeChoice(JUDGE_HOST))
    assert "1308 of 1308" in report and "[+" in report and fake_judge.url not in report  # host shown by name
    assert "Leave-one-model-out" in report
    run_id, _ = svc.runs.start(str(RESULTS.with_name("llava-v1.5-7b.json")), ALL, 1, JudgeChoice(JUDGE_HOST),
                               owner="me", visitor="v")
    wait_done(svc, run_id)
    card = svc.reading.card(svc.reading.view(run_id))
    assert card["official_equivalent"].startswith("official-equivalent estimate: ")
    assert "not the official MM-Vet metric" in card["official_equivalent"]
    est = card["official_equivalent_estimate"]["columns"][0]
    assert est["low"] <= 31.1 <= est["high"]                      # the official total of llava-v1.5-7b
    # llava-v1.5-7b is one of the check's references: labelled, and left out of its own correction (issue 23)
    assert card["official_equivalent_label"] == "in-sample" and "IN-SAMPLE" in card["official_equivalent"]
    assert card["official_equivalent_check"].startswith("check ") and "5 reference models" in card["official_equivalent_check"]
    files = svc.reading.downloads(svc.reading.view(run_id))
    assert any(f.endswith("official-equivalent-estimate-1runs.csv") for f in files)
    [row] = svc.judges.judge_board()
    assert (row.judge, row.endpoint, row.verdict, row.estimates) == ("judge-b", "this server's judge", "drifts", True)
    assert row.shift_low < row.shift < row.shift_high and row.tau > 0.8
    assert "1308 of 1308" in svc.judges.check_report(row.check_id) and svc.judges.check_report("nope") == ""
    csv_text = Path(svc.judges.judge_board_csv()).read_text()
    assert csv_text.splitlines()[0].startswith("judge,endpoint,delta_bar,shift")
    assert f"?check={row.check_id}" in csv_text


def test_a_host_key_check_obeys_the_visitor_budget_and_keeps_what_it_graded(tmp_path, fake_judge):
    """A visitor's check with the host's key is charged like grading: at the visitor's daily limit it stops, the
    grades made are kept and assessed, and the report says why it stopped."""
    from mmvet_core.judging.budget import BudgetLimits
    s = GradingService(ServiceSettings(data_dir=tmp_path / "d", host_key=HOST_KEY, host_base_url=fake_judge.url,
                                       allow_private_endpoints=True, run_concurrency=4,
                                       limits=BudgetLimits(per_visitor_daily=30)))
    try:
        s.judges.check_judge(JudgeChoice(JUDGE_HOST), "me", "v")
        text = wait_check(s, JudgeChoice(JUDGE_HOST))
        assert len(fake_judge.state.chat_calls()) <= 30
        assert "incomplete" in text and "daily limit of 30 judge calls with the host's key reached" in text
        assert s.store.usage(__import__("mmvet_core.judging.budget", fromlist=["today"]).today(), "v") <= 30
    finally:
        s.jobs.shutdown()
        s.store.close()


def test_a_hostile_judge_name_is_inert_on_the_board_and_in_its_csv(host_svc):
    svc = host_svc
    from mmvet_core.successors.table import board_rows, board_table, make_board_csv_text
    from mmvet_core.successors.judgecheck import assess_judge, load_references
    from mmvet_core.inputs.benchmark import load_bundled_v1
    bench, refs = load_bundled_v1(), load_references()
    result = assess_judge(bench, refs, {r.model: {sid: [0.5] for sid in bench.ids} for r in refs},
                          {"model": "=HYPERLINK(\"http://evil\")<img src=x>[x](javascript:alert(1))"}, resamples=200)
    svc.store.put_judge_check("fp", result.judge, result.to_dict(), refs="r")
    rows = board_rows(svc.store.judge_checks())
    cell = board_table(rows)[0][0]
    assert not set(cell) & set("<>[]()") and "javascript:alert" not in cell.replace("javascript", "js")
    line = make_board_csv_text(rows).splitlines()[1]
    assert line.startswith("\"'=HYPERLINK") or line.startswith("'=HYPERLINK")


def test_checking_the_shut_down_official_judge_stops_before_any_paid_call_and_a_served_one_records_its_date(
        tmp_path):
    """The app's check goes through the same preflight as grading: the official judge an endpoint no longer serves
    is never called; a judge with an announced shutdown gets it recorded (the board's shutdown column)."""
    from tests.fake_judge import FakeJudgeServer, FakeState
    with FakeJudgeServer(FakeState.after_gpt4()) as srv:
        for model, data in (("gpt-4-0613", "a"), ("judge-b", "b")):
            s = GradingService(ServiceSettings(data_dir=tmp_path / data, host_key=HOST_KEY, host_base_url=srv.url,
                                               judge_model=model, allow_private_endpoints=True, run_concurrency=8))
            try:
                s.judges.check_judge(JudgeChoice(JUDGE_HOST), "me", "v")
                text = wait_check(s, JudgeChoice(JUDGE_HOST))
                if model == "gpt-4-0613":
                    assert text.startswith("The check stopped: The official MM-Vet judge gpt-4-0613 was shut down")
                    assert "2026-10-23" in text and "judge-b" in text and "judge-c" in text
                    assert srv.state.chat_calls("gpt-4-0613") == []
                else:
                    [row] = s.judges.judge_board()
                    assert (row.judge, row.shutdown) == ("judge-b", "2026-12-11")
            finally:
                s.jobs.shutdown()
                s.store.close()


def test_a_run_unlike_the_references_is_labelled_on_the_cli_line_the_card_status_mcp_and_the_leaderboard(tmp_path):
    """Issue 30 part 3: llava-v1.5-7b-rerun (no reference of the check) with a third of its answers replaced by
    "I don't know." is graded by judge-b (official + 0.1; a refusal gets 0.1 like any answer GPT-4 gave 0), whose
    check is stored here. Every surface of the estimate says "unlike the references" with the reason: the CLI line,
    the run card, /status, MCP run_scores and the leaderboard's estimate column."""
    import json

    from mmvet_core.inputs.benchmark import load_bundled_v1
    from mmvet_core.judging.judge import JudgeSettings
    from mmvet_core.successors.judgecheck import assess_judge, check_prompt_id, check_settings, load_references
    from mmvet_core.store import Store
    from tests.fake_judge import official_grades_answer, simulate_grades
    from mmvet_app.mcp import scores_of

    bench = load_bundled_v1()
    answer = official_grades_answer(0.1, which="all", otherwise=lambda p, t: "0.1")
    rerun = json.loads((RESULTS.parent / "llava-v1.5-7b-rerun.json").read_text(encoding="utf-8"))
    unlike = tmp_path / "rerun-refusing.json"
    unlike.write_text(json.dumps({sid: "I don't know." if k % 3 == 0 else rerun[sid]
                                  for k, sid in enumerate(bench.ids)}), encoding="utf-8")
    with FakeJudgeServer(FakeState(answer_fn=answer, model_reported="judge-b")) as srv:
        refs = load_references()
        settings = check_settings(JudgeSettings(base_url=srv.url, model="judge-b"))
        check = assess_judge(bench, refs, {r.model: simulate_grades(answer, r.predictions) for r in refs},
                             settings.to_dict(), resamples=300)
        svc = make_service(tmp_path, srv.url, judge_model="judge-b")
        try:
            svc.store.put_judge_check(settings.fingerprint(), settings.to_dict(), check.to_dict(),
                                      prompt=check_prompt_id(), refs=check.references)
            run_id, _ = svc.runs.start(str(unlike), ALL, 1, JudgeChoice(JUDGE_HOST), owner="me", visitor="v")
            status = wait_done(svc, run_id)
            card = status["card"]
            # ~20 official: below the references too (extrapolated), and unlike them in kind
            assert card["official_equivalent_label"] == "extrapolated, unlike the references"
            assert "UNLIKE THE REFERENCES: refusals or empty answers 3" in card["official_equivalent"]
            assert card["official_equivalent_unlike"][0].startswith("refusals or empty answers 3")
            mcp = scores_of(svc, svc.store.get_run(run_id), False)["official_equivalent"]
            assert mcp["official_equivalent_label"] == "extrapolated, unlike the references"
            assert "UNLIKE THE REFERENCES: refusals" in mcp["official_equivalent"]
            svc.board.publish(run_id, "Refusing model", "", "me", visitor="v")
            [row] = [r for r in svc.board.leaderboard({"q": "Refusing model"}) if r.name == "Refusing model"]
            assert "unlike the references: refusals or empty answers 3" in row.estimate_text()
            assert row.to_json()["official_equivalent_label"].startswith(
                "extrapolated · unlike the references: refusals")
        finally:
            close(svc)
        db = tmp_path / "cli.db"
        store = Store(db)
        store.put_judge_check(settings.fingerprint(), settings.to_dict(), check.to_dict(), prompt=check_prompt_id(),
                              refs=check.references)
        store.close()
        proc = run_cli("grade", unlike, "--base-url", srv.url, "--judge-model", "judge-b", "--db", db,
                       "--out", tmp_path / "out", env={**__import__("os").environ, "OPENAI_API_KEY": "sk-x"})
    assert proc.returncode == 0, proc.stderr
    line = estimate_paragraph(proc.stdout)
    assert "UNLIKE THE REFERENCES: refusals or empty answers 3" in line


def test_the_app_exports_a_check_and_another_host_imports_it_verified_and_refuses_a_tampered_one(tmp_path):
    """Issue 30 part 1 through the service (the Judges view's buttons): host A's check of its judge-b (stored as a
    check stores it) is exported as a zipped dataset folder; host B, the same judge at its own endpoint, imports it
    after grading 63 of its prompts again, and refuses the same export with a tenth of its grades changed."""
    import json
    import zipfile

    from mmvet_core.inputs.benchmark import load_bundled_v1
    from mmvet_core.judging.judge import JudgeSettings
    from mmvet_core.successors.judgecheck import (assess_judge, check_prompt_id, check_settings, current_check,
                                                  load_references, visitor_scope)
    from tests.fake_judge import official_grades_answer, simulate_grades

    answer = official_grades_answer(0.1)
    bench, refs = load_bundled_v1(), load_references()
    with FakeJudgeServer(FakeState(answer_fn=answer, model_reported="judge-b")) as a, \
            FakeJudgeServer(FakeState(answer_fn=answer, model_reported="judge-b")) as b:
        svc_a = make_service(tmp_path / "a", a.url, judge_model="judge-b", public_url="https://lab-a.example/")
        svc_b = make_service(tmp_path / "b", b.url, judge_model="judge-b")
        try:
            with pytest.raises(ServiceError, match="no judge check of judge-b"):
                svc_a.judges.export_check(JudgeChoice(JUDGE_HOST))
            settings = check_settings(JudgeSettings(base_url=a.url, model="judge-b"))
            check = assess_judge(bench, refs, {r.model: simulate_grades(answer, r.predictions) for r in refs},
                                 settings.to_dict(), resamples=200)
            svc_a.store.put_judge_check(settings.fingerprint(), settings.to_dict(), check.to_dict(),
                                        prompt=check_prompt_id(), refs=check.references)
            zipped = svc_a.judges.export_check(JudgeChoice(JUDGE_HOST))
            with zipfile.ZipFile(zipped) as z:
                assert sorted(z.namelist()) == ["README.md", "check.jsonl"]
                assert "127.0.0.1" not in z.read("check.jsonl").decode()
                rows = [json.loads(x) for x in z.read("check.jsonl").decode().splitlines()]
            assert {r["host"] for r in rows} == {"lab-a.example"}     # named by its public address, as a host
            tampered = tmp_path / "check.jsonl"
            tampered.write_text("".join(json.dumps({**r, "grades": [0.0 if g >= 0.5 else 1.0 for g in r["grades"]]}
                                                   if k % 10 == 0 else r) + "\n" for k, r in enumerate(rows)))
            with pytest.raises(ServiceError, match="refused: verification on 63 prompts"):
                # (a seeded pick: with 63 of 1,243 prompts a tenth of them changed is missed about 5 % of the time)
                svc_b.judges.import_check(JudgeChoice(JUDGE_HOST), str(tampered), "me", "v", seed=0)
            assert current_check(svc_b.store, JudgeSettings(base_url=b.url, model="judge-b")) is None
            calls = len(b.state.chat_calls())
            message = svc_b.judges.import_check(JudgeChoice(JUDGE_HOST), zipped, "me", "v")
            # the prompts to re-grade are drawn anew for each import: only those not asked before are paid
            assert "verification on 63 prompts" in message and len(b.state.chat_calls()) - calls <= 63
            # a check imported on the page is the visitor's own (issue 33): never the server's check
            assert current_check(svc_b.store, JudgeSettings(base_url=b.url, model="judge-b")) is None
            imported = current_check(svc_b.store, JudgeSettings(base_url=b.url, model="judge-b"),
                                     visitor_scope("me", "host-judge"))
            assert imported.origin["verified"] and imported.correctable
        finally:
            close(svc_a)
            close(svc_b)
