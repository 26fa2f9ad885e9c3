"""The store, on both backends (a SQLite file; a real PostgreSQL server started by the tests, tests/pg_server.py):
durable answers, the cache key, runs, grades, overrides, budgets, keeping, the leaderboard, judge checks and
batches behave the same; migrations bring any database to the schema the code queries (a SQLite file of an
earlier release upgrades in place); faults are named."""
from __future__ import annotations

import json

import sqlite3
import threading
import time
from contextlib import closing
from pathlib import Path

import pytest
from alembic.autogenerate import compare_metadata
from alembic.runtime.migration import MigrationContext

from mmvet_core.store import GradeRow, Store, StoreError, new_run_id
from mmvet_core.store._migrate import head_revision
from mmvet_core.store._schema import metadata

OLD_SCHEMA = Path(__file__).parent / "data" / "store-schema-before-migrations.sql"


def other_client(location, sql: str) -> list[tuple]:
    """Rows as an independent client of the database sees them (its own connection, as another process)."""
    if isinstance(location, Path):
        with closing(sqlite3.connect(location)) as conn:
            return conn.execute(sql).fetchall()
    import psycopg
    with psycopg.connect(location, autocommit=True) as conn:
        return conn.execute(sql).fetchall()


def is_sqlite(location) -> bool:
    return isinstance(location, Path)


def grade(run_id: str, sample: str, index: int = 0, *, status: str = "ok", score: float | None = 0.5,
          attempts: list | None = None, at: float = 1.0) -> GradeRow:
    return GradeRow(run_id, sample, index, status, score, None if score is None else str(score), "j",
                    [{"content": str(score)}] if attempts is None else attempts, None, [], at)


def schema_differences(store: Store, *, legacy_sqlite: bool = False) -> list:
    """What differs between the database's schema and the one the code queries (`_schema.metadata`).
    `legacy_sqlite`: a file made before migrations declared its one-column TEXT keys ``PRIMARY KEY`` without ``NOT
    NULL`` (which SQLite, unlike the SQL standard, does not imply); the store never writes a NULL key, and the
    upgrade leaves such tables as they are rather than rebuilding them, so that difference is expected."""
    with store._tx(write=False) as conn:
        diffs = compare_metadata(MigrationContext.configure(conn), metadata)
    if legacy_sqlite:
        diffs = [d for d in diffs if not (isinstance(d, list) and len(d) == 1 and d[0][0] == "modify_nullable"
                                          and metadata.tables[d[0][2]].c[d[0][3]].primary_key)]
    return diffs


# --- the judge-answer cache ------------------------------------------------------------------------------------

def test_an_answer_is_durable_for_another_client_the_moment_it_is_stored(db_location):
    store = Store(db_location)
    store.put_answer("fp", "sha", 0.0, 0, content="0.5", model="gpt-4-0613", prompt_tokens=10,
                     completion_tokens=1, sent={"max_tokens": 3, "temperature": 0.0})
    # a second, independent connection (another process) sees it without any explicit commit or close
    assert other_client(db_location, "SELECT content, prompt_tokens FROM judge_cache") == [("0.5", 10)]
    store.close()


def test_the_sqlite_file_is_in_wal_mode(tmp_path):
    Store(tmp_path / "g.db").close()
    assert other_client(tmp_path / "g.db", "PRAGMA journal_mode") == [("wal",)]


def test_cache_is_keyed_by_judge_prompt_temperature_and_k(any_store):
    store = any_store
    for k, content in ((0, "0.1"), (1, "0.2")):
        store.put_answer("fp", "sha", 0.0, k, content=content, model="m", prompt_tokens=None,
                         completion_tokens=None, sent={"k": k})
    store.put_answer("fp", "sha", 0.2, 0, content="0.3", model="m", prompt_tokens=7, completion_tokens=1, sent={})
    assert store.get_answer("fp", "sha", 0.0, 0) == {"content": "0.1", "model": "m", "prompt_tokens": None,
                                                     "completion_tokens": None, "sent": {"k": 0}}
    assert store.get_answer("fp", "sha", 0.0, 1)["content"] == "0.2"
    assert store.get_answer("fp", "sha", 0.2, 0)["content"] == "0.3"       # a temperature is an exact key
    assert store.get_answer("fp", "sha", 0.5, 0) is None
    assert store.get_answer("other", "sha", 0.0, 0) is None
    # the first stored answer wins: a racing duplicate never replaces what was paid for first
    store.put_answer("fp", "sha", 0.0, 0, content="0.9", model="m", prompt_tokens=None, completion_tokens=None,
                     sent={})
    assert store.get_answer("fp", "sha", 0.0, 0)["content"] == "0.1"
    assert store.cache_size() == 3


