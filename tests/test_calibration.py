"""The per-grade correction (mmvet_core/successors/calibration.py): hand-computed fits, leave-one-model-out, the interval's
parts, and issue 23's "Done when": the four simulated successor judges, checked on the shipped references with one
of them left out as the unseen model, give estimates whose intervals are at most 6 points wide and hold its
official total (the judge answers a known function of the official grades, as tests/fake_judge.py serves it;
`simulate_grades` applies the same answer table without the HTTP round trip, test_judgecheck.py runs one through
the server and the CLI)."""
import math

import numpy as np
import pytest

from mmvet_core.inputs.benchmark import load_bundled_v1
from mmvet_core.successors.calibration import (LomoTable, PairSet, bin_index, column_scores, corrected_grades,
                                               correction_summary, estimate_run, fit_correction, grade_bins,
                                               leave_one_model_out, make_strata, strata_of, t95)
from mmvet_core.successors.judgecheck import assess_judge, load_references
from tests.fake_judge import SUCCESSORS, official_grades_answer, simulate_grades

IDS = ["a", "b", "c", "d"]
CAPS = {"a": ("rec",), "b": ("rec",), "c": ("math", "ocr"), "d": ("ocr",)}


def _pairs(cand, off, totals=None):
    cand, off = np.array(cand, dtype=float), np.array(off, dtype=float)
    return PairSet([f"m{j}" for j in range(len(cand))], IDS, cand, off, totals or [50.0] * len(cand))


def test_strata_put_each_sample_in_its_integration_and_rarest_capability_group():
    st = make_strata(CAPS, IDS, ["rec", "ocr", "math"])
    assert st.integrations == ["rec", "math_ocr", "ocr"] and st.groups == ["rec", "math", "ocr"]
    assert st.integration.tolist() == [0, 0, 1, 2] and st.group_of.tolist() == [0, 1, 2]
    assert st.members.tolist() == [[True, True, False, False], [True, True, False, False],
                                   [True, False, True, True], [True, False, True, False]]
    bench = load_bundled_v1()
    full = strata_of(bench)
    assert len(full.integrations) == 16 and full.members.shape == (218, 7)
    assert sorted(full.groups) == sorted(["math", "spat", "gen", "know", "ocr", "rec"])
    math_group = full.groups.index("math")                         # every math sample is in the math group
    assert all(full.group_of[full.integration[i]] == math_group
               for i, sid in enumerate(bench.ids) if "math" in bench.samples[sid].capabilities)


@pytest.mark.parametrize("values, grades, expected", [
    ([0.0, 0.5, 1.0], [0.5, 1.0, 0.0], [1, 2, 0]),
    ([0.0, 0.5, 1.0], [0.25, math.nan, 0.5000001], [-1, -1, 1]),        # unseen, missing, rounding to 3 decimals
    ([], [0.5], [-1]),
], ids=["exact", "unseen-missing-rounded", "no-values"])
def test_bin_index(values, grades, expected):
    assert bin_index(np.array(values), np.array(grades)).tolist() == expected


def test_the_pooled_correction_is_the_mean_official_grade_per_candidate_grade_shrunk_toward_the_line():
    # one integration, one group: f(c) = (Σ o + K·line(c)) / (n + K) at every level; with K = 0 the plain means
    st = make_strata({s: ("rec",) for s in IDS}, IDS, ["rec"])
    p = _pairs([[1.0, 1.0, 0.0, 0.0]], [[1.0, 0.5, 0.0, 0.0]])
    corr = fit_correction(p, st, grade_bins(p.candidate), shrink=0.0)
    assert corr.values.tolist() == [0.0, 1.0]
    assert corr.f[0, 0].tolist() == pytest.approx([0.0, 0.75])
    # K = 2: the line through the pairs is o = 0.75·c, so f(1) = (1.5 + 2·0.75) / (2 + 2) = 0.75 too, and a grade
    # the references never gave (0.5) gets the line: 0.375
    corr = fit_correction(p, st, np.array([0.0, 0.5, 1.0]), shrink=2.0)
    assert corr.f[0, 0].tolist() == pytest.approx([0.0, 0.375, 0.75])
    assert corr.n_pooled.tolist() == [2, 0, 2]


def test_a_capability_group_with_its_own_pairs_gets_its_own_correction():
    # math samples graded 0.0 when the official grade is 0.3; the others graded 0.0 for an official 0.0
    st = make_strata(CAPS, IDS, ["rec", "ocr", "math"])
    p = _pairs([[0.0, 0.0, 0.0, 0.0]] * 3, [[0.0, 0.0, 0.3, 0.0]] * 3)
    corr = fit_correction(p, st, grade_bins(p.candidate), shrink=1.0)
    f = corrected_grades(corr, st, np.array([[0.0, 0.0, 0.0, 0.0]]))[0, 0]
    pooled = 0.9 / 12                      # all 12 pairs are at c = 0: mean 0.075 (the line through them: the same)
    # each level: (its own Σ o + K · the level above) / (its pairs + K), K = 1
    rec = (0 + (0 + pooled) / (6 + 1)) / (6 + 1)          # group rec (6 pairs, all 0), integration rec (the same)
    math_ = (0.9 + (0.9 + pooled) / (3 + 1)) / (3 + 1)    # group math (3 pairs of 0.3), integration math_ocr
    ocr = (0 + (0 + pooled) / (3 + 1)) / (3 + 1)          # group ocr, integration ocr
    assert f.tolist() == pytest.approx([rec, rec, math_, ocr], rel=1e-9)
    assert math_ > 0.2 > 0.01 > rec                       # the math samples get (most of) their 0.3


