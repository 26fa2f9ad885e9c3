"""The named API endpoints a script would call, through gradio_client against the app on a real port.

The app's "Server's judge" is a fake OpenAI-compatible judge (real HTTP on 127.0.0.1), so every judge call is
visible in ``fake_server.state.calls``. Ownership: API callers pass their own token as ``owner_tok``.
"""
from __future__ import annotations

import time

import pytest
from gradio_client import handle_file
from tests.api_client import ApiClient
from gradio_client.exceptions import AppError

from app import BENCH_BUNDLED, JUDGE_BASELINE, JUDGE_HOST
from mmvet_core.scores.export import load_official_grades
from tests.app_fixtures import (  # noqa: F401  (fixtures)
    OFFICIAL_GRADES, RESULTS_DIR, V2_RESULTS, app_server, fake_server,
)
from tests.call_gate import CallGate

LLAVA_13B = RESULTS_DIR / "llava-v1.5-13b.json"
LLAVA_7B = RESULTS_DIR / "llava-v1.5-7b.json"
OWNER, INTRUDER = "api-owner-token-A", "someone-else-B"


@pytest.fixture(scope="module")
def client(app_server):
    return ApiClient(app_server.url, verbose=False, download_files=False)


def validate(client, path, judge=JUDGE_HOST, runs=1):
    """(report, estimate) of a results file."""
    out = client.predict(results=handle_file(str(path)), bench_c=BENCH_BUNDLED, bench_f=None, hub="",
                          sub="All samples", n_runs=runs, judge_c=judge, model="gpt-4-0613", api_name="/validate")
    return out["report"], out["estimate"]


def grade(client, path, owner=OWNER, runs=1, judge=JUDGE_HOST) -> str:
    out = client.predict(
        results=handle_file(str(path)), bench_c=BENCH_BUNDLED, bench_f=None, hub="", sub="All samples",
        n_runs=runs, judge_c=judge, url="", model="gpt-4-0613", key="", owner_tok=owner, api_name="/grade")
    run_id = out["run_id"]
    assert out["share_url"].endswith(f"/?run={run_id}")
    return run_id


def status(client, run_id) -> dict:
    return client.predict(run_id, api_name="/status")


def wait_status(client, run_id, want=("done",), timeout=180.0, cond=None) -> dict:
    deadline = time.time() + timeout
    while True:
        st = status(client, run_id)
        if (cond(st) if cond else st["status"] in want):
            return st
        if time.time() > deadline:
            raise TimeoutError(f"run {run_id} still {st['status']} ({st['done']}/{st['total']})")
        time.sleep(0.1)


def override(client, run_id, sample_id, score, reason, owner):
    return client.predict(run_id=run_id, sample_id=sample_id, score=score, reason=reason, owner_tok=owner,
                          api_name="/override")


def test_view_grades_imports_an_official_grade_file_without_any_judge_call(client, app_server, fake_server):
    before = list(fake_server.state.calls)
    path = OFFICIAL_GRADES / "llava-v1.5-13b_gpt-4-grade-1runs.json"
    out = client.predict(f=handle_file(str(path)), bench_c=BENCH_BUNDLED, bench_f=None, hub="",
                         sub="All samples", owner_tok=OWNER, api_name="/view_grades")
    run_id, share = out["run_id"], out["share_url"]
    assert share.endswith(f"/?run={run_id}")
    st = status(client, run_id)
    assert st["status"] == "done" and st["done"] == st["total"] == 218 and st["complete"]
    assert round(st["total_score"], 1) == 36.1
    assert fake_server.state.calls == before           # (empty: this module's first test) no judge call
    # per-sample grades are the file's, attempts marked as imported
    official = load_official_grades(path)
    detail = client.predict(run_id, "v1_5", api_name="/sample")
    assert detail["runs"][0]["score"] == official.scores["v1_5"][0]
    assert detail["runs"][0]["attempts"][0]["imported"] is True
    assert app_server.store.get_run(run_id).owner == OWNER


def test_validate_reports_coverage_and_cost(client):
    report, estimate = validate(client, LLAVA_13B, runs=2)
    assert "218 of 218 samples matched" in report and "ready to grade" in report
    assert "436 judge calls" in estimate
    report, estimate = validate(client, LLAVA_13B, judge=JUDGE_BASELINE)
    assert "no calls, no cost" in estimate and "NOT the MM-Vet metric" in estimate


def test_validate_errors_are_clear(client, tmp_path):
    report, estimate = validate(client, V2_RESULTS)
    assert "wrong benchmark" in report and "None of the 517 ids" in report
    assert estimate == "No estimate: the file is not ready to grade (see the report)."      # issue 19.5
    bad = tmp_path / "broken.json"
    bad.write_text('{"v1_0": ', encoding="utf-8")
    with pytest.raises(AppError, match=r"broken\.json: malformed JSON"):
        validate(client, bad)


