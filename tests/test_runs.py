"""Runs as the CLI and the app share them: stored benchmark, overrides, exports, imported official grades."""
import json
import re

import pytest
from pathlib import Path

from mmvet_core.inputs.benchmark import load_bundled_v1
from mmvet_core.scores.export import load_official_grades, read_official_csv
from mmvet_core.judging.judge import JudgeSettings
from mmvet_core.runs.lifecycle import (benchmark_from_stored, benchmark_to_stored, create_run, export_run,
                                       import_official_grades, load_run_view)
from mmvet_core.store import Store

SHARED = Path(__file__).resolve().parent / "data"
GRADES = SHARED / "official-grades"


def _imported_run(tmp_path, grade_file="llava-v1.5-13b_gpt-4-grade-3runs.json", n_runs=3):
    store = Store(tmp_path / "g.db")
    bench = load_bundled_v1()
    run_id = create_run(store, benchmark=bench, spec="mmvet-v1", predictions={}, n_runs=n_runs,
                        settings=JudgeSettings(model="gpt-4"), model_name="llava-v1.5-13b")
    n = import_official_grades(store, run_id, load_official_grades(GRADES / grade_file))
    return store, run_id, n


def test_stored_benchmark_rebuilds_identically():
    bench = load_bundled_v1().subset(load_bundled_v1().bard_set, "bard")
    again = benchmark_from_stored(json.loads(json.dumps(benchmark_to_stored(bench, "mmvet-v1"))))
    assert again.samples == bench.samples and again.subset_name == "bard" and again.version == "v1"
    assert again.integrations == bench.integrations


def test_imported_official_grades_give_the_official_totals_without_any_call(tmp_path):
    store, run_id, n = _imported_run(tmp_path)
    assert n == 218 * 3
    view = load_run_view(store, run_id)
    assert view.scores.complete
    assert (view.scores.total.mean, view.scores.total.std, view.scores.runs) == (36.3, 0.2, [36.1, 36.5, 36.3])
    assert store.cache_size() == 0


def test_override_recomputes_scores_and_is_marked_in_the_exports(tmp_path):
    store, run_id, _ = _imported_run(tmp_path, "llava-v1.5-13b_gpt-4-grade-1runs.json", 1)
    before = load_run_view(store, run_id)
    assert before.scores.total.mean == 36.1
    judge_score = before.grades[("v1_0", 0)].score
    assert judge_score == 0.0
    store.set_override(run_id, "v1_0", 1.0, "both roots are given")
    after = load_run_view(store, run_id)
    # one sample from 0.0 to 1.0 adds 100/218 points to the total and 100/26 to math
    assert abs((after.scores.total.per_run[0] - before.scores.total.per_run[0]) - 100 / 218) < 1e-9
    math_before, math_after = before.scores.capability("math"), after.scores.capability("math")
    assert abs((math_after.per_run[0] - math_before.per_run[0]) - 100 / 26) < 1e-9
    paths = export_run(after, tmp_path / "out")
    grade_json = json.loads(paths["grade"].read_text())
    assert grade_json["v1_0"]["score"] == [1.0]
    assert grade_json["v1_0"]["judge_score"] == [0.0]
    assert grade_json["v1_0"]["override"] == {"score": 1.0, "reason": "both roots are given"}
    assert "override" in grade_json["v1_0"]["flags"]
    row = read_official_csv(paths["cap"])["llava-v1.5-13b"]
    assert row["total"] == after.scores.total.mean
    store.clear_override(run_id, "v1_0")
    assert load_run_view(store, run_id).scores.total.mean == 36.1


def test_overrides_are_named_with_their_count_and_the_judge_only_total_everywhere_the_score_goes(tmp_path):
    """Issue 19, item 1. Before: after two overrides the total kept the label "official MM-Vet metric", the CSVs
    said nothing and run.json's metric_note was null."""
    from mmvet_core.runs import views
    store, run_id, _ = _imported_run(tmp_path, "llava-v1.5-13b_gpt-4-grade-1runs.json", 1)
    before = load_run_view(store, run_id)
    plain_csv = (export_run(before, tmp_path / "plain")["cap"]).read_text()
    assert before.metric_note is None and before.n_overrides == 0 and before.scores.judge_only_total is None
    store.set_override(run_id, "v1_0", 1.0, "both roots are given")
    store.set_override(run_id, "v1_1", 1.0, "right")
    view = load_run_view(store, run_id)
    assert view.n_overrides == 2 and view.scores.judge_only_total == 36.1
    assert view.scores.to_dict()["n_overrides"] == 2 and view.scores.to_dict()["judge_only_total"] == 36.1
    assert view.metric_note == ("owner's corrected score with 2 human overrides: NOT the official MM-Vet metric "
                                "(judge only: 36.1)")
    line = views.total_text(view)
    assert line.startswith(f"Total: {view.scores.total.mean:.1f} over 1 run(s)") and view.scores.total.mean != 36.1
    assert "2 human overrides" in line and "judge only: 36.1" in line and "· official MM-Vet metric" not in line
    paths = export_run(view, tmp_path / "out")
    # the official CSVs keep the official format (same header, no note column); a note file says the rest
    cap = paths["cap"].read_text()
    assert cap.splitlines()[0] == plain_csv.splitlines()[0] and "note" not in cap
    note = paths["note"].read_text()
    assert paths["note"].name == "llava-v1.5-13b_gpt-4-note-1runs.txt"
    assert "HUMAN OVERRIDES: 2 sample(s)" in note and "NOT the official MM-Vet metric" in note
    assert "Judge-only total" in note and "36.1" in note and "v1_0: 1 (both roots are given)" in note
    assert json.loads(paths["grade"].read_text())["v1_0"]["metric_note"] == view.metric_note


