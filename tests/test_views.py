"""What the app shows of a run (`mmvet_core.runs.views`), on real official grade files: readable tables, the samples
table with question and answer, sorting, filters without duplicates, partial totals without a false spread."""
from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import pytest

from mmvet_core.runs import views
from mmvet_core.inputs.benchmark import load_bundled_v1
from mmvet_core.runs.lifecycle import load_run_view, open_grade_file

GRADES = Path(__file__).resolve().parent / "data" / "official-grades"


@pytest.fixture
def bench():
    return load_bundled_v1()


def graded(store, bench, name: str):
    run_id = open_grade_file(store, GRADES / name, benchmark=bench, spec="mmvet-v1", owner="o")
    return load_run_view(store, run_id)


def test_one_run_has_no_spread_column_and_three_runs_do(store, bench):
    one = graded(store, bench, "llava-v1.5-13b_gpt-4-grade-1runs.json")
    assert "± std" not in views.table_columns(one, "capability")
    assert all(len(r) == len(views.table_columns(one, "capability")) for r in views.capability_rows(one))
    three = graded(store, bench, "llava-v1.5-13b_gpt-4-grade-3runs.json")
    assert views.table_columns(three, "integration") == views.INTEGRATION_COLUMNS
    assert all(len(r) == len(views.INTEGRATION_COLUMNS) for r in views.integration_rows(three))


def test_integrations_read_as_the_paper_writes_them(store, bench):
    view = graded(store, bench, "llava-v1.5-13b_gpt-4-grade-1runs.json")
    names = [r[0] for r in views.integration_rows(view)]
    assert names[0] == "Rec+Know+Gen (rec_know_gen)" and "OCR+Spat+Math (ocr_spat_math)" in names


def test_filter_lists_each_capability_and_integration_once(bench):
    choices = views.filter_choices(bench)
    labels, values = [c[0] for c in choices], [c[1] for c in choices]
    assert len(values) == len(set(values)) == 1 + 6 + 16 and len(labels) == len(set(labels))
    assert ("Recognition (rec)", "rec") in choices and ("Rec only", "int:rec") in choices


def test_integration_filter_means_exactly_that_integration(store, bench):
    view = graded(store, bench, "llava-v1.5-13b_gpt-4-grade-1runs.json")
    rec = views.sample_rows(view, views.SampleFilter(capability="rec"))
    rec_only = views.sample_rows(view, views.SampleFilter(capability="int:rec"))
    assert len(rec) == 150 and len(rec_only) == bench.integration_counts()["rec"] < len(rec)
    assert all(r[5] == "rec" for r in rec_only)


def test_samples_show_question_and_answer_shortened_and_consistent_decimals(store, bench):
    view = graded(store, bench, "llava-v1.5-13b_gpt-4-grade-3runs.json")
    rows = views.sample_rows(view)
    assert len(rows) == 218 and views.SAMPLE_COLUMNS[:5] == ["id", "score", "runs", "question", "model's answer"]
    by_id = {r[0]: r for r in rows}
    for sid, row in by_id.items():
        question = " ".join(bench.samples[sid].question.split())
        assert row[3] == question or (row[3].endswith("…") and question.startswith(row[3][:-1]))
        assert len(row[3]) <= views.SHORT_TEXT and len(row[4]) <= views.SHORT_TEXT
        mean, runs = row[1], row[2].split(" / ")
        assert len(runs) == 3 and all(len(x.split(".")[1]) == 2 for x in [mean, *runs])


@pytest.mark.parametrize("order, first_is_lowest", [(views.SORT_WORST, True), (views.SORT_BEST, False)])
def test_samples_sort_by_score(store, bench, order, first_is_lowest):
    view = graded(store, bench, "llava-v1.5-13b_gpt-4-grade-1runs.json")
    scores = [float(r[1]) for r in views.sample_rows(view, views.SampleFilter(sort=order))]
    assert scores == sorted(scores, reverse=not first_is_lowest) and scores[0] != scores[-1]
    assert [r[0] for r in views.sample_rows(view)] == bench.ids        # the default: the benchmark's order


def test_bundled_benchmark_says_where_images_come_from(store, bench):
    view = graded(store, bench, "llava-v1.5-13b_gpt-4-grade-1runs.json")
    assert bench.images_dir is None
    assert "mm-vet.zip" in views.image_note(view, "v1_0") and "Upload" in views.image_note(view, "v1_0")


def test_partial_total_has_no_spread_of_incomplete_runs(store, bench):
    """Issue 10, item 5. Before: "42.2 ± 5.1 over 3 runs (0 of 168 fully graded)" after Stop, final 37.1 ± 0.0."""
    view = graded(store, bench, "llava-v1.5-13b_gpt-4-grade-3runs.json")
    complete = views.total_text(view)
    assert complete.startswith(f"Total: {view.scores.total.mean:.1f} ± {view.scores.total.std:.1f} over 3 run(s)")
    # runs 2 and 3 lose some grades (as after a Stop): run 1 stays complete
    kept = {k: g for k, g in view.grades.items() if k[1] == 0 or int(k[0].split("_")[1]) % 3}
    partial = load_run_view(store, view.run.id)
    partial = replace(partial, grades=kept)
    partial = replace(partial, scores=_scores(partial))
    text = views.total_text(partial)
    assert text.startswith("So far: ") and "partial, not a final score" in text
    assert "±" not in text and "1 of 3 run(s) complete" in text
    assert views.table_columns(partial, "capability") == [c for c in views.CAPABILITY_COLUMNS if c != "± std"]