def test_grade_then_poll_status_until_done(client, app_server, fake_server):
    n0 = len(fake_server.state.calls)
    run_id = grade(client, LLAVA_13B)
    st = wait_status(client, run_id)
    view = app_server.view(run_id)
    assert st["done"] == st["total"] == 218 and st["errored"] == 0 and st["complete"]
    assert st["total_score"] == pytest.approx(view.scores.total.mean)
    assert st["scores"]["total"]["mean"] == pytest.approx(view.scores.total.mean)
    assert st["flags"] == view.flag_counts()
    calls = fake_server.state.calls[n0:]
    assert len(calls) >= 218 and all(c["auth"] == "Bearer sk-test" for c in calls)
    assert {c["model"] for c in calls} == {"gpt-4-0613"} and {c["max_tokens"] for c in calls} == {3}
    assert app_server.store.get_run(run_id).owner == OWNER


@pytest.fixture(scope="module")
def graded_run(client, app_server):
    run_id = grade(client, LLAVA_13B)
    wait_status(client, run_id)
    return run_id


def test_sample_returns_texts_and_every_judge_attempt(client, app_server, graded_run):
    view = app_server.view(graded_run)
    fallback = next(sid for sid in view.benchmark.ids if view.grades[(sid, 0)].status == "fallback")
    d = client.predict(graded_run, fallback, api_name="/sample")
    sample = view.benchmark.samples[fallback]
    assert (d["id"], d["question"], d["ground_truth"]) == (fallback, sample.question, sample.answer)
    assert d["prediction"] == view.run.predictions[fallback]
    assert "fallback" in d["flags"]
    run = d["runs"][0]
    assert run["status"] == "fallback" and run["score"] == 0.0
    assert [a["temperature"] for a in run["attempts"]] == [0.0, 0.0, 0.5, 1.0, 1.5, 2.0]
    assert [a["retry_prompt"] for a in run["attempts"]] == [False] + [True] * 5
    assert run["attempts"][0]["content"] == "I cannot"
    with pytest.raises(AppError, match="No sample 'v9_9'"):
        client.predict(graded_run, "v9_9", api_name="/sample")
    with pytest.raises(AppError, match="No sample"):
        client.predict("no-such-run", "v1_0", api_name="/sample")


def test_override_needs_the_owner_token(client, app_server, graded_run):
    before = status(client, graded_run)["total_score"]
    with pytest.raises(AppError, match="read-only"):
        override(client, graded_run, "v1_0", 1.0, "mine now", INTRUDER)
    with pytest.raises(AppError, match="read-only"):
        override(client, graded_run, "v1_0", 1.0, "no token", "")
    assert app_server.store.overrides(graded_run) == {}
    with pytest.raises(AppError, match="between 0 and 1|greater than maximum"):
        override(client, graded_run, "v1_0", 7, "too high", OWNER)
    with pytest.raises(AppError, match="reason"):
        override(client, graded_run, "v1_0", 1.0, "  ", OWNER)

    current = app_server.view(graded_run).effective_scores()["v1_0"][0]
    new = 0.0 if current and current > 0.5 else 1.0
    out = override(client, graded_run, "v1_0", new, "checked by hand", OWNER)
    view = app_server.view(graded_run)
    assert view.overrides["v1_0"] == (new, "checked by hand")
    assert out["total_score"] == view.scores.total.mean and out["card"]["model"] == view.run.model_name
    after = status(client, graded_run)["total_score"]
    assert after == pytest.approx(view.scores.total.mean) and after != pytest.approx(before)
    assert "override" in status(client, graded_run)["flags"]

    with pytest.raises(AppError, match="read-only"):
        client.predict(run_id=graded_run, sample_id="v1_0", owner_tok=INTRUDER, api_name="/clear_override")
    client.predict(run_id=graded_run, sample_id="v1_0", owner_tok=OWNER, api_name="/clear_override")
    assert app_server.store.overrides(graded_run) == {}
    assert status(client, graded_run)["total_score"] == pytest.approx(before)