def test_incomplete_runs_export_only_the_grade_json_and_a_note_that_says_partial(tmp_path):
    """Issue 19, item 3: the exports of an incomplete run say partial, with the counts."""
    store = Store(tmp_path / "g.db")
    run_id = create_run(store, benchmark=load_bundled_v1(), spec="mmvet-v1", predictions={}, n_runs=2,
                        settings=JudgeSettings(model="gpt-4"), model_name="m")
    import_official_grades(store, run_id, load_official_grades(GRADES / "llava-v1.5-13b_gpt-4-grade-1runs.json"))
    view = load_run_view(store, run_id)
    assert not view.scores.complete and view.n_graded == 218
    paths = export_run(view, tmp_path / "out")
    assert list(paths) == ["grade", "note"]
    assert all(len(v["score"]) == 1 for v in json.loads(paths["grade"].read_text()).values())
    assert paths["note"].name == "m_gpt-4-note-2runs.txt"
    assert "PARTIAL: 218 of 436 grades" in paths["note"].read_text()


def test_create_run_with_reuse_returns_the_same_run_for_the_same_job(tmp_path):
    store = Store(tmp_path / "g.db")
    kw = dict(benchmark=load_bundled_v1(), spec="mmvet-v1", predictions={"v1_0": "a"}, n_runs=1,
              settings=JudgeSettings(model="gpt-4"), model_name="m")
    a = create_run(store, reuse=True, **kw)
    assert create_run(store, reuse=True, **kw) == a
    assert create_run(store, reuse=False, **kw) != a
    assert create_run(store, reuse=True, **{**kw, "n_runs": 2}) != a


# --- import of grades: only this run's grades are reused ----------------------------------------------------

from mmvet_core.scores.graded import read_grade_file  # noqa: E402
from mmvet_core.runs.lifecycle import ImportRefused, create_grade_view, import_grades, metric_note  # noqa: E402
from tests import toolkit_writers as tw  # noqa: E402

PRED = {n: json.loads((SHARED / "results" / f"{n}.json").read_text()) for n in ("llava-v1.5-13b", "llava-v1.5-7b")}


def _run(store, model="llava-v1.5-7b", judge="gpt-4-0613", n_runs=1):
    return create_run(store, benchmark=load_bundled_v1(), spec="mmvet-v1", predictions=PRED[model], n_runs=n_runs,
                      settings=JudgeSettings(model=judge), model_name=model)


def _export_of(store, tmp_path, model):
    """Our own grade JSON of `model` (it records the predictions it graded), graded from the official file."""
    run_id = _run(store, model, judge="gpt-4")
    import_official_grades(store, run_id, load_official_grades(GRADES / f"{model}_gpt-4-grade-1runs.json"))
    return export_run(load_run_view(store, run_id), tmp_path / model)["grade"]


def test_grades_of_another_models_predictions_are_not_imported(tmp_path):
    # the real mistake: a smaller model's grades imported into another model's run (26.6 reported, not 38.5)
    store = Store(tmp_path / "g.db")
    other = _export_of(store, tmp_path, "llava-v1.5-13b")
    assert json.loads(other.read_text())["v1_1"]["prediction"] == PRED["llava-v1.5-13b"]["v1_1"]
    run_id = _run(store, "llava-v1.5-7b")
    report = import_grades(store, run_id, read_grade_file(other, load_bundled_v1()))
    same = [s for s in PRED["llava-v1.5-7b"] if PRED["llava-v1.5-7b"][s] == PRED["llava-v1.5-13b"][s]]
    assert report.imported == len(same) and len(report.skipped_changed) == 218 - len(same)
    assert "different prediction" in report.warnings[0] and "another model's" in report.warnings[0]
    assert set(g.sample_id for g in store.grades(run_id)) == set(same)