def test_a_nul_character_in_a_hostile_answer_never_fails_the_write(db_location):
    """PostgreSQL refuses NUL in text (SQLite keeps it): a judge answering one must not stop the run."""
    store = Store(db_location)
    store.put_answer("fp", "sha", 0.0, 0, content="0.5\x00<script>", model="m\x00", prompt_tokens=1,
                     completion_tokens=1, sent={"x": "\x00"})
    nul = "\x00" if is_sqlite(db_location) else "\ufffd"
    assert store.get_answer("fp", "sha", 0.0, 0) == {"content": f"0.5{nul}<script>", "model": f"m{nul}",
                                                     "prompt_tokens": 1, "completion_tokens": 1,
                                                     "sent": {"x": "\x00"}}      # JSON escapes it on both
    store.close()


# --- runs, grades, overrides -----------------------------------------------------------------------------------

def test_runs_grades_and_overrides_round_trip(any_store):
    store = any_store
    rid = store.create_run(model_name="m", benchmark={"name": "b"}, n_runs=2, judge={"model": "j"},
                           predictions={"v1_0": "x é ✓"}, owner="alice", fingerprint="fpr")
    stamp = store.change_stamp(rid)
    store.put_grade(GradeRow(rid, "v1_0", 0, "ok", 0.5, "0.5", "j", [{"content": "0.5"}], None, [], 1.0))
    store.put_grade(GradeRow(rid, "v1_0", 1, "error", None, None, None, [], "server: boom", ["error"], 2.0))
    store.put_grade(grade(rid, "v1_1", attempts=[{"content": "1.0", "why": "long"}], score=1.0, at=3.0))
    assert store.count_grades(rid) == {"ok": 2, "error": 1}
    assert store.change_stamp(rid) != stamp and store.change_stamp(rid)[3:] == (3, 3.0)
    assert [g.status for g in store.grades_since(rid, 1.5)] == ["error", "ok"]
    # a grade written again replaces the earlier one of the same (sample, judge run)
    store.put_grade(GradeRow(rid, "v1_0", 1, "ok", 1.0, "1.0", "j", [{"content": "1.0"}], None, ["steered"], 4.0))
    assert store.count_grades(rid) == {"ok": 3}
    rows = store.grades(rid)
    assert [(g.sample_id, g.run_index, g.score, g.flags) for g in rows] == [
        ("v1_0", 0, 0.5, []), ("v1_1", 0, 1.0, []), ("v1_0", 1, 1.0, ["steered"])]      # in the order written
    assert [g.attempts for g in store.grades(rid, evidence_for="v1_1")] == [[], [{"content": "1.0", "why": "long"}],
                                                                            []]
    assert all(g.attempts == [] for g in store.grades(rid, evidence_for=None))
    store.set_override(rid, "v1_0", 1.0, "judge missed the synonym")
    store.set_override(rid, "v1_0", 0.0, "on second thought")
    assert store.overrides(rid) == {"v1_0": (0.0, "on second thought")}
    store.clear_override(rid, "v1_0")
    assert store.overrides(rid) == {}
    run = store.get_run(rid)
    assert (run.predictions, run.benchmark, run.owner, run.status) == ({"v1_0": "x é ✓"}, {"name": "b"}, "alice",
                                                                       "created")
    assert store.find_run("fpr").id == rid and store.find_run("nope") is None
    store.rename_run(rid, "renamed")
    store.set_status(rid, "done", "finished")
    assert (store.get_run(rid).model_name, store.get_run(rid).status, store.get_run(rid).message) == (
        "renamed", "done", "finished")
    # deleting a run deletes what is stored for it; the shared answer cache stays
    store.add_batch(rid, 0, {"a": ["sha", 0.0, 0]})
    store.set_override(rid, "v1_1", 0.5, "r")
    store.put_answer("fp", "sha", 0.0, 0, content="0.5", model="m", prompt_tokens=1, completion_tokens=1, sent={})
    store.delete_run(rid)
    assert (store.get_run(rid), store.grades(rid), store.overrides(rid), store.batches(rid)) == (None, [], {}, [])
    assert store.change_stamp(rid) is None and store.cache_size() == 1


