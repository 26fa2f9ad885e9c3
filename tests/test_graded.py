"""Specification of `mmvet_core.scores.graded`: grade files of every toolkit viewed without a judge call.

Every graded file is built in `tmp_path` in the exact layout its toolkit writes (tests/toolkit_writers.py), from
LLaVA-1.5-13B's real predictions and the real per-sample scores of its official 1-run grade file; so the numbers
must be the official CSVs' numbers (36.1 total), while the label must say which judge and prompt made them.
"""
from __future__ import annotations

import json
from pathlib import Path

import pytest

from mmvet_core.scores.aggregate import aggregate_scores
from mmvet_core.inputs.benchmark import load_bundled_v1
from mmvet_core.scores.export import GradeFileError, read_official_csv
from mmvet_core.scores.graded import judges_compatible, read_grade_file
from tests import toolkit_writers as tw

DATA = Path(__file__).resolve().parent / "data"
GRADES = DATA / "official-grades"
BENCH = load_bundled_v1()
PREDS = json.loads((DATA / "results" / "llava-v1.5-13b.json").read_text(encoding="utf-8"))
OFFICIAL = json.loads((GRADES / "llava-v1.5-13b_gpt-4-grade-1runs.json").read_text(encoding="utf-8"))
SCORES = {sid: entry["score"][0] for sid, entry in OFFICIAL.items()}
OFFICIAL_CAP = read_official_csv(GRADES / "llava-v1.5-13b_gpt-4-cap-score-1runs.csv")["llava-v1.5-13b"]
OFFICIAL_INT = read_official_csv(GRADES / "llava-v1.5-13b_gpt-4-cap-int-score-1runs.csv")["llava-v1.5-13b"]


def graded_vlmevalkit(ext):
    def write(tmp_path: Path, preds=PREDS, scores=SCORES) -> Path:
        return tw.vlmevalkit(tmp_path / f"llava-v1.5-13b_MMVet_gpt-4-turbo.{ext}", preds, BENCH, scores)
    return write


def graded_lmms(writer, name, judge):
    def write(tmp_path: Path, preds=PREDS, scores=SCORES) -> Path:
        folder = tmp_path / "liuhaotian__llava-v1.5-13b"
        folder.mkdir(exist_ok=True)
        return writer(folder / name, preds, BENCH, scores, judge)
    return write


# (source format, writer, judge the file names, model the file names)
LAYOUTS = [
    pytest.param("vlmevalkit-xlsx", graded_vlmevalkit("xlsx"), "gpt-4-turbo", "llava-v1.5-13b", id="vlmevalkit-xlsx"),
    pytest.param("vlmevalkit-tsv", graded_vlmevalkit("tsv"), "gpt-4-turbo", "llava-v1.5-13b", id="vlmevalkit-tsv"),
    pytest.param("vlmevalkit-csv", graded_vlmevalkit("csv"), "gpt-4-turbo", "llava-v1.5-13b", id="vlmevalkit-csv"),
    pytest.param("vlmevalkit-json", graded_vlmevalkit("json"), "gpt-4-turbo", "llava-v1.5-13b", id="vlmevalkit-json"),
    pytest.param("lmms-eval-json", graded_lmms(tw.lmms_v01_logs, "mmvet.json", "gpt-4-0613"), "gpt-4-0613",
                 "liuhaotian/llava-v1.5-13b", id="lmms-eval-v0.1-logs"),
    pytest.param("lmms-eval-jsonl", graded_lmms(tw.lmms_v03_jsonl, "0126_samples_mmvet.jsonl", "gpt-4-0613"),
                 "gpt-4-0613", "liuhaotian__llava-v1.5-13b", id="lmms-eval-v0.3"),
    pytest.param("lmms-eval-jsonl-v0.4", graded_lmms(tw.lmms_v04_jsonl, "0801_samples_mmvet.jsonl",
                                                     "gpt-4o-2024-11-20"),
                 "gpt-4o-2024-11-20", "liuhaotian__llava-v1.5-13b", id="lmms-eval-v0.4"),
    pytest.param("lmms-eval-jsonl-v0.7", graded_lmms(tw.lmms_v07_jsonl, "0301_samples_mmvet.jsonl",
                                                     "gpt-4o-2024-11-20"),
                 "gpt-4o-2024-11-20", "liuhaotian__llava-v1.5-13b", id="lmms-eval-v0.7"),
]


@pytest.mark.parametrize("source, write, judge, model", LAYOUTS)
def test_graded_files_of_every_layout_give_the_official_aggregation_of_their_scores(source, write, judge, model,
                                                                                     tmp_path):
    gs = read_grade_file(write(tmp_path), BENCH)
    assert (gs.source, gs.n_runs, len(gs.scores)) == (source, 1, 218)
    assert {sid: row[0] for sid, row in gs.scores.items()} == SCORES      # the right score on the right id
    assert gs.predictions == PREDS                                          # the right text on the right id
    scores = aggregate_scores(BENCH, gs.scores, 1)
    assert scores.total.mean == OFFICIAL_CAP["total"] == 36.1
    assert {c.name: c.mean for c in scores.capabilities} == {
        k: v for k, v in OFFICIAL_CAP.items() if k not in ("total", "std", "runs")}
    assert {c.name: c.mean for c in scores.integrations} == {
        k: v for k, v in OFFICIAL_INT.items() if k not in ("total", "std", "runs")}
    assert (gs.judge_text(), gs.judge_name, gs.model_name) == (judge, judge, model)
    # neither toolkit uses the official prompt: never the official metric, whatever the judge
    assert not gs.official_metric
    note = gs.metric_note()
    assert note.startswith("NOT the official MM-Vet metric")
    assert ("lmms-eval's MM-Vet prompt" if source.startswith("lmms") else "VLMEvalKit's MM-Vet prompt") in note


