"""`python -m mmvet_core compare|combine` as a user runs them, on the real official grade files and stored runs."""
import csv
import json
from pathlib import Path

from tests.conftest import cli_env
from tests.cli_run import run_cli as in_process

ROOT = Path(__file__).resolve().parents[1]
DATA = ROOT / "tests" / "data"
GRADES = DATA / "official-grades"
B13_1 = GRADES / "llava-v1.5-13b_gpt-4-grade-1runs.json"
B13_3 = GRADES / "llava-v1.5-13b_gpt-4-grade-3runs.json"
B7_3 = GRADES / "llava-v1.5-7b_gpt-4-grade-3runs.json"


def run_cli(*args, **env):
    return in_process(*args, env=cli_env(**env))


def test_compare_prints_the_report_and_writes_csv_and_json(tmp_path):
    proc = run_cli("compare", B7_3, B13_3, B13_1, "--out", tmp_path / "cmp", "--db", tmp_path / "none.db")
    assert proc.returncode == 0, proc.stderr
    out = proc.stdout
    assert "Compared 218 samples" in out
    assert "Δ̄ 0.116 · B − A +5.2 [+1.7, +9.0]" in out
    assert "total 36.3 [30.7, 42.0] ± 0.2" in out and "noise floor Δ̄ 0.012" in out
    data = json.loads((tmp_path / "cmp" / "comparison.json").read_text())
    assert data["n_common"] == 218 and round(data["pairs"][0]["delta_bar"], 3) == 0.116
    rows = list(csv.DictReader((tmp_path / "cmp" / "comparison.csv").open()))
    total = next(r for r in rows if r["set"].startswith("llava-v1.5-13b_gpt-4-grade-3runs") and r["column"] == "total")
    assert float(total["diff_vs_ref"]) == 5.21 and float(total["delta_bar_vs_ref"]) == 0.1157
    samples = list(csv.reader((tmp_path / "cmp" / "comparison-samples.csv").open()))
    assert len(samples) == 219


def test_compare_on_the_bard_subset_says_how_many_samples(tmp_path):
    proc = run_cli("compare", B13_3, B7_3, "--subset", "bard", "--db", tmp_path / "none.db")
    assert proc.returncode == 0, proc.stderr
    assert "Compared 168 samples" in proc.stdout


def test_compare_refuses_a_v2_file_against_v1(tmp_path):
    v2 = tmp_path / "v2-grade.json"
    v2.write_text(json.dumps({"v2_0": {"model": ["gpt-4-0613"], "content": ["1.0"], "score": [1.0]}}))
    proc = run_cli("compare", B13_3, v2, "--db", tmp_path / "none.db")
    assert proc.returncode == 2 and "different benchmarks" in proc.stderr


def test_compare_refuses_an_unknown_set_and_a_single_set(tmp_path):
    proc = run_cli("compare", B13_3, "no-such-run", "--db", tmp_path / "none.db")
    assert proc.returncode == 2 and "neither a grade file nor a run id" in proc.stderr
    assert run_cli("compare", B13_3, "--db", tmp_path / "none.db").returncode == 2


def test_compare_a_stored_run_with_an_official_file_and_human_scores(tmp_path):
    db = tmp_path / "g.db"
    proc = run_cli("grade", DATA / "results" / "llava-v1.5-13b.json", "--baseline", "--db", db,
                   "--out", tmp_path / "out")
    assert proc.returncode == 0, proc.stderr
    run_id = proc.stdout.split("Run ", 1)[1].split(":", 1)[0]
    proc = run_cli("compare", B13_3, f"run:{run_id}", "--db", db)
    assert proc.returncode == 0, proc.stderr
    assert "Compared 218 samples" in proc.stdout and "keyword-baseline" in proc.stdout
    assert "NOT the MM-Vet metric" in proc.stdout
    human = tmp_path / "human.json"
    human.write_text(json.dumps({"v1_0": 0.0, "v1_1": 1.0, "v1_2": 0.5}))
    proc = run_cli("compare", human, B13_3, f"run:{run_id}", "--db", db)   # (an id may start with '-')
    assert proc.returncode == 0, proc.stderr
    assert "Compared 3 samples" in proc.stdout


def test_combine_writes_an_official_grade_json_that_aggregate_and_compare_read(tmp_path):
    out = tmp_path / "combined_gpt-4x2-grade-3runs.json"
    proc = run_cli("combine", B13_3, B7_3, "--out", out, "--db", tmp_path / "none.db")
    assert proc.returncode == 0, proc.stderr
    assert "Table 7" in proc.stdout
    a, b, c = (json.loads(p.read_text()) for p in (B13_3, B7_3, out))
    assert c["v1_20"]["score"] == [(x + y) / 2 for x, y in zip(a["v1_20"]["score"], b["v1_20"]["score"])]
    proc = run_cli("aggregate", out, "--out", tmp_path / "agg")
    assert proc.returncode == 0, proc.stderr
    assert "Total: 33.7" in proc.stdout            # (36.3 + 31.1) / 2 per run, then mean over runs
    proc = run_cli("compare", B13_3, out, "--db", tmp_path / "none.db")
    assert proc.returncode == 0 and "Δ̄ 0.058" in proc.stdout


def test_compare_of_a_set_missing_a_sample_names_the_id_and_refuses_only_with_complete_only(tmp_path):
    """Issue 19, item 4: compare accepted a grade file with a missing sample without a word."""
    grades = json.loads(B13_1.read_text())
    del grades["v1_145"]
    partial = tmp_path / "partial_gpt-4-grade-1runs.json"
    partial.write_text(json.dumps(grades))
    proc = run_cli("compare", B13_3, partial, "--db", tmp_path / "none.db", "--resamples", "200")
    assert proc.returncode == 0, proc.stderr
    assert "Compared 217 samples" in proc.stdout
    assert "PARTIAL: partial_gpt-4-grade-1runs has no grade for 1 sample(s) of mmvet-v1 (v1_145)" in proc.stdout
    refused = run_cli("compare", B13_3, partial, "--db", tmp_path / "none.db", "--complete-only")
    assert refused.returncode == 2 and "no grade for 1 of 218 samples of mmvet-v1 (v1_145)" in refused.stderr