def test_run_usage_counts_paid_calls_and_tokens_apart_from_cached_and_imported_answers(any_store):
    store = any_store
    rid = store.create_run(model_name="m", benchmark={}, n_runs=1, judge={}, predictions={})
    store.put_grade(grade(rid, "a", attempts=[{"prompt_tokens": 100, "completion_tokens": 2, "cached": False},
                                              {"prompt_tokens": 100, "completion_tokens": 3}]))
    store.put_grade(grade(rid, "b", attempts=[{"prompt_tokens": 90, "completion_tokens": 1, "cached": True}]))
    store.put_grade(grade(rid, "c", attempts=[{"content": "1.0", "imported": True}]))
    store.put_grade(grade(rid, "d", attempts=[{"content": "0.0"}]))          # an answer without token counts
    assert store.run_usage(rid) == {"calls": 3, "cached_answers": 1, "prompt_tokens": 200, "completion_tokens": 5}
    assert store.run_usage("no-such-run") == {"calls": 0, "cached_answers": 0, "prompt_tokens": 0,
                                              "completion_tokens": 0}


def test_runs_are_listed_only_to_their_owner_and_a_restart_stops_app_runs_only(any_store):
    store = any_store
    a = store.create_run(model_name="a", benchmark={}, n_runs=1, judge={}, predictions={}, owner="alice")
    b = store.create_run(model_name="b", benchmark={}, n_runs=1, judge={}, predictions={}, owner="bob")
    cli = store.create_run(model_name="c", benchmark={}, n_runs=1, judge={}, predictions={})
    assert [r.id for r in store.list_runs("alice")] == [a]
    for rid in (a, b, cli):
        store.set_status(rid, "running")
    assert store.mark_interrupted() == 2
    assert [store.get_run(r).status for r in (a, b, cli)] == ["stopped", "stopped", "running"]
    assert "Resume" in store.get_run(a).message


def test_run_ids_are_unguessable():
    ids = {new_run_id() for _ in range(1000)}
    assert len(ids) == 1000
    assert all(len(i) == 24 for i in ids)   # 18 random bytes = 144 bits, URL-safe base64


def test_an_id_never_starts_with_a_dash_so_the_command_line_never_reads_it_as_an_option(monkeypatch):
    """Issue 32: 1 in 64 ids started with '-', and ``leaderboard publish RUN --name ...`` then failed. The random
    source is scripted to draw a dash first: the id handed out is the next draw."""
    from mmvet_core.board.entries import new_entry_id
    import mmvet_core.store._records as records

    draws = iter(["-startsWithDash", "AfterTheDash", "-again", "Entry-Id"])
    monkeypatch.setattr(records.secrets, "token_urlsafe", lambda n: next(draws))
    assert new_run_id() == "AfterTheDash"
    assert new_entry_id() == "Entry-Id"


# --- budgets ---------------------------------------------------------------------------------------------------

def test_usage_counted_by_several_processes_at_once_adds_up(db_location):
    """Two stores on one database (two processes of a host) count calls and tokens together: nothing is lost to
    a race, so the host's daily budgets hold however many processes spend them."""
    stores = [Store(db_location) for _ in range(2)]

    def spend(store: Store, visitor: str):
        for _ in range(25):
            store.add_usage("2026-12-04", visitor, 1, 10)

    threads = [threading.Thread(target=spend, args=(s, v)) for s in stores for v in ("v1", "v2")]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    store = stores[0]
    assert (store.usage("2026-12-04"), store.usage("2026-12-04", "v1"), store.usage("2026-12-04", "nobody")) == (
        100, 50, 0)
    assert (store.token_usage("2026-12-04"), store.token_usage("2026-12-04", "v2")) == (1000, 500)
    assert store.usage("2026-12-05") == 0
    for s in stores:
        s.close()


# --- keeping storage bounded -----------------------------------------------------------------------------------

