"""Estimates for grade files people hold (issue 30 part 2): `aggregate` of an official-format grade file whose
judge has a check here prints the official-equivalent estimate, labelled "judge as recorded in the file"; a zip as
the MM-Vet Space hands it out (`gpt-4.1-2025-04-14` in ``model``) is read as it comes; an lmms-eval log (its own
prompt, another table header) says which prompt graded it and gets no estimate, however its judge was checked.

The files are built from llava-v1.5-7b-rerun's real answers (no reference of the check), graded by a simulated
successor that answers each sample's official GPT-4-0613 grade + 0.1; the check of that judge is the one
`assess_judge` computes from the same simulated judge on the default references, stored as a check stores it."""
from __future__ import annotations

import json
import zipfile
from pathlib import Path

import pytest

from mmvet_core.inputs.benchmark import load_bundled_v1
from mmvet_core.successors.equivalence import FILE_BASIS, recorded_equivalence
from mmvet_core.scores.graded import read_grade_file
from mmvet_core.judging.judge import JudgeSettings
from mmvet_core.successors.judgecheck import assess_judge, check_prompt_id, check_settings, load_references
from mmvet_core.store import Store
from tests import toolkit_writers as tw
from tests.fake_judge import official_grades_answer, simulate_grades
from tests.service_helpers import estimate_paragraph
from tests.cli_run import run_cli as _cli

ROOT = Path(__file__).resolve().parent.parent
SPACE_JUDGE = "gpt-4.1-2025-04-14"
LMMS_JUDGE = "gpt-4o-2024-11-20"
BENCH = load_bundled_v1()



@pytest.fixture(scope="module")
def checked(tmp_path_factory):
    """(database with checks of the Space's and lmms-eval's judges, the rerun's answers, their simulated grades)."""
    tmp = tmp_path_factory.mktemp("checks")
    answer = official_grades_answer(0.1, which="all")
    refs = load_references()
    grades = {r.model: simulate_grades(answer, r.predictions) for r in refs}
    store = Store(tmp / "g.db")
    for model in (SPACE_JUDGE, LMMS_JUDGE):
        settings = check_settings(JudgeSettings(model=model))
        check = assess_judge(BENCH, refs, grades, settings.to_dict(), resamples=200)
        store.put_judge_check(settings.fingerprint(), settings.to_dict(), check.to_dict(), prompt=check_prompt_id(),
                              refs=check.references)
    store.close()
    rerun = next(r for r in load_references(which="all") if r.model == "llava-v1.5-7b-rerun")
    return tmp / "g.db", rerun, simulate_grades(answer, rerun.predictions)


def _space_zip(tmp_path: Path, scores: dict) -> Path:
    """What the MM-Vet Space hands out: the official evaluator's three files for one run, in a zip."""
    grade = {sid: {"model": [SPACE_JUDGE], "content": [f"{s[0]:g}"], "score": [s[0]]} for sid, s in scores.items()}
    path = tmp_path / "llava-v1.5-7b-rerun.zip"
    with zipfile.ZipFile(path, "w") as z:
        z.writestr(f"llava-v1.5-7b-rerun/llava-v1.5-7b-rerun_{SPACE_JUDGE}-grade-1runs.json", json.dumps(grade))
        z.writestr(f"llava-v1.5-7b-rerun/llava-v1.5-7b-rerun_{SPACE_JUDGE}-cap-score-1runs.csv", ",rec\nx,1\n")
        z.writestr(f"llava-v1.5-7b-rerun/llava-v1.5-7b-rerun_{SPACE_JUDGE}-cap-int-score-1runs.csv", ",rec\nx,1\n")
    return path


def test_aggregate_of_a_space_zip_prints_the_estimate_of_the_judge_as_recorded_in_the_file(checked, tmp_path):
    db, rerun, scores = checked
    proc = _cli("aggregate", _space_zip(tmp_path, scores), "--db", db, "--out", tmp_path / "out")
    assert proc.returncode == 0, proc.stderr
    out = proc.stdout
    assert f"Judge: {SPACE_JUDGE}" in out and "NOT the official MM-Vet metric" in out
    line = estimate_paragraph(out)
    assert f"graded by {SPACE_JUDGE} ({FILE_BASIS})" in line and "an estimate, not the official" in line
    lo, hi = (float(x) for x in line.split("[", 1)[1].split("]", 1)[0].split(", "))
    assert lo <= rerun.official_total <= hi and hi - lo <= 6.0        # 30.7, the re-run's official total
    assert "per capability (estimates): rec " in out
    assert (tmp_path / "out" / f"llava-v1.5-7b-rerun_{SPACE_JUDGE}-cap-score-1runs.csv").is_file()


def test_a_zip_without_exactly_one_grade_file_is_refused_by_name(tmp_path):
    path = tmp_path / "two.zip"
    with zipfile.ZipFile(path, "w") as z:
        z.writestr("a_judge-grade-1runs.json", "{}")
        z.writestr("b_judge-grade-1runs.json", "{}")
    proc = _cli("aggregate", path, "--out", tmp_path / "out")
    assert proc.returncode == 2 and "holds exactly one official grade file" in proc.stderr


def test_an_lmms_eval_log_says_its_prompt_and_gets_no_estimate_though_its_judge_is_checked(checked, tmp_path):
    db, rerun, scores = checked
    log = tw.lmms_v04_jsonl(tmp_path / "20261201_samples_mmvet.jsonl", rerun.predictions, BENCH,
                            {sid: s[0] for sid, s in scores.items()}, LMMS_JUDGE)
    proc = _cli("aggregate", log, "--db", db, "--out", tmp_path / "out")
    assert proc.returncode == 0, proc.stderr
    line = estimate_paragraph(proc.stdout)
    assert line.startswith("official-equivalent estimate: none (the file was graded with lmms-eval's MM-Vet prompt")
    assert "no check with that prompt exists here" in line


def test_a_file_whose_judge_has_no_check_here_says_so(checked, tmp_path):
    db, rerun, scores = checked
    grades = read_grade_file(_space_zip(tmp_path, scores), BENCH)
    store = Store(tmp_path / "empty.db")
    eq = recorded_equivalence(store, BENCH, grades.scores, judge_counts=grades.judge_counts(), prompt=grades.prompt)
    store.close()
    assert not eq.available and f"no judge check of {SPACE_JUDGE}, the judge as recorded in the file" in eq.reason


def test_the_app_opens_a_space_zip_and_its_card_shows_the_estimate_of_the_recorded_judge(checked, tmp_path):
    """The app's Open a grade file: the same zip, read as it comes; its card carries the labelled estimate."""
    import shutil

    from mmvet_core.service import BENCH_BUNDLED, BenchmarkChoice, GradingService, ServiceSettings

    db, rerun, scores = checked
    data = tmp_path / "data"
    data.mkdir()
    shutil.copy(db, data / "mmvet-grader.db")
    svc = GradingService(ServiceSettings(data_dir=data))
    try:
        run_id = svc.runs.open_grade_file(str(_space_zip(tmp_path, scores)), BenchmarkChoice(BENCH_BUNDLED), "me")
        card = svc.reading.card(svc.reading.view(run_id))
    finally:
        svc.jobs.shutdown()
        svc.store.close()
    assert card["official_equivalent_shown"]
    assert f"graded by {SPACE_JUDGE} ({FILE_BASIS})" in card["official_equivalent"]
    t = card["official_equivalent_estimate"]["columns"][0]
    assert t["low"] <= rerun.official_total <= t["high"]
