"""`python -m mmvet_core aggregate|validate|grade` as a user runs them (real subprocesses)."""
import os
import subprocess
import sys
from pathlib import Path

import pytest

from mmvet_core.export import read_official_csv

ROOT = Path(__file__).resolve().parents[1]
SHARED = ROOT / "tests" / "data"
GRADES = SHARED / "official-grades"

from tests.test_aggregate import PARITY_CASES as OFFICIAL   # (grade file, cap CSV, cap-int CSV, row label)


def run_cli(*args, env=None, cwd=None):
    full_env = {**os.environ, "PYTHONPATH": str(ROOT), **(env or {})}
    return subprocess.run([sys.executable, "-m", "mmvet_core", *map(str, args)], capture_output=True, text=True,
                          env=full_env, cwd=cwd or ROOT, timeout=120)


@pytest.mark.parametrize("grade, cap, cap_int, label", OFFICIAL, ids=[f"{o[0]}:{o[3]}" for o in OFFICIAL])
def test_aggregate_reproduces_every_number_of_the_official_csvs(tmp_path, grade, cap, cap_int, label):
    proc = run_cli("aggregate", GRADES / grade, "--out", tmp_path, "--model-name", label)
    assert proc.returncode == 0, proc.stderr
    ours_cap = list(tmp_path.glob("*-cap-score-*.csv"))
    ours_int = list(tmp_path.glob("*-cap-int-score-*.csv"))
    assert len(ours_cap) == len(ours_int) == 1
    assert read_official_csv(ours_cap[0])[label] == read_official_csv(GRADES / cap)[label]
    assert read_official_csv(ours_int[0])[label] == read_official_csv(GRADES / cap_int)[label]
    # the grade file itself is never rewritten by aggregate
    assert not list(tmp_path.glob("*-grade-*.json"))


def test_aggregate_names_files_like_the_official_script(tmp_path):
    proc = run_cli("aggregate", GRADES / "llava-v1.5-7b-rerun_gpt-4-0613-grade-1runs.json", "--out", tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert sorted(p.name for p in tmp_path.iterdir()) == [
        "llava-v1.5-7b-rerun_gpt-4-0613-cap-int-score-1runs.csv",
        "llava-v1.5-7b-rerun_gpt-4-0613-cap-score-1runs.csv"]
    header = (tmp_path / "llava-v1.5-7b-rerun_gpt-4-0613-cap-int-score-1runs.csv").read_text().splitlines()[0]
    assert header.startswith(",rec_know_gen,rec,ocr_spat,ocr_spat_math,rec_spat,ocr,ocr_math,rec_know,")
    assert "np.float64" not in (tmp_path / "llava-v1.5-7b-rerun_gpt-4-0613-cap-score-1runs.csv").read_text()


def test_aggregate_on_the_bard_subset_uses_the_official_bardset_name(tmp_path):
    proc = run_cli("aggregate", GRADES / "llava-v1.5-13b_gpt-4-grade-3runs.json", "--subset", "bard",
                   "--out", tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert (tmp_path / "llava-v1.5-13b_bardset_gpt-4-cap-score-3runs.csv").exists()


def test_validate_reports_the_format_and_matches(tmp_path):
    proc = run_cli("validate", SHARED / "results" / "llava-v1.5-13b.answers.jsonl")
    assert proc.returncode == 0, proc.stderr
    assert "218" in proc.stdout and "LLaVA" in proc.stdout


def test_bad_input_exits_2_with_a_clear_message(tmp_path):
    bad = tmp_path / "broken.json"
    bad.write_text('{"v1_0": "a", ')
    proc = run_cli("grade", bad, "--baseline", "--db", tmp_path / "g.db")
    assert proc.returncode == 2
    assert "error:" in proc.stderr and "broken.json" in proc.stderr
    assert "Traceback" not in proc.stderr


def test_grade_without_a_key_explains_the_options(tmp_path):
    env = {k: v for k, v in os.environ.items() if not k.startswith(("OPENAI_", "AZURE_"))}
    proc = subprocess.run([sys.executable, "-m", "mmvet_core", "grade",
                           str(SHARED / "results" / "llava-v1.5-13b.json"), "--db", str(tmp_path / "g.db")],
                          capture_output=True, text=True, env={**env, "PYTHONPATH": str(ROOT)}, cwd=ROOT,
                          timeout=120)
    assert proc.returncode == 2
    assert "OPENAI_API_KEY" in proc.stderr and "--baseline" in proc.stderr


def test_baseline_grade_writes_the_three_official_files_and_labels_itself(tmp_path):
    proc = run_cli("grade", SHARED / "results" / "llava-v1.5-13b.json", "--baseline", "--db", tmp_path / "g.db",
                   "--out", tmp_path / "out")
    assert proc.returncode == 0, proc.stderr
    assert "NOT the MM-Vet metric" in proc.stdout
    assert sorted(p.name for p in (tmp_path / "out").iterdir()) == [
        "llava-v1.5-13b_keyword-baseline-cap-int-score-1runs.csv",
        "llava-v1.5-13b_keyword-baseline-cap-score-1runs.csv",
        "llava-v1.5-13b_keyword-baseline-grade-1runs.json"]
