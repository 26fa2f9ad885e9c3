"""`python -m mmvet_core aggregate|validate|grade` as a user runs them: the commands in this process
(tests/cli_run.py); a real `python -m mmvet_core` process where the process is the subject (no key in its
environment, what a fresh interpreter imports)."""
import contextlib
import os
import shutil
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest

from mmvet_core.scores.export import read_official_csv
from tests.cli_run import run_cli as in_process

ROOT = Path(__file__).resolve().parents[1]
SHARED = ROOT / "tests" / "data"
GRADES = SHARED / "official-grades"

from tests.test_aggregate import PARITY_CASES as OFFICIAL   # (grade file, cap CSV, cap-int CSV, row label)


def run_cli(*args, env=None, cwd=None):
    """The command in this process (tests/cli_run.py), with `env` added to this process's environment."""
    return in_process(*args, env={**os.environ, **env} if env else None, cwd=cwd)


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
        "llava-v1.5-7b-rerun_gpt-4-0613-cap-score-1runs.csv",
        "llava-v1.5-7b-rerun_gpt-4-0613-ci-95-1runs.csv"]     # the intervals: a file of their own
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


def test_baseline_grade_writes_the_three_official_files_and_the_intervals_and_labels_itself(tmp_path):
    proc = run_cli("grade", SHARED / "results" / "llava-v1.5-13b.json", "--baseline", "--db", tmp_path / "g.db",
                   "--out", tmp_path / "out")
    assert proc.returncode == 0, proc.stderr
    assert "NOT the MM-Vet metric" in proc.stdout
    assert sorted(p.name for p in (tmp_path / "out").iterdir()) == [
        "llava-v1.5-13b_keyword-baseline-cap-int-score-1runs.csv",
        "llava-v1.5-13b_keyword-baseline-cap-score-1runs.csv",
        "llava-v1.5-13b_keyword-baseline-ci-95-1runs.csv",       # 95% intervals over samples, beside
        "llava-v1.5-13b_keyword-baseline-grade-1runs.json"]
    # the command closed its database (also when called from Python, as here): the file alone, copied without the
    # write-ahead log beside it, holds every grade, as after a process of its own exits
    shutil.copy(tmp_path / "g.db", tmp_path / "copy.db")
    with contextlib.closing(sqlite3.connect(tmp_path / "copy.db")) as conn:
        assert conn.execute("SELECT count(*) FROM grades").fetchone()[0] == 218


# --- aggregate over any grade file; names; import safety -----------------------------------------------------

import json  # noqa: E402

from mmvet_core.inputs.benchmark import load_bundled_v1  # noqa: E402
from tests import toolkit_writers as tw  # noqa: E402

PREDS_13B = json.loads((SHARED / "results" / "llava-v1.5-13b.json").read_text(encoding="utf-8"))
SCORES_13B = {s: e["score"][0] for s, e in
              json.loads((GRADES / "llava-v1.5-13b_gpt-4-grade-1runs.json").read_text()).items()}
OFFICIAL_13B = read_official_csv(GRADES / "llava-v1.5-13b_gpt-4-cap-score-1runs.csv")["llava-v1.5-13b"]


def test_aggregate_names_outputs_from_the_stem_when_the_official_pattern_does_not_match(tmp_path):
    shutil.copy(GRADES / "llava-v1.5-7b-rerun_gpt-4-0613-grade-1runs.json", tmp_path / "score_original.json")
    proc = run_cli("aggregate", tmp_path / "score_original.json", "--out", tmp_path / "out")
    assert proc.returncode == 0, proc.stderr
    # not the row label "score" and the file "score_original.json-cap-score-1runs.csv" of the official pattern
    assert sorted(p.name for p in (tmp_path / "out").iterdir()) == [
        "score_original_gpt-4-0613-cap-int-score-1runs.csv", "score_original_gpt-4-0613-cap-score-1runs.csv",
        "score_original_gpt-4-0613-ci-95-1runs.csv"]
    assert list(read_official_csv(tmp_path / "out" / "score_original_gpt-4-0613-cap-score-1runs.csv")) == [
        "score_original"]


