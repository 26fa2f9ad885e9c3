"""`mmvet_core.judging.endpoints`: model lists, shutdown facts, the preflight before a run (issue 17, parts 1-2)."""
import asyncio
from datetime import date

import pytest

from mmvet_core.judging.endpoints import (CheckFacts, JudgeModel, JudgeRow, ModelList, format_judges, is_chat_model,
                                          judge_rows, list_judge_models, load_retirements, parse_model_list, preflight,
                                          retired_judge_message, retirement_note, retirement_of, stored_check_facts)
from mmvet_core.judging.judge import JudgeSettings, make_judge
from mmvet_core.successors.judgecheck import check_settings
from mmvet_core.judging.transport import EndpointPolicy
from tests.fake_judge import FakeJudgeServer, FakeState, free_port

TODAY = date(2026, 12, 4)


# --- pure ---------------------------------------------------------------------------------------------------
@pytest.mark.parametrize("model, shutdown, today, expected", [
    pytest.param("judge-b", date(2026, 12, 11), TODAY, "grades by judge-b cannot be re-run after 2026-12-11",
                 id="announced"),
    pytest.param("judge-b", date(2026, 12, 11), date(2026, 12, 11),
                 "judge-b was shut down on 2026-12-11: its grades cannot be re-run", id="on-the-day"),
    pytest.param("gpt-4-0613", date(2026, 10, 23), TODAY,
                 "gpt-4-0613 was shut down on 2026-10-23: its grades cannot be re-run", id="past"),
    pytest.param("judge-c", None, TODAY, None, id="no-date"),
])
def test_retirement_note(model, shutdown, today, expected):
    assert retirement_note(model, shutdown, today) == expected


@pytest.mark.parametrize("body, azure, expected", [
    pytest.param({"data": [{"id": "judge-b", "shutdown_date": "2026-12-11"}, {"id": "judge-c", "shutdown_date": None}]},
                 False, [("judge-b", date(2026, 12, 11)), ("judge-c", None)], id="openai-with-and-without-date"),
    pytest.param({"data": [{"id": "m"}]}, False, [("m", None)], id="local-server-no-field"),
    pytest.param({"data": [{"id": "m", "shutdown_date": 1796083200}]}, False, [("m", date(2026, 12, 1))],
                 id="unix-seconds"),
    pytest.param({"data": [{"id": "m", "shutdown_date": "soon"}]}, False, [("m", None)], id="unreadable-date"),
    pytest.param({"data": [{"id": ""}, {"no": "id"}, "x", {"id": 7}, {"id": "a\x1b[31m"}, {"id": "x" * 201},
                           {"id": "ok"}]}, False, [("ok", None)], id="unusable-entries-skipped"),
    pytest.param({"data": [{"id": "m"}, {"id": "m", "shutdown_date": "2026-12-11"}]}, False, [("m", None)],
                 id="duplicates-first-wins"),
    pytest.param(b'{"data": [{"id": "dep1", "model": "gpt-4o"}]}', True, [("dep1", None)], id="azure-deployments"),
])
def test_parse_model_list(body, azure, expected):
    assert [(m.name, m.shutdown_date) for m in parse_model_list(body, azure=azure)] == expected


@pytest.mark.parametrize("body", [
    pytest.param(b"<html>hi</html>", id="not-json"),
    pytest.param({"object": "list"}, id="no-data"),
    pytest.param({"data": "x"}, id="data-not-a-list"),
])
def test_parse_model_list_refuses_what_is_not_a_list(body):
    with pytest.raises(ValueError):
        parse_model_list(body)


def test_a_hostile_list_is_bounded():
    models = parse_model_list({"data": [{"id": f"m{i}"} for i in range(10_000)]})
    assert len(models) == 2000


@pytest.mark.parametrize("name, chat", [
    ("gpt-4.1", True), ("gpt-4o-2024-08-06", True), ("judge-b", True), ("Qwen2.5-7B-Instruct", True),
    ("text-embedding-3-small", False), ("whisper-1", False), ("tts-1-hd", False), ("dall-e-3", False),
    ("omni-moderation-latest", False), ("davinci-002", False), ("gpt-4o-realtime-preview", False),
    ("gpt-image-1", False), ("gpt-4o-audio-preview", False), ("gpt-4o-mini-transcribe", False),
], ids=lambda v: str(v))
def test_is_chat_model(name, chat):
    assert is_chat_model(name) is chat


def test_the_official_judges_shutdown_is_data():
    retired = load_retirements()
    for name in ("gpt-4-0613", "gpt-4"):
        assert (retired[name].provider, retired[name].shutdown_date, retired[name].announced) == (
            "OpenAI", date(2026, 10, 23), date(2026, 4, 22))
    assert retirement_of("judge-b") is None


