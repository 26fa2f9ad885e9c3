"""Aggregation: hand-computed tables, the official rounding, partial sets, subsets, and parity with the real
official CSVs in tests/data/official-grades."""
from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from mmvet_core.scores.aggregate import aggregate_scores, round_official
from mmvet_core.inputs.benchmark import Benchmark, Sample, integration_name, load_bundled_v1

SHARED_DATA = Path(__file__).resolve().parent / "data"
OFFICIAL = SHARED_DATA / "official-grades"


def make_benchmark(caps_by_id: dict[str, tuple[str, ...]]) -> Benchmark:
    samples = {sid: Sample(id=sid, question=f"q {sid}", answer=f"a {sid}", capabilities=caps)
               for sid, caps in caps_by_id.items()}
    return Benchmark(name="tiny", version="v1", samples=samples)


@pytest.fixture
def tiny() -> Benchmark:
    # Four samples; integrations: rec, rec_ocr, ocr, rec_know_gen (one sample each, so first-appearance order).
    return make_benchmark({
        "a": ("rec",),
        "b": ("rec", "ocr"),
        "c": ("ocr",),
        "d": ("rec", "know", "gen"),
    })


TINY_SCORES = {
    "a": [1.0, 0.5],
    "b": [0.5, 0.5],
    "c": [0.0, 1.0],
    "d": [0.3, 0.6],
}


def test_complete_set_hand_computed(tiny):
    scores = aggregate_scores(tiny, TINY_SCORES)

    assert (scores.n_runs, scores.n_samples, scores.n_graded, scores.complete) == (2, 4, 4, True)
    assert scores.notes == []
    # total, run 0: (1.0 + 0.5 + 0.0 + 0.3) / 4 * 100 = 45.0; run 1: (0.5 + 0.5 + 1.0 + 0.6) / 4 * 100 = 65.0
    assert scores.total.per_run == pytest.approx([45.0, 65.0])
    assert scores.total.mean == 55.0            # (45.0 + 65.0) / 2
    assert scores.std == 10.0                   # population std of [45, 65]
    assert scores.runs == [45.0, 65.0]

    by_cap = {c.name: c for c in scores.capabilities}
    assert list(by_cap) == ["rec", "ocr", "know", "gen"]
    # rec = a, b, d: run 0 (1.0 + 0.5 + 0.3) / 3 * 100 = 60.0; run 1 (0.5 + 0.5 + 0.6) / 3 * 100 = 53.33...
    assert by_cap["rec"].per_run == pytest.approx([(1.0 + 0.5 + 0.3) / 3 * 100, (0.5 + 0.5 + 0.6) / 3 * 100])
    assert by_cap["rec"].mean == 56.7           # (60.0 + 53.333) / 2 = 56.666...
    assert by_cap["rec"].n_samples == 3
    # ocr = b, c: run 0 (0.5 + 0.0) / 2 * 100 = 25.0; run 1 (0.5 + 1.0) / 2 * 100 = 75.0
    assert by_cap["ocr"].mean == 50.0
    # know = gen = d: (30.0 + 60.0) / 2
    assert by_cap["know"].mean == by_cap["gen"].mean == 45.0


def test_integrations_hand_computed(tiny):
    scores = aggregate_scores(tiny, TINY_SCORES)

    means = {c.name: c.mean for c in scores.integrations}
    assert list(means) == ["rec", "rec_ocr", "ocr", "rec_know_gen"]   # Benchmark.integrations order
    assert means == {
        "rec": 75.0,            # a: (100.0 + 50.0) / 2
        "rec_ocr": 50.0,        # b: (50.0 + 50.0) / 2
        "ocr": 50.0,            # c: (0.0 + 100.0) / 2
        "rec_know_gen": 45.0,   # d: (30.0 + 60.0) / 2
    }
    assert scores.integration("rec_know_gen").n_samples == 1
    with pytest.raises(KeyError):
        scores.integration("ocr_math")