def test_keeping_quota_expiry_pins_and_summaries(any_store):
    store = any_store
    predictions = {"v1_0": "é" * 10, "v1_1": "abc"}
    bench, judge = {"name": "MM-Vet", "subset": "bard"}, {"model": "gpt-4-0613", "provider": "openai"}
    rid = store.create_run(model_name="m", benchmark=bench, n_runs=1, judge=judge, predictions=predictions,
                           owner="alice")
    store.put_grade(grade(rid, "v1_0", attempts=[{"content": "0.5 ✓"}]))
    store.keep_run(rid, "visitor-1")
    store.keep_run(rid, "visitor-1", host=True)
    store.keep_run(rid, "visitor-1", host=False)                 # once graded with the host's key, always
    assert store.protected_run_ids() == {rid}
    # bytes, not characters: what the visitor's storage quota counts
    import json
    expected = (len(json.dumps(predictions, ensure_ascii=False).encode()) + len(json.dumps(bench).encode())
                + len(json.dumps([{"content": "0.5 ✓"}], ensure_ascii=False).encode()) + len("0.5"))
    assert store.visitor_storage("visitor-1") == (1, expected)
    assert store.visitor_storage("nobody") == (0, 0)
    store.set_total(rid, 31.5, "stamp-1")
    [summary] = store.run_summaries("alice")
    assert {k: summary[k] for k in ("id", "model_name", "n_runs", "status", "judge_model", "provider",
                                    "bench_name", "subset", "total", "total_stamp")} == {
        "id": rid, "model_name": "m", "n_runs": 1, "status": "created", "judge_model": "gpt-4-0613",
        "provider": "openai", "bench_name": "MM-Vet", "subset": "bard", "total": 31.5, "total_stamp": "stamp-1"}
    # expiry: app runs nobody opened since a time, oldest first; pinned, host-key, running and CLI runs stay
    old = [store.create_run(model_name=f"o{i}", benchmark={}, n_runs=1, judge={}, predictions={}, owner="bob")
           for i in range(4)]
    for i, r in enumerate(old):
        store.touch_run(r, when=100.0 + i)
    store.pin_run(old[1], "published")
    store.set_status(old[2], "running")
    store.create_run(model_name="cli", benchmark={}, n_runs=1, judge={}, predictions={})
    store.touch_run(rid, when=50.0)                              # host-key run: never expires
    assert store.unopened_runs(before=1000.0) == [old[0], old[3]]
    assert store.unopened_runs(before=1000.0, limit=1) == [old[0]]
    assert store.unopened_runs(before=101.0) == [old[0]]
    store.pin_run(old[1], "published")                           # pinning twice is one pin
    store.unpin_run(old[1], "published")
    assert store.unopened_runs(before=1000.0) == [old[0], old[1], old[3]]
    store.pin_run(old[0], "published")
    store.forget_run(old[0])
    assert store.get_run(old[0]) is None and old[0] not in store.protected_run_ids()


# --- the leaderboard -------------------------------------------------------------------------------------------

def test_leaderboard_versions_flags_and_stamp(any_store):
    store = any_store
    stamps = [store.board_stamp()]
    assert store.add_board_version("e1", run_id="r1", owner_hash="h", name="Mine", link="", meta={"a": "é"},
                                   scores={"v1_0": [1.0]}, published_at=10.0) == 1
    assert store.add_board_version("e1", run_id="r1", owner_hash="h", name="Mine v2", link="https://x",
                                   meta={"a": 2}, scores={"v1_0": [0.5]}, published_at=20.0) == 2
    stamps.append(store.board_stamp())
    entry = store.board_entry("e1")
    assert (entry["version"], entry["name"], entry["link"], entry["published"], entry["hidden"]) == (
        2, "Mine v2", "https://x", 1, 0)
    # an import forces an older version number: the current one stays the highest
    assert store.add_board_version("e1", run_id="r1", owner_hash="h", name="Mine v2", link="https://x",
                                   meta={"a": 1}, scores={}, version=1, published_at=30.0) == 1
    assert store.board_entry("e1")["version"] == 2
    assert [(v["version"], v["meta"]) for v in store.board_versions("e1")] == [(1, '{"a": 1}'), (2, '{"a": 2}')]
    store.add_board_version("e2", run_id="r2", owner_hash="h2", name="Other", link="", meta={}, scores={},
                            published_at=40.0, published=False)
    [shown] = store.board_entries()
    assert (shown["id"], shown["version"], shown["meta"], shown["published_at"]) == ("e1", 2, '{"a": 2}', 20.0)
    assert [e["id"] for e in store.board_entries(include_withdrawn=True)] == ["e1", "e2"]
    store.update_board_entry("e1", hidden=True)
    store.update_board_entry("e2", published=True, name="Other!")
    assert [e["id"] for e in store.board_entries()] == ["e2"] and store.board_entry("e2")["name"] == "Other!"
    store.set_board_current("e1", 1, published=True, hidden=False, name="Back", link="")
    assert store.board_entry("e1")["version"] == 1 and store.board_entry_for_run("r1")["name"] == "Back"
    assert store.board_entry_for_run("nope") is None and store.board_entry("nope") is None
    stamps.append(store.board_stamp())
    assert len(set(stamps)) == 3 and stamps[0] == (0, 0.0, 0)
    # publishing is rate limited per visitor; old records are dropped
    for at in (1.0, 90_000.0, 90_001.0):
        store.log_publish("v", at=at)
    assert store.count_publishes("v", since=90_000.0) == 2 and store.count_publishes("w", since=0.0) == 0
    assert len(dict(store.iter_tables())["board_publishes"]) == 2