def test_the_message_names_the_shutdown_the_metric_the_served_judges_and_the_check():
    models = ModelList((JudgeModel("judge-b", date(2026, 12, 11)), JudgeModel("judge-c"),
                        JudgeModel("whisper-1")), source="GET /v1/models")
    text = retired_judge_message("gpt-4-0613", retirement_of("gpt-4-0613"), models)
    assert "The official MM-Vet judge gpt-4-0613 was shut down by OpenAI on 2026-10-23" in text
    assert "the official MM-Vet metric can no longer be recomputed" in text
    assert "Recorded official grades stay valid" in text
    assert "Judges this endpoint serves: judge-b (shutdown 2026-12-11), judge-c." in text
    assert "whisper" not in text and "judge-check" in text and "none is picked for you" in text
    unknown = retired_judge_message("gpt-4-0613", retirement_of("gpt-4-0613"), ModelList(None, reason="HTTP 404"))
    assert "This endpoint does not list its models (HTTP 404)" in unknown


def test_a_long_list_is_cut_in_the_message():
    models = ModelList(tuple(JudgeModel(f"m{i:03d}") for i in range(100)))
    text = retired_judge_message("gpt-4", retirement_of("gpt-4"), models)
    assert "m029" in text and "m030" not in text and "… and 70 more" in text


def test_judge_rows_and_labels_carry_the_facts():
    rows = [JudgeRow("judge-b", date(2026, 12, 11), None, "grades by judge-b cannot be re-run after 2026-12-11"),
            JudgeRow("judge-c", None, CheckFacts(0.0523, 1.26, (0.4, 2.1)), None)]
    assert rows[0].label() == "judge-b · shutdown 2026-12-11"
    assert rows[1].label() == "judge-c · Δ̄ 0.052, total shift +1.3 [+0.4, +2.1]"
    text = format_judges(rows, ModelList((JudgeModel("judge-b"), JudgeModel("judge-c")), "GET /v1/models"),
                         "http://x/v1", TODAY)
    assert "judge-b  2026-12-11  not checked  (grades by judge-b cannot be re-run after 2026-12-11)" in text
    assert "is not among them" in text


# --- against a real endpoint (the fake judge server) -----------------------------------------------------------
def _list(settings, key="sk-test", **kw):
    return asyncio.run(list_judge_models(settings, key, **kw))


def test_the_model_list_keeps_shutdown_dates():
    with FakeJudgeServer(FakeState.after_gpt4()) as srv:
        models = _list(JudgeSettings(base_url=srv.url))
    assert models.known and models.source == "GET /v1/models"
    assert [(m.name, m.shutdown_date) for m in models.chat_models()] == [("judge-b", date(2026, 12, 11)),
                                                                         ("judge-c", None)]
    assert models.serves("judge-c") is True and models.serves("gpt-4-0613") is False


@pytest.mark.parametrize("state, reason", [
    pytest.param(FakeState.after_gpt4(listed=False), "the endpoint has no model list (HTTP 404)", id="no-list"),
    pytest.param(FakeState(raw_body=None, model_list=None), None, id="default-fake-lists-its-model"),
])
def test_an_endpoint_without_a_list_is_unknown_not_an_error(state, reason):
    with FakeJudgeServer(state) as srv:
        models = _list(JudgeSettings(base_url=srv.url))
    if reason is None:
        assert models.known and models.serves("gpt-4-0613")
    else:
        assert not models.known and models.serves("gpt-4-0613") is None and models.reason == reason


def test_unreachable_and_refused_endpoints_give_an_unknown_list_with_the_reason():
    unreachable = _list(JudgeSettings(base_url=f"http://127.0.0.1:{free_port()}/v1"))
    assert (unreachable.known, unreachable.reason) == (False, "the endpoint could not be reached")
    with FakeJudgeServer(FakeState.after_gpt4()) as srv:       # a visitor's private URL on a public host
        blocked = _list(JudgeSettings(base_url=srv.url), policy=EndpointPolicy(block_private=True))
        assert srv.state.list_calls == []
    assert not blocked.known and "does not call that address" in blocked.reason


def test_azure_lists_its_deployments():
    with FakeJudgeServer(FakeState.after_gpt4()) as srv:
        settings = JudgeSettings(provider="azure", base_url=srv.url.removesuffix("/v1"), api_version="2024-02-01",
                                 model="judge-b")
        models = _list(settings)
    assert models.source == "Azure deployments" and models.serves("judge-b")


def _preflight(state, model, today=TODAY):
    with FakeJudgeServer(state) as srv:
        settings = JudgeSettings(base_url=srv.url, model=model)

        async def go():
            judge = make_judge(settings, "sk-test")
            try:
                return await preflight(settings, "sk-test", today=today, judge=judge)
            finally:
                await judge.aclose()
        pre = asyncio.run(go())
        return pre, len(srv.state.chat_calls(model))