@pytest.mark.parametrize(("value", "expected"), [
    (0.35, 0.4),      # 0.35 is stored as 0.34999..., Python rounds down, numpy rounds 3.5 half-even up
    (0.15, 0.2),
    (0.45, 0.4),      # the other way round: Python 0.5, numpy rounds 4.5 half-even down
    (0.05, 0.0),
    (12.35, 12.4),
    (45.85, 45.8),
], ids=["0.35", "0.15", "0.45", "0.05", "12.35", "45.85"])
def test_round_official_is_numpy_rounding_not_python(value, expected):
    assert round_official(value) == expected
    assert round(value, 1) != expected          # these are exactly the cases where Python's round differs


@pytest.mark.parametrize(("value", "expected"), [
    (36.25, 36.2), (36.1, 36.1), (0.0, 0.0), (100.0, 100.0), (None, None), (float("nan"), None),
], ids=["half-even", "plain", "zero", "hundred", "none", "nan"])
def test_round_official_plain_cases(value, expected):
    assert round_official(value) == expected


def test_regression_mean_rounds_like_numpy_not_python():
    # 40 samples, 5 runs; run i has k_i tenths of score: k = 122, 151, 184, 217, 243, so the per-run totals are
    # 12.2 / 40 * 100 = 30.5, 37.75, 46.0, 54.25, 60.75 and their mean is 45.85 (stored as 45.850000000000001):
    # np.round gives 45.8 (what the official CSV would say), Python's round 45.9.
    bench = make_benchmark({f"s{i}": ("rec",) for i in range(40)})
    tenths = [122, 151, 184, 217, 243]
    per_sample = {f"s{i}": [] for i in range(40)}
    for k in tenths:
        run = [1.0] * (k // 10) + [round((k % 10) / 10, 1)]
        run += [0.0] * (40 - len(run))
        for i, score in enumerate(run):
            per_sample[f"s{i}"].append(score)

    scores = aggregate_scores(bench, per_sample)

    mean_unrounded = float(np.mean(scores.total.per_run))
    assert round(mean_unrounded, 1) == 45.9
    assert scores.total.mean == 45.8
    assert scores.capability("rec").mean == 45.8
    assert scores.runs == [30.5, 37.8, 46.0, 54.2, 60.8]


def test_std_is_population_std_of_run_totals(tiny):
    # totals 45.0 and 65.0: population std 10.0; the sample std would be 14.1
    scores = aggregate_scores(tiny, TINY_SCORES)
    assert scores.std == 10.0
    assert scores.to_dict()["total"]["std"] == 10.0


def test_single_run_std_is_zero(tiny):
    scores = aggregate_scores(tiny, {k: v[:1] for k, v in TINY_SCORES.items()})
    assert (scores.n_runs, scores.std, scores.runs) == (1, 0.0, [45.0])


def test_partial_set_aggregates_what_is_graded(tiny):
    partial = {
        "a": [1.0, 0.5],
        "b": [0.5, None],     # run 1 not graded yet
        "c": [0.0],           # run 1 missing entirely
        # d: not graded at all
    }
    scores = aggregate_scores(tiny, partial)

    assert scores.complete is False
    assert (scores.n_runs, scores.n_graded) == (2, 1)
    assert scores.notes and scores.notes[0].startswith("partial")
    # total run 0 over a, b, c: (1.0 + 0.5 + 0.0) / 3 * 100 = 50.0; run 1 over a only: 0.5 / 1 * 100 = 50.0
    assert scores.total.per_run == pytest.approx([50.0, 50.0])
    assert scores.total.mean == 50.0
    means = {c.name: c.mean for c in scores.capabilities}
    # rec over a, b in run 0: (1.0 + 0.5) / 2 * 100 = 75.0; over a in run 1: 50.0 -> (75.0 + 50.0) / 2 = 62.5
    assert means["rec"] == 62.5
    # know and gen: d is their only sample and has no score in any run
    assert means["know"] is None and means["gen"] is None
    assert scores.capability("know").per_run == [None, None]
    assert scores.capability("know").std is None
    assert {c.name: c.mean for c in scores.integrations}["rec_know_gen"] is None


def test_partial_run_with_no_graded_sample_is_skipped_in_the_mean(tiny):
    scores = aggregate_scores(tiny, {"a": [1.0, None]}, n_runs=2)
    assert scores.total.per_run == [100.0, None]
    assert scores.total.mean == 100.0
    assert scores.runs == [100.0, None]


def test_no_scores_at_all(tiny):
    scores = aggregate_scores(tiny, {})
    assert (scores.n_runs, scores.n_graded, scores.complete) == (0, 0, False)
    assert scores.total.mean is None and scores.runs == []


def test_explicit_n_runs_pads_and_truncates(tiny):
    # n_runs=3 with two scores each: incomplete. n_runs=1: the second run is ignored, like the official script.
    assert aggregate_scores(tiny, TINY_SCORES, n_runs=3).complete is False
    one = aggregate_scores(tiny, TINY_SCORES, n_runs=1)
    assert one.complete is True and one.runs == [45.0]
    with pytest.raises(ValueError):
        aggregate_scores(tiny, TINY_SCORES, n_runs=-1)


def test_nan_counts_as_not_graded(tiny):
    scores = aggregate_scores(tiny, {**TINY_SCORES, "d": [float("nan"), 0.6]})
    assert scores.complete is False
    assert scores.capability("know").per_run == [None, pytest.approx(60.0)]


def test_unknown_ids_are_ignored(tiny):
    scores = aggregate_scores(tiny, {**TINY_SCORES, "zzz": [1.0, 1.0, 1.0]})
    assert scores.n_runs == 2 and scores.complete is True and scores.total.mean == 55.0


def test_subset_aggregates_only_its_ids(tiny):
    sub = tiny.subset(["a", "c"], name="two")
    scores = aggregate_scores(sub, TINY_SCORES)
    assert scores.n_samples == 2 and scores.complete
    assert [c.name for c in scores.capabilities] == ["rec", "ocr"]
    assert [c.name for c in scores.integrations] == ["rec", "ocr"]
    # run 0: (1.0 + 0.0) / 2 * 100 = 50.0; run 1: (0.5 + 1.0) / 2 * 100 = 75.0
    assert scores.total.mean == 62.5


def test_bard_subset_of_bundled_v1():
    bench = load_bundled_v1()
    bard = bench.subset(bench.bard_set, name="bard")
    grades = json.loads((OFFICIAL / "llava-v1.5-13b_gpt-4-grade-3runs.json").read_text())
    scores = aggregate_scores(bard, {k: v["score"] for k, v in grades.items()})
    assert scores.n_samples == 168 and scores.complete
    assert len(scores.integrations) == 15            # no rec_ocr_spat_math sample in the Bard set
    bard_ids = set(bench.bard_set)
    expected = np.round(np.mean([sum(v["score"][i] for k, v in grades.items() if k in bard_ids) / 168 * 100
                                 for i in range(3)]), 1)
    assert scores.total.mean == float(expected)


def test_to_dict_is_json_serialisable(tiny):
    data = aggregate_scores(tiny, TINY_SCORES).to_dict()
    text = json.dumps(data)
    assert json.loads(text)["runs"] == [45.0, 65.0]
    assert data["capabilities"][0]["name"] == "rec"
    assert data["integrations"][-1]["runs"] == [30.0, 60.0]


# ------------------------------------------------------------------------------------------------------------
# Parity with the real official outputs


def read_official_row(path: Path, label: str) -> dict:
    """The official CSV row `label`, read with pandas independently of mmvet_core.scores.export."""
    frame = pd.read_csv(path, index_col=0)
    row = frame.loc[label]
    out = {}
    for column, value in row.items():
        name = column if column in ("total", "std", "runs") else integration_name(column.split("_"))
        out[name] = json.loads(value) if name == "runs" else float(value)
    return out


PARITY_CASES = [
    # grade file, cap CSV, cap-int CSV, row label
    ("llava-v1.5-13b_gpt-4-grade-1runs.json", "llava-v1.5-13b_gpt-4-cap-score-1runs.csv",
     "llava-v1.5-13b_gpt-4-cap-int-score-1runs.csv", "llava-v1.5-13b"),
    ("llava-v1.5-13b_gpt-4-grade-3runs.json", "llava-v1.5-13b_gpt-4-cap-score-3runs.csv",
     "llava-v1.5-13b_gpt-4-cap-int-score-3runs.csv", "llava-v1.5-13b"),
    ("llava-v1.5-7b_gpt-4-grade-1runs.json", "llava-v1.5-7b_gpt-4-cap-score-1runs.csv",
     "llava-v1.5-7b_gpt-4-cap-int-score-1runs.csv", "llava-v1.5-7b"),
    ("llava-v1.5-7b_gpt-4-grade-3runs.json", "llava-v1.5-7b_gpt-4-cap-score-3runs.csv",
     "llava-v1.5-7b_gpt-4-cap-int-score-3runs.csv", "llava-v1.5-7b"),
    ("llava-v1.5-7b-rerun_gpt-4-0613-grade-1runs.json", "llava-v1.5-7b-rerun_gpt-4-0613-cap-score-1runs.csv",
     "llava-v1.5-7b-rerun_gpt-4-0613-cap-int-score-1runs.csv", "llava-v1.5-7b"),
    # The second rows some CSVs carry: another model's 1-run result, kept there by the official script.
    ("llava-v1.5-7b_gpt-4-grade-1runs.json", "llava-v1.5-13b_gpt-4-cap-score-3runs.csv",
     "llava-v1.5-13b_gpt-4-cap-int-score-3runs.csv", "llava-v1.5-7b"),
    ("llava-v1.5-13b_gpt-4-grade-1runs.json", "llava-v1.5-7b_gpt-4-cap-score-1runs.csv",
     "llava-v1.5-7b_gpt-4-cap-int-score-1runs.csv", "llava-v1.5-13b"),
]
PARITY_IDS = ["13b-1run", "13b-3runs", "7b-1run", "7b-3runs", "7b-rerun", "7b-1run-row-in-13b-3runs-csv",
              "13b-1run-row-in-7b-1run-csv"]


@pytest.fixture(scope="module")
def v1() -> Benchmark:
    return load_bundled_v1()


@pytest.mark.parametrize(("grade_file", "cap_csv", "int_csv", "label"), PARITY_CASES, ids=PARITY_IDS)
def test_parity_with_official_csvs(v1, grade_file, cap_csv, int_csv, label):
    grades = json.loads((OFFICIAL / grade_file).read_text())
    scores = aggregate_scores(v1, {sid: g["score"] for sid, g in grades.items()})
    assert scores.complete

    official_cap = read_official_row(OFFICIAL / cap_csv, label)
    ours_cap = {c.name: c.mean for c in scores.capabilities}
    ours_cap.update(total=scores.total.mean, std=scores.std, runs=scores.runs)
    assert ours_cap == official_cap

    official_int = read_official_row(OFFICIAL / int_csv, label)
    ours_int = {c.name: c.mean for c in scores.integrations}
    ours_int.update(total=scores.total.mean, std=scores.std, runs=scores.runs)
    assert ours_int == official_int
    assert len(official_int) == 16 + 3
    assert scores.n_runs == len(official_cap["runs"])


def test_parity_values_are_plain_floats(v1):
    grades = json.loads((OFFICIAL / "llava-v1.5-13b_gpt-4-grade-3runs.json").read_text())
    scores = aggregate_scores(v1, {sid: g["score"] for sid, g in grades.items()})
    values = [scores.total.mean, scores.std, *scores.runs, *(c.mean for c in scores.capabilities)]
    assert all(type(v) is float for v in values)
    assert str(scores.runs) == "[36.1, 36.5, 36.3]"
    assert not any(math.isnan(v) for v in values)
