"""Reading runs (`mmvet_core.service.reading`): status, the run card, downloads, a visitor's runs, the form a run
was started with; a real store, a real judge over HTTP (the fake one)."""
from __future__ import annotations

import asyncio
import json
import time
from pathlib import Path

from mmvet_core.service import (BENCH_BUNDLED, JUDGE_BASELINE, JUDGE_HOST, JUDGE_OWN, JudgeChoice)
from tests.call_gate import CallGate
from tests.service_helpers import ALL, BARD, RESULTS, VISITOR_KEY, tagged, wait_done
from tests.waiting import wait_until



def test_status_has_no_spread_until_the_runs_are_complete(svc, fake_judge, tmp_path):
    gate = fake_judge.state.gate = CallGate()   # 200 answers (some 70 of the 436 grades), the rest held until Stop
    gate.release(200)
    run_id, _ = svc.runs.start(tagged(tmp_path, "spread"), ALL, 2, JudgeChoice(JUDGE_HOST), owner="me", visitor="v")
    wait_until(lambda: svc.reading.status(run_id)["done"] >= 40, what="40 grades shown", every=0.05)
    svc.runs.stop(run_id, "me")
    gate.open()
    st = wait_done(svc, run_id)
    assert st["status"] == "stopped" and not st["complete"] and st["total_std"] is None
    assert "partial" in st["total_text"] and f"over {st['done']} of 436 grades" in st["total_text"]   # issue 19.3
    svc.runs.resume(run_id, "me", "v", JudgeChoice(JUDGE_HOST))
    st = wait_done(svc, run_id)
    assert st["complete"] and st["total_std"] is not None


def test_status_reads_progress_and_score_from_one_snapshot(svc, fake_judge, tmp_path, monkeypatch):
    """Issue 26: polled while a run grades, /status gave a fresh count beside the scores of an older snapshot
    (251 / 436 beside "over 205 of 436 grades"). Here the judge answers 40 calls, status is read, 20 more are
    answered and stored, and status is read again while the first answer is still fresh (its freshness is made
    long, so that a slow machine reads it in time): the count and the score come from one snapshot."""
    import re

    import mmvet_core.service.reading as reading

    monkeypatch.setattr(reading, "STATUS_TTL", 3600.0)
    gate = fake_judge.state.gate = CallGate()
    gate.release(60)
    run_id, _ = svc.runs.start(tagged(tmp_path, "snapshot"), ALL, 2, JudgeChoice(JUDGE_HOST), owner="me",
                               visitor="v")
    try:
        graded = lambda: sum(n for st, n in svc.store.count_grades(run_id).items() if st != "error")  # noqa: E731
        seen = 0
        for _ in range(2):                   # a first read, then one after more grades were stored
            wait_until(lambda: graded() > seen, what=lambda: f"more than {seen} grades ({graded()})")
            st = svc.reading.status(run_id)
            counted = int(re.search(r"over (\d+) of 436 grades", st["total_text"]).group(1))
            assert st["done"] == counted, (st["done"], st["total_text"])
            seen = max(counted, graded())
            gate.release(60)
    finally:
        svc.runs.stop(run_id, "me")
        gate.open()
        wait_done(svc, run_id)


def test_a_stalled_run_shows_every_grade_it_stored(svc, fake_judge, tmp_path):
    """A run whose judge stops answering (rate limited, slow, held) must still show every grade it stored.
    Before: a change read within STATUS_TTL of the last snapshot was filed under the new change stamp, so once the
    run stalled its status showed an older count (12 of 20 stored, in a test) until the next grade arrived, minutes
    later."""
    gate = fake_judge.state.gate = CallGate()
    gate.release(20)
    run_id, _ = svc.runs.start(tagged(tmp_path, "stalled"), ALL, 1, JudgeChoice(JUDGE_HOST), owner="me",
                               visitor="v")
    try:
        graded = lambda: sum(n for st, n in svc.store.count_grades(run_id).items() if st != "error")  # noqa: E731
        while gate.passed < 20 or gate.held < 1:     # status is read all along, as a page polls it
            svc.reading.status(run_id)
            time.sleep(0.01)
        # stalled: the next calls wait at the judge; the 20 answers are stored (or being stored) as grades
        deadline = time.monotonic() + 60     # STATUS_TTL is 2 s; a busy machine takes longer
        while (done := svc.reading.status(run_id)["done"]) < (stored := graded()) or not stored:
            assert time.monotonic() < deadline, f"status still shows {done} of the {stored} stored grades"
            time.sleep(0.1)
        assert done == stored >= 10 and svc.reading.status(run_id)["status"] == "running"
    finally:
        svc.runs.stop(run_id, "me")
        gate.open()
        wait_done(svc, run_id)