@pytest.mark.parametrize("state, model, stop, served, calls, shutdown", [
    pytest.param(FakeState.after_gpt4(), "gpt-4-0613", True, False, 0, date(2026, 10, 23), id="official-gone-listed"),
    pytest.param(FakeState.after_gpt4(listed=False), "gpt-4-0613", True, False, 1, date(2026, 10, 23),
                 id="official-gone-one-probe"),
    pytest.param(FakeState.after_gpt4(listed=False), "gpt-4", True, False, 1, date(2026, 10, 23),
                 id="alias-gone-one-probe"),
    pytest.param(FakeState(), "gpt-4-0613", False, True, 0, None, id="official-still-served"),
    pytest.param(FakeState(no_model_list=True), "gpt-4-0613", False, True, 1, None,
                 id="official-served-without-list"),
    pytest.param(FakeState.after_gpt4(), "judge-b", False, True, 0, date(2026, 12, 11), id="announced-shutdown"),
    pytest.param(FakeState.after_gpt4(listed=False), "judge-b", False, None, 0, None, id="other-judge-no-probe"),
    pytest.param(FakeState.after_gpt4(), "judge-x", False, False, 0, None, id="other-judge-never-stopped"),
])
def test_preflight(state, model, stop, served, calls, shutdown):
    pre, made = _preflight(state, model)
    assert (pre.stop, pre.served, made, pre.shutdown_date) == (stop, served, calls, shutdown)
    assert (pre.message() is not None) is stop


def test_preflight_flags_an_announced_shutdown_and_warns_about_what_it_cannot_confirm():
    pre, _ = _preflight(FakeState.after_gpt4(), "judge-b")
    assert pre.note == "grades by judge-b cannot be re-run after 2026-12-11" and pre.warnings == ()
    pre, _ = _preflight(FakeState.after_gpt4(), "judge-x")
    assert pre.warnings == ("judge-x is not in this endpoint's model list (it serves: judge-b (shutdown 2026-12-11), "
                            "judge-c); grading tries it anyway",)
    pre, _ = _preflight(FakeState(), "gpt-4-0613")
    assert pre.warnings == ("OpenAI shut down gpt-4-0613 on 2026-10-23; this endpoint still serves it",)


def test_stored_check_facts_are_found_per_endpoint_and_model(store):
    settings = JudgeSettings(base_url="http://judge.example/v1", model="judge-c")
    assert stored_check_facts(store, settings) is None
    checked = check_settings(settings)
    store.put_judge_check(checked.fingerprint(), checked.to_dict(),
                          {"columns": [{"name": "total", "delta_bar": 0.05, "shift": -2.0}], "close": True})
    assert stored_check_facts(store, settings) == CheckFacts(0.05, -2.0, None, True, 0.0)
    assert stored_check_facts(store, JudgeSettings(base_url="http://other/v1", model="judge-c")) is None
    models = ModelList((JudgeModel("judge-b", date(2026, 12, 11)), JudgeModel("judge-c")), "GET /v1/models")
    rows = judge_rows(models, JudgeSettings(base_url="http://judge.example/v1"), TODAY, store)
    assert [(r.name, r.check is not None, r.note is not None) for r in rows] == [("judge-b", False, True),
                                                                                 ("judge-c", True, False)]


@pytest.mark.parametrize("model, retired", [("gpt-4-0613", True), ("gpt-4", True), ("gpt-4.1", False)])
def test_the_cost_estimate_says_the_official_judge_is_shut_down(model, retired):
    from mmvet_core.inputs.benchmark import load_bundled_v1
    from mmvet_core.judging.estimate import estimate_cost

    text = estimate_cost(load_bundled_v1(), {}, 1, model).summary(model)
    assert ("was shut down by OpenAI on 2026-10-23: nothing is called unless your endpoint still serves it" in text) is retired
    assert "218 judge calls" in text and "with the Batch API" in text


@pytest.mark.parametrize("model, models, expected", [
    pytest.param("judge-b", "listed", "judge-b · shutdown 2026-12-11 — grades by judge-b cannot be re-run after "
                                      "2026-12-11", id="announced"),
    pytest.param("judge-c", "listed", "", id="nothing-to-say"),
    pytest.param("gpt-4-0613", "listed", "The official judge gpt-4-0613 was shut down by OpenAI on 2026-10-23 and "
                 "is not served by this endpoint: Grade stops before any call. It serves: judge-b (shutdown "
                 "2026-12-11), judge-c.", id="official-gone"),
    pytest.param("judge-x", "listed", "judge-x is not in this endpoint's model list", id="not-listed"),
    pytest.param("gpt-4-0613", "unknown", "one probe call asks whether it still serves the official judge "
                                          "gpt-4-0613 (shut down by OpenAI on 2026-10-23)", id="official-no-list"),
    pytest.param("judge-x", "unknown", "This endpoint does not list its models (HTTP 404)", id="no-list"),
])
def test_judge_facts_beside_the_chosen_judge(model, models, expected):
    from mmvet_core.judging.endpoints import judge_facts

    listed = ModelList((JudgeModel("judge-b", date(2026, 12, 11)), JudgeModel("judge-c")), "GET /v1/models")
    ml = listed if models == "listed" else ModelList(None, reason="HTTP 404")
    rows = [JudgeRow(m.name, m.shutdown_date, None, retirement_note(m.name, m.shutdown_date, TODAY))
            for m in ml.chat_models()]
    text = judge_facts(model, ml, rows)
    assert expected in text if expected else text == ""
