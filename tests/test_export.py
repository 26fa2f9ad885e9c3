"""Official file formats: names, grade JSON (write, read, validate), score CSVs (write, read, round trip)."""
from __future__ import annotations

import csv
import io

from pathlib import Path

import pytest

from mmvet_core.scores.aggregate import aggregate_scores
from mmvet_core.inputs.benchmark import Benchmark, Sample, load_bundled_v1
from mmvet_core.scores.export import (GradeFileError, OfficialGrades, load_official_grades, make_cap_csv_text,
                                      make_cap_int_csv_text, make_grade_json, official_file_names, read_grade_json,
                                      read_official_csv, write_grade_json, write_official_files)

SHARED_DATA = Path(__file__).resolve().parent / "data"
OFFICIAL = SHARED_DATA / "official-grades"

# grade file, cap CSV, cap-int CSV, row label (the 7b re-run's row is labelled llava-v1.5-7b)
OFFICIAL_SETS = {
    "13b-1run": ("llava-v1.5-13b_gpt-4-grade-1runs.json", "llava-v1.5-13b_gpt-4-cap-score-1runs.csv",
                 "llava-v1.5-13b_gpt-4-cap-int-score-1runs.csv", "llava-v1.5-13b"),
    "13b-3runs": ("llava-v1.5-13b_gpt-4-grade-3runs.json", "llava-v1.5-13b_gpt-4-cap-score-3runs.csv",
                  "llava-v1.5-13b_gpt-4-cap-int-score-3runs.csv", "llava-v1.5-13b"),
    "7b-1run": ("llava-v1.5-7b_gpt-4-grade-1runs.json", "llava-v1.5-7b_gpt-4-cap-score-1runs.csv",
                "llava-v1.5-7b_gpt-4-cap-int-score-1runs.csv", "llava-v1.5-7b"),
    "7b-3runs": ("llava-v1.5-7b_gpt-4-grade-3runs.json", "llava-v1.5-7b_gpt-4-cap-score-3runs.csv",
                 "llava-v1.5-7b_gpt-4-cap-int-score-3runs.csv", "llava-v1.5-7b"),
    "7b-rerun": ("llava-v1.5-7b-rerun_gpt-4-0613-grade-1runs.json",
                 "llava-v1.5-7b-rerun_gpt-4-0613-cap-score-1runs.csv",
                 "llava-v1.5-7b-rerun_gpt-4-0613-cap-int-score-1runs.csv", "llava-v1.5-7b"),
}


@pytest.fixture(scope="module")
def v1() -> Benchmark:
    return load_bundled_v1()


def official_scores(v1: Benchmark, grade_file: str):
    return aggregate_scores(v1, load_official_grades(OFFICIAL / grade_file).scores)


# ------------------------------------------------------------------------------------------------------------
# File names


@pytest.mark.parametrize(("subset", "cap", "cap_int"), [
    (None, "llava_gpt-4-0613-cap-score-5runs.csv", "llava_gpt-4-0613-cap-int-score-5runs.csv"),
    ("bard", "llava_bardset_gpt-4-0613-cap-score-5runs.csv", "llava_bardset_gpt-4-0613-cap-int-score-5runs.csv"),
    ("bardset", "llava_bardset_gpt-4-0613-cap-score-5runs.csv",
     "llava_bardset_gpt-4-0613-cap-int-score-5runs.csv"),
    ("mine", "llava_mine_gpt-4-0613-cap-score-5runs.csv", "llava_mine_gpt-4-0613-cap-int-score-5runs.csv"),
], ids=["full", "bard", "bardset", "custom"])
def test_official_file_names(subset, cap, cap_int):
    names = official_file_names("llava", "gpt-4-0613", 5, subset)
    # The official grade file name never carries the subset (mm-vet_evaluator.py get_file_names).
    assert names == {"grade": "llava_gpt-4-0613-grade-5runs.json", "cap": cap, "cap_int": cap_int}


@pytest.mark.parametrize("key", sorted(OFFICIAL_SETS))
def test_official_file_names_match_the_real_files(key):
    grade, cap, cap_int, _ = OFFICIAL_SETS[key]
    model, rest = grade.split("_", 1)
    judge = rest.split("-grade-")[0]
    n_runs = int(rest.split("-grade-")[1].split("runs")[0])
    assert official_file_names(model, judge, n_runs, None) == {"grade": grade, "cap": cap, "cap_int": cap_int}


