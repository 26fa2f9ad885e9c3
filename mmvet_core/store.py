"""SQLite persistence: runs, grades, overrides, the judge-answer cache, Batch API submissions and judge-call budgets.

Every judge answer is committed the moment it arrives (`Store.put_answer`), so a process killed at any moment
(kill -9) loses nothing it paid for. The cache is keyed by (judge fingerprint, sha256 of the prompt, temperature,
k): the k-th run of an identical prompt under an identical judge configuration reuses the k-th stored answer.
No API key is ever passed to this module.

One `Store` may be shared by threads (a lock serialises its single connection); WAL mode lets other processes
(the CLI beside the app) read and write the same file.

Faults are named, not generic: opening a damaged file, or one that fails SQLite's ``PRAGMA quick_check``, raises
`StoreError` saying what is wrong and what to do; a write that fails (disk full, read-only file) raises
`StoreError` too, which stops the run that needed it with the reason. A marker file beside the database
(``<name>.id``) notices a database that vanished or was replaced since the last start: `Store.warnings` says so
(every run and budget count it held is gone), instead of silently starting empty.
"""
from __future__ import annotations

import json
import secrets
import sqlite3
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Iterator

SCHEMA = """
CREATE TABLE IF NOT EXISTS runs (
    id TEXT PRIMARY KEY,
    created_at REAL NOT NULL,
    updated_at REAL NOT NULL,
    model_name TEXT NOT NULL,
    benchmark TEXT NOT NULL,          -- JSON: spec, name, version, subset, n_samples
    n_runs INTEGER NOT NULL,
    judge TEXT NOT NULL,              -- JSON JudgeSettings (never a key)
    status TEXT NOT NULL,             -- created, running, stopped, done, failed
    message TEXT NOT NULL DEFAULT '',
    results_format TEXT NOT NULL DEFAULT '',
    predictions TEXT NOT NULL,        -- JSON id -> prediction text
    owner TEXT NOT NULL DEFAULT '',   -- opaque visitor id (app), '' for the CLI
    fingerprint TEXT NOT NULL DEFAULT ''
);
CREATE TABLE IF NOT EXISTS grades (
    run_id TEXT NOT NULL,
    sample_id TEXT NOT NULL,
    run_index INTEGER NOT NULL,
    status TEXT NOT NULL,             -- ok, fallback, bad_request_zero, error
    score REAL,
    content TEXT,
    judge_model TEXT,
    attempts TEXT NOT NULL,           -- JSON list of attempts (raw answer, temperature, params sent, tokens)
    error TEXT,
    flags TEXT NOT NULL DEFAULT '[]',
    updated_at REAL NOT NULL,
    PRIMARY KEY (run_id, sample_id, run_index)
);
CREATE TABLE IF NOT EXISTS overrides (
    run_id TEXT NOT NULL,
    sample_id TEXT NOT NULL,
    score REAL NOT NULL,
    reason TEXT NOT NULL,
    created_at REAL NOT NULL,
    PRIMARY KEY (run_id, sample_id)
);
CREATE TABLE IF NOT EXISTS judge_cache (
    fingerprint TEXT NOT NULL,
    prompt_sha TEXT NOT NULL,
    temperature REAL NOT NULL,
    k INTEGER NOT NULL,
    content TEXT,
    model TEXT,
    prompt_tokens INTEGER,
    completion_tokens INTEGER,
    sent TEXT NOT NULL,
    created_at REAL NOT NULL,
    PRIMARY KEY (fingerprint, prompt_sha, temperature, k)
);
CREATE TABLE IF NOT EXISTS batches (
    id TEXT PRIMARY KEY,              -- our id; the Batch API's id is batch_id once created
    run_id TEXT NOT NULL,
    round INTEGER NOT NULL,
    status TEXT NOT NULL,             -- submitting, submitted, done, failed
    input_file_id TEXT,
    batch_id TEXT,
    requests TEXT NOT NULL,           -- JSON custom_id -> [prompt_sha, temperature, k]
    message TEXT NOT NULL DEFAULT '',
    created_at REAL NOT NULL,
    updated_at REAL NOT NULL
);
CREATE TABLE IF NOT EXISTS meta (
    key TEXT PRIMARY KEY,
    value TEXT NOT NULL
);
CREATE TABLE IF NOT EXISTS judge_checks (
    id TEXT PRIMARY KEY,
    created_at REAL NOT NULL,
    fingerprint TEXT NOT NULL,        -- JudgeSettings.fingerprint() of the checked judge
    judge TEXT NOT NULL,              -- JSON JudgeSettings (never a key)
    result TEXT NOT NULL              -- JSON judgecheck.JudgeCheckResult
);
CREATE INDEX IF NOT EXISTS judge_checks_by_judge ON judge_checks (fingerprint, created_at);
CREATE TABLE IF NOT EXISTS board_entries (
    id TEXT PRIMARY KEY,              -- the entry (stable across versions)
    run_id TEXT NOT NULL,             -- the run it was published from (may since be deleted)
    owner_hash TEXT NOT NULL,         -- leaderboard.owner_hash(owner token): who may rename / unpublish
    name TEXT NOT NULL,               -- display name: bounded plain text
    link TEXT NOT NULL DEFAULT '',    -- optional https link (validated)
    version INTEGER NOT NULL,         -- the current version (board_versions)
    published INTEGER NOT NULL DEFAULT 1,   -- 0: unpublished by its owner
    hidden INTEGER NOT NULL DEFAULT 0,      -- 1: hidden by the host
    created_at REAL NOT NULL,
    updated_at REAL NOT NULL
);
CREATE TABLE IF NOT EXISTS board_versions (
    entry_id TEXT NOT NULL,
    version INTEGER NOT NULL,
    published_at REAL NOT NULL,
    meta TEXT NOT NULL,               -- JSON: frozen run metadata (judge, benchmark, runs, totals, date, ...)
    scores TEXT NOT NULL,             -- JSON: frozen per-sample scores {sample id: [score per judge run]}
    PRIMARY KEY (entry_id, version)
);
CREATE TABLE IF NOT EXISTS board_publishes (
    visitor TEXT NOT NULL,            -- hashed visitor id (rate limit of publishing)
    at REAL NOT NULL
);
CREATE TABLE IF NOT EXISTS usage (
    day TEXT NOT NULL,
    visitor TEXT NOT NULL,
    calls INTEGER NOT NULL,
    tokens INTEGER NOT NULL DEFAULT 0,
    PRIMARY KEY (day, visitor)
);
"""
#: What keeps storage bounded (`mmvet_core/keeping.py`): who stored each app run (quota), whether it was graded
#: with the host's key, when anyone last opened it (expiry), its cached total (My runs); and runs that never
#: expire (``run_pins``: e.g. a published leaderboard entry, reason ``published``).
KEEPING_SCHEMA = """
CREATE TABLE IF NOT EXISTS run_keeping (
    run_id TEXT PRIMARY KEY,
    visitor TEXT NOT NULL DEFAULT '',
    host INTEGER NOT NULL DEFAULT 0,
    opened_at REAL NOT NULL,
    total REAL,
    total_stamp TEXT
);
CREATE INDEX IF NOT EXISTS run_keeping_visitor ON run_keeping (visitor);
CREATE TABLE IF NOT EXISTS run_pins (
    run_id TEXT NOT NULL,
    reason TEXT NOT NULL,
    PRIMARY KEY (run_id, reason)
);
CREATE INDEX IF NOT EXISTS runs_owner ON runs (owner, created_at);
"""
#: Columns added after a table was first released: (table, column, definition), added to older databases.
MIGRATIONS = [("usage", "tokens", "INTEGER NOT NULL DEFAULT 0"),
              # a judge check is stored per (endpoint, judge model, prompt) and reference sets
              ("judge_checks", "endpoint", "TEXT NOT NULL DEFAULT ''"),
              ("judge_checks", "judge_model", "TEXT NOT NULL DEFAULT ''"),
              ("judge_checks", "prompt", "TEXT NOT NULL DEFAULT ''"),
              ("judge_checks", "refs", "TEXT NOT NULL DEFAULT ''")]


