"""`python -m mmvet_core leaderboard ...` as a host runs it (the commands in this process, tests/cli_run.py; a
real judge over HTTP: the fake one, answering the official GPT-4-0613 grades of the bundled LLaVA-1.5 references)."""
from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from tests.conftest import ROOT, cli_env
from tests.fake_judge import FakeJudgeServer, FakeState, official_grades_answer
from tests.cli_run import run_cli as in_process

REFERENCE = ROOT / "assets" / "reference"


def run_cli(*args, env=None):
    return in_process(*args, env=env or cli_env())


@pytest.fixture(scope="module")
def board(tmp_path_factory):
    """Four runs graded from the CLI and published: llava-v1.5-13b twice (two runs of the same predictions), 7b,
    and a weak model (7b's answers on every third sample, "I am not sure." elsewhere). The judge answers each
    reference answer's official per-sample grade (sample-dependent, realistic) and 0 to anything else."""
    tmp = tmp_path_factory.mktemp("board")
    preds_7b = json.loads((REFERENCE / "llava-v1.5-7b.json").read_text(encoding="utf-8"))
    weak = tmp / "weak-model.json"
    weak.write_text(json.dumps({sid: p if i % 3 == 0 else "I am not sure." for i, (sid, p) in
                                enumerate(preds_7b.items())}), encoding="utf-8")
    db = tmp / "board.db"
    entries, runs = {}, {}
    with FakeJudgeServer(FakeState(answer_fn=official_grades_answer())) as judge:
        env = cli_env(OPENAI_API_KEY="sk-test")
        for name, path in [("llava-v1.5-13b", REFERENCE / "llava-v1.5-13b.json"),
                           ("llava-v1.5-13b (again)", REFERENCE / "llava-v1.5-13b.json"),
                           ("llava-v1.5-7b", REFERENCE / "llava-v1.5-7b.json"), ("weak model", weak)]:
            graded = run_cli("grade", path, "--base-url", judge.url, "--judge-model", "gpt-4-0613", "--db", db,
                             "--out", tmp / "out", "--model-name", name.replace(" ", "_"), env=env)
            assert graded.returncode == 0, graded.stderr[-2000:]
            run_id = runs[name] = re.search(r"^Run (\S+):", graded.stdout, re.M).group(1)
            published = run_cli("leaderboard", "publish", run_id, "--name", name, "--db", db)
            assert published.returncode == 0, published.stderr
            entries[name] = re.search(r"as entry (\S+) \(version 1\)", published.stdout).group(1)
    return db, entries, tmp, runs


def test_show_json_ranks_13b_above_7b_and_two_runs_of_the_same_predictions_together(board):
    db, entries, _, _ = board
    shown = run_cli("leaderboard", "show", "--json", "--db", db)
    assert shown.returncode == 0, shown.stderr
    rows = {e["name"]: e for e in json.loads(shown.stdout)["entries"]}
    assert set(rows) == set(entries)
    for e in rows.values():
        assert isinstance(e["total"], float) and len(e["ci"]) == 2 and e["ci"][0] < e["total"] < e["ci"][1]
        assert (e["judge"], e["judge_kind"], e["benchmark"], e["runs"]) == ("gpt-4-0613", "official", "v1", 1)
        assert set(e["capabilities"]) == {"rec", "ocr", "know", "gen", "spat", "math"}
        assert len(e["integrations"]) == 16 and e["date"]
    # the official grades of the references: 13b 36.3, 7b 31.1 (their paired difference is significant)
    assert (rows["llava-v1.5-13b"]["total"], rows["llava-v1.5-7b"]["total"]) == (36.3, 31.1)
    assert rows["llava-v1.5-13b"]["rank"] == rows["llava-v1.5-13b (again)"]["rank"] == [1, 2]
    assert rows["llava-v1.5-7b"]["rank"] == [3, 3]
    assert rows["weak model"]["rank"] == [4, 4]
    # the two 13b intervals overlap the 7b's widely: only the paired test separates them
    assert rows["llava-v1.5-7b"]["ci"][1] > rows["llava-v1.5-13b"]["ci"][0]