def test_column_scores_are_the_official_aggregation_per_run_then_averaged():
    members = np.array([[True, True], [True, False], [True, True]])
    grades = np.array([[1.0, 0.0, 0.5], [0.0, 0.0, np.nan]])        # run 2 has no grade for sample 3
    # run 1: total 100·1.5/3 = 50, column 2 100·1.5/2 = 75; run 2: total 0, column 2 0; means 25 and 37.5
    assert column_scores(grades, members).tolist() == pytest.approx([25.0, 37.5])


def test_leave_one_model_out_predicts_each_model_from_the_others():
    st = make_strata({s: ("rec",) for s in IDS}, IDS, ["rec"])
    # three models, a judge giving official + 0.1 (capped): every model is predicted exactly
    off = np.array([[0.0, 0.5, 0.9, 1.0], [0.0, 0.0, 0.5, 1.0], [0.5, 0.9, 1.0, 1.0]])
    cand = np.minimum(off + 0.1, 1.0)
    p = PairSet(["x", "y", "z"], IDS, cand, off, [60.0, 37.5, 85.0])
    lomo = leave_one_model_out(p, st, shrink=0.0)
    assert [r.model for r in lomo.rows] == ["x", "y", "z"]
    # the grade 1.0 stands for an official 0.9 or 1.0: each model gets the proportion the others show
    x, y, z = lomo.rows
    assert x.predicted[0] == pytest.approx(100 * (0.0 + 0.5 + 0.975 + 0.975) / 4)      # y, z: 1, .9, 1, 1 at 1.0
    assert y.official[0] == pytest.approx(37.5)
    assert y.error[0] == pytest.approx(100 * (0.96 - 1.0) / 4)                          # x, z: .9, 1, .9, 1, 1
    assert z.predicted[0] == pytest.approx(100 * (0.5 + 3 * 2.9 / 3) / 4)              # x, y: .9, 1, 1
    assert x.outside == 0.0 and y.outside == pytest.approx(22.5) and z.outside == pytest.approx(25.0)
    assert lomo.delta_bar == pytest.approx(np.mean([0, 0, 0.075, 0.025, 0, 0, 0, 0.04,
                                                    0, 0.9667 - 0.9, 0.0333, 0.0333]), abs=1e-4)


@pytest.mark.parametrize("df, expected", [(1, 12.706), (5, 2.571), (30, 2.042), (31, 1.959963984540054)])
def test_t95(df, expected):
    assert t95(df) == expected


def test_an_interval_is_never_narrower_than_the_largest_leave_one_out_error_and_stays_in_0_100():
    st = make_strata({s: ("rec",) for s in IDS}, IDS, ["rec"])
    off = np.array([[1.0, 1.0, 1.0, 1.0], [1.0, 1.0, 1.0, 0.0], [0.0, 1.0, 1.0, 1.0]])
    p = PairSet(["x", "y", "z"], IDS, np.ones_like(off), off, [100.0, 75.0, 75.0])
    lomo = leave_one_model_out(p, st)
    est = estimate_run(p, st, np.ones((1, 4)), lomo, resamples=200)
    t = est.columns[0]
    assert lomo.max_error(0) == pytest.approx(25.0)               # z's 75 predicted 100 from x's and y's pairs
    assert t.estimate - t.low >= 25.0 - 1e-9 and t.low >= 0.0
    assert t.high == 100.0                                        # clipped: the interval never leaves [0, 100]
    assert est.pairs == 12 and est.range == (75.0, 100.0)


# ---- issue 23, Done when: the four simulated successors, one shipped reference left out as the unseen model ----
#: The unseen models: the strongest shipped reference (outside the others' range: an extrapolation of ~10 points)
#: and Qwen2.5-VL-3B on Claude-redrawn images (31.1, the model family and kind of images of the held-out weak model).
UNSEEN = ["qwen2.5-vl-3b", "qwen2.5-vl-3b-claude-images"]


@pytest.fixture(scope="module")
def successor_table():
    """{(successor, unseen model): (official total, Equivalence)}, each check assessed on the default references
    without the unseen one (its answers never reach the check)."""
    rows = {}
    for name, fn in SUCCESSORS.items():
        for unseen, (official, eq, _) in held_out(fn, 500).items():
            rows[(name, unseen)] = (official, eq)
    return rows