# ------------------------------------------------------------------------------------------------------------
# Grade JSON


def test_make_grade_json_official_shape_and_extra_keys():
    records = {
        "v1_0": {"score": [1, 0.5], "content": ["1.0", "0.5"], "model": ["gpt-4-0613", "gpt-4-0613"],
                 "override": [None, 1.0], "flags": [[], ["fallback"]]},
        "v1_1": {"model": ["gpt-4-0613"] * 2, "content": ["0.0", "0.0"], "score": [0.0, 0.0]},
    }
    grade = make_grade_json(records)
    assert list(grade["v1_0"]) == ["model", "content", "score", "override", "flags"]
    assert grade["v1_0"]["score"] == [1.0, 0.5] and type(grade["v1_0"]["score"][0]) is float
    assert grade["v1_0"]["override"] == [None, 1.0] and grade["v1_0"]["flags"] == [[], ["fallback"]]
    # Official readers only look at "score": the extra keys do not disturb them.
    assert load_official_grades(grade).scores == {"v1_0": [1.0, 0.5], "v1_1": [0.0, 0.0]}


@pytest.mark.parametrize("record", [
    {"model": ["m"], "content": ["1.0"]},
    {"model": ["m"], "content": ["1.0", "0.0"], "score": [1.0]},
    {"model": ["m"], "content": ["x"], "score": ["x"]},
], ids=["missing-score", "length-mismatch", "non-numeric"])
def test_make_grade_json_rejects_malformed_records(record):
    with pytest.raises(GradeFileError, match="v1_0"):
        make_grade_json({"v1_0": record})


@pytest.mark.parametrize("key", sorted(OFFICIAL_SETS))
def test_rewriting_an_official_grade_file_is_byte_identical(tmp_path, key):
    original = OFFICIAL / OFFICIAL_SETS[key][0]
    grades = load_official_grades(original)
    out = tmp_path / "grade.json"
    write_grade_json(out, make_grade_json(grades.raw))
    assert out.read_bytes() == original.read_bytes()


def test_grade_json_round_trip(tmp_path):
    grade = make_grade_json({
        "v1_0": {"model": ["judge"], "content": ["0.7"], "score": [0.7], "override": [1.0]},
        "v1_1": {"model": ["judge"], "content": ["Ünïcode"], "score": [0.0]},
    })
    path = tmp_path / "g.json"
    write_grade_json(path, grade)
    loaded = load_official_grades(path)
    assert loaded.raw == grade
    assert loaded.scores == {"v1_0": [0.7], "v1_1": [0.0]}
    assert (loaded.n_runs, loaded.judge_models) == (1, {"judge"})
    assert read_grade_json(path) == loaded.scores
    assert "\\u00dc" in path.read_text()          # ASCII-escaped, like the official json.dump


@pytest.mark.parametrize(("key", "n_runs", "judges"), [
    ("13b-1run", 1, {"gpt-4"}), ("13b-3runs", 3, {"gpt-4"}), ("7b-rerun", 1, {"gpt-4-0613"}),
], ids=["13b-1run", "13b-3runs", "7b-rerun"])
def test_load_official_grades_real_files(key, n_runs, judges):
    grades = load_official_grades(OFFICIAL / OFFICIAL_SETS[key][0])
    assert isinstance(grades, OfficialGrades)
    assert len(grades.scores) == 218 and grades.n_runs == n_runs and grades.judge_models == judges
    assert all(len(v) == n_runs for v in grades.scores.values())


@pytest.mark.parametrize(("obj", "message"), [
    ([1, 2], "JSON object"),
    ({}, "no samples"),
    ({"v1_0": [0.5]}, "expected an object"),
    ({"v1_0": {"model": ["m"], "content": ["1"]}}, "missing 'score'"),
    ({"v1_0": {"score": 0.5}}, "must be a list"),
    ({"v1_0": {"score": [0.5, 1.0]}, "v1_1": {"score": [0.5]}}, "runs of different length"),
    ({"v1_0": {"score": ["0.5"]}}, "not a number"),
    ({"v1_0": {"score": [True]}}, "not a number"),
    ({"v1_0": {"model": ["m"], "content": ["1", "2"], "score": [1.0, 0.0], }}, "'model' must be a list of 2"),
], ids=["not-a-dict", "empty", "entry-not-a-dict", "missing-score", "score-not-a-list", "runs-differ",
        "string-score", "bool-score", "model-length"])