def test_show_prints_a_table_with_its_reading_rule_and_filters(board):
    db, _, _, _ = board
    shown = run_cli("leaderboard", "show", "--query", "13b", "--db", db)
    assert shown.returncode == 0, shown.stderr
    lines = shown.stdout.splitlines()
    assert lines[0].split()[:3] == ["rank", "total", "95%"] and max(map(len, lines)) <= 100
    # the rank group under its heading (judge · endpoint · benchmark), each row followed by its provenance
    assert lines[2] == "── gpt-4-0613 · MM-Vet v1 ──", lines[2]
    assert [ln.split()[0] for ln in lines[3:7:2]] == ["1–2", "1–2"] and "llava-v1.5-7b" not in shown.stdout
    assert "paired bootstrap" in shown.stdout
    refs = json.loads(run_cli("leaderboard", "show", "--json", "--references", "--db", db).stdout)["entries"]
    assert any(e["reference"] and e["rank"] is None for e in refs)


def test_hide_export_import(board):
    db, entries, tmp, _ = board
    hidden = run_cli("leaderboard", "hide", entries["weak model"], "--db", db)
    assert hidden.returncode == 0, hidden.stderr
    names = [e["name"] for e in json.loads(run_cli("leaderboard", "show", "--json", "--db", db).stdout)["entries"]]
    assert "weak model" not in names and len(names) == 3
    assert run_cli("leaderboard", "hide", "no-such-entry", "--db", db).returncode == 2

    out = tmp / "export"
    assert run_cli("leaderboard", "export", out, "--db", db).returncode == 0
    restored = tmp / "restored.db"
    imported = run_cli("leaderboard", "import", out, "--trust", "--db", restored)      # the host's own backup
    assert imported.returncode == 0 and "imported 4 entry versions" in imported.stdout
    before = json.loads(run_cli("leaderboard", "show", "--json", "--db", db).stdout)
    after = json.loads(run_cli("leaderboard", "show", "--json", "--db", restored).stdout)
    assert after == before
    assert {e["provenance"] for e in after["entries"]} == {"graded here (this server's judge)"}   # not its address
    assert run_cli("leaderboard", "hide", entries["weak model"], "--show", "--db", db).returncode == 0

    # a backup from elsewhere: restored, listed, unranked until the host verifies an entry
    elsewhere = tmp / "elsewhere.db"
    imported = run_cli("leaderboard", "import", out, "--db", elsewhere)
    assert imported.returncode == 0 and "restored unverified" in imported.stdout
    shown = {e["name"]: e for e in json.loads(run_cli("leaderboard", "show", "--json", "--db", elsewhere).stdout)
             ["entries"]}
    assert {(e["rank"], e["verified"]) for e in shown.values()} == {(None, False)}
    assert shown["llava-v1.5-7b"]["provenance"] == \
        "restored from a backup (graded on another server's endpoint), judge not verified"
    verified = run_cli("leaderboard", "verify", entries["llava-v1.5-7b"], "--db", elsewhere)
    assert verified.returncode == 0 and "verified by the host" in verified.stdout
    table = run_cli("leaderboard", "show", "--db", elsewhere).stdout
    assert re.search(r"^\s+1\s.*llava-v1.5-7b .*\n\s+.*verified by the host", table, re.M)
    assert re.search(r"^\s+—\s.*llava-v1.5-13b .*\n\s+.*judge not verified", table, re.M)
    assert run_cli("leaderboard", "verify", "no-such-entry", "--db", elsewhere).returncode == 2


