"""The app's rules without Gradio (`mmvet_core.service`): a real store, a real judge over HTTP (the fake one)."""
from __future__ import annotations

import json
import threading
import time
import zipfile
from pathlib import Path

import pytest

from mmvet_core.service import (BENCH_BUNDLED, JUDGE_BASELINE, JUDGE_HOST, JUDGE_OWN, MODE_BATCH, BenchmarkChoice,
                                GradingService, JudgeChoice, ServiceError, ServiceSettings)
from tests.fake_judge import RETRY_MARK

RESULTS = Path(__file__).resolve().parent / "data" / "results" / "llava-v1.5-13b.json"
HOST_KEY, VISITOR_KEY = "sk-host", "sk-visitor"
ALL, BARD = BenchmarkChoice(BENCH_BUNDLED), BenchmarkChoice(BENCH_BUNDLED, subset="Bard set (168)")


@pytest.fixture
def svc(tmp_path, fake_judge):
    s = GradingService(ServiceSettings(data_dir=tmp_path / "data", host_key=HOST_KEY, host_base_url=fake_judge.url,
                                       allow_private_endpoints=True, run_concurrency=8))
    yield s
    s.jobs.shutdown()
    s.store.close()


def tagged(tmp_path: Path, tag: str) -> str:
    preds = json.loads(RESULTS.read_text(encoding="utf-8"))
    path = tmp_path / f"llava-{tag}.json"
    path.write_text(json.dumps({k: f"{v} [{tag}]" for k, v in preds.items()}), encoding="utf-8")
    return str(path)


def wait_done(svc: GradingService, run_id: str, timeout: float = 60.0) -> dict:
    deadline = time.time() + timeout
    while svc.jobs.is_running(run_id):
        assert time.time() < deadline, "the run did not end"
        time.sleep(0.02)
    return svc.status(run_id)


def test_the_same_job_started_twice_at_once_is_one_run_paid_once(svc, fake_judge, tmp_path):
    """A double click: two starts arrive together. One run, one bill; a third start after the end is a new run."""
    path = tagged(tmp_path, "twice")
    fake_judge.state.latency = 0.02
    out: list[tuple[str, bool]] = []
    starts = [threading.Thread(target=lambda: out.append(svc.start(path, ALL, 1, JudgeChoice(JUDGE_HOST),
                                                                   owner="me", visitor="v1")))
              for _ in range(2)]
    for t in starts:
        t.start()
    for t in starts:
        t.join()
    assert {rid for rid, _ in out} == {out[0][0]} and sorted(started for _, started in out) == [False, True]
    st = wait_done(svc, out[0][0])
    assert st["status"] == "done" and st["done"] == 218
    firsts = [c for c in fake_judge.state.completed_calls() if RETRY_MARK not in c["prompt"]
              and c["temperature"] == 0.0]
    assert len(firsts) == 218
    assert svc.store.run_usage(out[0][0])["calls"] == len(fake_judge.state.completed_calls())
    assert [r.id for r in svc.runs_of("me")] == [out[0][0]]
    # another owner's identical job is their own run (answers come from the shared cache: no call)
    other, started = svc.start(path, ALL, 1, JudgeChoice(JUDGE_HOST), owner="you", visitor="v2")
    assert started and other != out[0][0]


def test_only_the_owner_changes_a_run(svc, tmp_path):
    run_id, _ = svc.start(str(RESULTS), ALL, 1, JudgeChoice(JUDGE_BASELINE), owner="me", visitor="v")
    wait_done(svc, run_id)
    for call in (lambda o: svc.stop(run_id, o), lambda o: svc.resume(run_id, o, "v", JudgeChoice(JUDGE_HOST)),
                 lambda o: svc.override(run_id, o, "v1_0", 1.0, "mine"), lambda o: svc.rename(run_id, o, "x"),
                 lambda o: svc.delete(run_id, o), lambda o: svc.clear_override(run_id, o, "v1_0")):
        for intruder in ("", "you"):
            with pytest.raises(ServiceError, match="read-only"):
                call(intruder)
    assert svc.permissions(run_id, "you").owner is False and svc.permissions(run_id, "me").owner is True
    assert svc.store.get_run(run_id).model_name == "llava-v1.5-13b" and svc.store.overrides(run_id) == {}