def test_model_name_always_wins(tmp_path):
    proc = run_cli("aggregate", GRADES / "llava-v1.5-7b-rerun_gpt-4-0613-grade-1runs.json", "--out", tmp_path,
                   "--model-name", "mine")
    assert proc.returncode == 0, proc.stderr
    assert sorted(p.name for p in tmp_path.iterdir()) == ["mine_gpt-4-0613-cap-int-score-1runs.csv",
                                                          "mine_gpt-4-0613-cap-score-1runs.csv",
                                                          "mine_gpt-4-0613-ci-95-1runs.csv"]
    assert list(read_official_csv(tmp_path / "mine_gpt-4-0613-cap-score-1runs.csv")) == ["mine"]


def model_folder(d: Path) -> Path:
    """lmms-eval writes <output>/<model_name_sanitized>/<date>_samples_mmvet.jsonl."""
    (d / "liuhaotian__llava-v1.5-13b").mkdir()
    return d / "liuhaotian__llava-v1.5-13b"


@pytest.mark.parametrize("make, judge, files", [
    pytest.param(lambda d: tw.vlmevalkit(d / "llava-v1.5-13b_MMVet_gpt-4-turbo.xlsx", PREDS_13B, load_bundled_v1(),
                                         SCORES_13B),
                 "gpt-4-turbo", "llava-v1.5-13b_gpt-4-turbo", id="vlmevalkit-xlsx"),
    pytest.param(lambda d: tw.lmms_v07_jsonl(model_folder(d) / "0301_samples_mmvet.jsonl", PREDS_13B,
                                             load_bundled_v1(), SCORES_13B, "gpt-4o-2024-11-20"),
                 "gpt-4o-2024-11-20", "liuhaotian__llava-v1.5-13b_gpt-4o-2024-11-20", id="lmms-eval-v0.7"),
])
def test_aggregate_shows_a_toolkits_graded_file_with_its_judge_labelled(make, judge, files, tmp_path):
    proc = run_cli("aggregate", make(tmp_path), "--out", tmp_path / "out", "--samples")
    assert proc.returncode == 0, proc.stderr
    out = proc.stdout
    assert f"Judge: {judge}" in out and "Metric: NOT the official MM-Vet metric" in out
    assert "Total: 36.1" in out and "[NOT the official MM-Vet metric" in out
    assert "Integrations: rec_know_gen " in out and f"v1_0\tocr,math\t0.0\t{judge}" in out
    cap = read_official_csv(tmp_path / "out" / f"{files}-cap-score-1runs.csv")
    row = next(iter(cap.values()))
    assert {k: v for k, v in row.items() if k != "note"} == OFFICIAL_13B   # the official aggregation of its scores
    assert row["note"].startswith("NOT the official MM-Vet metric")
    grade = json.loads((tmp_path / "out" / f"{files}-grade-1runs.json").read_text())
    assert grade["v1_1"]["prediction"] == PREDS_13B["v1_1"] and grade["v1_1"]["model"] == [judge]


def test_aggregate_refuses_a_misaligned_file(tmp_path):
    path = tw.vlmevalkit(tmp_path / "m_MMVet_gpt-4-turbo.csv", PREDS_13B, load_bundled_v1(), SCORES_13B)
    text = path.read_text().replace('"0","What is x in the equation?"', '"9","What is x in the equation?"', 1)
    path.write_text(text)                            # row v1_0 claims to be v1_9 (a different question)
    proc = run_cli("aggregate", path, "--out", tmp_path / "out")
    assert proc.returncode == 2 and "do not match" in proc.stderr and "Traceback" not in proc.stderr


def test_import_grades_refuses_another_judge_and_warns_about_unknown_predictions(tmp_path):
    args = ("grade", SHARED / "results" / "llava-v1.5-7b.json", "--baseline", "--db", tmp_path / "g.db",
            "--out", tmp_path / "out", "--import-grades", GRADES / "llava-v1.5-13b_gpt-4-grade-1runs.json")
    proc = run_cli(*args)
    assert proc.returncode == 2
    assert "graded by gpt-4, but this run's judge is keyword-baseline" in proc.stderr