def test_board_heads_one_version_a_rewritten_meta_and_a_runs_judge(any_store):
    """What the leaderboard's refresh reads (heads without the frozen copies, one version), the host's
    verification (a version's meta rewritten, the board's stamp moved) and a resumed run's endpoints."""
    store = any_store
    store.add_board_version("e1", run_id="r1", owner_hash="h", name="One", link="", meta={"a": 1}, scores={"s": [1]})
    store.add_board_version("e2", run_id="r2", owner_hash="h", name="Two", link="", meta={}, scores={})
    store.update_board_entry("e2", published=False)
    assert [h["id"] for h in store.board_heads()] == ["e1"] and "meta" not in store.board_heads()[0]
    assert [h["id"] for h in store.board_heads(include_withdrawn=True)] == ["e1", "e2"]
    assert store.board_version("e1", 1)["scores"] == '{"s": [1]}' and store.board_version("e1", 2) is None
    before = store.board_stamp()
    store.set_board_meta("e1", 1, {"a": 1, "provenance": {"verified_by": "host"}})
    assert json.loads(store.board_version("e1", 1)["meta"])["provenance"] == {"verified_by": "host"}
    assert store.board_stamp() != before
    run = store.create_run(model_name="m", benchmark={}, n_runs=1, judge={"model": "j"}, predictions={})
    store.update_run_judge(run, {"model": "j", "graded_on": ["evil.example"]})
    assert store.get_run(run).judge == {"model": "j", "graded_on": ["evil.example"]}


def test_two_processes_publishing_one_entry_at_once_get_distinct_versions(db_location):
    stores = [Store(db_location) for _ in range(2)]
    versions: list[int] = []

    def publish(store: Store):
        for _ in range(8):
            versions.append(store.add_board_version("e", run_id="r", owner_hash="h", name="n", link="", meta={},
                                                    scores={}))

    threads = [threading.Thread(target=publish, args=(s,)) for s in stores]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert sorted(versions) == list(range(1, 17))
    assert stores[0].board_entry("e")["version"] == 16 and len(stores[1].board_versions("e")) == 16
    for s in stores:
        s.close()


# --- judge checks and batches ----------------------------------------------------------------------------------

def test_judge_checks_are_listed_per_judge_prompt_and_reference_sets(any_store):
    store = any_store
    assert store.judge_checks_stamp() == (0, 0.0) and store.latest_judge_check("fp-a") is None
    store.put_judge_check("fp-a", {"model": "a", "base_url": "http://h/v1/"}, {"n_graded": 2}, prompt="p", refs="r1")
    time.sleep(0.002)           # checks are ordered by the time they were stored
    store.put_judge_check("fp-a", {"model": "a", "base_url": "http://h/v1"}, {"n_graded": 3}, prompt="p", refs="r1")
    time.sleep(0.002)
    store.put_judge_check("fp-b", {"model": "b"}, {"n_graded": 4}, prompt="p", refs="r1+r2")
    assert store.latest_judge_check("fp-a") == {"n_graded": 3}
    assert store.latest_judge_check("fp-a", refs="r1") == {"n_graded": 3}
    assert store.latest_judge_check("fp-a", refs="nope") is None
    board = store.judge_checks()
    assert [(c["judge_model"], c["endpoint"], c["result"]["n_graded"]) for c in board] == [
        ("b", "", 4), ("a", "http://h/v1", 3)]
    assert board[1]["judge"] == {"model": "a", "base_url": "http://h/v1"} and board[1]["refs"] == "r1"
    assert store.judge_checks_stamp()[0] == 3


def test_a_check_records_who_made_it_and_one_estimate_is_stored_per_check_and_inputs(any_store):
    """Issue 33: a check keeps its scope (the server's, a visitor's with their owner hash; "" for one stored
    before: trusted by nothing), and the first estimate stored for (check, inputs) is the one everyone reads."""
    store = any_store
    store.put_judge_check("fp-v", {"model": "v"}, {"n_graded": 1}, scope="visitor", owner_hash="h1")
    store.put_judge_check("fp-old", {"model": "o"}, {"n_graded": 1}, scope="")
    assert {(c["fingerprint"], c["scope"], c["owner_hash"]) for c in store.judge_checks()} == \
        {("fp-v", "visitor", "h1"), ("fp-old", "", "")}
    assert store.latest_judge_check("fp-v") == {"n_graded": 1} and store.latest_judge_check("fp-old") is None
    assert store.get_estimate("c1", "in") is None
    assert store.put_estimate("c1", "in", {"estimate": 30.0}) == {"estimate": 30.0}
    assert store.put_estimate("c1", "in", {"estimate": 51.5}) == {"estimate": 30.0}    # the first stored wins
    assert store.get_estimate("c1", "in") == {"estimate": 30.0} and store.get_estimate("c2", "in") is None