@pytest.mark.parametrize("score, reason, message", [(None, "r", "number"), ("abc", "r", "number"),
                                                    (1.5, "r", "between 0 and 1"), (-0.1, "r", "between 0 and 1"),
                                                    (0.5, "  ", "reason")])
def test_an_override_is_checked_before_it_is_stored(svc, score, reason, message):
    run_id, _ = svc.start(str(RESULTS), ALL, 1, JudgeChoice(JUDGE_BASELINE), owner="me", visitor="v")
    wait_done(svc, run_id)
    with pytest.raises(ServiceError, match=message):
        svc.override(run_id, "me", "v1_0", score, reason)
    with pytest.raises(ServiceError, match="No sample"):
        svc.override(run_id, "me", "v9_9", 1.0, "r")
    assert svc.store.overrides(run_id) == {}
    assert svc.override(run_id, "me", "v1_0", "1", "checked") == "Override saved: v1_0 = 1."
    assert svc.store.overrides(run_id) == {"v1_0": (1.0, "checked")}


def test_buttons_follow_the_run(svc, fake_judge, tmp_path):
    fake_judge.state.latency = 0.2
    run_id, _ = svc.start(tagged(tmp_path, "perm"), ALL, 1, JudgeChoice(JUDGE_HOST), owner="me", visitor="v")
    p = svc.permissions(run_id, "me")
    assert (p.running, p.can_stop, p.can_resume, p.can_override) == (True, True, False, False)
    with pytest.raises(ServiceError, match="Wait until the run ends"):
        svc.override(run_id, "me", "v1_0", 1.0, "too early")
    svc.stop(run_id, "me")
    wait_done(svc, run_id)
    p = svc.permissions(run_id, "me")
    assert (p.running, p.can_stop, p.can_resume, p.can_override) == (False, False, True, True)
    assert svc.permissions(run_id, "you") == type(p)(owner=False)


def test_resume_sends_the_visitors_key_only_to_the_visitors_endpoint(svc, fake_judge, tmp_path):
    """A run graded with the host's judge and resumed with "My own key": the key goes to the URL the visitor
    gives now, never to the host's endpoint the run started on."""
    fake_judge.state.latency = 0.2
    run_id, _ = svc.start(tagged(tmp_path, "key"), ALL, 1, JudgeChoice(JUDGE_HOST), owner="me", visitor="v")
    svc.stop(run_id, "me")
    wait_done(svc, run_id)
    with pytest.raises(ServiceError, match="needs the API key"):
        svc.resume(run_id, "me", "v", JudgeChoice(JUDGE_OWN))
    n = len(fake_judge.state.calls)
    with pytest.raises(ServiceError, match="Base URL refused"):
        svc.resume(run_id, "me", "v", JudgeChoice(JUDGE_OWN, base_url="file:///etc/passwd", api_key=VISITOR_KEY))
    assert len(fake_judge.state.calls) == n
    svc.resume(run_id, "me", "v", JudgeChoice(JUDGE_OWN, api_key=VISITOR_KEY))   # empty URL = OpenAI's
    time.sleep(0.3)
    svc.stop(run_id, "me")
    wait_done(svc, run_id)
    assert not [c for c in fake_judge.state.calls[n:] if VISITOR_KEY in c.get("auth", "")]


def test_bard_subset_validation_names_the_other_ids_for_what_they_are(svc):
    v = svc.validate(str(RESULTS), BARD, 1, JudgeChoice(JUDGE_HOST))
    assert "168 of 168 samples matched" in v.report
    assert "50 ids are samples of the full benchmark outside the Bard set" in v.report
    assert "not in the benchmark" not in v.report
    assert "168 judge calls" in v.estimate and v.model_name == "llava-v1.5-13b"
    assert "outside" not in svc.validate(str(RESULTS), ALL, 1, JudgeChoice(JUDGE_HOST)).report


