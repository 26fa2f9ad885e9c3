"""Runs (`mmvet_core.service.runs`): start, stop, resume, override, rename, delete, with their refusals; a real
store, a real judge over HTTP (the fake one)."""
from __future__ import annotations

import json
import threading
import time
import zipfile
from pathlib import Path

import pytest

from mmvet_core.service import (JUDGE_BASELINE, JUDGE_HOST, JUDGE_OWN, MODE_BATCH,
                                JudgeChoice, ServiceError)
from tests.call_gate import CallGate
from tests.fake_judge import RETRY_MARK
from tests.service_helpers import ALL, BARD, RESULTS, VISITOR_KEY, tagged, wait_done



def test_the_same_job_started_twice_at_once_is_one_run_paid_once(svc, fake_judge, tmp_path):
    """A double click: two starts arrive together. One run, one bill; a third start after the end is a new run."""
    path = tagged(tmp_path, "twice")
    gate = fake_judge.state.gate = CallGate()   # the judge holds every call until both starts have answered
    out: list[tuple[str, bool]] = []
    starts = [threading.Thread(target=lambda: out.append(svc.runs.start(path, ALL, 1, JudgeChoice(JUDGE_HOST),
                                                                        owner="me", visitor="v1")))
              for _ in range(2)]
    for t in starts:
        t.start()
    for t in starts:
        t.join()
    gate.open()
    assert {rid for rid, _ in out} == {out[0][0]} and sorted(started for _, started in out) == [False, True]
    st = wait_done(svc, out[0][0])
    assert st["status"] == "done" and st["done"] == 218
    firsts = [c for c in fake_judge.state.completed_calls() if RETRY_MARK not in c["prompt"]
              and c["temperature"] == 0.0]
    assert len(firsts) == 218
    assert svc.store.run_usage(out[0][0])["calls"] == len(fake_judge.state.completed_calls())
    assert [r.id for r in svc.reading.runs_of("me")] == [out[0][0]]
    # another owner's identical job is their own run (answers come from the shared cache: no call)
    other, started = svc.runs.start(path, ALL, 1, JudgeChoice(JUDGE_HOST), owner="you", visitor="v2")
    assert started and other != out[0][0]


def test_only_the_owner_changes_a_run(svc, tmp_path):
    run_id, _ = svc.runs.start(str(RESULTS), ALL, 1, JudgeChoice(JUDGE_BASELINE), owner="me", visitor="v")
    wait_done(svc, run_id)
    for call in (lambda o: svc.runs.stop(run_id, o), lambda o: svc.runs.resume(run_id, o, "v", JudgeChoice(JUDGE_HOST)),
                 lambda o: svc.runs.override(run_id, o, "v1_0", 1.0, "mine"), lambda o: svc.runs.rename(run_id, o, "x"),
                 lambda o: svc.runs.delete(run_id, o), lambda o: svc.runs.clear_override(run_id, o, "v1_0")):
        for intruder in ("", "you"):
            with pytest.raises(ServiceError, match="read-only"):
                call(intruder)
    assert svc.runs.permissions(run_id, "you").owner is False and svc.runs.permissions(run_id, "me").owner is True
    assert svc.store.get_run(run_id).model_name == "llava-v1.5-13b" and svc.store.overrides(run_id) == {}


@pytest.mark.parametrize("score, reason, message", [(None, "r", "number"), ("abc", "r", "number"),
                                                    (1.5, "r", "between 0 and 1"), (-0.1, "r", "between 0 and 1"),
                                                    (0.5, "  ", "reason")])
def test_an_override_is_checked_before_it_is_stored(svc, score, reason, message):
    run_id, _ = svc.runs.start(str(RESULTS), ALL, 1, JudgeChoice(JUDGE_BASELINE), owner="me", visitor="v")
    wait_done(svc, run_id)
    with pytest.raises(ServiceError, match=message):
        svc.runs.override(run_id, "me", "v1_0", score, reason)
    with pytest.raises(ServiceError, match="No sample"):
        svc.runs.override(run_id, "me", "v9_9", 1.0, "r")
    assert svc.store.overrides(run_id) == {}
    assert svc.runs.override(run_id, "me", "v1_0", "1", "checked") == "Override saved: v1_0 = 1."
    assert svc.store.overrides(run_id) == {"v1_0": (1.0, "checked")}


def test_buttons_follow_the_run(svc, fake_judge, tmp_path):
    gate = fake_judge.state.gate = CallGate()   # the run grades until the test stops it
    run_id, _ = svc.runs.start(tagged(tmp_path, "perm"), ALL, 1, JudgeChoice(JUDGE_HOST), owner="me", visitor="v")
    p = svc.runs.permissions(run_id, "me")
    assert (p.running, p.can_stop, p.can_resume, p.can_override) == (True, True, False, False)
    with pytest.raises(ServiceError, match="Wait until the run ends"):
        svc.runs.override(run_id, "me", "v1_0", 1.0, "too early")
    svc.runs.stop(run_id, "me")
    gate.open()                                 # (the calls in flight answer within the stop's grace)
    wait_done(svc, run_id)
    p = svc.runs.permissions(run_id, "me")
    assert (p.running, p.can_stop, p.can_resume, p.can_override) == (False, False, True, True)
    assert svc.runs.permissions(run_id, "you") == type(p)(owner=False)


