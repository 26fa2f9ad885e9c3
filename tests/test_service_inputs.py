"""The form's inputs (`mmvet_core.service.inputs`): validation against the chosen benchmark, the cost estimate,
the model's name from an upload, one parse for validate-then-start; a real store and parsing box."""
from __future__ import annotations

import json
from pathlib import Path

from mmvet_core.service import JUDGE_BASELINE, JUDGE_HOST, JudgeChoice
from tests.service_helpers import ALL, BARD, RESULTS, tagged, wait_done



def test_bard_subset_validation_names_the_other_ids_for_what_they_are(svc):
    v = svc.inputs.validate(str(RESULTS), BARD, 1, JudgeChoice(JUDGE_HOST))
    assert "168 of 168 samples matched" in v.report
    assert "50 ids are samples of the full benchmark outside the Bard set" in v.report
    assert "not in the benchmark" not in v.report
    assert "168 judge calls" in v.estimate and v.model_name == "llava-v1.5-13b"
    assert "outside" not in svc.inputs.validate(str(RESULTS), ALL, 1, JudgeChoice(JUDGE_HOST)).report


def test_an_uploaded_lmms_eval_samples_file_is_never_named_after_its_upload_folder(svc, tmp_path):
    """Issue 19, item 2: the app named lmms-eval samples files after Gradio's 64-character upload folder."""
    from mmvet_core.inputs.benchmark import load_bundled_v1
    from tests import toolkit_writers as tw
    folder = tmp_path / ("ab12" * 16)
    folder.mkdir()
    preds = json.loads(RESULTS.read_text(encoding="utf-8"))
    path = tw.lmms_v07_jsonl(folder / "20250103_101112_samples_mmvet.jsonl", preds, load_bundled_v1())
    v = svc.inputs.validate(str(path), ALL, 1, JudgeChoice(JUDGE_BASELINE))
    assert v.model_name == "20250103_101112_samples_mmvet" and "ab12ab12" not in v.report
    assert "Model: 20250103_101112_samples_mmvet (from the file name)" in v.report
    v = svc.inputs.validate(str(path), ALL, 1, JudgeChoice(JUDGE_BASELINE), original_name="llava-13b_samples.jsonl")
    assert v.model_name == "llava-13b_samples"
    run_id, _ = svc.runs.start(str(path), ALL, 1, JudgeChoice(JUDGE_BASELINE), owner="me", visitor="v",
                               original_name="llava-13b_samples.jsonl")
    assert svc.store.get_run(run_id).model_name == "llava-13b_samples"
    wait_done(svc, run_id)


def test_a_file_not_ready_to_grade_has_no_cost_estimate(svc, tmp_path):
    """Issue 19, item 5: a file marked "NOT ready to grade" still showed a cost estimate."""
    preds = json.loads(RESULTS.read_text(encoding="utf-8"))
    path = tmp_path / "half.json"
    path.write_text(json.dumps(dict(list(preds.items())[:100])))
    v = svc.inputs.validate(str(path), ALL, 1, JudgeChoice(JUDGE_HOST))
    assert "NOT ready to grade" in v.report
    assert v.estimate == "No estimate: the file is not ready to grade (see the report)."
    assert "judge calls" in svc.inputs.validate(str(RESULTS), ALL, 1, JudgeChoice(JUDGE_HOST)).estimate


def test_grade_right_after_the_check_does_not_parse_the_file_again(svc, tmp_path):
    """Issue 19, item 6: ``?run=`` reached the address 2.5–6 s after Grade, most of it a second parse of the
    file in a fresh worker process. Validate then start: one parse; a changed file is parsed again."""
    calls = []
    real = svc.limits.gate.box.call
    svc.limits.gate.box.call = lambda fn, *a, **k: (calls.append(fn.__name__), real(fn, *a, **k))[1]
    path = tagged(tmp_path, "once")
    svc.inputs.validate(path, ALL, 1, JudgeChoice(JUDGE_BASELINE))
    run_id, _ = svc.runs.start(path, ALL, 1, JudgeChoice(JUDGE_BASELINE), owner="me", visitor="v")
    assert calls == ["read_results"]
    wait_done(svc, run_id)
    Path(path).write_text(Path(path).read_text().replace("[once]", "[twice]"))
    svc.runs.start(path, ALL, 1, JudgeChoice(JUDGE_BASELINE), owner="me", visitor="v")
    assert calls == ["read_results", "read_results"]
    assert svc.reading.view(svc.reading.runs_of("me")[0].id).run.predictions["v1_0"].endswith("[twice]")