class StoreError(Exception):
    """The database cannot be read or written; the message says what is wrong (no server path in it: it may be
    shown to visitors)."""


def _describe(err: sqlite3.Error) -> str:
    text = str(err) or type(err).__name__
    low = text.lower()
    if "disk is full" in low or "database or disk is full" in low:
        return f"the disk holding the database is full ({text})"
    if "readonly" in low or "read-only" in low:
        return f"the database file cannot be written ({text})"
    if "malformed" in low or "not a database" in low or "corrupt" in low:
        return f"the database file is damaged ({text})"
    if "disk i/o" in low:
        return f"the disk failed while using the database ({text})"
    return text


def new_run_id() -> str:
    """An unguessable run id: 144 random bits, URL-safe."""
    return secrets.token_urlsafe(18)


@dataclass
class RunRecord:
    id: str
    created_at: float
    updated_at: float
    model_name: str
    benchmark: dict
    n_runs: int
    judge: dict
    status: str
    message: str
    results_format: str
    predictions: dict[str, str]
    owner: str
    fingerprint: str


@dataclass
class GradeRow:
    run_id: str
    sample_id: str
    run_index: int
    status: str
    score: float | None
    content: str | None
    judge_model: str | None
    attempts: list[dict]
    error: str | None
    flags: list[str]
    updated_at: float


