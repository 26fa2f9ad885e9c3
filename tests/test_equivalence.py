"""Official-equivalent estimate (mmvet_core/successors/equivalence.py): what it rests on (a named check), its labels
(in-sample, extrapolated), the cases with no estimate, the lines and the export file. The calibration itself is
tested in test_calibration.py."""
import pytest

from mmvet_core.inputs.benchmark import load_bundled_v1
from mmvet_core.successors.equivalence import (EXTRAPOLATED, IN_SAMPLE, Equivalence, EquivalentColumn,
                                               estimate_equivalent, format_capability_line, format_equivalent_line,
                                               hover_text, in_sample_model, make_equivalent_csv_text,
                                               unavailable_reason)
from mmvet_core.successors.judgecheck import assess_judge, load_references
from tests.fake_judge import official_grades_answer, simulate_grades

RUN = {"model": "judge-b", "provider": "openai", "prompt_examples": None}


@pytest.fixture(scope="module")
def bench():
    return load_bundled_v1()


@pytest.fixture(scope="module")
def plus_tenth(bench):
    """A judge answering official + 0.1 (capped), checked on the default references: (check, grades of every
    shipped set)."""
    answer = official_grades_answer(0.1, which="all")
    every = load_references(which="all")
    grades = {r.model: simulate_grades(answer, r.predictions) for r in every}
    refs = load_references()
    check = assess_judge(bench, refs, {r.model: grades[r.model] for r in refs}, {"model": "judge-b"}, resamples=300)
    check.check_id, check.created_at = "3f2a9c1bd0e4", 1764892800.0            # as read from the store
    return check, grades, {r.model: r for r in every}


def test_an_estimate_names_its_check_and_corrects_per_grade(bench, plus_tenth):
    check, grades, refs = plus_tenth
    rerun = refs["llava-v1.5-7b-rerun"]                # not in the default check: an unseen model
    eq = estimate_equivalent(bench, grades[rerun.model], check, run_judge=RUN, predictions=rerun.predictions,
                             resamples=300)
    t = eq.total
    assert eq.available and eq.label == "" and eq.check_id == "3f2a9c1bd0e4" and len(eq.references) == 6
    assert t.score > 37 and t.low <= rerun.official_total <= t.high and t.high - t.low < 6
    assert [c.name for c in eq.columns] == ["total", *bench.capabilities]
    assert all(0.0 <= c.low <= c.estimate <= c.high <= 100.0 for c in eq.columns)     # math too: never below 0
    line = format_equivalent_line(eq)
    assert line.startswith(f"official-equivalent estimate: {t.estimate:.1f} [{t.low:.1f}, {t.high:.1f}]")
    assert "check 3f2a9c1b (2025-12-05; 6 reference models, official totals 21.6–60.9)" in line
    assert "not the official MM-Vet metric" in line and "IN-SAMPLE" not in line
    assert format_capability_line(eq).startswith("rec ") and "estimate" in hover_text(eq, "rec")
    text = make_equivalent_csv_text(eq)
    assert text.splitlines()[0].startswith("column,score,official_equivalent_estimate,estimate_ci_low")
    assert text.splitlines()[1].startswith(f"total,{t.score:.1f},{t.estimate:.1f},{t.low:.1f},{t.high:.1f},")
    assert "3f2a9c1bd0e4" in text and "not the official MM-Vet metric" in text


def test_a_reference_model_is_in_sample_and_left_out_of_its_own_correction(bench, plus_tenth):
    check, grades, refs = plus_tenth
    ref = refs["internlm-xcomposer2-vl-7b"]
    assert in_sample_model(check, ref.predictions) == ref.model
    assert in_sample_model(check, {**ref.predictions, **{s: "x" for s in list(ref.predictions)[:30]}}) is None
    eq = estimate_equivalent(bench, grades[ref.model], check, run_judge=RUN, predictions=ref.predictions,
                             resamples=300)
    assert eq.label == IN_SAMPLE and eq.left_out == ref.model and ref.model not in eq.references
    assert len(eq.references) == 5 and eq.total.low <= ref.official_total <= eq.total.high
    assert "\nIN-SAMPLE: these answers are the check's reference internlm-xcomposer2-vl-7b; it is left out" in \
        format_equivalent_line(eq)