def test_run_card_my_runs_rename_delete_and_the_exported_run_json(svc, tmp_path):
    run_id, _ = svc.start(str(RESULTS), BARD, 2, JudgeChoice(JUDGE_BASELINE), owner="me", visitor="v",
                          model_name="  My <b>model</b>\n v2 ")
    wait_done(svc, run_id)
    card = svc.card(svc.view(run_id))
    assert card["model"] == "My <b>model</b>  v2"              # one line, kept as typed (shown as text)
    assert (card["subset"], card["n_samples"], card["runs"], card["status"]) == ("bard", 168, 2, "done")
    assert card["endpoint"] == "offline (no endpoint)" and card["calls"] == 0 and card["tool_version"]
    [summary] = svc.runs_of("me")
    assert (summary.model, summary.n_runs, summary.status) == ("My <b>model</b>  v2", 2, "done")
    assert summary.total == svc.view(run_id).scores.total.mean and "bard" in summary.benchmark
    assert svc.runs_of("you") == [] and svc.runs_of("") == []

    svc.rename(run_id, "me", "renamed/../model")
    files = svc.downloads(svc.view(run_id))
    zpath = next(f for f in files if f.endswith(".zip"))
    assert Path(zpath).parent == svc.exports_dir / run_id
    with zipfile.ZipFile(zpath) as z:
        assert json.loads(z.read("run.json"))["model"] == "renamed/../model"
        assert sorted(n.rsplit(".", 1)[1] for n in z.namelist()) == ["csv", "csv", "csv", "json", "json"]
    with pytest.raises(ServiceError, match="cannot be empty"):
        svc.rename(run_id, "me", " \n ")

    svc.delete(run_id, "me")
    assert svc.store.get_run(run_id) is None and svc.runs_of("me") == []
    assert not (svc.exports_dir / run_id).exists() and svc.store.grades(run_id) == []


@pytest.mark.parametrize("runs", [0, -1, 6, 10**9])
def test_judge_runs_out_of_range_are_refused_before_anything_is_paid(svc, fake_judge, runs):
    assert svc.validate(str(RESULTS), ALL, runs, JudgeChoice(JUDGE_HOST)).estimate == \
        "Judge runs must be between 1 and 5."
    with pytest.raises(ServiceError, match="between 1 and 5"):
        svc.start(str(RESULTS), ALL, runs, JudgeChoice(JUDGE_HOST), owner="me", visitor="v")
    assert svc.runs_of("me") == [] and fake_judge.state.calls == []


def test_batch_mode_needs_an_openai_compatible_judge(svc, tmp_path):
    with pytest.raises(ServiceError, match="Batch API works with OpenAI-compatible endpoints only"):
        svc.start(str(RESULTS), ALL, 1, JudgeChoice(JUDGE_BASELINE, mode=MODE_BATCH), owner="me", visitor="v")
    assert svc.runs_of("me") == []
    v = svc.validate(str(RESULTS), ALL, 1, JudgeChoice(JUDGE_HOST, mode=MODE_BATCH))
    assert "Batch API chosen" in v.estimate


def test_status_has_no_spread_until_the_runs_are_complete(svc, fake_judge, tmp_path):
    fake_judge.state.latency = 0.05
    run_id, _ = svc.start(tagged(tmp_path, "spread"), ALL, 2, JudgeChoice(JUDGE_HOST), owner="me", visitor="v")
    deadline = time.time() + 30
    while svc.status(run_id)["done"] < 40:
        assert time.time() < deadline
        time.sleep(0.05)
    svc.stop(run_id, "me")
    st = wait_done(svc, run_id)
    assert st["status"] == "stopped" and not st["complete"] and st["total_std"] is None
    assert "partial" in st["total_text"] and f"over {st['done']} of 436 grades" in st["total_text"]   # issue 19.3
    fake_judge.state.latency = 0.0
    svc.resume(run_id, "me", "v", JudgeChoice(JUDGE_HOST))
    st = wait_done(svc, run_id)
    assert st["complete"] and st["total_std"] is not None