def test_stop_and_resume_are_owner_only_and_never_pay_twice(client, app_server, fake_server):
    state = fake_server.state
    gate = state.gate = CallGate()      # 40 answers, then the run waits on the judge until the owner stops it
    gate.release(40)
    try:
        n0 = len(state.calls)
        run_id = grade(client, LLAVA_7B)
        wait_status(client, run_id, cond=lambda st: st["done"] >= 4)
        with pytest.raises(AppError, match="read-only"):
            client.predict(run_id, INTRUDER, api_name="/stop")
        assert app_server.svc.jobs.is_running(run_id)
        client.predict(run_id, OWNER, api_name="/stop")
        gate.open()                     # the calls in flight answer within the stop's grace (and are kept)
        st = wait_status(client, run_id, want=("stopped",))
        assert 0 < st["done"] < 218 and not app_server.svc.jobs.is_running(run_id)
        assert "resume" in st["message"]
        answered = {(c["prompt"], c["temperature"]) for c in state.calls[n0:] if c.get("status") == 200}
        n1 = len(state.calls)

        with pytest.raises(AppError, match="read-only"):
            client.predict(run_id, JUDGE_HOST, "", "gpt-4-0613", "", INTRUDER, api_name="/resume")
        assert status(client, run_id)["status"] == "stopped" and len(state.calls) == n1
        client.predict(run_id, JUDGE_HOST, "", "gpt-4-0613", "", OWNER, api_name="/resume")
        st = wait_status(client, run_id)
        assert st["done"] == 218 and st["complete"]
        resumed = state.calls[n1:]
        assert resumed and not [c for c in resumed if (c["prompt"], c["temperature"]) in answered]
        assert st["total_score"] == pytest.approx(app_server.view(run_id).scores.total.mean)
    finally:
        gate.open()
        state.gate = None
        app_server.wait_idle()


def test_grade_refuses_bad_input(client, tmp_path):
    with pytest.raises(AppError, match="wrong benchmark"):
        grade(client, V2_RESULTS)
    with pytest.raises(AppError, match="reload the page|owner"):
        grade(client, LLAVA_13B, owner="")
    with pytest.raises(AppError, match="No such run"):
        status(client, "nope")


@pytest.mark.parametrize("endpoint", ["grade", "validate", "view_grades"])
def test_file_parameters_take_only_files_the_caller_uploaded(app_server, endpoint):
    """The endpoints' file parameters are `FileData`: a path on the server (the app's database, /etc/passwd) is
    refused by Gradio before the service sees it, and no run is created."""
    import httpx

    db = str(app_server.settings.data_dir / "mmvet-grader.db")
    before = len(dict(app_server.store.iter_tables())["runs"])
    for path in ("/etc/passwd", db):
        data = [{"path": path, "meta": {"_type": "gradio.FileData"}}]
        data += {"grade": [BENCH_BUNDLED, None, "", "All samples", 1, JUDGE_BASELINE, "", "", "", OWNER],
                 "validate": [BENCH_BUNDLED, None, "", "All samples", 1, JUDGE_BASELINE, ""],
                 "view_grades": [BENCH_BUNDLED, None, "", "All samples", OWNER]}[endpoint]
        r = httpx.post(f"{app_server.url}gradio_api/call/{endpoint}", json={"data": data}, timeout=30)
        assert r.status_code == 200, r.text
        answer = httpx.get(f"{app_server.url}gradio_api/call/{endpoint}/{r.json()['event_id']}", timeout=30).text
        assert "event: error" in answer and "root:" not in answer and "SQLite" not in answer, answer[:300]
    assert len(dict(app_server.store.iter_tables())["runs"]) == before


def test_the_successor_board_and_a_check_report_through_the_api(client, app_server):
    """A script reads the board (every judge checked on this server, with the interval of its shift) and a row's
    full report by its check id."""
    from mmvet_core.inputs.benchmark import load_bundled_v1
    from mmvet_core.successors.judgecheck import assess_judge, load_references
    bench, refs = load_bundled_v1(), load_references()
    result = assess_judge(bench, refs, {r.model: {sid: [0.5] for sid in bench.ids} for r in refs},
                          {"model": "api-judge", "base_url": "https://judge.example/v1"}, resamples=200)
    app_server.store.put_judge_check("fp-api-judge", result.judge, result.to_dict(), refs=result.references)
    rows = client.predict("abs_shift", api_name="/judge_board")
    [row] = [r for r in rows if r["judge"] == "api-judge"]
    # an endpoint by its kind, never its address (issue 33)
    assert row["endpoint"] == "an endpoint the host checked (public host)" and row["verified"]
    assert row["shift_low"] <= row["shift"] <= row["shift_high"]
    assert row["references"] == result.models and row["verdict"] == "drifts"
    report = client.predict(row["check_id"], api_name="/judge_check_report")
    assert report.startswith(("Close to the official judge", "Drifts from the official judge"))   # verdict first
    assert "Judge check of api-judge at an endpoint the host checked (public host) (official prompt)" in \
        " ".join(report.split())
    assert "judge.example" not in report
    assert client.predict("no-such-check", api_name="/judge_check_report") == ""