def test_publish_refuses_bad_input_with_exit_code_2(board):
    db, _, _, runs = board
    run = runs["llava-v1.5-7b"]
    for args, message in [(["no-such-run", "--name", "x"], "no run"),
                          ([run, "--name", "y", "--link", "javascript:alert(1)"], "https"),
                          ([run, "--name", "   "], "display name"),
                          ([run, "--name", "7b again"], "already on the board")]:
        proc = run_cli("leaderboard", "publish", *args, "--db", db)
        assert proc.returncode == 2 and message in proc.stderr and "Traceback" not in proc.stderr
    again = run_cli("leaderboard", "publish", run, "--name", "llava-v1.5-7b", "--republish", "--db", db)
    assert again.returncode == 0 and "(version 2)" in again.stdout
    missing = run_cli("leaderboard", "import", Path(db).parent / "nothing-here", "--db", db)
    assert missing.returncode == 2 and "board.jsonl" in missing.stderr


def test_an_id_that_starts_with_a_dash_is_published_after_double_dash_as_help_says(tmp_path, monkeypatch, capsys):
    """Issue 32: a run id starting with '-' (1 in 64 before ids avoided it) made ``leaderboard publish RUN``
    fail with "the following arguments are required: RUN"; ``--`` passes it, and --help says so."""
    import mmvet_core.store._runs as store_runs
    from mmvet_core.cli import main

    old_id = "-oldRunIdFromBefore12345"
    monkeypatch.setattr(store_runs, "new_run_id", lambda: old_id)      # a run stored before the fix
    db = tmp_path / "b.db"
    assert main(["grade", str(ROOT / "assets/examples/llava_llama2_13b_chat.json"), "--baseline", "--db", str(db),
                 "--out", str(tmp_path / "out")]) == 0
    assert f"Run {old_id}:" in capsys.readouterr().out
    assert "and '--': publish --name N -- RUN" in " ".join(run_cli("leaderboard", "publish", "--help").stdout.split())
    published = run_cli("leaderboard", "publish", "--name", "Old run", "--db", db, "--", old_id)
    assert published.returncode == 0, published.stderr
    entry = re.search(r"as entry (\S+) \(version 1\)", published.stdout).group(1)
    hidden = run_cli("leaderboard", "hide", "--db", db, "--", entry)
    assert hidden.returncode == 0 and "is hidden" in hidden.stdout


def test_a_crafted_import_row_is_refused_by_line_and_field_and_a_bad_stored_row_never_takes_the_board_down(board):
    """Issue 26, attack 5: ``capabilities.rec = "lots"`` imported with exit 0, then ``leaderboard show`` crashed
    (and the app's /leaderboard and MCP with it)."""
    db, _, tmp, _ = board
    out = tmp / "crafted"
    assert run_cli("leaderboard", "export", out, "--db", db).returncode == 0
    lines = (out / "board.jsonl").read_text().splitlines()
    row = json.loads(lines[2])
    meta = json.loads(row["meta"])
    meta["capabilities"]["rec"] = "lots"
    (out / "board.jsonl").write_text("\n".join([*lines[:2], json.dumps({**row, "meta": json.dumps(meta)})]) + "\n")
    target = tmp / "crafted.db"
    refused = run_cli("leaderboard", "import", out, "--db", target)
    assert refused.returncode == 2 and "Traceback" not in refused.stderr
    assert "board.jsonl line 3, field meta.capabilities.rec: must be a number" in refused.stderr

    # the same row written straight into a copy of the database (an old version, a hand edit): skipped, named
    import shutil
    import sqlite3
    shutil.copy(db, target)
    with sqlite3.connect(target) as conn:
        conn.execute("UPDATE board_versions SET meta = ? WHERE entry_id = ?", (json.dumps(meta), row["entry_id"]))
    shown = run_cli("leaderboard", "show", "--json", "--db", target)
    assert shown.returncode == 0, shown.stderr
    names = [e["entry"] for e in json.loads(shown.stdout)["entries"]]
    assert row["entry_id"] not in names and len(names) == 3
    assert f"skipped entry '{row['entry_id']}'" in shown.stderr and "meta.capabilities.rec" in shown.stderr