class Store:
    """The SQLite database at `path` (created with its parent folder when missing)."""

    def __init__(self, path: str | Path, *, check: bool = True):
        """Open (or create) the database. `check` runs ``PRAGMA quick_check`` (a damaged file raises
        `StoreError` with what SQLite found) and compares the database with its marker file (`warnings`)."""
        self.path = Path(path)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self.warnings: list[str] = []
        existed = self.path.exists() and self.path.stat().st_size > 0
        self._lock = threading.RLock()
        try:
            self._conn = sqlite3.connect(str(self.path), check_same_thread=False, timeout=30, isolation_level=None)
        except sqlite3.Error as e:
            raise StoreError(f"the database {self.path.name} cannot be opened: {_describe(e)}") from e
        self._conn.row_factory = sqlite3.Row
        try:
            with self._lock:
                if check and existed:
                    problems = [r[0] for r in self._conn.execute("PRAGMA quick_check(5)").fetchall()]
                    if problems != ["ok"]:
                        raise StoreError(self._damaged("; ".join(problems)))
                self._conn.execute("PRAGMA journal_mode=WAL")
                self._conn.execute("PRAGMA synchronous=NORMAL")
                self._conn.execute("PRAGMA busy_timeout=30000")
                self._conn.executescript(SCHEMA)
                self._conn.executescript(KEEPING_SCHEMA)
                for table, column, definition in MIGRATIONS:
                    have = {r[1] for r in self._conn.execute(f"PRAGMA table_info({table})")}
                    if column not in have:
                        self._conn.execute(f"ALTER TABLE {table} ADD COLUMN {column} {definition}")
        except sqlite3.DatabaseError as e:
            self._conn.close()
            raise StoreError(self._damaged(_describe(e))) from e
        except StoreError:
            self._conn.close()
            raise
        if check:
            self._check_marker(existed)

    def _damaged(self, what: str) -> str:
        return (f"the database {self.path.name} is damaged ({what}). Stop every process using it, move it aside "
                f"(keep it: `sqlite3 {self.path.name} .recover` may save its grades) and start again with a new one.")

    def _check_marker(self, existed: bool) -> None:
        """Notice a database that vanished (or was swapped) since the last start, through the marker file beside
        it that holds the database's random id."""
        marker = self.path.with_name(self.path.name + ".id")
        rows = self._query("SELECT value FROM meta WHERE key = 'id'")
        db_id = rows[0]["value"] if rows else None
        if db_id is None:
            db_id = secrets.token_hex(8)
            self._exec("INSERT INTO meta (key, value) VALUES ('id', ?)", (db_id,))
        try:
            known = marker.read_text().strip() if marker.exists() else None
        except OSError:
            known = None
        if known and known != db_id:
            if not existed:
                self.warnings.append(
                    f"the database {self.path.name} existed at the last start and is missing now: every earlier "
                    "run, grade, cached answer and today's budget counts are gone (a new, empty database was "
                    "created). Restore it from a backup if you have one.")
            else:
                self.warnings.append(
                    f"the database {self.path.name} is not the one of the last start (it was replaced): runs and "
                    "budget counts are those of the file now in place.")
        if known != db_id:
            try:
                marker.write_text(db_id)
            except OSError as e:
                self.warnings.append(f"the marker file {marker.name} cannot be written ({e})")

    def close(self) -> None:
        with self._lock:
            self._conn.close()

    def _exec(self, sql: str, args: tuple = ()) -> sqlite3.Cursor:
        with self._lock:
            try:
                return self._conn.execute(sql, args)
            except sqlite3.Error as e:
                raise StoreError(f"the server could not write to its database: {_describe(e)}") from e

    def _query(self, sql: str, args: tuple = ()) -> list[sqlite3.Row]:
        with self._lock:
            try:
                return self._conn.execute(sql, args).fetchall()
            except sqlite3.Error as e:
                raise StoreError(f"the server could not read its database: {_describe(e)}") from e

    # --- runs --------------------------------------------------------------------------------------------
    def create_run(self, *, model_name: str, benchmark: dict, n_runs: int, judge: dict,
                   predictions: dict[str, str], results_format: str = "", owner: str = "",
                   fingerprint: str = "", run_id: str | None = None) -> str:
        assert "api_key" not in judge, "keys are never stored"
        run_id = run_id or new_run_id()
        now = time.time()
        self._exec(
            "INSERT INTO runs (id, created_at, updated_at, model_name, benchmark, n_runs, judge, status, message,"
            " results_format, predictions, owner, fingerprint) VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?)",
            (run_id, now, now, model_name, json.dumps(benchmark), n_runs, json.dumps(judge), "created", "",
             results_format, json.dumps(predictions, ensure_ascii=False), owner, fingerprint))
        return run_id

    def get_run(self, run_id: str) -> RunRecord | None:
        rows = self._query("SELECT * FROM runs WHERE id = ?", (run_id,))
        return _run_record(rows[0]) if rows else None

    def find_run(self, fingerprint: str) -> RunRecord | None:
        """The most recent run with this fingerprint (the CLI resumes it)."""
        rows = self._query("SELECT * FROM runs WHERE fingerprint = ? ORDER BY created_at DESC LIMIT 1",
                           (fingerprint,))
        return _run_record(rows[0]) if rows else None

    def list_runs(self, owner: str) -> list[RunRecord]:
        """Runs of one owner only (no page lists other visitors' runs)."""
        rows = self._query("SELECT * FROM runs WHERE owner = ? ORDER BY created_at DESC", (owner,))
        return [_run_record(r) for r in rows]

    def update_run_judge(self, run_id: str, judge: dict) -> None:
        """Replace a run's judge record (provenance: the endpoints a resumed run was graded on)."""
        assert "api_key" not in judge, "keys are never stored"
        self._exec("UPDATE runs SET judge = ? WHERE id = ?", (json.dumps(judge), run_id))

    def rename_run(self, run_id: str, model_name: str) -> None:
        self._exec("UPDATE runs SET model_name = ?, updated_at = ? WHERE id = ?", (model_name, time.time(), run_id))

    def delete_run(self, run_id: str) -> None:
        """A run and everything stored for it (grades, overrides, batches); the shared answer cache stays."""
        for table in ("grades", "overrides", "batches", "runs"):
            self._exec(f"DELETE FROM {table} WHERE {'id' if table == 'runs' else 'run_id'} = ?", (run_id,))

    def mark_interrupted(self) -> int:
        """App runs left 'running' by a previous process (a restart) become 'stopped'; returns how many."""
        cur = self._exec("UPDATE runs SET status = 'stopped', message = ?, updated_at = ? "
                         "WHERE status = 'running' AND owner != ''",
                         ("interrupted by a server restart; Resume continues without paying again", time.time()))
        return cur.rowcount

    def set_status(self, run_id: str, status: str, message: str = "") -> None:
        self._exec("UPDATE runs SET status = ?, message = ?, updated_at = ? WHERE id = ?",
                   (status, message, time.time(), run_id))

    # --- grades ------------------------------------------------------------------------------------------
    def put_grade(self, row: GradeRow) -> None:
        self._exec(
            "INSERT OR REPLACE INTO grades (run_id, sample_id, run_index, status, score, content, judge_model,"
            " attempts, error, flags, updated_at) VALUES (?,?,?,?,?,?,?,?,?,?,?)",
            (row.run_id, row.sample_id, row.run_index, row.status, row.score, row.content, row.judge_model,
             json.dumps(row.attempts, ensure_ascii=False), row.error, json.dumps(row.flags), row.updated_at))

    def grades(self, run_id: str, *, evidence_for: str | None = "*") -> list[GradeRow]:
        """A run's grades. Decoding every attempt is the costly part of reading a run, so `evidence_for` says
        whose attempts to load: ``"*"`` all, a sample id that sample's only, None nobody's (``attempts=[]``)."""
        if evidence_for == "*":
            rows = self._query("SELECT * FROM grades WHERE run_id = ? ORDER BY rowid", (run_id,))
        else:
            rows = self._query(
                "SELECT run_id, sample_id, run_index, status, score, content, judge_model, error, flags, updated_at,"
                " CASE WHEN sample_id = ? THEN attempts ELSE '[]' END AS attempts"
                " FROM grades WHERE run_id = ? ORDER BY rowid", (evidence_for or "", run_id))
        return [_grade_row(r) for r in rows]

    def grades_since(self, run_id: str, since: float) -> list[GradeRow]:
        rows = self._query("SELECT * FROM grades WHERE run_id = ? AND updated_at > ? ORDER BY updated_at",
                           (run_id, since))
        return [_grade_row(r) for r in rows]

    def run_usage(self, run_id: str) -> dict[str, int]:
        """Judge calls made for a run's stored grades and their tokens (answers from the cache or imported from a
        file cost nothing and are counted apart), summed by SQLite over the attempts' JSON."""
        rows = self._query(
            "SELECT"
            " COALESCE(SUM(CASE WHEN json_extract(a.value, '$.cached') THEN 0 ELSE 1 END), 0) AS calls,"
            " COALESCE(SUM(CASE WHEN json_extract(a.value, '$.cached') THEN 1 ELSE 0 END), 0) AS cached,"
            " COALESCE(SUM(CASE WHEN json_extract(a.value, '$.cached') THEN 0"
            "     ELSE COALESCE(json_extract(a.value, '$.prompt_tokens'), 0) END), 0) AS prompt_tokens,"
            " COALESCE(SUM(CASE WHEN json_extract(a.value, '$.cached') THEN 0"
            "     ELSE COALESCE(json_extract(a.value, '$.completion_tokens'), 0) END), 0) AS completion_tokens"
            " FROM grades AS g, json_each(g.attempts) AS a"
            " WHERE g.run_id = ? AND NOT COALESCE(json_extract(a.value, '$.imported'), 0)", (run_id,))
        r = rows[0]
        return {"calls": r["calls"], "cached_answers": r["cached"], "prompt_tokens": r["prompt_tokens"],
                "completion_tokens": r["completion_tokens"]}

    def count_grades(self, run_id: str) -> dict[str, int]:
        rows = self._query("SELECT status, COUNT(*) AS n FROM grades WHERE run_id = ? GROUP BY status", (run_id,))
        return {r["status"]: r["n"] for r in rows}

    # --- overrides ---------------------------------------------------------------------------------------
    def set_override(self, run_id: str, sample_id: str, score: float, reason: str) -> None:
        self._exec("INSERT OR REPLACE INTO overrides (run_id, sample_id, score, reason, created_at)"
                   " VALUES (?,?,?,?,?)", (run_id, sample_id, score, reason, time.time()))
        self._exec("UPDATE runs SET updated_at = ? WHERE id = ?", (time.time(), run_id))

    def clear_override(self, run_id: str, sample_id: str) -> None:
        self._exec("DELETE FROM overrides WHERE run_id = ? AND sample_id = ?", (run_id, sample_id))
        self._exec("UPDATE runs SET updated_at = ? WHERE id = ?", (time.time(), run_id))

    def overrides(self, run_id: str) -> dict[str, tuple[float, str]]:
        rows = self._query("SELECT sample_id, score, reason FROM overrides WHERE run_id = ?", (run_id,))
        return {r["sample_id"]: (r["score"], r["reason"]) for r in rows}

    # --- judge-answer cache ------------------------------------------------------------------------------
    def get_answer(self, fingerprint: str, prompt_sha: str, temperature: float, k: int) -> dict | None:
        rows = self._query(
            "SELECT content, model, prompt_tokens, completion_tokens, sent FROM judge_cache"
            " WHERE fingerprint = ? AND prompt_sha = ? AND temperature = ? AND k = ?",
            (fingerprint, prompt_sha, temperature, k))
        if not rows:
            return None
        r = rows[0]
        return {"content": r["content"], "model": r["model"], "prompt_tokens": r["prompt_tokens"],
                "completion_tokens": r["completion_tokens"], "sent": json.loads(r["sent"])}

    def put_answer(self, fingerprint: str, prompt_sha: str, temperature: float, k: int, *, content: str | None,
                   model: str | None, prompt_tokens: int | None, completion_tokens: int | None,
                   sent: dict) -> None:
        """Commit one judge answer at once (autocommit mode: durable as soon as this returns)."""
        self._exec(
            "INSERT OR IGNORE INTO judge_cache (fingerprint, prompt_sha, temperature, k, content, model,"
            " prompt_tokens, completion_tokens, sent, created_at) VALUES (?,?,?,?,?,?,?,?,?,?)",
            (fingerprint, prompt_sha, temperature, k, content, model, prompt_tokens, completion_tokens,
             json.dumps(sent), time.time()))

    def cache_size(self) -> int:
        return self._query("SELECT COUNT(*) AS n FROM judge_cache")[0]["n"]

    # --- Batch API submissions (mmvet_core/batch.py) --------------------------------------------------------
    def add_batch(self, run_id: str, round_: int, requests: dict) -> str:
        """Record a batch about to be submitted (before its file is uploaded): a restart then never submits the
        same calls twice. Returns our id of it."""
        bid, now = new_run_id(), time.time()
        self._exec("INSERT INTO batches (id, run_id, round, status, requests, created_at, updated_at)"
                   " VALUES (?,?,?,?,?,?,?)", (bid, run_id, round_, "submitting", json.dumps(requests), now, now))
        return bid

    def update_batch(self, bid: str, **fields) -> None:
        allowed = {"status", "input_file_id", "batch_id", "message"}
        assert set(fields) <= allowed, fields
        sets = ", ".join(f"{k} = ?" for k in fields)
        self._exec(f"UPDATE batches SET {sets}, updated_at = ? WHERE id = ?", (*fields.values(), time.time(), bid))

    def open_batches(self, run_id: str) -> list[dict]:
        """The run's batches still submitting or submitted (to resume after a restart), oldest first."""
        rows = self._query("SELECT * FROM batches WHERE run_id = ? AND status IN ('submitting', 'submitted')"
                           " ORDER BY created_at", (run_id,))
        return [{**dict(r), "requests": json.loads(r["requests"])} for r in rows]

    def batches(self, run_id: str) -> list[dict]:
        rows = self._query("SELECT * FROM batches WHERE run_id = ? ORDER BY created_at", (run_id,))
        return [{**dict(r), "requests": json.loads(r["requests"])} for r in rows]

    # --- judge checks (judgecheck.py) -------------------------------------------------------------------
    def put_judge_check(self, fingerprint: str, judge: dict, result: dict, *, prompt: str = "",
                        refs: str = "") -> str:
        """Store the result of a judge check under its judge (fingerprint: endpoint, model, token limit; the
        endpoint and model are kept in their own columns too), the prompt it graded with and its reference sets
        (`judgecheck.references_key`); returns its id."""
        assert "api_key" not in judge, "keys are never stored"
        check_id = new_run_id()
        self._exec("INSERT INTO judge_checks (id, created_at, fingerprint, judge, result, endpoint, judge_model, "
                   "prompt, refs) VALUES (?,?,?,?,?,?,?,?,?)",
                   (check_id, time.time(), fingerprint, json.dumps(judge), json.dumps(result),
                    (judge.get("base_url") or "").rstrip("/"), str(judge.get("model") or ""), prompt, refs))
        return check_id

    def latest_judge_check(self, fingerprint: str, *, refs: str | None = None) -> dict | None:
        """The latest stored check result of the judge with this fingerprint (of these reference sets when
        `refs` is given), or None."""
        sql = "SELECT result FROM judge_checks WHERE fingerprint = ?"
        args: tuple = (fingerprint,)
        if refs is not None:
            sql, args = sql + " AND refs = ?", (fingerprint, refs)
        rows = self._query(sql + " ORDER BY created_at DESC LIMIT 1", args)
        return json.loads(rows[0]["result"]) if rows else None

    def judge_checks_stamp(self) -> tuple[int, float]:
        """(how many checks are stored, when the latest was): changes whenever a check is stored."""
        row = self._query("SELECT COUNT(*) AS n, COALESCE(MAX(created_at), 0) AS t FROM judge_checks")[0]
        return int(row["n"]), float(row["t"])

    def judge_checks(self, limit: int = 500) -> list[dict]:
        """The latest check of every (judge, prompt, reference sets) stored, newest first: dicts with ``id``,
        ``created_at``, ``fingerprint``, ``endpoint``, ``judge_model``, ``prompt``, ``refs``, ``judge`` and
        ``result`` (parsed)."""
        rows = self._query(
            "SELECT c.* FROM judge_checks c JOIN (SELECT fingerprint, prompt, refs, MAX(created_at) AS latest "
            "FROM judge_checks GROUP BY fingerprint, prompt, refs) l ON c.fingerprint = l.fingerprint AND "
            "c.prompt = l.prompt AND c.refs = l.refs AND c.created_at = l.latest ORDER BY c.created_at DESC "
            "LIMIT ?", (int(limit),))
        out = []
        for r in rows:
            judge = json.loads(r["judge"])
            out.append({**dict(r), "judge": judge, "result": json.loads(r["result"]),
                        # checks stored before these columns existed: read them from the judge's settings
                        "endpoint": r["endpoint"] or (judge.get("base_url") or "").rstrip("/"),
                        "judge_model": r["judge_model"] or str(judge.get("model") or "")})
        return out

    # --- judge-call budgets (hosting) --------------------------------------------------------------------
    def add_usage(self, day: str, visitor: str, calls: int = 1, tokens: int = 0) -> None:
        self._exec("INSERT INTO usage (day, visitor, calls, tokens) VALUES (?,?,?,?) ON CONFLICT(day, visitor)"
                   " DO UPDATE SET calls = calls + excluded.calls, tokens = tokens + excluded.tokens",
                   (day, visitor, calls, tokens))

    def token_usage(self, day: str, visitor: str | None = None) -> int:
        if visitor is None:
            rows = self._query("SELECT COALESCE(SUM(tokens), 0) AS n FROM usage WHERE day = ?", (day,))
        else:
            rows = self._query("SELECT tokens AS n FROM usage WHERE day = ? AND visitor = ?", (day, visitor))
        return int(rows[0]["n"]) if rows else 0

    def usage(self, day: str, visitor: str | None = None) -> int:
        if visitor is None:
            rows = self._query("SELECT COALESCE(SUM(calls), 0) AS n FROM usage WHERE day = ?", (day,))
        else:
            rows = self._query("SELECT calls AS n FROM usage WHERE day = ? AND visitor = ?", (day, visitor))
        return int(rows[0]["n"]) if rows else 0

    # --- keeping storage bounded (keeping.py) ------------------------------------------------------------
    def change_stamp(self, run_id: str) -> tuple | None:
        """What changes whenever a run's status, name, overrides or grades change (None: no such run): one cheap
        query, so a status asked by many viewers is recomputed only when this differs."""
        rows = self._query(
            "SELECT r.status, r.updated_at, r.message, (SELECT COUNT(*) FROM grades WHERE run_id = r.id) AS n,"
            " (SELECT MAX(updated_at) FROM grades WHERE run_id = r.id) AS last FROM runs AS r WHERE r.id = ?",
            (run_id,))
        return tuple(rows[0]) if rows else None

    def run_summaries(self, owner: str, limit: int = 100) -> list[dict]:
        """An owner's runs, newest first, with only what a list shows (no predictions or samples decoded)."""
        rows = self._query(
            "SELECT r.id, r.model_name, r.n_runs, r.created_at, r.updated_at, r.status,"
            " json_extract(r.judge, '$.model') AS judge_model, json_extract(r.judge, '$.provider') AS provider,"
            " json_extract(r.benchmark, '$.name') AS bench_name, json_extract(r.benchmark, '$.subset') AS subset,"
            " k.total, k.total_stamp FROM runs AS r LEFT JOIN run_keeping AS k ON k.run_id = r.id"
            " WHERE r.owner = ? ORDER BY r.created_at DESC LIMIT ?", (owner, limit))
        return [dict(r) for r in rows]

    def keep_run(self, run_id: str, visitor: str, *, host: bool = False) -> None:
        """Record who stored a run (its visitor's quota) and whether the host's key graded it (never expires)."""
        self._exec("INSERT INTO run_keeping (run_id, visitor, host, opened_at) VALUES (?,?,?,?)"
                   " ON CONFLICT(run_id) DO UPDATE SET host = MAX(host, excluded.host)",
                   (run_id, visitor, int(host), time.time()))

    def touch_run(self, run_id: str, when: float | None = None) -> None:
        """Someone opened the run now (it does not expire before the expiry time has passed again)."""
        self._exec("INSERT INTO run_keeping (run_id, opened_at) VALUES (?, ?)"
                   " ON CONFLICT(run_id) DO UPDATE SET opened_at = excluded.opened_at",
                   (run_id, time.time() if when is None else when))

    def set_total(self, run_id: str, total: float | None, stamp: str) -> None:
        self._exec("INSERT INTO run_keeping (run_id, opened_at, total, total_stamp) VALUES (?,?,?,?)"
                   " ON CONFLICT(run_id) DO UPDATE SET total = excluded.total, total_stamp = excluded.total_stamp",
                   (run_id, time.time(), total, stamp))

    def visitor_storage(self, visitor: str) -> tuple[int, int]:
        """(runs, bytes) a visitor stores: predictions, samples, grades with their judge answers."""
        rows = self._query(
            "SELECT COUNT(*) AS n, COALESCE(SUM(LENGTH(CAST(r.predictions AS BLOB)) + LENGTH(CAST(r.benchmark AS BLOB))"
            " + COALESCE((SELECT SUM(LENGTH(CAST(g.attempts AS BLOB)) + COALESCE(LENGTH(CAST(g.content AS BLOB)), 0))"
            " FROM grades AS g WHERE g.run_id = r.id), 0)), 0) AS bytes"
            " FROM run_keeping AS k JOIN runs AS r ON r.id = k.run_id WHERE k.visitor = ?", (visitor,))
        return int(rows[0]["n"]), int(rows[0]["bytes"])

    def pin_run(self, run_id: str, reason: str) -> None:
        """Keep a run whoever opens it or not (`protected_run_ids`); `reason` names why (``published``)."""
        self._exec("INSERT OR IGNORE INTO run_pins (run_id, reason) VALUES (?, ?)", (run_id, reason))

    def unpin_run(self, run_id: str, reason: str) -> None:
        self._exec("DELETE FROM run_pins WHERE run_id = ? AND reason = ?", (run_id, reason))

    def protected_run_ids(self) -> set[str]:
        """Runs that never expire: pinned ones (`pin_run`) and those graded with the host's key."""
        rows = self._query("SELECT run_id FROM run_pins UNION SELECT run_id FROM run_keeping WHERE host = 1")
        return {r["run_id"] for r in rows}

    def unopened_runs(self, before: float, limit: int = 500) -> list[str]:
        """App runs (an owner, not the CLI's) nobody opened since `before` (never-opened ones count from their last
        change), pinned and host-key runs excepted, oldest first."""
        rows = self._query(
            "SELECT r.id FROM runs AS r LEFT JOIN run_keeping AS k ON k.run_id = r.id"
            " WHERE r.owner != '' AND r.status != 'running' AND COALESCE(k.host, 0) = 0"
            " AND COALESCE(k.opened_at, r.updated_at) < ? AND r.id NOT IN (SELECT run_id FROM run_pins)"
            " ORDER BY COALESCE(k.opened_at, r.updated_at) LIMIT ?", (before, limit))
        return [r["id"] for r in rows]

    def forget_run(self, run_id: str) -> None:
        """`delete_run` and the run's keeping rows."""
        self.delete_run(run_id)
        self._exec("DELETE FROM run_keeping WHERE run_id = ?", (run_id,))
        self._exec("DELETE FROM run_pins WHERE run_id = ?", (run_id,))
    # --- leaderboard (leaderboard.py) -----------------------------------------------------------------
    def add_board_version(self, entry_id: str, *, run_id: str, owner_hash: str, name: str, link: str,
                          meta: dict, scores: dict, published_at: float | None = None,
                          version: int | None = None, published: bool = True, hidden: bool = False) -> int:
        """Store a new frozen version of an entry (creating the entry when new) and make it current; returns its
        version number (1 for a new entry; `version` forces one, for an import)."""
        now = time.time() if published_at is None else published_at
        with self._lock:
            rows = self._query("SELECT version FROM board_entries WHERE id = ?", (entry_id,))
            if version is None:
                have = self._query("SELECT COALESCE(MAX(version), 0) AS v FROM board_versions WHERE entry_id = ?",
                                   (entry_id,))
                version = int(have[0]["v"]) + 1
            self._exec("INSERT OR REPLACE INTO board_versions (entry_id, version, published_at, meta, scores)"
                       " VALUES (?,?,?,?,?)", (entry_id, version, now, json.dumps(meta, ensure_ascii=False),
                                               json.dumps(scores)))
            if rows:
                self._exec("UPDATE board_entries SET version = MAX(version, ?), name = ?, link = ?, published = ?,"
                           " updated_at = ? WHERE id = ?", (version, name, link, int(published), now, entry_id))
            else:
                self._exec("INSERT INTO board_entries (id, run_id, owner_hash, name, link, version, published,"
                           " hidden, created_at, updated_at) VALUES (?,?,?,?,?,?,?,?,?,?)",
                           (entry_id, run_id, owner_hash, name, link, version, int(published), int(hidden), now,
                            now))
        return version

    def board_entry(self, entry_id: str) -> dict | None:
        rows = self._query("SELECT * FROM board_entries WHERE id = ?", (entry_id,))
        return dict(rows[0]) if rows else None

    def board_entry_for_run(self, run_id: str) -> dict | None:
        """The entry published from `run_id` (the latest one when several), or None."""
        rows = self._query("SELECT * FROM board_entries WHERE run_id = ? ORDER BY created_at DESC LIMIT 1",
                           (run_id,))
        return dict(rows[0]) if rows else None

    def board_entries(self, *, include_withdrawn: bool = False) -> list[dict]:
        """Every entry with its current version's frozen meta and scores (JSON text, decoded by the caller):
        published and not hidden ones only unless `include_withdrawn`."""
        where = "" if include_withdrawn else "WHERE e.published = 1 AND e.hidden = 0"
        rows = self._query("SELECT e.*, v.published_at, v.meta, v.scores FROM board_entries AS e"
                           " JOIN board_versions AS v ON v.entry_id = e.id AND v.version = e.version"
                           f" {where} ORDER BY e.created_at")
        return [dict(r) for r in rows]

    def board_heads(self, *, include_withdrawn: bool = False) -> list[dict]:
        """`board_entries` without the frozen copies (id, owner_hash, name, link, version, flags, updated_at): what
        changes without a new version, read on every refresh of the board."""
        where = "" if include_withdrawn else "WHERE published = 1 AND hidden = 0"
        return [dict(r) for r in self._query(f"SELECT * FROM board_entries {where} ORDER BY created_at")]

    def board_version(self, entry_id: str, version: int) -> dict | None:
        """One stored version (published_at, meta and scores as JSON text), or None."""
        rows = self._query("SELECT * FROM board_versions WHERE entry_id = ? AND version = ?", (entry_id, version))
        return dict(rows[0]) if rows else None

    def set_board_meta(self, entry_id: str, version: int, meta: dict) -> None:
        """Replace a version's meta (the host's verification is written into its provenance); the entry counts
        as changed (`board_stamp`)."""
        with self._lock:
            self._exec("UPDATE board_versions SET meta = ? WHERE entry_id = ? AND version = ?",
                       (json.dumps(meta, ensure_ascii=False), entry_id, version))
            self._exec("UPDATE board_entries SET updated_at = ? WHERE id = ?", (time.time(), entry_id))

    def board_versions(self, entry_id: str) -> list[dict]:
        rows = self._query("SELECT * FROM board_versions WHERE entry_id = ? ORDER BY version", (entry_id,))
        return [dict(r) for r in rows]

    def update_board_entry(self, entry_id: str, **fields) -> None:
        allowed = {"name", "link", "published", "hidden"}
        assert fields and set(fields) <= allowed, fields
        sets = ", ".join(f"{k} = ?" for k in fields)
        self._exec(f"UPDATE board_entries SET {sets}, updated_at = ? WHERE id = ?",
                   (*fields.values(), time.time(), entry_id))

    def set_board_current(self, entry_id: str, version: int, *, published: bool, hidden: bool, name: str,
                          link: str) -> None:
        """Make `version` the entry's current one with these flags (an import restores them as exported)."""
        self._exec("UPDATE board_entries SET version = ?, published = ?, hidden = ?, name = ?, link = ?,"
                   " updated_at = ? WHERE id = ?", (version, int(published), int(hidden), name, link, time.time(),
                                                    entry_id))

    def board_stamp(self) -> tuple:
        """Changes whenever anything on the board changes (a cache key for ranks and tables)."""
        r = self._query("SELECT COUNT(*) AS n, COALESCE(MAX(updated_at), 0) AS t,"
                        " COALESCE(SUM(version * 7 + published * 3 + hidden), 0) AS s FROM board_entries")[0]
        return (r["n"], r["t"], r["s"])

    def log_publish(self, visitor: str, at: float | None = None) -> None:
        self._exec("INSERT INTO board_publishes (visitor, at) VALUES (?, ?)",
                   (visitor, time.time() if at is None else at))

    def count_publishes(self, visitor: str, since: float) -> int:
        self._exec("DELETE FROM board_publishes WHERE at < ?", (since - 86400,))     # keep the table small
        return int(self._query("SELECT COUNT(*) AS n FROM board_publishes WHERE visitor = ? AND at >= ?",
                               (visitor, since))[0]["n"])

    def iter_tables(self) -> Iterator[tuple[str, list[dict[str, Any]]]]:
        """Every table's rows (used by tests that check no secret was written)."""
        for (name,) in self._query("SELECT name FROM sqlite_master WHERE type = 'table'"):
            yield name, [dict(r) for r in self._query(f"SELECT * FROM {name}")]


def _run_record(r: sqlite3.Row) -> RunRecord:
    return RunRecord(id=r["id"], created_at=r["created_at"], updated_at=r["updated_at"],
                     model_name=r["model_name"], benchmark=json.loads(r["benchmark"]), n_runs=r["n_runs"],
                     judge=json.loads(r["judge"]), status=r["status"], message=r["message"],
                     results_format=r["results_format"], predictions=json.loads(r["predictions"]),
                     owner=r["owner"], fingerprint=r["fingerprint"])


def _grade_row(r: sqlite3.Row) -> GradeRow:
    return GradeRow(run_id=r["run_id"], sample_id=r["sample_id"], run_index=r["run_index"], status=r["status"],
                    score=r["score"], content=r["content"], judge_model=r["judge_model"],
                    attempts=_json_list(r["attempts"]), error=r["error"], flags=_json_list(r["flags"]),
                    updated_at=r["updated_at"])


def _json_list(text: str) -> list:
    return [] if text == "[]" else json.loads(text)