def test_a_rejected_key_prints_its_cause_once_counts_every_call_and_writes_no_grade_file(tmp_path):
    """Issue 10, item 9. Before: the 401 line 16 times, "Judge calls: 0 made" with 16 made, and an empty `{}`
    grade file under an official name."""
    from tests.fake_judge import FakeJudgeServer, FakeState

    with FakeJudgeServer(FakeState(api_key="sk-right")) as judge:
        proc = run_cli("grade", SHARED / "results" / "llava-v1.5-13b.json", "--base-url", judge.url,
                       "--out", tmp_path / "out", "--db", tmp_path / "grader.db",
                       env={"OPENAI_API_KEY": "sk-wrong", "OPENAI_BASE_URL": ""})
        sent = len(judge.state.calls)
    output = proc.stdout + proc.stderr
    assert proc.returncode == 1
    assert output.count("Incorrect API key provided") == 1, output
    assert "the API key was rejected" in proc.stdout
    assert 0 < sent <= 32                                 # the run stopped at the first refusal
    assert f"Judge calls: {sent} made (0 answered)" in proc.stdout
    assert "No grade was made: no file written" in proc.stdout
    assert not (tmp_path / "out").exists() or not list((tmp_path / "out").iterdir())


def test_missing_predictions_are_refused_with_the_flag_that_grades_them(tmp_path):
    import json

    preds = json.loads((SHARED / "results" / "llava-v1.5-13b.json").read_text(encoding="utf-8"))
    partial = tmp_path / "partial.json"
    partial.write_text(json.dumps({k: v for k, v in preds.items() if k != "v1_7"}), encoding="utf-8")
    proc = run_cli("grade", partial, "--baseline", "--out", tmp_path / "out", "--db", tmp_path / "grader.db")
    assert proc.returncode != 0
    assert "v1_7" in proc.stderr and "add --allow-missing to grade them as empty answers" in proc.stderr
    proc = run_cli("grade", partial, "--baseline", "--allow-missing", "--out", tmp_path / "out",
                   "--db", tmp_path / "grader.db")
    assert proc.returncode == 0, proc.stderr


def _without(tmp_path, sid: str) -> Path:
    """The real LLaVA-1.5-13b official grade file with one sample's grade taken out."""
    import json
    grades = json.loads((GRADES / "llava-v1.5-13b_gpt-4-grade-1runs.json").read_text())
    del grades[sid]
    path = tmp_path / "llava-v1.5-13b_gpt-4-grade-1runs.json"
    path.write_text(json.dumps(grades, indent=4))
    return path


def test_aggregate_of_a_file_missing_a_sample_names_it_and_shows_a_partial_total(tmp_path):
    """Issue 19, item 4. Before: exit 2 "no grade for 1 of 218 …" with no way on. Now the partial total, labelled,
    with the missing id (exit 0), no official CSV; --complete-only refuses."""
    path = _without(tmp_path, "v1_145")
    proc = run_cli("aggregate", path, "--out", tmp_path / "out")
    assert proc.returncode == 0, proc.stderr
    assert "PARTIAL: the file has no grade for 1 of 218 samples of mmvet-v1 (v1_145)" in proc.stdout
    [total] = [line for line in proc.stdout.splitlines() if line.startswith("Total:")]
    assert "(partial, 217 of 218 grades: not a final score)" in total
    assert sorted(p.name for p in (tmp_path / "out").iterdir()) == ["llava-v1.5-13b_gpt-4-note-1runs.txt"]
    assert "v1_145" in (tmp_path / "out" / "llava-v1.5-13b_gpt-4-note-1runs.txt").read_text()
    refused = run_cli("aggregate", path, "--out", tmp_path / "out2", "--complete-only")
    assert refused.returncode == 2 and "no grade for 1 of 218 samples of mmvet-v1 (v1_145)" in refused.stderr
    assert "--complete-only" in run_cli("aggregate", "--help").stdout


@pytest.mark.parametrize("fmt", ["lmms-eval-jsonl-v0.4", "lmms-eval-jsonl-v0.7"])
def test_validate_of_an_lmms_eval_samples_file_reports_the_model_the_file_names(tmp_path, fmt):
    """Issue 19, item 2 (done when): `validate` reports a model name taken from the file, never a hash."""
    import json
    from mmvet_core.inputs.benchmark import load_bundled_v1
    from tests import toolkit_writers as tw
    out = tmp_path / ("9e" * 32)          # whatever the folder is called, the results file beside it names the model
    out.mkdir()
    preds = json.loads((SHARED / "results" / "llava-v1.5-13b.json").read_text(encoding="utf-8"))
    path = tw.LMMS_WRITERS[fmt](out / "20250103_101112_samples_mmvet.jsonl", preds, load_bundled_v1())
    tw.lmms_results_json(out, "20250103_101112", "pretrained=liuhaotian/llava-v1.5-13b")
    proc = run_cli("validate", path)
    assert proc.returncode == 0, proc.stderr
    assert "Model: liuhaotian/llava-v1.5-13b (from lmms-eval's 20250103_101112_results.json beside it)" in proc.stdout
    (out / "20250103_101112_results.json").unlink()
    proc = run_cli("validate", path)
    assert "Model: 20250103_101112_samples_mmvet (from the file name)" in proc.stdout and "9e9e" not in proc.stdout