def test_the_official_grade_json_is_the_official_metric_and_gpt_4_counts_as_gpt_4_0613():
    gs = read_grade_file(GRADES / "llava-v1.5-13b_gpt-4-grade-3runs.json", BENCH)
    assert (gs.source, gs.n_runs, gs.judge_text(), gs.model_name, gs.judge_name) == (
        "official-grade-json", 3, "gpt-4", "llava-v1.5-13b", "gpt-4")
    assert gs.official_metric and gs.metric_note() is None
    rerun = read_grade_file(GRADES / "llava-v1.5-7b-rerun_gpt-4-0613-grade-1runs.json", BENCH)
    assert rerun.official_metric and rerun.judge_counts() == {"gpt-4-0613": 218}


def test_a_grade_json_by_another_judge_is_not_the_official_metric(tmp_path):
    other = {sid: {**e, "model": ["gpt-4o-2024-08-06"]} for sid, e in OFFICIAL.items()}
    path = tmp_path / "m_gpt-4o-grade-1runs.json"
    path.write_text(json.dumps(other))
    gs = read_grade_file(path, BENCH)
    assert not gs.official_metric
    assert "judge gpt-4o-2024-08-06" in gs.metric_note()


def test_a_file_mixing_judge_models_is_reported_as_mixed(tmp_path):
    # the real case: 113 grades by gpt-4-0613 and 105 by gpt-4-turbo-2024-04-09 in one lmms-eval log
    judges = {sid: "gpt-4-0613" if n < 113 else "gpt-4-turbo-2024-04-09" for n, sid in enumerate(BENCH.ids)}
    gs = read_grade_file(graded_lmms(tw.lmms_v04_jsonl, "x_samples_mmvet.jsonl", judges)(tmp_path), BENCH)
    assert gs.mixed and gs.judge_counts() == {"gpt-4-0613": 113, "gpt-4-turbo-2024-04-09": 105}
    assert gs.judge_text() == "mixed judges: 113 grades by gpt-4-0613, 105 by gpt-4-turbo-2024-04-09"
    assert "mixed judges" in gs.metric_note() and gs.judge_name == "mixed-judges"
    # the same mix in an official grade JSON: mixed too, and not official (one of the judges is not)
    mixed = {sid: {**e, "model": [judges[sid]]} for sid, e in OFFICIAL.items()}
    (tmp_path / "m_gpt-4-0613-grade-1runs.json").write_text(json.dumps(mixed))
    gs = read_grade_file(tmp_path / "m_gpt-4-0613-grade-1runs.json", BENCH)
    assert gs.mixed and not gs.official_metric and "105 by gpt-4-turbo-2024-04-09" in gs.metric_note()


@pytest.mark.parametrize("write", [graded_vlmevalkit("tsv"), graded_vlmevalkit("json"),
                                   graded_lmms(tw.lmms_v04_jsonl, "s_samples_mmvet.jsonl", "gpt-4o")],
                         ids=["vlmevalkit-tsv", "vlmevalkit-json", "lmms-eval-v0.4"])
def test_a_misaligned_index_is_refused_not_graded(write, tmp_path):
    path = write(tmp_path)
    if path.suffix == ".jsonl":    # lmms-eval v0.4: shift doc_id and the metric's question_id by one
        lines = [json.loads(x) for x in path.read_text().splitlines()]
        for rec in lines:
            rec["doc_id"] += 1
            rec["gpt_eval_score"]["question_id"] = f"v1_{rec['doc_id']}"
        path.write_text("".join(json.dumps(r) + "\n" for r in lines))
    else:                          # VLMEvalKit: index off by one against its own question column
        import pandas as pd
        df = pd.read_csv(path, sep="\t") if path.suffix == ".tsv" else pd.DataFrame(json.loads(path.read_text()))
        df["index"] = df["index"] + 1
        tw.vlmevalkit_dump(df, path)
    with pytest.raises(GradeFileError, match="do not match"):
        read_grade_file(path, BENCH)


def test_an_lmms_eval_log_where_no_judge_answered_is_not_a_grade_file(tmp_path):
    # lmms-eval writes score 0.0 and eval_model "" when its judge never answers (e.g. no API key)
    path = tw.lmms_v07_jsonl(tmp_path / "n_samples_mmvet.jsonl", PREDS, BENCH, None, "")
    with pytest.raises(GradeFileError, match="without grades"):
        read_grade_file(path, BENCH)


def test_a_prediction_table_without_scores_is_not_a_grade_file(tmp_path):
    with pytest.raises(GradeFileError, match="without grades"):
        read_grade_file(tw.vlmevalkit(tmp_path / "m_MMVet.xlsx", PREDS, BENCH), BENCH)


def test_a_v2_grade_file_against_v1_names_the_v2_benchmark(tmp_path):
    path = tmp_path / "g_gpt-4-0613-grade-1runs.json"
    path.write_text(json.dumps({f"v2_{n}": {"model": ["gpt-4-0613"], "content": ["1.0"], "score": [1.0]}
                                for n in range(5)}))
    with pytest.raises(GradeFileError, match="mmvet-v2"):
        read_grade_file(path, BENCH)


@pytest.mark.parametrize("reported, wanted, ok", [
    ("gpt-4-0613", "gpt-4-0613", True), ("gpt-4", "gpt-4-0613", True), ("gpt-4o-2024-08-06", "gpt-4o", True),
    ("gpt-4-turbo-2024-04-09", "gpt-4-0613", False), ("gpt-4o", "gpt-4o-mini", False),
    ("keyword-baseline", "gpt-4-0613", False)])
def test_judges_compatible(reported, wanted, ok):
    assert judges_compatible(reported, wanted) is ok