def test_our_own_export_of_the_same_predictions_imports_everything(tmp_path):
    store = Store(tmp_path / "g.db")
    mine = _export_of(store, tmp_path, "llava-v1.5-7b")
    run_id = _run(store, "llava-v1.5-7b", n_runs=3)
    report = import_grades(store, run_id, read_grade_file(mine, load_bundled_v1()))
    assert (report.imported, report.skipped_changed, report.warnings) == (218, [], [])
    assert load_run_view(store, run_id).scores.total.per_run[0] is not None


def test_an_official_grade_file_warns_that_it_cannot_prove_whose_answers_it_graded(tmp_path):
    store = Store(tmp_path / "g.db")
    run_id = _run(store, "llava-v1.5-7b")
    report = import_grades(store, run_id, read_grade_file(GRADES / "llava-v1.5-13b_gpt-4-grade-1runs.json",
                                                          load_bundled_v1()))
    assert report.imported == 218            # gpt-4 stands for gpt-4-0613; nothing to compare predictions with
    assert "does not record the predictions" in report.warnings[0]
    assert "named for model 'llava-v1.5-13b' but this run is 'llava-v1.5-7b'" in report.warnings[0]


@pytest.mark.parametrize("judge, message", [
    ("gpt-4o", "graded by gpt-4, but this run's judge is gpt-4o; pass --judge-model gpt-4"),
    ("keyword-baseline", "this run's judge is keyword-baseline")])
def test_grades_of_another_judge_are_refused(judge, message, tmp_path):
    store = Store(tmp_path / "g.db")
    run_id = _run(store, "llava-v1.5-13b", judge=judge)
    with pytest.raises(ImportRefused, match=re.escape(message)):
        import_grades(store, run_id, read_grade_file(GRADES / "llava-v1.5-13b_gpt-4-grade-1runs.json",
                                                     load_bundled_v1()))
    assert list(store.grades(run_id)) == []


def test_grades_made_with_a_toolkits_prompt_are_refused(tmp_path):
    bench = load_bundled_v1()
    scores = {s: 1.0 for s in PRED["llava-v1.5-13b"]}
    path = tw.lmms_v04_jsonl(tmp_path / "x_samples_mmvet.jsonl", PRED["llava-v1.5-13b"], bench, scores, "gpt-4-0613")
    store = Store(tmp_path / "g.db")
    run_id = _run(store, "llava-v1.5-13b")
    with pytest.raises(ImportRefused, match="lmms-eval's prompt"):
        import_grades(store, run_id, read_grade_file(path, bench))


def test_a_grade_view_shows_a_toolkits_file_with_its_judge_and_the_note_in_every_export(tmp_path):
    bench = load_bundled_v1()
    official = json.loads((GRADES / "llava-v1.5-13b_gpt-4-grade-1runs.json").read_text())
    scores = {s: e["score"][0] for s, e in official.items()}
    path = tw.vlmevalkit(tmp_path / "llava-v1.5-13b_MMVet_gpt-4-turbo.xlsx", PRED["llava-v1.5-13b"], bench, scores)
    store = Store(tmp_path / "g.db")
    run_id = create_grade_view(store, read_grade_file(path, bench), benchmark=bench, spec="mmvet-v1")
    view = load_run_view(store, run_id)
    assert (view.run.status, view.run.model_name, view.judge_text) == ("done", "llava-v1.5-13b", "gpt-4-turbo")
    assert view.scores.complete and view.scores.total.mean == 36.1 and store.cache_size() == 0
    assert view.run.predictions == PRED["llava-v1.5-13b"]
    assert view.metric_note.startswith("NOT the official MM-Vet metric") and "VLMEvalKit" in view.metric_note
    paths = export_run(view, tmp_path / "out")
    assert paths["cap"].name == "llava-v1.5-13b_gpt-4-turbo-cap-score-1runs.csv"
    row = read_official_csv(paths["cap"])["llava-v1.5-13b"]
    assert row["total"] == 36.1 and row["note"] == view.metric_note
    assert json.loads(paths["grade"].read_text())["v1_0"]["metric_note"] == view.metric_note


@pytest.mark.parametrize("judge, official", [
    ({"model": "gpt-4-0613"}, True), ({"model": "gpt-4"}, True), ({"model": "gpt-4o"}, False),
    ({"model": "keyword-baseline", "provider": "baseline"}, False),
    ({"model": "gpt-4-0613", "official_metric": False, "metric_note": "NOT the official MM-Vet metric (x)"}, False)])
def test_metric_note_of_a_run(judge, official):
    note = metric_note(judge)
    assert (note is None) is official
    assert official or "NOT the" in note