def test_a_resumed_run_never_reads_as_stopped(svc, fake_judge, tmp_path, monkeypatch):
    """Resume, then the page reads the status at once: the resumed job writes "running" when it begins, which on a
    busy machine comes after that read (here its beginning waits until the status has been read). Before, the
    page read the stored "stopped" of before the resume (a suite run under load saw it)."""
    import threading

    import mmvet_core.runs.jobs as jobs

    gate = fake_judge.state.gate = CallGate()       # 5 answers, then held until Stop
    gate.release(5)
    run_id, _ = svc.runs.start(tagged(tmp_path, "resumed"), ALL, 1, JudgeChoice(JUDGE_HOST), owner="me",
                               visitor="v")
    gate.wait_held(1)
    svc.runs.stop(run_id, "me")
    gate.open()
    assert wait_done(svc, run_id)["status"] == "stopped"
    read, real_grade_run = threading.Event(), jobs.grade_run

    async def late_grade_run(*args, **kwargs):
        while not read.is_set():             # a busy machine: the job begins after the page's first read
            await asyncio.sleep(0.01)
        return await real_grade_run(*args, **kwargs)

    monkeypatch.setattr(jobs, "grade_run", late_grade_run)
    try:
        svc.runs.resume(run_id, "me", "v", JudgeChoice(JUDGE_HOST))
        assert svc.reading.status(run_id)["status"] == "running"
    finally:
        read.set()
    assert wait_done(svc, run_id)["status"] == "done"


def test_after_overrides_status_and_run_json_name_the_count_and_keep_the_judge_only_total(svc, tmp_path):
    """Issue 19, item 1. Before: run.json said ``metric_note: null`` and the status had no word of the
    overrides."""
    run_id, _ = svc.runs.start(str(RESULTS), ALL, 1, JudgeChoice(JUDGE_BASELINE), owner="me", visitor="v")
    judge_total = wait_done(svc, run_id)["total_score"]
    svc.runs.override(run_id, "me", "v1_0", 1.0, "checked")
    svc.runs.override(run_id, "me", "v1_1", 0.0, "checked")
    st = svc.reading.status(run_id)
    assert (st["n_overrides"], st["judge_only_total"]) == (2, judge_total)
    assert st["scores"]["n_overrides"] == 2 and st["scores"]["judge_only_total"] == judge_total
    assert "2 human overrides" in st["metric_label"] and f"judge only: {judge_total:.1f}" in st["metric_label"]
    files = svc.reading.downloads(svc.reading.view(run_id))
    card = json.loads(Path(next(f for f in files if f.endswith("run.json"))).read_text())
    assert card["n_overrides"] == 2 and card["judge_only_total"] == judge_total
    assert "2 human overrides" in card["metric_note"] and "NOT the official MM-Vet metric" in card["metric_note"]
    note = Path(next(f for f in files if f.endswith(".txt"))).read_text()
    assert "HUMAN OVERRIDES: 2 sample(s)" in note
    svc.runs.clear_override(run_id, "me", "v1_0")
    assert svc.reading.status(run_id)["n_overrides"] == 1


def test_a_grade_file_missing_a_sample_opens_as_a_partial_total_that_names_the_id(svc, tmp_path):
    """Issue 19, item 4: the app opened it as a partial total without naming the missing id."""
    from mmvet_core.runs import views
    grades = json.loads((Path(__file__).parent / "data" / "official-grades" /
                         "llava-v1.5-13b_gpt-4-grade-1runs.json").read_text())
    del grades["v1_145"]
    path = tmp_path / "llava-v1.5-13b_gpt-4-grade-1runs.json"
    path.write_text(json.dumps(grades))
    run_id = svc.runs.open_grade_file(str(path), ALL, "me")
    view = svc.reading.view(run_id)
    line = views.total_text(view)
    assert "partial" in line and "no grade for 1 of 218 samples of mmvet-v1 (v1_145)" in line
    assert svc.reading.card(view)["message"] == ("imported from an official grade JSON (no judge call); partial: "
                                                 "no grade for 1 of 218 samples of mmvet-v1 (v1_145)")
    [summary] = svc.reading.runs_of("me")
    assert summary.row()[6] == f"{view.scores.total.mean:.1f} (partial)"


def test_the_form_of_a_run_is_the_settings_it_was_started_with(svc, fake_judge, tmp_path):
    """Issue 19, item 6: after a reload the form showed defaults beside the run card's own settings."""
    run_id, _ = svc.runs.start(str(RESULTS), BARD, 3, JudgeChoice(JUDGE_BASELINE), owner="me", visitor="v",
                               model_name="mine")
    wait_done(svc, run_id)
    assert svc.reading.form_of(svc.reading.view(run_id)) == {
        "n_runs": 3, "judge": JUDGE_BASELINE, "base_url": "", "judge_model": "", "mode": "live",
        "benchmark": BENCH_BUNDLED, "hub_id": "", "subset": "Bard set (168)", "model_name": "mine"}
    own, _ = svc.runs.start(tagged(tmp_path, "own"), ALL, 2, JudgeChoice(JUDGE_OWN, base_url=fake_judge.url,
                                                                         model="gpt-4o", api_key=VISITOR_KEY),
                            owner="me", visitor="v")
    form = svc.reading.form_of(svc.reading.view(own))
    assert (form["judge"], form["base_url"], form["judge_model"], form["n_runs"]) == \
        (JUDGE_OWN, fake_judge.url, "gpt-4o", 2)
    assert VISITOR_KEY not in json.dumps(form)
    svc.runs.stop(own, "me")
    wait_done(svc, own)
