"""Reports that fit a terminal (issue 32 part 4): `mmvet_core.scores.terminal` and every report of the command line at
most 100 columns by default, run as a user would (offline: the keyword baseline and grade files, no judge)."""
from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from mmvet_core.scores.terminal import REPORT_WIDTH, fit, fit_lines, pack
from tests.conftest import cli_env
from tests.cli_run import run_cli

ROOT = Path(__file__).resolve().parents[1]
EXAMPLE = ROOT / "assets" / "examples" / "llava_llama2_13b_chat.json"
OFFICIAL = ROOT / "assets" / "reference" / "llava-v1.5-13b_gpt-4-grade-3runs.json"


@pytest.mark.parametrize("text", [
    pytest.param("word " * 80, id="prose"),
    pytest.param("  indented " + "x" * 30 + " " + "word " * 40, id="indented"),
    pytest.param("a-path/" * 30, id="one-long-word"),
])
def test_fit_wraps_prose_at_the_width_and_keeps_long_words_whole(text):
    lines = fit_lines([text], 40)
    assert all(len(x) <= 40 for x in lines if " " in x.strip())
    assert " ".join(x.strip() for x in lines).split() == text.split()


def test_pack_never_cuts_an_item():
    items = [f"cap{i} {i}.0 [{i}.1, {i}.2]" for i in range(12)]
    lines = pack("Capabilities:", items, 50)
    assert all(len(x) <= 50 for x in lines) and sum(x.count("[") for x in lines) == 12
    assert fit("short") == "short"


def test_every_cli_report_fits_100_columns_and_the_baseline_makes_no_judge_calls(tmp_path):
    # run where a user would, in their own folder: the paths it prints are theirs (relative here)
    db, out = "g.db", tmp_path / "results"
    env = {**cli_env(), "PYTHONPATH": str(ROOT)}

    def run(*args) -> str:
        proc = run_cli(*args, env=env, cwd=tmp_path)
        assert proc.returncode in (0, 1), proc.stderr
        wide = [x for x in proc.stdout.splitlines() if len(x) > REPORT_WIDTH and "--json" not in args]  # (data)
        assert not wide, (args[0], wide)
        return proc.stdout

    run("validate", EXAMPLE)
    graded = run("grade", EXAMPLE, "--baseline", "--db", db, "--out", "results")
    assert "No judge calls" in graded and "Judge calls:" not in graded
    assert re.search(r"^official-equivalent estimate: none \(", graded, re.M)
    grade_file = next(out.glob("*-grade-1runs.json"))
    run("aggregate", OFFICIAL, "--out", "agg")
    run("compare", OFFICIAL, grade_file)
    checked = run("judge-check", "--baseline", "--db", db)
    assert "No judge calls" in checked or "no judge calls" in checked
    assert checked.index("Drifts from the official judge") < checked.index("Per column")      # the verdict first
    run_id = re.search(r"^Run ([\w-]+):", graded, re.M).group(1)
    run("leaderboard", "publish", run_id, "--name", "A model with a rather long display name, 60 characters",
        "--db", db)
    shown = run("leaderboard", "show", "--references", "--db", db)
    assert "── keyword-baseline · offline · MM-Vet v1 ──" in shown
    entries = json.loads(run("leaderboard", "show", "--json", "--db", db))["entries"]
    assert entries[0]["estimate_text"] == "no estimate: the keyword baseline reads no judgement"
    wide = run_cli("judge-check", "--baseline", "--db", db, "--wide", env=env, cwd=tmp_path).stdout
    assert max(map(len, wide.splitlines())) > REPORT_WIDTH and "Shift per reference model" in wide