def test_load_official_grades_rejects_bad_shapes(obj, message):
    with pytest.raises(GradeFileError, match=message):
        load_official_grades(obj)


def test_grade_file_error_is_a_value_error_and_names_the_file(tmp_path):
    bad = tmp_path / "bad.json"
    bad.write_text("{not json")
    with pytest.raises(ValueError, match="bad.json"):
        load_official_grades(bad)


def test_interrupted_grade_file_loads_when_partial_allowed():
    grades = load_official_grades({"v1_0": {"score": [0.5, 1.0]}, "v1_1": {"score": [0.5]}}, allow_partial=True)
    assert grades.n_runs == 2 and grades.scores["v1_1"] == [0.5, None]


# ------------------------------------------------------------------------------------------------------------
# Score CSVs


@pytest.mark.parametrize("key", ["13b-1run", "7b-3runs", "7b-rerun"])
def test_cap_csv_text_is_byte_identical_to_official(v1, key):
    # These official cap CSVs hold a single row, and on the full v1 set the official capability order (by
    # sample count) is the paper's order, so our text equals the file byte for byte.
    grade, cap, _, label = OFFICIAL_SETS[key]
    assert make_cap_csv_text(label, official_scores(v1, grade)) == (OFFICIAL / cap).read_text()


def test_cap_csv_text_shape(v1):
    text = make_cap_csv_text("llava-v1.5-13b", official_scores(v1, OFFICIAL_SETS["13b-3runs"][0]))
    assert text == (",rec,ocr,know,gen,spat,math,total,std,runs\n"
                    'llava-v1.5-13b,40.5,28.4,23.5,24.2,35.2,8.8,36.3,0.2,"[36.1, 36.5, 36.3]"\n')
    assert "np.float64" not in text


def test_cap_int_csv_uses_canonical_names_in_benchmark_order(v1):
    scores = official_scores(v1, OFFICIAL_SETS["13b-1run"][0])
    header = make_cap_int_csv_text("m", scores).splitlines()[0].split(",")
    assert header == ["", *v1.integrations, "total", "std", "runs"]
    assert header[1:4] == ["rec_know_gen", "rec", "ocr_spat"]


@pytest.mark.parametrize("key", sorted(OFFICIAL_SETS))
def test_csv_round_trip_equals_official_numbers(tmp_path, v1, key):
    grade, cap, cap_int, label = OFFICIAL_SETS[key]
    scores = official_scores(v1, grade)
    for make_text, official_file in ((make_cap_csv_text, cap), (make_cap_int_csv_text, cap_int)):
        ours = tmp_path / official_file
        ours.write_text(make_text(label, scores))
        assert read_official_csv(ours) == {label: read_official_csv(OFFICIAL / official_file)[label]}


def test_read_official_csv_normalises_integration_names():
    table = read_official_csv(OFFICIAL / "llava-v1.5-7b_gpt-4-cap-int-score-3runs.csv")
    row = table["llava-v1.5-7b"]
    assert "rec_know_gen" in row and "know_gen_rec" not in row        # file says know_gen_rec
    assert row["rec_know_gen"] == 17.8
    assert row["runs"] == [31.2, 30.8, 31.2] and row["std"] == 0.2


def test_read_official_csv_second_rows_and_notebook_files():
    both = read_official_csv(OFFICIAL / "llava-v1.5-7b_gpt-4-cap-score-1runs.csv")
    assert list(both) == ["llava-v1.5-13b", "llava-v1.5-7b"]
    notebook = read_official_csv(OFFICIAL / "llava_llama2_13b_chat_gpt-4-0613-cap-score-1runs.FROM_NOTEBOOK_OUTPUT.csv")
    assert notebook["llava_llama2_13b_chat"]["total"] == 33.3


def test_read_official_csv_accepts_numpy2_runs_and_empty_cells(tmp_path):
    # The official script run under numpy 2 writes np.float64(...) reprs; a partial export leaves empty cells.
    path = tmp_path / "x.csv"
    path.write_text(',rec,gen_rec_know,total,std,runs\n'
                    'm,40.5,,36.3,0.2,"[np.float64(36.1), np.float64(36.5), np.float64(36.3)]"\n')
    assert read_official_csv(path) == {"m": {"rec": 40.5, "rec_know_gen": None, "total": 36.3, "std": 0.2,
                                             "runs": [36.1, 36.5, 36.3]}}


