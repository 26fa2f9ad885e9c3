"""Comparing grade sets (mmvet_core/scores/compare.py, gradesets.py) on the real official grade files."""
import json
from pathlib import Path

import pytest

from mmvet_core.inputs.benchmark import load_bundled_v1
from mmvet_core.scores.compare import (CompareError, ScoreSet, combine_sets, compare_sets, format_report,
                                       make_combined_grade_json)
from mmvet_core.scores.export import GradeFileError, load_official_grades
from mmvet_core.runs.gradesets import human_set, load_grade_set, set_from_grade_file

GRADES = Path(__file__).resolve().parent / "data" / "official-grades"
B13_1 = GRADES / "llava-v1.5-13b_gpt-4-grade-1runs.json"
B13_3 = GRADES / "llava-v1.5-13b_gpt-4-grade-3runs.json"
B7_1 = GRADES / "llava-v1.5-7b_gpt-4-grade-1runs.json"
B7_3 = GRADES / "llava-v1.5-7b_gpt-4-grade-3runs.json"


@pytest.fixture(scope="module")
def bench():
    return load_bundled_v1()


@pytest.fixture(scope="module")
def official(bench):
    """13b 3 runs (reference), 13b 1 run, 7b 3 runs."""
    sets = [set_from_grade_file(p) for p in (B13_3, B13_1, B7_3)]
    return compare_sets(bench, sets)


def test_delta_bar_of_13b_one_run_vs_three_runs_is_0_011(official):
    assert official.pairs[0].other.startswith("llava-v1.5-13b_gpt-4-grade-1runs")
    assert round(official.pairs[0].delta_bar, 3) == 0.011


def test_delta_bar_of_13b_vs_7b_is_0_116(official):
    assert round(official.pairs[1].delta_bar, 3) == 0.116


def test_13b_minus_7b_is_plus_5_2_with_an_interval_near_1_7_to_8_8(bench):
    cmp = compare_sets(bench, [set_from_grade_file(B7_3), set_from_grade_file(B13_3)])
    total = cmp.pairs[0].columns[0]
    assert round(total.diff, 1) == 5.2
    assert abs(total.low - 1.7) <= 0.5 and abs(total.high - 8.8) <= 0.5
    assert cmp.n_common == 218
    text = format_report(cmp)
    assert "Compared 218 samples" in text and "+5.2" in text and "beyond sampling noise" in text


def test_every_column_has_an_interval_and_the_official_mean_and_std(official):
    ref = official.sets[0]
    cols = {c.name: v for c, v in zip(official.columns, ref.columns)}
    # the official 3-run CSV: total 36.3, std 0.2 (tests/data/official-grades)
    assert cols["total"].official == 36.3 and cols["total"].std == 0.2
    assert round(cols["total"].low, 1) == 30.7
    for c, v in zip(official.columns, ref.columns):
        assert v.low is not None and v.low <= v.score <= v.high, c.name
    assert [c.name for c in official.columns[1:7]] == ["rec", "ocr", "know", "gen", "spat", "math"]
    assert len(official.columns) == 1 + 6 + 16


def test_noise_floor_is_the_delta_bar_between_a_sets_own_runs(official):
    grades = load_official_grades(B13_3).scores
    ids = list(grades)
    pairs = [(0, 1), (0, 2), (1, 2)]
    expected = sum(sum(abs(grades[s][i] - grades[s][j]) for s in ids) / len(ids) for i, j in pairs) / 3
    assert official.sets[0].noise_floor == pytest.approx(expected)
    assert 0.004 <= official.sets[0].noise_floor <= 0.015       # GPT-4-0613 against itself (issue figure)
    assert official.sets[1].noise_floor is None                 # one run: no floor


def test_agreement_correlation_and_most_different_samples(official):
    pair = official.pairs[1]
    assert 0 < pair.equal <= pair.within < 1
    assert 0.5 < pair.correlation < 1
    gaps = [d.gap for d in pair.disagreements]
    assert gaps == sorted(gaps, reverse=True) and gaps[0] == 1.0
    d = pair.disagreements[0]
    assert d.question and d.ground_truth and d.reference_answers and d.other_answers


