"""The service after the official judge's shutdown (issue 17, parts 1-2): what the judge field offers, the stop
before any paid call, the shutdown flag on the run card (a real store, the fake judge server over HTTP)."""
from __future__ import annotations

import time

import pytest

from mmvet_core.service import (BENCH_BUNDLED, JUDGE_BASELINE, JUDGE_HOST, JUDGE_OWN, BenchmarkChoice,
                                GradingService, JudgeChoice, JudgeUnavailable, ServiceSettings)
from tests.fake_judge import FakeJudgeServer, FakeState
from tests.test_service import RESULTS

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
        svc.start(str(RESULTS), ALL, 1, choice(after_gpt4.url), owner="me", visitor="v")
    text = str(err.value)
    assert "shut down by OpenAI on 2026-10-23" in text and "can no longer be recomputed" in text
    assert "judge-b (shutdown 2026-12-11), judge-c" in text and "Check this judge first" in text
    assert [m.name for m in err.value.models.chat_models()] == ["judge-b", "judge-c"]
    assert after_gpt4.state.chat_calls() == []                 # nothing called, nothing substituted
    assert svc.runs_of("me") == []


def test_a_judge_with_an_announced_shutdown_is_recorded_and_flagged_on_the_card(svc, after_gpt4):
    choice = JudgeChoice(JUDGE_OWN, base_url=after_gpt4.url, model="judge-b", api_key="sk-visitor")
    run_id, started = svc.start(str(RESULTS), ALL, 1, choice, owner="me", visitor="v")
    assert started
    deadline = time.time() + 60
    while svc.jobs.is_running(run_id):
        assert time.time() < deadline
        time.sleep(0.02)
    card = svc.status(run_id)["card"]
    assert card["judge_shutdown_date"] == "2026-12-11"
    assert "judge-b" in card["judge_shutdown_note"] and "2026-12-11" in card["judge_shutdown_note"]
    assert svc.judge_note(run_id) == card["judge_shutdown_note"]
    assert card["status"] == "done"


def test_the_judge_field_offers_what_the_endpoint_serves_with_the_facts(svc, after_gpt4):
    models, rows = svc.judges(JudgeChoice(JUDGE_HOST))
    assert [(r.name, r.shutdown_date and r.shutdown_date.isoformat()) for r in rows] == [
        ("judge-b", "2026-12-11"), ("judge-c", None)]
    assert rows[0].label() == "judge-b · shutdown 2026-12-11"
    svc.judges(JudgeChoice(JUDGE_HOST))
    assert len(after_gpt4.state.list_calls) == 1                # read once, then reused
    models, rows = svc.judges(JudgeChoice(JUDGE_BASELINE))
    assert not models.known and rows == []


def test_a_visitors_private_endpoint_is_not_listed_on_a_public_host(tmp_path, after_gpt4):
    svc = GradingService(ServiceSettings(data_dir=tmp_path / "data"))
    try:
        from mmvet_core.service import ServiceError
        with pytest.raises(ServiceError, match="Base URL refused"):
            svc.judges(JudgeChoice(JUDGE_OWN, base_url=after_gpt4.url, api_key="sk-visitor"))
        assert after_gpt4.state.list_calls == []
    finally:
        svc.jobs.shutdown()
        svc.store.close()