def test_partial_scores_write_empty_cells():
    bench = Benchmark(name="t", version="v1", samples={
        "a": Sample("a", "q", "a", ("rec",)), "b": Sample("b", "q", "a", ("ocr",))})
    scores = aggregate_scores(bench, {"a": [1.0]})
    assert make_cap_csv_text("m", scores) == ",rec,ocr,total,std,runs\nm,100.0,,100.0,0.0,[100.0]\n"


def test_model_name_with_comma_is_quoted_like_pandas(tmp_path, v1):
    scores = official_scores(v1, OFFICIAL_SETS["13b-1run"][0])
    text = make_cap_csv_text("a,b", scores)
    assert text.splitlines()[1].startswith('"a,b",')
    path = tmp_path / "c.csv"
    path.write_text(text)
    assert list(read_official_csv(path)) == ["a,b"]


def test_write_official_files(tmp_path, v1):
    grades = load_official_grades(OFFICIAL / OFFICIAL_SETS["13b-3runs"][0])
    scores = aggregate_scores(v1, grades.scores)
    paths = write_official_files(tmp_path / "out", "llava-v1.5-13b", "gpt-4", scores, grades.raw)
    assert {k: p.name for k, p in paths.items()} == {
        "grade": "llava-v1.5-13b_gpt-4-grade-3runs.json",
        "cap": "llava-v1.5-13b_gpt-4-cap-score-3runs.csv",
        "cap_int": "llava-v1.5-13b_gpt-4-cap-int-score-3runs.csv",
    }
    assert paths["grade"].read_bytes() == (OFFICIAL / OFFICIAL_SETS["13b-3runs"][0]).read_bytes()
    official_cap = read_official_csv(OFFICIAL / OFFICIAL_SETS["13b-3runs"][1])["llava-v1.5-13b"]
    assert read_official_csv(paths["cap"]) == {"llava-v1.5-13b": official_cap}


def test_write_official_files_bard_subset(tmp_path, v1):
    bard = v1.subset(v1.bard_set, name="bard")
    grades = load_official_grades(OFFICIAL / OFFICIAL_SETS["7b-1run"][0])
    scores = aggregate_scores(bard, grades.scores)
    paths = write_official_files(tmp_path, "llava-v1.5-7b", "gpt-4", scores, grades.raw, subset=bard.subset_name)
    assert paths["cap"].name == "llava-v1.5-7b_bardset_gpt-4-cap-score-1runs.csv"
    assert paths["grade"].name == "llava-v1.5-7b_gpt-4-grade-1runs.json"
    row = read_official_csv(paths["cap_int"])["llava-v1.5-7b"]
    assert "rec_ocr_spat_math" not in row and len(row) == 15 + 3


# ---------------------------------------------------------------------------- formula injection (issue 9, row 3)
from mmvet_core.scores.export import csv_safe, safe_name_part  # noqa: E402


@pytest.mark.parametrize("evil", ["=HYPERLINK(\"http://x\",\"y\")", "+1+1", "-2+3", "@SUM(A1)", "\tx", "\rx"])
def test_csv_cells_never_start_a_formula(tmp_path, evil):
    """A model name (row label) starting with a formula character is written with a leading quote, and read
    back as it was."""
    bench = Benchmark(name="t", version="v1", samples={"a": Sample("a", "q", "a", ("rec",))})
    text = make_cap_csv_text(evil, aggregate_scores(bench, {"a": [1.0]}))
    rows = list(csv.reader(io.StringIO(text)))
    assert len(rows) == 2 and rows[1][0] == "'" + evil.replace("\r", " ")
    assert not any(cell.startswith(("=", "+", "-", "@", "\t", "\r")) for row in rows for cell in row)
    path = tmp_path / "x.csv"
    path.write_text(text, encoding="utf-8")
    if "\r" not in evil:
        assert evil in read_official_csv(path)


def test_file_names_are_sanitised():
    names = official_file_names("=cmd|'/c calc'!A1", "@judge/../x", 1, "../=sub")
    assert all(not n.startswith(("=", "+", "-", "@", ".")) and "/" not in n for n in names.values()), names
    assert safe_name_part("llava_llama2_13b_chat") == "llava_llama2_13b_chat"
    assert csv_safe("36.1") == "36.1"
