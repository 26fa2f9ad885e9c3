"""``python -m mmvet_core db copy``: a host moving from the SQLite file to PostgreSQL loses nothing (every row of
every table, compared value by value), and a copy that cannot be complete copies nothing."""
from __future__ import annotations

import re
import sqlite3
import subprocess
from contextlib import closing

from mmvet_core.cli import main
from mmvet_core.store import GradeRow, Store
from tests.conftest import cli_env
from tests.cli_run import run_cli as in_process


def run_cli(*args, env=None) -> subprocess.CompletedProcess:
    return in_process(*args, env=env or cli_env())


def fill(store: Store) -> str:
    """A store with rows in every table (answers: more than one chunk of the copy); returns a run id."""
    rid = store.create_run(model_name="llava ✓", benchmark={"name": "MM-Vet", "subset": None}, n_runs=2,
                           judge={"model": "gpt-4-0613", "provider": "openai"},
                           predictions={"v1_0": "a cat é", "v1_1": "42"}, owner="alice", fingerprint="fp-run")
    for i, sample in enumerate(("v1_0", "v1_1")):
        store.put_grade(GradeRow(rid, sample, 0, "ok", 0.1 * (i + 1), "0.1", "gpt-4-0613",
                                 [{"content": "0.1", "prompt_tokens": 300, "completion_tokens": 2,
                                   "temperature": 0.0}], None, ["fallback"] if i else [], 1_733_000_000.123456))
    store.set_override(rid, "v1_1", 1.0, "the judge missed “42”")
    for i in range(1100):
        store.put_answer("fp", f"sha{i}", 0.2 * (i % 3), i % 2, content=f"{i / 1100:.17g}", model="gpt-4-0613",
                         prompt_tokens=i, completion_tokens=None if i % 5 else 1, sent={"i": i})
    bid = store.add_batch(rid, 0, {"c1": ["sha1", 0.0, 0]})
    store.update_batch(bid, status="submitted", batch_id="batch_1")
    store.put_judge_check("fp-j", {"model": "gpt-4-0613", "base_url": "https://api.openai.com/v1"},
                          {"n_graded": 3}, prompt="v1", refs="r1")
    store.add_board_version("e1", run_id=rid, owner_hash="h", name="Llava", link="https://x", meta={"a": 1},
                            scores={"v1_0": [0.1]})
    store.add_board_version("e1", run_id=rid, owner_hash="h", name="Llava", link="", meta={"a": 2}, scores={})
    store.log_publish("visitor")
    store.add_usage("2026-12-04", "visitor", 3, 900)
    store.keep_run(rid, "visitor", host=True)
    store.set_total(rid, 31.2, "stamp")
    store.pin_run(rid, "published")
    return rid


def all_rows(store: Store) -> dict[str, list]:
    return {name: sorted(map(repr, rows)) for name, rows in store.iter_tables()}


def test_a_sqlite_database_is_copied_into_postgresql_losing_nothing(tmp_path, pg_url):
    path = tmp_path / "mmvet-grader.db"
    source = Store(path)
    rid = fill(source)
    source.close()
    proc = run_cli("db", "copy", "--from", path, "--to", pg_url)
    assert proc.returncode == 0, proc.stderr
    assert re.search(r"^judge_cache +1100 +1100$", proc.stdout, re.M) and "every row copied" in proc.stdout
    source, target = Store(path), Store(pg_url)
    assert all_rows(target) == all_rows(source)          # every value of every row, the database's id included
    assert target.grades(rid) == source.grades(rid) and target.run_usage(rid) == source.run_usage(rid)
    assert target.board_entries() == source.board_entries()
    # the copy is the same database, moved: the CLI reads it through the setting
    info = run_cli("db", "info", env=cli_env(MMVET_DATABASE_URL=pg_url))
    assert info.returncode == 0 and "(postgresql)" in info.stdout and "judge_cache: 1100" in info.stdout
    source.close()
    target.close()


def test_a_copy_that_cannot_be_complete_copies_nothing(tmp_path, pg_url, capsys):
    missing = tmp_path / "nope.db"
    assert main(["db", "copy", "--from", str(missing), "--to", pg_url]) == 2
    assert "no database at" in capsys.readouterr().err and not missing.exists()

    path = tmp_path / "mmvet-grader.db"
    source = Store(path)
    fill(source)
    source.close()
    with closing(sqlite3.connect(path)) as conn:       # a value PostgreSQL's typed column refuses (SQLite kept it)
        conn.execute("UPDATE judge_cache SET k = 'x' WHERE prompt_sha = 'sha1099'")
        conn.commit()
    assert main(["db", "copy", "--from", str(path), "--to", pg_url]) == 2
    assert "nothing was copied" in capsys.readouterr().err
    target = Store(pg_url)
    assert {name: len(rows) for name, rows in target.iter_tables() if rows} == {"alembic_version": 1, "meta": 1}

    # a target that already holds runs is refused, and keeps them
    target.create_run(model_name="theirs", benchmark={}, n_runs=1, judge={}, predictions={})
    with closing(sqlite3.connect(path)) as conn:
        conn.execute("UPDATE judge_cache SET k = 0 WHERE prompt_sha = 'sha1099'")
        conn.commit()
    assert main(["db", "copy", "--from", str(path), "--to", pg_url]) == 2
    assert "not empty (1 rows in runs)" in capsys.readouterr().err
    assert [r["model_name"] for r in dict(target.iter_tables())["runs"]] == ["theirs"]
    target.close()