def test_status_reads_progress_and_score_from_one_snapshot(svc, fake_judge, tmp_path):
    """Issue 26: polled while a run grades, /status gave a fresh count beside the scores of an older snapshot
    (progress 251 / 436 beside "over 205 of 436 grades"). Every answer now reads both from one snapshot."""
    import re

    fake_judge.state.latency = 0.02
    run_id, _ = svc.start(tagged(tmp_path, "snapshot"), ALL, 2, JudgeChoice(JUDGE_HOST), owner="me", visitor="v")
    answers = []
    try:
        while svc.jobs.is_running(run_id):               # poll as a crowd of viewers does, until the run ends
            answers.append(svc.status(run_id))
            time.sleep(0.01)
    finally:
        fake_judge.state.latency = 0.0
    partial = [(st["done"], re.search(r"over (\d+) of 436 grades", st["total_text"])) for st in answers]
    partial = [(done, int(m.group(1))) for done, m in partial if m]
    assert len({done for done, _ in partial}) > 3, partial              # the run was seen at several points
    assert [(d, n) for d, n in partial if d != n] == [], partial


def test_judge_check_runs_in_the_background_and_its_report_stays(svc, fake_judge):
    with pytest.raises(ServiceError, match="offline baseline is what the check compares"):
        svc.check_judge(JudgeChoice(JUDGE_BASELINE), "me", "v")
    assert svc.check_judge(JudgeChoice(JUDGE_HOST), "me", "v").startswith("Checking gpt-4-0613")
    deadline = time.time() + 60
    while (state := svc.judge_check_text(JudgeChoice(JUDGE_HOST), "me"))[1]:
        assert state[0].startswith("checking: ") and time.time() < deadline
        time.sleep(0.05)
    text, running = svc.judge_check_text(JudgeChoice(JUDGE_HOST), "me")
    assert not running and "654 of 654 reference grades" in text
    assert svc.runs_of("me") == []            # the check's runs are not the visitor's runs


def _wait_check(svc, choice, owner="me", timeout=120.0) -> str:
    deadline = time.time() + timeout
    while (state := svc.judge_check_text(choice, owner))[1]:
        assert time.time() < deadline, "the check did not end"
        time.sleep(0.05)
    return state[0]


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
    assert "654 judge calls at most" in svc.check_cost() and "llava-v1.5-7b-rerun" in svc.check_cost()
    svc.check_judge(JudgeChoice(JUDGE_HOST), "me", "v")
    report = _wait_check(svc, JudgeChoice(JUDGE_HOST))
    assert "654 of 654" in report and "[+" in report and fake_judge.url not in report    # host shown by name
    run_id, _ = svc.start(str(RESULTS.with_name("llava-v1.5-7b.json")), ALL, 1, JudgeChoice(JUDGE_HOST),
                          owner="me", visitor="v")
    wait_done(svc, run_id)
    card = svc.card(svc.view(run_id))
    assert card["official_equivalent"].startswith("official-equivalent estimate: ")
    assert "not the official MM-Vet metric" in card["official_equivalent"]
    est = card["official_equivalent_estimate"]["columns"][0]
    assert est["low"] <= 31.1 <= est["high"]                      # the official total of llava-v1.5-7b
    files = svc.downloads(svc.view(run_id))
    assert any(f.endswith("official-equivalent-estimate-1runs.csv") for f in files)
    [row] = svc.judge_board()
    assert (row.judge, row.endpoint, row.verdict, row.estimates) == ("judge-b", "this server's judge", "drifts", True)
    assert row.shift_low < row.shift < row.shift_high and row.tau == 1.0
    assert "654 of 654" in svc.check_report(row.check_id) and svc.check_report("nope") == ""
    csv_text = Path(svc.judge_board_csv()).read_text()
    assert csv_text.splitlines()[0].startswith("judge,endpoint,delta_bar,shift")
    assert f"?check={row.check_id}" in csv_text


def test_a_host_key_check_obeys_the_visitor_budget_and_keeps_what_it_graded(tmp_path, fake_judge):
    """A visitor's check with the host's key is charged like grading: at the visitor's daily limit it stops, the
    grades made are kept and assessed, and the report says why it stopped."""
    from mmvet_core.budget import BudgetLimits
    s = GradingService(ServiceSettings(data_dir=tmp_path / "d", host_key=HOST_KEY, host_base_url=fake_judge.url,
                                       allow_private_endpoints=True, run_concurrency=4,
                                       limits=BudgetLimits(per_visitor_daily=30)))
    try:
        s.check_judge(JudgeChoice(JUDGE_HOST), "me", "v")
        text = _wait_check(s, JudgeChoice(JUDGE_HOST))
        assert len(fake_judge.state.chat_calls()) <= 30
        assert "incomplete" in text and "daily limit of 30 judge calls with the host's key reached" in text
        assert s.store.usage(__import__("mmvet_core.budget", fromlist=["today"]).today(), "v") <= 30
    finally:
        s.jobs.shutdown()
        s.store.close()