def test_resume_sends_the_visitors_key_only_to_the_visitors_endpoint(svc, fake_judge, tmp_path):
    """A run graded with the host's judge and resumed with "My own key": the key goes to the URL the visitor
    gives now, never to the host's endpoint the run started on."""
    gate = fake_judge.state.gate = CallGate()   # the run grades until the test stops it
    run_id, _ = svc.runs.start(tagged(tmp_path, "key"), ALL, 1, JudgeChoice(JUDGE_HOST), owner="me", visitor="v")
    svc.runs.stop(run_id, "me")
    gate.open()
    wait_done(svc, run_id)
    with pytest.raises(ServiceError, match="needs the API key"):
        svc.runs.resume(run_id, "me", "v", JudgeChoice(JUDGE_OWN))
    n = len(fake_judge.state.calls)
    with pytest.raises(ServiceError, match="Base URL refused"):
        svc.runs.resume(run_id, "me", "v", JudgeChoice(JUDGE_OWN, base_url="file:///etc/passwd", api_key=VISITOR_KEY))
    assert len(fake_judge.state.calls) == n
    svc.runs.resume(run_id, "me", "v", JudgeChoice(JUDGE_OWN, api_key=VISITOR_KEY))   # empty URL = OpenAI's
    time.sleep(0.3)
    svc.runs.stop(run_id, "me")
    wait_done(svc, run_id)
    assert not [c for c in fake_judge.state.calls[n:] if VISITOR_KEY in c.get("auth", "")]


def test_run_card_my_runs_rename_delete_and_the_exported_run_json(svc, tmp_path):
    run_id, _ = svc.runs.start(str(RESULTS), BARD, 2, JudgeChoice(JUDGE_BASELINE), owner="me", visitor="v",
                               model_name="  My <b>model</b>\n v2 ")
    wait_done(svc, run_id)
    card = svc.reading.card(svc.reading.view(run_id))
    assert card["model"] == "My <b>model</b>  v2"              # one line, kept as typed (shown as text)
    assert (card["subset"], card["n_samples"], card["runs"], card["status"]) == ("bard", 168, 2, "done")
    assert card["endpoint"] == "offline (no endpoint)" and card["calls"] == 0 and card["tool_version"]
    [summary] = svc.reading.runs_of("me")
    assert (summary.model, summary.n_runs, summary.status) == ("My <b>model</b>  v2", 2, "done")
    assert summary.total == svc.reading.view(run_id).scores.total.mean and "bard" in summary.benchmark
    assert svc.reading.runs_of("you") == [] and svc.reading.runs_of("") == []

    svc.runs.rename(run_id, "me", "renamed/../model")
    files = svc.reading.downloads(svc.reading.view(run_id))
    zpath = next(f for f in files if f.endswith(".zip"))
    assert Path(zpath).parent == svc.exports_dir / run_id
    with zipfile.ZipFile(zpath) as z:
        assert json.loads(z.read("run.json"))["model"] == "renamed/../model"
        assert sorted(n.rsplit(".", 1)[1] for n in z.namelist()) == ["csv", "csv", "csv", "json", "json"]
    with pytest.raises(ServiceError, match="cannot be empty"):
        svc.runs.rename(run_id, "me", " \n ")

    svc.runs.delete(run_id, "me")
    assert svc.store.get_run(run_id) is None and svc.reading.runs_of("me") == []
    assert not (svc.exports_dir / run_id).exists() and svc.store.grades(run_id) == []


@pytest.mark.parametrize("runs", [0, -1, 6, 10**9])
def test_judge_runs_out_of_range_are_refused_before_anything_is_paid(svc, fake_judge, runs):
    assert svc.inputs.validate(str(RESULTS), ALL, runs, JudgeChoice(JUDGE_HOST)).estimate == \
        "Judge runs must be between 1 and 5."
    with pytest.raises(ServiceError, match="between 1 and 5"):
        svc.runs.start(str(RESULTS), ALL, runs, JudgeChoice(JUDGE_HOST), owner="me", visitor="v")
    assert svc.reading.runs_of("me") == [] and fake_judge.state.calls == []


def test_batch_mode_needs_an_openai_compatible_judge(svc, tmp_path):
    with pytest.raises(ServiceError, match="Batch API works with OpenAI-compatible endpoints only"):
        svc.runs.start(str(RESULTS), ALL, 1, JudgeChoice(JUDGE_BASELINE, mode=MODE_BATCH), owner="me", visitor="v")
    assert svc.reading.runs_of("me") == []
    v = svc.inputs.validate(str(RESULTS), ALL, 1, JudgeChoice(JUDGE_HOST, mode=MODE_BATCH))
    assert "Batch API chosen" in v.estimate
