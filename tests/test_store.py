"""The SQLite store: WAL, durable answers, runs and grades round-trip, owner-scoped listing."""
import sqlite3

from mmvet_core.store import GradeRow, Store, new_run_id


def test_database_is_in_wal_mode_and_answers_are_durable_at_once(tmp_path):
    db = tmp_path / "g.db"
    store = Store(db)
    store.put_answer("fp", "sha", 0.0, 0, content="0.5", model="gpt-4-0613", prompt_tokens=10,
                     completion_tokens=1, sent={"max_tokens": 3, "temperature": 0.0})
    # a second, independent connection (another process) sees it without any explicit commit or close
    other = sqlite3.connect(db)
    assert other.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
    assert other.execute("SELECT content FROM judge_cache").fetchall() == [("0.5",)]


def test_cache_is_keyed_by_judge_prompt_temperature_and_k(tmp_path):
    store = Store(tmp_path / "g.db")
    store.put_answer("fp", "sha", 0.0, 0, content="0.1", model="m", prompt_tokens=None, completion_tokens=None,
                     sent={})
    store.put_answer("fp", "sha", 0.0, 1, content="0.2", model="m", prompt_tokens=None, completion_tokens=None,
                     sent={})
    assert store.get_answer("fp", "sha", 0.0, 0)["content"] == "0.1"
    assert store.get_answer("fp", "sha", 0.0, 1)["content"] == "0.2"
    assert store.get_answer("fp", "sha", 0.5, 0) is None
    assert store.get_answer("other", "sha", 0.0, 0) is None
    # the first stored answer wins: a racing duplicate never replaces what was paid for first
    store.put_answer("fp", "sha", 0.0, 0, content="0.9", model="m", prompt_tokens=None, completion_tokens=None,
                     sent={})
    assert store.get_answer("fp", "sha", 0.0, 0)["content"] == "0.1"


def test_runs_grades_and_overrides_round_trip(tmp_path):
    store = Store(tmp_path / "g.db")
    rid = store.create_run(model_name="m", benchmark={"name": "b"}, n_runs=2, judge={"model": "j"},
                           predictions={"v1_0": "x"}, owner="alice")
    store.put_grade(GradeRow(rid, "v1_0", 0, "ok", 0.5, "0.5", "j", [{"content": "0.5"}], None, [], 1.0))
    store.put_grade(GradeRow(rid, "v1_0", 1, "error", None, None, None, [], "server: boom", ["error"], 2.0))
    assert store.count_grades(rid) == {"ok": 1, "error": 1}
    assert [g.status for g in store.grades_since(rid, 1.5)] == ["error"]
    store.set_override(rid, "v1_0", 1.0, "judge missed the synonym")
    assert store.overrides(rid) == {"v1_0": (1.0, "judge missed the synonym")}
    store.clear_override(rid, "v1_0")
    assert store.overrides(rid) == {}
    assert store.get_run(rid).predictions == {"v1_0": "x"}


def test_runs_are_listed_only_to_their_owner(tmp_path):
    store = Store(tmp_path / "g.db")
    a = store.create_run(model_name="a", benchmark={}, n_runs=1, judge={}, predictions={}, owner="alice")
    store.create_run(model_name="b", benchmark={}, n_runs=1, judge={}, predictions={}, owner="bob")
    assert [r.id for r in store.list_runs("alice")] == [a]


def test_run_ids_are_unguessable():
    ids = {new_run_id() for _ in range(1000)}
    assert len(ids) == 1000
    assert all(len(i) == 24 for i in ids)   # 18 random bytes = 144 bits, URL-safe base64


# --- faults are named (issue 9 row 14) ---------------------------------------------------------------------------

def test_a_corrupted_database_is_refused_at_startup_with_what_is_wrong(tmp_path):
    import pytest

    from mmvet_core.store import StoreError

    db = tmp_path / "g.db"
    store = Store(db)
    for i in range(300):
        store.put_answer("fp", f"sha{i}", 0.0, 0, content="0.5" * 50, model="m", prompt_tokens=1,
                         completion_tokens=1, sent={})
    store._exec("PRAGMA wal_checkpoint(TRUNCATE)")
    store.close()
    data = bytearray(db.read_bytes())
    data[4096 * 3: 4096 * 3 + 2000] = b"\x07" * 2000          # a damaged page in the middle of the file
    db.write_bytes(bytes(data))
    with pytest.raises(StoreError, match="is damaged") as info:
        Store(db)
    assert ".recover" in str(info.value) and str(tmp_path) not in str(info.value)   # what to do; no server path

    db.write_bytes(b"this is not a database at all" * 100)
    with pytest.raises(StoreError, match="is damaged"):
        Store(db)


def test_a_database_that_vanished_since_the_last_start_is_reported(tmp_path):
    db = tmp_path / "g.db"
    first = Store(db)
    assert first.warnings == []
    run_id = first.create_run(model_name="m", benchmark={}, n_runs=1, judge={}, predictions={})
    first.close()
    assert Store(db).warnings == [] and Store(db).get_run(run_id) is not None     # a normal restart: no warning
    for suffix in ("", "-wal", "-shm"):
        (tmp_path / f"g.db{suffix}").unlink(missing_ok=True)
    again = Store(db)
    assert len(again.warnings) == 1 and "missing now" in again.warnings[0]
    assert "budget" in again.warnings[0]
    assert Store(db).warnings == []                     # said once: the new database is the known one now


def test_an_older_judge_checks_table_gains_its_columns_and_checks_are_listed_per_judge(tmp_path):
    """Migration: a database made before checks were stored per (endpoint, judge model, prompt, reference sets)
    opens with the new columns; its old check stays readable; the board lists the latest check of each judge."""
    import sqlite3
    path = tmp_path / "old.db"
    conn = sqlite3.connect(path)
    conn.execute("CREATE TABLE judge_checks (id TEXT PRIMARY KEY, created_at REAL NOT NULL, fingerprint TEXT NOT "
                 "NULL, judge TEXT NOT NULL, result TEXT NOT NULL)")
    conn.execute("INSERT INTO judge_checks VALUES ('old', 1.0, 'fp-a', '{\"model\": \"a\"}', '{\"n_graded\": 1}')")
    conn.commit()
    conn.close()
    store = Store(path)
    cols = {r[1] for r in store._conn.execute("PRAGMA table_info(judge_checks)")}
    assert {"endpoint", "judge_model", "prompt", "refs"} <= cols
    assert store.latest_judge_check("fp-a") == {"n_graded": 1}
    store.put_judge_check("fp-a", {"model": "a", "base_url": "http://h/v1/"}, {"n_graded": 2}, prompt="p", refs="r1")
    store.put_judge_check("fp-a", {"model": "a", "base_url": "http://h/v1"}, {"n_graded": 3}, prompt="p", refs="r1")
    store.put_judge_check("fp-b", {"model": "b"}, {"n_graded": 4}, prompt="p", refs="r1+r2")
    assert store.latest_judge_check("fp-a")["n_graded"] == 3
    assert store.latest_judge_check("fp-a", refs="nope") is None
    board = store.judge_checks()
    assert [(c["judge_model"], c["result"]["n_graded"]) for c in board] == [("b", 4), ("a", 3), ("a", 1)]
    assert board[1]["endpoint"] == "http://h/v1" and board[1]["refs"] == "r1"