def test_batches_are_recorded_before_submission_and_followed(any_store):
    store = any_store
    first = store.add_batch("run", 0, {"c1": ["sha", 0.0, 0]})
    time.sleep(0.002)
    second = store.add_batch("run", 1, {"c2": ["sha", 0.2, 0]})
    store.update_batch(first, status="submitted", input_file_id="file-1", batch_id="batch-1")
    assert [(b["id"], b["status"], b["requests"]) for b in store.open_batches("run")] == [
        (first, "submitted", {"c1": ["sha", 0.0, 0]}), (second, "submitting", {"c2": ["sha", 0.2, 0]})]
    store.update_batch(first, status="done", message="ok")
    assert [b["id"] for b in store.open_batches("run")] == [second]
    assert [b["batch_id"] for b in store.batches("run")] == ["batch-1", None]


def test_a_lasting_secret_is_the_same_for_every_process_and_restart(db_location):
    stores = [Store(db_location) for _ in range(3)]
    got: list[str] = []
    threads = [threading.Thread(target=lambda s=s: got.append(s.lasting_secret("visitor-salt"))) for s in stores]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(set(got)) == 1 and len(got[0]) >= 43                 # one secret of 256 bits, whoever asked first
    for s in stores:
        s.close()
    again = Store(db_location)
    assert again.lasting_secret("visitor-salt") == got[0] and again.lasting_secret("other") != got[0]
    again.close()


# --- migrations ------------------------------------------------------------------------------------------------

def test_a_migrated_database_has_exactly_the_schema_the_code_queries(any_store):
    assert schema_differences(any_store) == []
    assert {name for name, _ in any_store.iter_tables()} == set(metadata.tables) | {"alembic_version"}
    assert dict(any_store.iter_tables())["alembic_version"] == [{"version_num": head_revision()}]


def test_a_database_at_head_opens_without_alembic_and_the_heads_agree(tmp_path):
    """A command, worker or replica opening a database already at this release's revision does not import
    Alembic (80 ms of every start); the head read from the version files is Alembic's own."""
    import subprocess
    import sys

    from alembic.script import ScriptDirectory

    from mmvet_core.store._migrate import _config, current_revision

    assert head_revision() == ScriptDirectory.from_config(_config()).get_current_head()
    path = tmp_path / "mmvet-grader.db"
    Store(path).close()
    code = ("import sys; from mmvet_core.store import Store; s = Store(sys.argv[1]); s.get_run('x'); s.close(); "
            "print(sorted(m for m in sys.modules if m.split('.')[0] == 'alembic'))")
    out = subprocess.run([sys.executable, "-c", code, str(path)], capture_output=True, text=True, check=True,
                         cwd=Path(__file__).resolve().parents[1]).stdout
    assert out.strip() == "[]"
    assert other_client(path, "SELECT version_num FROM alembic_version") == [(head_revision(),)]
    with closing(sqlite3.connect(path)) as conn:
        conn.execute("DELETE FROM alembic_version")
        conn.commit()
    import sqlalchemy as sa
    engine = sa.create_engine(f"sqlite:///{path}")
    with engine.connect() as conn:                           # a database with no revision: Alembic reads what we read
        assert current_revision(conn) is None
        assert MigrationContext.configure(conn).get_current_revision() is None
    engine.dispose()


def test_a_sqlite_database_of_an_earlier_release_is_upgraded_in_place(tmp_path):
    """A file made before versioned migrations (its tables created by CREATE TABLE IF NOT EXISTS, columns added
    since missing) opens with everything it held, gains the missing columns and is at the current revision."""
    path = tmp_path / "mmvet-grader.db"
    with closing(sqlite3.connect(path)) as conn:
        conn.executescript(OLD_SCHEMA.read_text())
        conn.execute("INSERT INTO runs (id, created_at, updated_at, model_name, benchmark, n_runs, judge, status,"
                     " predictions, owner) VALUES ('r1', 1.0, 2.0, 'llava', '{\"name\": \"b\"}', 1,"
                     " '{\"model\": \"gpt-4-0613\"}', 'done', '{\"v1_0\": \"x\"}', 'alice')")
        conn.execute("INSERT INTO grades VALUES ('r1', 'v1_0', 0, 'ok', 0.5, '0.5', 'j', '[]', NULL, '[]', 3.0)")
        conn.execute("INSERT INTO judge_cache VALUES ('fp', 'sha', 0.0, 0, '0.5', 'm', 1, 1, '{}', 4.0)")
        conn.execute("INSERT INTO judge_checks VALUES ('old', 1.0, 'fp-a', '{\"model\": \"a\"}', '{\"n_graded\": 1}')")
        conn.execute("INSERT INTO usage VALUES ('2026-12-01', 'v', 7)")
        conn.execute("INSERT INTO meta VALUES ('id', 'abc123')")
        conn.commit()
    (tmp_path / "mmvet-grader.db.id").write_text("abc123")
    store = Store(path)
    assert store.warnings == []                      # the same database as at the last start
    assert schema_differences(store, legacy_sqlite=True) == []
    assert store.get_run("r1").predictions == {"v1_0": "x"} and store.grades("r1")[0].score == 0.5
    assert store.get_answer("fp", "sha", 0.0, 0)["content"] == "0.5"
    assert (store.usage("2026-12-01", "v"), store.token_usage("2026-12-01", "v")) == (7, 0)   # the new column
    [check] = store.judge_checks()
    assert (check["result"], check["judge_model"], check["endpoint"]) == ({"n_graded": 1}, "a", "")
    store.close()
    assert other_client(path, "SELECT version_num FROM alembic_version") == [(head_revision(),)]
    assert Store(path).get_run("r1") is not None     # opening again migrates nothing


