"""Bootstrap intervals over samples (mmvet_core/scores/stats.py): hand-checkable cases and the measured MM-Vet figure."""
import json
from pathlib import Path

import numpy as np
import pytest

from mmvet_core.inputs.benchmark import load_bundled_v1
from mmvet_core.scores.stats import (bootstrap_columns, bootstrap_many, bootstrap_paired_difference, draw_counts,
                                     _percentiles)

GRADES = Path(__file__).resolve().parent / "data" / "official-grades"


def test_draw_counts_are_seeded_and_each_row_draws_n_samples():
    a, b = draw_counts(5, 100, seed=3), draw_counts(5, 100, seed=3)
    assert np.array_equal(a, b)
    assert not np.array_equal(a, draw_counts(5, 100, seed=4))
    assert (a.sum(axis=1) == 5).all()
    with pytest.raises(ValueError):
        draw_counts(0)


def test_constant_scores_have_a_zero_width_interval():
    ci = bootstrap_columns(np.full(10, 0.3), np.ones((10, 1), bool), resamples=500)
    assert ci.point[0] == pytest.approx(30.0) and ci.low[0] == pytest.approx(30.0) and ci.high[0] == pytest.approx(30.0)


def test_a_column_is_recomputed_over_the_members_drawn_in_each_resample():
    # column 1 has one member scoring 1.0: whenever it is drawn the column is 100, else undefined (not 0)
    member = np.array([[True, False], [True, False], [True, True]])
    ci = bootstrap_columns(np.array([0.0, 0.0, 1.0]), member, resamples=3000, seed=1)
    assert ci.low[1] == ci.high[1] == 100.0
    # P(sample drawn at least once in 3 draws) = 1 - (2/3)^3 = 0.704
    assert ci.defined[1] == pytest.approx(1 - (2 / 3) ** 3, abs=0.03)
    assert ci.defined[0] == 1.0


def test_percentiles_match_numpy_with_undefined_draws_left_out():
    rng = np.random.default_rng(0)
    v = rng.random((1001, 3))
    v[::4, 1] = np.nan
    v[:, 2] = np.nan
    low, high, defined = _percentiles(v, 0.9)
    assert low[0] == pytest.approx(np.percentile(v[:, 0], 5)) and high[0] == pytest.approx(np.percentile(v[:, 0], 95))
    assert low[1] == pytest.approx(np.nanpercentile(v[:, 1], 5)) and high[1] == pytest.approx(np.nanpercentile(v[:, 1], 95))
    assert np.isnan(low[2]) and defined[2] == 0.0


def test_paired_difference_is_the_interval_of_b_minus_a_on_shared_draws():
    rng = np.random.default_rng(2)
    a = rng.random(50)
    b = a + 0.1            # B is exactly 10 points better on every sample: no sampling noise in the difference
    d = bootstrap_paired_difference(a, b, np.ones((50, 1), bool), resamples=1000)
    assert d.point[0] == pytest.approx(10.0) and d.low[0] == pytest.approx(10.0) and d.high[0] == pytest.approx(10.0)
    many = bootstrap_many([a, b, b - a], np.ones((50, 1), bool), resamples=1000)
    assert many[2].low[0] == pytest.approx(10.0)
    assert many[0].high[0] - many[0].low[0] > 5      # each side alone is uncertain


def _mean_scores(name):
    bench = load_bundled_v1()
    grades = json.loads((GRADES / name).read_text())
    return bench, np.array([np.mean(grades[sid]["score"]) for sid in bench.ids])


def test_the_issue_figure_one_model_total_36_3_with_interval_about_30_7_to_42_1():
    bench, scores = _mean_scores("llava-v1.5-13b_gpt-4-grade-3runs.json")
    ci = bootstrap_columns(scores, np.ones((len(scores), 1), bool))
    assert round(ci.point[0], 1) == 36.3
    assert abs(ci.low[0] - 30.7) < 0.3 and abs(ci.high[0] - 42.1) < 0.3


def test_the_app_shows_intervals_beside_the_std_once_a_run_is_complete(store):
    from mmvet_core.runs.lifecycle import load_run_view, open_grade_file
    from mmvet_core.runs import views

    run_id = open_grade_file(store, GRADES / "llava-v1.5-13b_gpt-4-grade-3runs.json", benchmark=load_bundled_v1(),
                             spec="mmvet-v1", owner="o")
    view = load_run_view(store, run_id)
    text = views.total_text(view)
    assert text.startswith("Total: 36.3 ± 0.2 over 3 run(s)") and text.endswith(" · 95% interval over samples [30.7, 42.0]")
    rec = views.capability_rows(view)[0]
    assert views.CAPABILITY_COLUMNS[2] == "95% interval" and rec[1:4] == ["40.5", "[33.7, 47.7]", "0.2"]
    assert len(views.integration_rows(view)[0]) == len(views.INTEGRATION_COLUMNS)


@pytest.mark.parametrize("x, y, tau", [
    ([1, 2, 3], [10, 20, 30], 1.0),
    ([1, 2, 3], [30, 20, 10], -1.0),
    ([1, 2, 3, 4], [1, 3, 2, 4], 4 / 6),                # 5 concordant pairs, 1 discordant: (5 - 1) / 6
    ([1, 2, 3], [1, 1, 2], 2 / (3 * 2) ** 0.5),         # tau-b: 2 concordant, 1 pair tied in y: 2 / √(3·2)
    ([1, 2], [5, 5], None),                             # one side constant
    ([1], [1], None),
], ids=["same-order", "reversed", "one-swap", "tie-in-y", "constant", "one-item"])
def test_kendall_tau_b(x, y, tau):
    from mmvet_core.scores.stats import kendall_tau
    got = kendall_tau(x, y)
    assert got == (None if tau is None else pytest.approx(tau))


def test_slope_draws_is_least_squares_per_row():
    from mmvet_core.scores.stats import slope_draws
    x = np.array([[30.0, 40.0, 50.0], [1.0, 1.0, 1.0]])
    y = np.array([[7.0, 6.0, 5.0], [1.0, 2.0, 3.0]])
    got = slope_draws(x, y)
    assert got[0] == pytest.approx(-0.1) and np.isnan(got[1])


def test_percentile_interval_of_one_column_of_draws():
    from mmvet_core.scores.stats import percentile_interval
    lo, hi = percentile_interval(np.array([np.nan, *range(101)], dtype=float))
    assert (lo, hi) == (pytest.approx(2.5), pytest.approx(97.5))
