"""Runs as the CLI and the app share them: stored benchmark, overrides, exports, imported official grades."""
import json
from pathlib import Path

from mmvet_core.benchmark import load_bundled_v1
from mmvet_core.export import load_official_grades, read_official_csv
from mmvet_core.judge import JudgeSettings
from mmvet_core.runs import (benchmark_from_stored, benchmark_to_stored, create_run, export_run,
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


def test_incomplete_runs_export_only_the_grade_json(tmp_path):
    store = Store(tmp_path / "g.db")
    run_id = create_run(store, benchmark=load_bundled_v1(), spec="mmvet-v1", predictions={}, n_runs=2,
                        settings=JudgeSettings(model="gpt-4"), model_name="m")
    import_official_grades(store, run_id, load_official_grades(GRADES / "llava-v1.5-13b_gpt-4-grade-1runs.json"))
    view = load_run_view(store, run_id)
    assert not view.scores.complete and view.n_graded == 218
    paths = export_run(view, tmp_path / "out")
    assert list(paths) == ["grade"]
    assert all(len(v["score"]) == 1 for v in json.loads(paths["grade"].read_text()).values())


def test_create_run_with_reuse_returns_the_same_run_for_the_same_job(tmp_path):
    store = Store(tmp_path / "g.db")
    kw = dict(benchmark=load_bundled_v1(), spec="mmvet-v1", predictions={"v1_0": "a"}, n_runs=1,
              settings=JudgeSettings(model="gpt-4"), model_name="m")
    a = create_run(store, reuse=True, **kw)
    assert create_run(store, reuse=True, **kw) == a
    assert create_run(store, reuse=False, **kw) != a
    assert create_run(store, reuse=True, **{**kw, "n_runs": 2}) != a