def test_sets_on_another_benchmark_version_are_refused(bench):
    v2 = ScoreSet("v2 file", "grade-file", "v2", {"v2_0": [1.0]})
    with pytest.raises(CompareError, match="different benchmarks"):
        compare_sets(bench, [set_from_grade_file(B13_1), v2])


def test_same_ids_with_other_questions_are_refused(bench):
    other = ScoreSet("run", "run", "v1", {"v1_0": [1.0]}, questions={"v1_0": ("another question", "x")})
    with pytest.raises(CompareError, match="another benchmark"):
        compare_sets(bench, [set_from_grade_file(B13_1), other])


def test_no_common_sample_is_refused(bench):
    a = ScoreSet("a", "grade-file", "v1", {"v1_0": [1.0]})
    b = ScoreSet("b", "grade-file", "v1", {"v1_1": [1.0], "v1_0": [None]})
    with pytest.raises(CompareError, match="no sample is graded in every set"):
        compare_sets(bench, [a, b])
    with pytest.raises(CompareError, match="at least two"):
        compare_sets(bench, [a])


def test_human_scores_compare_on_the_annotated_samples_only(bench, tmp_path):
    truth = load_official_grades(B13_3).scores
    annotated = {sid: truth[sid][0] for sid in list(truth)[:138]}
    path = tmp_path / "human.json"
    path.write_text(json.dumps(annotated))
    human = load_grade_set(str(path))
    assert human.kind == "human"
    cmp = compare_sets(bench, [human, set_from_grade_file(B13_3)])
    assert cmp.n_common == 138 and cmp.excluded["llava-v1.5-13b_gpt-4-grade-3runs"] == 80
    with pytest.raises(GradeFileError, match="not in"):
        human_set({"v1_0": 3})


def test_pooling_a_one_run_and_a_three_run_file_gives_four_runs():
    pooled = load_grade_set(f"{B13_1}+{B13_3}")
    assert pooled.n_runs == 4
    assert pooled.scores["v1_0"] == load_official_grades(B13_1).scores["v1_0"] + load_official_grades(B13_3).scores["v1_0"]


def test_combine_is_the_per_sample_mean_and_round_trips_as_an_official_grade_json(bench, tmp_path):
    a, b = set_from_grade_file(B13_3), set_from_grade_file(B7_3)
    combined = combine_sets([a, b])
    sa, sb, sc = a.sample_scores(), b.sample_scores(), combined.sample_scores()
    assert all(sc[sid] == pytest.approx((sa[sid] + sb[sid]) / 2) for sid in sa)
    assert combined.n_runs == 3           # same run count: run i is the mean of the runs i
    path = tmp_path / "combined-grade-3runs.json"
    path.write_text(json.dumps(make_combined_grade_json(combined, [a.name, b.name]), indent=4))
    back = load_grade_set(str(path))
    assert back.sample_scores() == pytest.approx(sc) and back.note and "Table 7" in back.note
    # Δ̄ of the combination to each part is half the parts' Δ̄ to each other
    cmp = compare_sets(bench, [a, back, b])
    assert cmp.pairs[0].delta_bar == pytest.approx(compare_sets(bench, [a, b]).pairs[0].delta_bar / 2)


def test_combining_sets_with_different_run_counts_gives_one_run_of_means():
    combined = combine_sets([set_from_grade_file(B13_1), set_from_grade_file(B13_3)])
    assert combined.n_runs == 1


def test_to_dict_and_rows_are_the_exports(official):
    data = json.loads(json.dumps(official.to_dict()))
    assert data["n_common"] == 218 and data["bootstrap"]["resamples"] == 10_000
    assert round(data["pairs"][1]["delta_bar"], 3) == 0.116
    rows = official.rows()
    assert len(rows) == 3 * 23 and len(rows[0]) == len(official.CSV_HEADER)
    header, samples = official.sample_rows()
    assert len(samples) == 218 and len(header) == 4