def test_a_hostile_judge_name_is_inert_on_the_board_and_in_its_csv(svc):
    from mmvet_core.successors import board_rows, board_table, make_board_csv_text
    from mmvet_core.judgecheck import assess_judge, load_references
    from mmvet_core.benchmark import load_bundled_v1
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
                s.check_judge(JudgeChoice(JUDGE_HOST), "me", "v")
                text = _wait_check(s, JudgeChoice(JUDGE_HOST))
                if model == "gpt-4-0613":
                    assert text.startswith("The check stopped: The official MM-Vet judge gpt-4-0613 was shut down")
                    assert "2026-10-23" in text and "judge-b" in text and "judge-c" in text
                    assert srv.state.chat_calls("gpt-4-0613") == []
                else:
                    [row] = s.judge_board()
                    assert (row.judge, row.shutdown) == ("judge-b", "2026-12-11")
            finally:
                s.jobs.shutdown()
                s.store.close()
def test_after_overrides_status_and_run_json_name_the_count_and_keep_the_judge_only_total(svc, tmp_path):
    """Issue 19, item 1. Before: run.json said ``metric_note: null`` and the status had no word of the
    overrides."""
    run_id, _ = svc.start(str(RESULTS), ALL, 1, JudgeChoice(JUDGE_BASELINE), owner="me", visitor="v")
    judge_total = wait_done(svc, run_id)["total_score"]
    svc.override(run_id, "me", "v1_0", 1.0, "checked")
    svc.override(run_id, "me", "v1_1", 0.0, "checked")
    st = svc.status(run_id)
    assert (st["n_overrides"], st["judge_only_total"]) == (2, judge_total)
    assert st["scores"]["n_overrides"] == 2 and st["scores"]["judge_only_total"] == judge_total
    assert "2 human overrides" in st["metric_label"] and f"judge only: {judge_total:.1f}" in st["metric_label"]
    files = svc.downloads(svc.view(run_id))
    card = json.loads(Path(next(f for f in files if f.endswith("run.json"))).read_text())
    assert card["n_overrides"] == 2 and card["judge_only_total"] == judge_total
    assert "2 human overrides" in card["metric_note"] and "NOT the official MM-Vet metric" in card["metric_note"]
    note = Path(next(f for f in files if f.endswith(".txt"))).read_text()
    assert "HUMAN OVERRIDES: 2 sample(s)" in note
    svc.clear_override(run_id, "me", "v1_0")
    assert svc.status(run_id)["n_overrides"] == 1


def test_a_grade_file_missing_a_sample_opens_as_a_partial_total_that_names_the_id(svc, tmp_path):
    """Issue 19, item 4: the app opened it as a partial total without naming the missing id."""
    from mmvet_core import views
    grades = json.loads((Path(__file__).parent / "data" / "official-grades" /
                         "llava-v1.5-13b_gpt-4-grade-1runs.json").read_text())
    del grades["v1_145"]
    path = tmp_path / "llava-v1.5-13b_gpt-4-grade-1runs.json"
    path.write_text(json.dumps(grades))
    run_id = svc.open_grade_file(str(path), ALL, "me")
    view = svc.view(run_id)
    line = views.total_text(view)
    assert "partial" in line and "no grade for 1 of 218 samples of mmvet-v1 (v1_145)" in line
    assert svc.card(view)["message"] == ("imported from an official grade JSON (no judge call); partial: no grade "
                                         "for 1 of 218 samples of mmvet-v1 (v1_145)")
    [summary] = svc.runs_of("me")
    assert summary.row()[6] == f"{view.scores.total.mean:.1f} (partial)"