@pytest.mark.parametrize("argv, hint", [
    pytest.param(["grade", "r.json", "--run", "2", "--baseline"], "--run: did you mean --runs?", id="prefix-of-runs"),
    pytest.param(["aggregate", "g.json", "--complete_only"], "--complete_only: did you mean --complete-only?",
                 id="underscore"),
    pytest.param(["grade", "r.json", "--judge-modle", "gpt-4o"], "--judge-modle: did you mean --judge-model?",
                 id="typo"),
    pytest.param(["compare", "a.json", "b.json", "--resample", "200"], "--resample: did you mean --resamples?",
                 id="compare-prefix"),
])
def test_a_mistyped_option_is_refused_with_did_you_mean_never_taken_as_a_prefix(argv, hint, tmp_path):
    """Issue 19, item 5: `--run 2` was silently read as `--runs 2`; typos got no "did you mean"."""
    proc = run_cli(*argv, cwd=tmp_path)
    assert proc.returncode == 2 and hint in proc.stderr, proc.stderr
    assert f"usage: python -m mmvet_core {argv[0]}" in proc.stderr      # the subcommand's own usage
    assert not list(tmp_path.iterdir())                                  # nothing was graded or written


def test_a_grade_file_or_a_markdown_file_dropped_as_results_says_what_it_is(tmp_path):
    """Issue 19, item 5: a Markdown file was "a VLMEvalKit table"; a grade file did not point to its viewer."""
    md = tmp_path / "README.md"
    md.write_text("# My model\n\nSome notes about the run.\n")
    proc = run_cli("validate", md)
    assert proc.returncode == 2 and "this is a Markdown or plain-text document, not a results file" in proc.stderr
    assert "VLMEvalKit table" not in proc.stderr
    proc = run_cli("validate", GRADES / "llava-v1.5-13b_gpt-4-grade-1runs.json")
    assert proc.returncode == 2 and "this is a grade file" in proc.stderr
    assert "Open a grade file (no judge call)" in proc.stderr and "`aggregate`" in proc.stderr


def test_a_command_imports_only_what_it_runs_and_help_lists_every_command():
    """``import mmvet_core`` imports none of its modules, and a command imports its own: ``validate`` never
    pays for the service layer a worker needs, the leaderboard, Alembic or the judge's SDK (the whole import was
    most of every command's start)."""
    code = ("import sys; from mmvet_core.cli import main; rc = main(['validate', sys.argv[1]]); "
            "print(sorted({m.split('.')[0] if not m.startswith('mmvet_core.') else '.'.join(m.split('.')[:2]) "
            "for m in sys.modules}))")
    proc = subprocess.run([sys.executable, "-c", code, str(ROOT / "assets/examples/llava_llama2_13b_chat.json")],
                          capture_output=True, text=True, cwd=ROOT, timeout=120)
    assert proc.returncode == 0, proc.stderr
    assert "218 of 218 samples matched" in proc.stdout
    loaded = proc.stdout.strip().splitlines()[-1]
    for heavy in ("mmvet_core.service", "mmvet_core.board", "mmvet_core.successors", "alembic", "openai", "gradio"):
        assert f"'{heavy}'" not in loaded, heavy
    bare = subprocess.run([sys.executable, "-c", "import sys, mmvet_core; print(sorted(m for m in sys.modules "
                           "if m.startswith('mmvet_core.')))"], capture_output=True, text=True, cwd=ROOT, timeout=60)
    assert bare.stdout.strip() == "[]", bare.stdout
    listed = run_cli("--help").stdout
    for name in ("grade", "aggregate", "compare", "combine", "judge-check", "judges", "leaderboard", "prompt",
                 "validate", "db", "worker", "app"):
        assert name in listed