def test_a_vlmevalkit_graded_table_is_a_grade_set_too(bench, tmp_path):
    from tests import toolkit_writers as tw

    preds = json.loads((GRADES.parent / "results" / "llava-v1.5-13b.json").read_text(encoding="utf-8"))
    scores = {sid: e[0] for sid, e in load_official_grades(B13_1).scores.items()}
    table = tw.vlmevalkit_dump(tw.vlmevalkit_frame(preds, bench, scores),
                               tmp_path / "llava-v1.5-13b_MMVet_gpt-4-turbo.tsv")
    graded = load_grade_set(str(table))
    assert "NOT the official" in graded.note
    cmp = compare_sets(bench, [set_from_grade_file(B13_1), graded])
    assert cmp.n_common == 218 and cmp.pairs[0].delta_bar == 0.0


def test_app_tables_and_figures_of_a_comparison(official):
    from mmvet_core.scores.charts import make_compare_figures
    from mmvet_core.scores.compare import (DISAGREEMENT_COLUMNS, PAIR_COLUMNS, SUMMARY_COLUMNS, disagreement_rows,
                                           pair_rows, summary_rows)

    rows = summary_rows(official)
    assert [len(r) for r in rows] == [len(SUMMARY_COLUMNS)] * 3
    assert rows[0][1] == "reference" and rows[0][5:7] == ["36.3", "[30.7, 42.0]"]
    assert rows[2][9:12] == ["0.116", "-5.2", "[-9.0, -1.7]"]
    table = pair_rows(official, 1)
    assert len(table[0]) == len(PAIR_COLUMNS) and table[0][0] == "total" and table[0][-1] == "0.116"
    worst = disagreement_rows(official, 1)
    assert len(worst[0]) == len(DISAGREEMENT_COLUMNS) and worst[0][4] == "1.00"
    scatter, radar = make_compare_figures(official, 1)
    assert len(scatter.data[1].x) == 218
    assert [t.name for t in radar.data] == [s.name for s in official.sets]


def test_the_app_compares_only_the_visitors_own_runs(store, tmp_path):
    from mmvet_core.runs.gradesets import sets_for_owner
    from mmvet_core.judging.judge import JudgeSettings
    from mmvet_core.runs.lifecycle import create_run

    bench = load_bundled_v1()
    preds = {sid: "x" for sid in bench.ids}
    mine = create_run(store, benchmark=bench, spec="mmvet-v1", predictions=preds, n_runs=1,
                      settings=JudgeSettings(), model_name="m", owner="me")
    theirs = create_run(store, benchmark=bench, spec="mmvet-v1", predictions=preds, n_runs=1,
                        settings=JudgeSettings(), model_name="m", owner="them")
    assert len(sets_for_owner(store, "me", [mine], [str(B13_1)])) == 2
    for bad in ([theirs], ["no-such-run"]):
        with pytest.raises(CompareError, match="not one of your runs"):
            sets_for_owner(store, "me", bad, [str(B13_1)])
    with pytest.raises(CompareError, match="at least two"):
        sets_for_owner(store, "me", [mine], [])
    with pytest.raises(CompareError, match="at most"):
        sets_for_owner(store, "me", [mine], [str(B13_1)] * 6)


def test_a_run_with_overrides_is_compared_with_its_count_named_and_judge_only_on_request(store, bench):
    """Issue 19, item 1: Compare used the overridden scores silently. Now the set says so (count, judge-only
    total) and ``judge:RUN_ID`` compares the judge's grades alone."""
    from mmvet_core.runs.lifecycle import open_grade_file
    run_id = open_grade_file(store, B13_1, benchmark=bench, spec="mmvet-v1", owner="me")
    store.set_override(run_id, "v1_0", 1.0, "checked")
    store.set_override(run_id, "v1_1", 1.0, "checked")
    corrected, judge_only = load_grade_set(f"run:{run_id}", store), load_grade_set(f"judge:{run_id}", store)
    assert "2 human overrides" in corrected.note and "judge only: 36.1" in corrected.note
    assert f"judge:{run_id}" in corrected.note and judge_only.name.endswith("(judge only)")
    assert judge_only.scores == set_from_grade_file(B13_1).scores
    assert corrected.scores["v1_0"] == [1.0] and judge_only.scores["v1_0"] == [0.0]
    report = format_report(compare_sets(bench, [judge_only, corrected]))
    assert "2 human overrides" in report