def test_threads_opening_new_databases_side_by_side_migrate_each(tmp_path):
    """Alembic keeps the migration it runs in module globals: three threads creating three databases at once
    failed ("'script'", "table runs already exists"). Each database is now migrated, one at a time."""
    errors, stores = [], []
    ready = threading.Barrier(3)

    def create(i: int):
        ready.wait()
        try:
            stores.append(Store(tmp_path / f"{i}.db"))
        except Exception as e:          # noqa: BLE001  (reported below)
            errors.append(e)

    threads = [threading.Thread(target=create, args=(i,)) for i in range(3)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == [] and len(stores) == 3
    for s in stores:
        assert other_client(s.path, "SELECT version_num FROM alembic_version") == [(head_revision(),)]
        s.close()


def test_processes_opening_a_new_database_together_create_it_once(db_location):
    stores, errors = [], []

    def open_store():
        try:
            stores.append(Store(db_location))
        except Exception as e:          # noqa: BLE001  (reported below)
            errors.append(e)

    threads = [threading.Thread(target=open_store) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == [] and len(stores) == 4
    assert other_client(db_location, "SELECT version_num FROM alembic_version") == [(head_revision(),)]
    assert len(other_client(db_location, "SELECT value FROM meta WHERE key = 'id'")) == 1
    for s in stores:
        s.close()


def test_a_database_of_a_newer_release_is_refused(db_location):
    Store(db_location).close()
    if is_sqlite(db_location):
        with closing(sqlite3.connect(db_location)) as conn:
            conn.execute("UPDATE alembic_version SET version_num = '9999'")
            conn.commit()
    else:
        other_client(db_location, "UPDATE alembic_version SET version_num = '9999' RETURNING 1")
    with pytest.raises(StoreError, match="newer release"):
        Store(db_location)


# --- faults are named (issue 9 row 14) -------------------------------------------------------------------------

def test_a_corrupted_database_is_refused_at_startup_with_what_is_wrong(tmp_path):
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


def test_a_write_the_database_refuses_is_named(db_location, request):
    """A database that cannot be written (read-only file or server) fails the write with that reason."""
    store = Store(db_location)
    store.put_answer("fp", "sha", 0.0, 0, content="0.5", model="m", prompt_tokens=1, completion_tokens=1, sent={})
    if is_sqlite(db_location):
        store._exec("PRAGMA query_only = 1")
    else:
        store.close()
        name = str(db_location).rsplit("/", 1)[1]
        with request.getfixturevalue("pg_server").admin() as conn:
            conn.execute(f'ALTER DATABASE "{name}" SET default_transaction_read_only = on')
        store = Store(db_location)
    with pytest.raises(StoreError, match="could not write to its database: the database .*cannot be written"):
        store.put_answer("fp", "sha2", 0.0, 0, content="0.5", model="m", prompt_tokens=1, completion_tokens=1,
                         sent={})
    assert store.get_answer("fp", "sha", 0.0, 0)["content"] == "0.5"          # reading still works
    store.close()


def test_an_unreachable_database_server_is_named_without_its_password():
    import socket
    with socket.socket() as s:                      # a port nobody listens on
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    with pytest.raises(StoreError) as info:
        Store(f"postgresql://grader:s3cret-pw@127.0.0.1:{port}/grades")
    text = str(info.value)
    assert "cannot be used" in text and f"127.0.0.1:{port}/grades" in text and "s3cret-pw" not in text


def test_a_database_outage_fails_calls_by_name_and_the_store_recovers_by_itself(pg_server, pg_url):
    """A database restart ends every connection of the grader: the next calls do not fail (each pooled connection
    is checked before use and replaced). While the database refuses connections, a call fails with a message that
    names the fault (without the server's address: it may reach a visitor); once it accepts them again, the same
    store works without a restart."""
    store = Store(pg_url)
    name = pg_url.rsplit("/", 1)[1]
    store.put_answer("fp", "sha", 0.0, 0, content="0.5", model="m", prompt_tokens=1, completion_tokens=1, sent={})

    def end_connections(conn):
        return conn.execute("SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE datname = %s",
                            (name,)).fetchall()

    with pg_server.admin() as conn:
        assert end_connections(conn)
    assert store.get_answer("fp", "sha", 0.0, 0)["content"] == "0.5"
    pg_server.outage(pg_url, True)
    with pytest.raises(StoreError, match="could not write to its database: the database server cannot be "
                                         "reached") as info:
        store.put_answer("fp", "sha", 0.0, 1, content="0.7", model="m", prompt_tokens=1, completion_tokens=1,
                         sent={})
    assert "127.0.0.1" not in str(info.value) and str(pg_server.port) not in str(info.value)
    pg_server.outage(pg_url, False)
    store.put_answer("fp", "sha", 0.0, 2, content="0.9", model="m", prompt_tokens=1, completion_tokens=1, sent={})
    assert [store.get_answer("fp", "sha", 0.0, k) is not None for k in range(3)] == [True, False, True]
    store.close()


@pytest.mark.parametrize("url, message", [("mysql://u@h/db", "unknown database 'mysql'"),
                                          ("postgresql://u@h", "names no database")], ids=["scheme", "no-database"])
def test_a_database_url_the_store_cannot_use_is_refused(url, message):
    with pytest.raises(StoreError, match=message):
        Store(url)


# --- the setting -----------------------------------------------------------------------------------------------

def test_a_host_moving_to_postgresql_finds_every_run_and_pays_for_no_answer_again(tmp_path, pg_url, fake_judge):
    """The setting selects the database: unset, the SQLite file in the data folder, as always. A host grades a run
    there, copies the database into PostgreSQL (`db copy`), sets MMVET_DATABASE_URL and restarts: the run reads
    the same (scores, overrides, usage, My runs), and grading the same file again pays for no answer."""
    from dataclasses import replace

    from mmvet_core.service import BENCH_BUNDLED, JUDGE_HOST, BenchmarkChoice, GradingService, JudgeChoice, \
        ServiceSettings
    from mmvet_core.store._copy import copy_store

    results = str(Path(__file__).resolve().parent / "data" / "results" / "llava-v1.5-13b.json")
    env = {"MMVET_DATA_DIR": str(tmp_path), "OPENAI_API_KEY": "sk-host", "OPENAI_BASE_URL": fake_judge.url,
           "MMVET_ALLOW_PRIVATE_ENDPOINTS": "1"}

    def service(**extra) -> GradingService:
        return GradingService(replace(ServiceSettings.from_env({**env, **extra}), run_concurrency=16))

    def seen(svc: GradingService, run_id: str) -> tuple:
        st = svc.reading.status(run_id)
        return (st["status"], st["done"], st["total_score"], st["scores"], st["n_overrides"],
                svc.store.run_usage(run_id), [r.id for r in svc.reading.runs_of("me")])

    def grade(svc: GradingService, owner: str) -> str:
        run_id, _ = svc.runs.start(results, BenchmarkChoice(BENCH_BUNDLED), 1, JudgeChoice(JUDGE_HOST), owner=owner,
                              visitor="v")
        svc.jobs.wait(run_id, timeout=300)
        return run_id

    before = service()
    assert before.store.backend == "sqlite" and before.store.path == tmp_path / "mmvet-grader.db"
    run_id = grade(before, "me")
    before.runs.override(run_id, "me", "v1_0", 1.0, "checked by hand")
    on_sqlite = seen(before, run_id)
    assert on_sqlite[:2] == ("done", 218) and on_sqlite[4] == 1 and on_sqlite[-1] == [run_id]
    before.jobs.shutdown()
    before.store.close()
    paid = len(fake_judge.state.calls)

    source, target = Store(tmp_path / "mmvet-grader.db"), Store(pg_url)
    copy_store(source, target)
    source.close()
    target.close()
    after = service(MMVET_DATABASE_URL=pg_url)
    assert after.store.backend == "postgresql"
    assert seen(after, run_id) == on_sqlite
    again = grade(after, "you")                    # another visitor, the same file and judge: the shared cache
    assert after.reading.status(again)["done"] == 218 and len(fake_judge.state.calls) == paid
    after.jobs.shutdown()
    after.store.close()