def _scores(view):
    from mmvet_core.scores.aggregate import aggregate_scores
    return aggregate_scores(view.benchmark, view.effective_scores(), view.run.n_runs)


def test_no_eta_before_the_pace_is_known(store, bench):
    """Issue 19, item 6: "ETA 0 s" at 32 of 654 grades (the first answers arrive in one burst)."""
    view = graded(store, bench, "llava-v1.5-13b_gpt-4-grade-3runs.json")
    running = replace(view, run=replace(view.run, status="running"))
    t0 = 1_000_000.0
    items = sorted(view.grades.items())

    def after(n, spread):
        grades = {k: replace(g, updated_at=t0 + spread * i / max(n - 1, 1)) for i, (k, g) in enumerate(items[:n])}
        return replace(running, grades=grades)

    burst = views.progress_of(after(32, 0.2), now=t0 + 0.3)        # 32 of 654 within 0.2 s
    assert burst.eta_seconds is None and "ETA" not in burst.text() and burst.text().startswith("running: 32 / 654")
    steady = views.progress_of(after(100, 10.0), now=t0 + 10.0)    # 100 grades over 10 s: ~10 per second
    assert abs(steady.eta_seconds - 554 / 9.9) < 1e-9 and "ETA 56 s" in steady.text()   # 99 gaps in 10 s
    stalled = views.progress_of(after(100, 10.0), now=t0 + 500.0)  # nothing for 490 s: no "ETA 0 s"
    assert stalled.eta_seconds is None and "ETA" not in stalled.text()


def test_the_overlay_note_names_overlaid_runs_graded_by_another_judge(store, bench):
    """Issue 19, item 6: the overlay note stayed empty when the overlaid runs' judges differed."""
    from mmvet_core.judging.judge import JudgeSettings
    from mmvet_core.runs.lifecycle import create_run, import_official_grades
    from mmvet_core.scores.export import load_official_grades
    gpt4 = graded(store, bench, "llava-v1.5-13b_gpt-4-grade-1runs.json")
    other_id = create_run(store, benchmark=bench, spec="mmvet-v1", predictions={}, n_runs=1,
                          settings=JudgeSettings(model="gpt-4o-mini"), model_name="llava-7b")
    import_official_grades(store, other_id, load_official_grades(GRADES / "llava-v1.5-7b_gpt-4-grade-1runs.json"))
    other = load_run_view(store, other_id)
    same = graded(store, bench, "llava-v1.5-7b_gpt-4-grade-1runs.json")
    assert views.overlay_note(gpt4, [], [same]) == ""
    note = views.overlay_note(gpt4, [], [other])
    assert f"llava-7b ({other_id[:6]}) was graded by gpt-4o-mini" in note and "this run by gpt-4" in note
    assert "not a like-for-like comparison" in note
    assert "paper" in views.overlay_note(other, ["LLaVA-13B (LLaMA-2)"], [])


def test_the_radar_legend_names_overrides_and_the_metric(store, bench):
    """Issue 19, item 1: the radar legend of a run with overrides said nothing of them."""
    view = graded(store, bench, "llava-v1.5-13b_gpt-4-grade-1runs.json")
    assert views.radar_label(view) == "llava-v1.5-13b (this run)"
    store.set_override(view.run.id, "v1_0", 1.0, "checked")
    store.set_override(view.run.id, "v1_1", 1.0, "checked")
    again = load_run_view(store, view.run.id)
    assert views.radar_label(again) == "llava-v1.5-13b (this run, 2 human overrides, NOT the official MM-Vet metric)"
    assert views.radar_label(again, this_run=False).startswith(f"llava-v1.5-13b ({view.run.id[:6]}, 2 human")


@pytest.mark.parametrize("model, once", [("judge-b", "judge judge-b"), ("gpt-4-0613", "judge gpt-4-0613")],
                         ids=["successor", "official"])
def test_the_score_line_names_the_judge_once(store, bench, model, once):
    """Issue 26: "· judge judge-b · judge judge-b: NOT the official MM-Vet metric" named a successor judge twice."""
    view = graded(store, bench, "llava-v1.5-13b_gpt-4-grade-1runs.json")
    view = replace(view, run=replace(view.run, judge={"provider": "openai", "model": model}))
    text = views.total_text(view)
    assert text.count(once) == 1, text
    assert ("NOT the official MM-Vet metric" in text) == (model != "gpt-4-0613"), text


def test_a_partial_score_counts_the_grades_the_progress_bar_counts(store, bench):
    """Issue 26: the progress bar read 205 / 436 while the score read "over 251 of 436 grades": a sample scored by
    hand filled its runs in the score's count. Both now count the judge's grades; hand scores are named apart."""
    view = graded(store, bench, "llava-v1.5-13b_gpt-4-grade-3runs.json")
    kept = {k: g for k, g in view.grades.items() if int(k[0].split("_")[1]) % 2}       # a stopped run
    partial = replace(load_run_view(store, view.run.id), grades=kept, overrides={"v1_0": (1.0, "x"),
                                                                                  "v1_2": (0.5, "y")})
    partial = replace(partial, scores=_scores(partial))
    done = views.progress_of(partial).done
    text = views.total_text(partial)
    assert f"over {done} of 654 grades and 2 samples scored by hand (partial" in text, (done, text)