def held_out(fn, resamples: int) -> dict:
    """{unseen model: (official total, Equivalence, check)} for the simulated successor `fn`: each check assessed
    on the default references without the unseen one (its answers never reach the check)."""
    from mmvet_core.successors.equivalence import estimate_equivalent

    bench = load_bundled_v1()
    every = load_references(which="all")
    answer = official_grades_answer(which="all", transform=fn)
    grades = {r.model: simulate_grades(answer, r.predictions) for r in every}
    out = {}
    for unseen in UNSEEN:
        refs = [r for r in load_references() if r.model != unseen]
        check = assess_judge(bench, refs, {r.model: grades[r.model] for r in refs}, {"model": "judge-b"},
                             resamples=resamples)
        target = next(r for r in every if r.model == unseen)
        eq = estimate_equivalent(bench, grades[unseen], check, run_judge={"model": "judge-b", "provider": "openai"},
                                 predictions=target.predictions, resamples=resamples)
        out[unseen] = (target.official_total, eq, check)
    return out


def test_done_when_every_successor_gives_both_unseen_models_an_interval_at_most_6_wide_that_holds_the_official_total(
        successor_table):
    for (name, unseen), (official, eq) in successor_table.items():
        t = eq.total
        assert eq.available, (name, unseen, eq.reason)
        assert t.high - t.low <= 6.0 and t.low <= official <= t.high, (name, unseen, official, t)
        assert abs(t.estimate - official) < 1.5, (name, unseen, official, t)
        assert eq.label != "in-sample"                 # its answers are in no reference of the check
    # the strongest reference left out lies ~10 points above the others: labelled, and widened
    strong = successor_table[(next(iter(SUCCESSORS)), "qwen2.5-vl-3b")][1]
    assert strong.label.split(", ")[0] == "extrapolated" and strong.total.widened > 0 and "above" in strong.label_note


def test_the_correction_says_what_it_rests_on():
    bench = load_bundled_v1()
    refs = load_references()
    answer = official_grades_answer(0.1)
    check = assess_judge(bench, refs, {r.model: simulate_grades(answer, r.predictions) for r in refs},
                         {"model": "judge-b"}, resamples=200)
    pairs, strata = PairSet.from_dict(check.pairs, bench.ids), strata_of(bench)
    summary = correction_summary(pairs, strata)
    assert summary["pairs"] == 6 * 218 == check.calibration["pairs"]
    assert summary["groups"]["math"] == 6 * 26 and sum(summary["groups"].values()) == 6 * 218
    assert sum(summary["integrations"].values()) == 6 * 218 and summary["cells_own"] <= summary["cells"]
    assert check.correctable and "1308 reference pairs of 6 reference models" in check.correction_note


# ---- issue 30: harder successors (kinder to long answers, a fifth of the questions, all at once; coarse) -------
@pytest.mark.parametrize("name", ["kinder to long answers (+0.15 over 200 characters)",
                                  "disagrees on a fifth of the questions (±0.3)",
                                  "everything at once, on another scale", "coarse: 0, 0.5 or 1 only"])
def test_harder_successors_hold_the_official_total_of_both_unseen_models(name):
    """Every interval holds; at most 6 points wide, except a coarse judge's, whose check says why it cannot be
    (test_judgecheck.py) and whose intervals hold all the same."""
    from tests.fake_judge import HARDER_SUCCESSORS

    for unseen, (official, eq, check) in held_out(HARDER_SUCCESSORS[name], 300).items():
        t = eq.total
        assert eq.available and t.low <= official <= t.high, (unseen, official, t)
        if name.startswith("coarse"):
            assert check.coarse_note and "cannot narrow it to 6 points" in check.coarse_note
            # what makes it wide is the model-to-model term (a bias of the model as a whole), not the per-sample
            # scatter, which averages out over 218 samples; the correction's own uncertainty, which the
            # leave-one-out errors already hold, is counted once (issue 30 part 4)
            lomo = LomoTable.from_dict(check.lomo)
            assert t.model_sd ** 2 == pytest.approx(max(0.0, lomo.model_var(0) - t.correction_sd ** 2))
            assert t.model_sd > max(t.scatter_sd, t.correction_sd) and t.scatter_sd < 0.6
            sd = math.sqrt(t.scatter_sd ** 2 + t.correction_sd ** 2 + t.model_sd ** 2)
            half = max(t95(len(lomo.rows) - 1) * sd, t.floor) + t.widened
            assert t.high - t.low == pytest.approx(min(100.0, t.estimate + half) - max(0.0, t.estimate - half))
            assert t.high - t.low < 2 * (t95(len(lomo.rows) - 1) * math.sqrt(
                t.scatter_sd ** 2 + t.correction_sd ** 2 + lomo.model_var(0)) + t.widened)
        else:
            assert t.high - t.low <= 6.0 and not check.coarse_note, (unseen, t)