def test_a_model_beyond_the_references_is_extrapolated_and_widened(bench, plus_tenth):
    check, grades, refs = plus_tenth
    # a run answering every sample as well as the references' best: far above their range
    scores = {sid: [1.0] for sid in bench.ids}
    eq = estimate_equivalent(bench, scores, check, run_judge=RUN, predictions={}, resamples=200)
    assert eq.label.split(", ")[0] == EXTRAPOLATED and eq.total.widened > 0 and eq.total.high <= 100.0
    # every grade 1.0: unlike every reference in kind too (issue 30), and said so
    assert eq.label.endswith("unlike the references") and eq.unlike[0] == \
        "grades of exactly 0 or 1 100 % (references 19–51 %)"
    assert "EXTRAPOLATED:" in format_equivalent_line(eq) and "above the references' official totals" in eq.label_note


@pytest.mark.parametrize("judge, version, check, says", [
    ({"provider": "imported", "model": "gpt-4"}, "v1", None, "imported"),
    ({"provider": "openai", "model": "gpt-4-0613", "prompt_examples": None}, "v1", None, "official judge itself"),
    ({"provider": "openai", "model": "judge-b", "prompt_examples": [1, 2]}, "v1", "ok", "another prompt"),
    ({"provider": "openai", "model": "judge-b", "prompt_examples": None}, "v2", "ok", "measures MM-Vet v1"),
    ({"provider": "baseline", "model": "keyword-baseline"}, "v1", "ok", "keyword baseline"),
    ({"provider": "openai", "model": "judge-b", "prompt_examples": None}, "v1", None, "judge-check --judge-model judge-b"),
    ({"provider": "openai", "model": "judge-b", "prompt_examples": None}, "v1", "few", "at least 3 are needed"),
], ids=["imported", "official-judge", "other-prompt", "v2", "baseline", "no-check", "too-few-models"])
def test_no_estimate_and_why(bench, plus_tenth, judge, version, check, says):
    few = assess_judge(bench, load_references(which="llava-v1.5-13b,llava-v1.5-7b"),
                       {m: plus_tenth[1][m] for m in ("llava-v1.5-13b", "llava-v1.5-7b")}, {"model": "judge-b"},
                       resamples=100) if check == "few" else None
    stored = {"ok": plus_tenth[0], "few": few, None: None}[check]
    assert says in unavailable_reason(judge, version, stored)
    eq = estimate_equivalent(bench, {sid: [0.5] for sid in bench.ids}, stored, run_judge=judge,
                             benchmark_version=version)
    assert not eq.available and eq.columns == []
    assert format_equivalent_line(eq).startswith("official-equivalent estimate: none (")
    assert "no official-equivalent estimate" in make_equivalent_csv_text(eq)


def test_nothing_graded_has_no_estimate(bench, plus_tenth):
    eq = estimate_equivalent(bench, {sid: [None] for sid in bench.ids}, plus_tenth[0], run_judge=RUN)
    assert eq == Equivalence(False, "nothing graded yet", "judge-b")


def test_the_short_form_for_tables_and_apis():
    col = EquivalentColumn("total", 40.0, 33.04, 30.01, 36.26)
    eq = Equivalence(True, "", "judge-b", "abc123", 0.0, ["a", "b", "c"], [21.6, 60.9], label=EXTRAPOLATED,
                     columns=[col])
    assert eq.short() == {"estimate": 33.0, "low": 30.0, "high": 36.3, "label": "extrapolated", "check": "abc123",
                          "check_text": "check abc123 (?; 3 reference models, official totals 21.6–60.9)"}
    assert Equivalence(False, "why").short() is None