def test_an_uploaded_lmms_eval_samples_file_is_never_named_after_its_upload_folder(svc, tmp_path):
    """Issue 19, item 2: the app named lmms-eval samples files after Gradio's 64-character upload folder."""
    from mmvet_core.benchmark import load_bundled_v1
    from tests import toolkit_writers as tw
    folder = tmp_path / ("ab12" * 16)
    folder.mkdir()
    preds = json.loads(RESULTS.read_text(encoding="utf-8"))
    path = tw.lmms_v07_jsonl(folder / "20250103_101112_samples_mmvet.jsonl", preds, load_bundled_v1())
    v = svc.validate(str(path), ALL, 1, JudgeChoice(JUDGE_BASELINE))
    assert v.model_name == "20250103_101112_samples_mmvet" and "ab12ab12" not in v.report
    assert "Model: 20250103_101112_samples_mmvet (from the file name)" in v.report
    v = svc.validate(str(path), ALL, 1, JudgeChoice(JUDGE_BASELINE), original_name="llava-13b_samples.jsonl")
    assert v.model_name == "llava-13b_samples"
    run_id, _ = svc.start(str(path), ALL, 1, JudgeChoice(JUDGE_BASELINE), owner="me", visitor="v",
                          original_name="llava-13b_samples.jsonl")
    assert svc.store.get_run(run_id).model_name == "llava-13b_samples"
    wait_done(svc, run_id)


def test_a_file_not_ready_to_grade_has_no_cost_estimate(svc, tmp_path):
    """Issue 19, item 5: a file marked "NOT ready to grade" still showed a cost estimate."""
    preds = json.loads(RESULTS.read_text(encoding="utf-8"))
    path = tmp_path / "half.json"
    path.write_text(json.dumps(dict(list(preds.items())[:100])))
    v = svc.validate(str(path), ALL, 1, JudgeChoice(JUDGE_HOST))
    assert "NOT ready to grade" in v.report
    assert v.estimate == "No estimate: the file is not ready to grade (see the report)."
    assert "judge calls" in svc.validate(str(RESULTS), ALL, 1, JudgeChoice(JUDGE_HOST)).estimate


def test_grade_right_after_the_check_does_not_parse_the_file_again(svc, tmp_path):
    """Issue 19, item 6: ``?run=`` reached the address 2.5–6 s after Grade, most of it a second parse of the
    file in a fresh worker process. Validate then start: one parse; a changed file is parsed again."""
    calls = []
    real = svc.gate.box.call
    svc.gate.box.call = lambda fn, *a, **k: (calls.append(fn.__name__), real(fn, *a, **k))[1]
    path = tagged(tmp_path, "once")
    svc.validate(path, ALL, 1, JudgeChoice(JUDGE_BASELINE))
    run_id, _ = svc.start(path, ALL, 1, JudgeChoice(JUDGE_BASELINE), owner="me", visitor="v")
    assert calls == ["read_results"]
    wait_done(svc, run_id)
    Path(path).write_text(Path(path).read_text().replace("[once]", "[twice]"))
    svc.start(path, ALL, 1, JudgeChoice(JUDGE_BASELINE), owner="me", visitor="v")
    assert calls == ["read_results", "read_results"]
    assert svc.view(svc.runs_of("me")[0].id).run.predictions["v1_0"].endswith("[twice]")


def test_the_form_of_a_run_is_the_settings_it_was_started_with(svc, fake_judge, tmp_path):
    """Issue 19, item 6: after a reload the form showed defaults beside the run card's own settings."""
    run_id, _ = svc.start(str(RESULTS), BARD, 3, JudgeChoice(JUDGE_BASELINE), owner="me", visitor="v",
                          model_name="mine")
    wait_done(svc, run_id)
    assert svc.form_of(svc.view(run_id)) == {
        "n_runs": 3, "judge": JUDGE_BASELINE, "base_url": "", "judge_model": "", "mode": "live",
        "benchmark": BENCH_BUNDLED, "hub_id": "", "subset": "Bard set (168)", "model_name": "mine"}
    own, _ = svc.start(tagged(tmp_path, "own"), ALL, 2, JudgeChoice(JUDGE_OWN, base_url=fake_judge.url,
                                                                    model="gpt-4o", api_key=VISITOR_KEY),
                       owner="me", visitor="v")
    form = svc.form_of(svc.view(own))
    assert (form["judge"], form["base_url"], form["judge_model"], form["n_runs"]) == \
        (JUDGE_OWN, fake_judge.url, "gpt-4o", 2)
    assert VISITOR_KEY not in json.dumps(form)
    svc.stop(own, "me")
    wait_done(svc, own)