@pytest.mark.parametrize("name", ["random", "keyword"])
def test_a_judge_no_better_than_corrected_keyword_matching_gets_no_estimate(bench, name):
    """The gate compares like with like: the judge's grades corrected per grade (each reference by the others)
    against keyword matching's grades corrected the same way. A judge answering at random, corrected, only
    predicts each cell's average; it is refused, and so is keyword matching itself."""
    import random

    from mmvet_core.judging.judge import keyword_score
    rng = random.Random(0)
    refs = load_references()
    grades = {r.model: {sid: [rng.randint(0, 10) / 10 if name == "random" else
                              keyword_score(bench.samples[sid].answer, r.predictions.get(sid, ""))]
                        for sid in bench.ids} for r in refs}
    check = assess_judge(bench, refs, grades, {"model": name}, resamples=100)
    assert not check.correctable and "keyword matching corrected the same way" in check.correction_note
    assert check.calibration["rmse"] >= check.calibration["keyword_rmse"] > 0.25
    check.check_id = "x"
    assert "no closer to the official grades" in unavailable_reason(RUN, "v1", check)


# ---- issue 30: a run unlike the references ----------------------------------------------------------------
def _refused_third(ref):
    """The reference with every third answer replaced by "I don't know." (official grade 0 for those: GPT-4-0613
    gives a refusal nothing), and its official total recomputed."""
    from mmvet_core.scores.aggregate import aggregate_scores

    bench = load_bundled_v1()
    refused = set(bench.ids[::3])
    preds = {sid: ("I don't know." if sid in refused else p) for sid, p in ref.predictions.items()}
    official = {sid: ([0.0] * len(runs) if sid in refused else runs) for sid, runs in ref.official.items()}
    n = max(len(v) for v in official.values())
    total = aggregate_scores(bench, official, n).total.mean
    return preds, official, total


@pytest.mark.parametrize("successor", ["official + 0.1, capped at 1", "kinder to long answers (+0.15 over 200 "
                                                                      "characters)"])
def test_a_reference_with_a_third_of_its_answers_refused_is_unlike_the_references_and_its_interval_holds(
        bench, successor):
    from mmvet_core.successors.equivalence import UNLIKE, label_text
    from tests.fake_judge import HARDER_SUCCESSORS, SUCCESSORS

    fn = {**SUCCESSORS, **HARDER_SUCCESSORS}[successor]
    refs = load_references()
    unseen = next(r for r in refs if r.model == "internlm-xcomposer2-vl-7b")
    preds, official, total = _refused_third(unseen)
    # the judge grades a refusal (a short answer) as it grades any short answer the official judge gave 0
    refusal = repr(min(1.0, max(0.0, fn(0.0, bench.samples["v1_0"], ""))))
    answer = official_grades_answer(which="all", transform=fn, otherwise=lambda p, t: refusal)
    others = [r for r in refs if r.model != unseen.model]
    check = assess_judge(bench, others, {r.model: simulate_grades(answer, r.predictions) for r in others},
                         {"model": "judge-b"}, resamples=300)
    eq = estimate_equivalent(bench, simulate_grades(answer, preds), check, run_judge=RUN, predictions=preds,
                             resamples=300)
    t = eq.total
    assert UNLIKE in eq.label and eq.unlike[0].startswith("refusals or empty answers 34 %"), eq.label_note
    assert t.low <= total <= t.high and t.widened > 0, (total, t)
    line = format_equivalent_line(eq)
    assert "UNLIKE THE REFERENCES: refusals or empty answers 34 % (references 0–" in line     # 73 + 1 of 218
    assert eq.short()["label"].startswith(UNLIKE + ": refusals or empty answers 34 %")
    assert label_text(eq.label_note) in line
    # the same reference as it is: like the others, no label
    plain = estimate_equivalent(bench, simulate_grades(answer, unseen.predictions), check, run_judge=RUN,
                                predictions=unseen.predictions, resamples=300)
    assert UNLIKE not in plain.label and not plain.unlike
