"""SQLite, the default: one file (``mmvet-grader.db`` in the data folder), nothing to install or run.

One connection, shared by the threads of the process behind a lock, in autocommit mode: every statement is
durable when it returns (an answer paid for survives a kill -9 right after). WAL mode lets other processes (the
CLI beside the app) read and write the same file. Opening checks the file (``PRAGMA quick_check``: a damaged file
is refused with what to do) and a marker file beside it (``<name>.id``) that notices a database that vanished or
was replaced since the last start.
"""
from __future__ import annotations

import sqlite3
import threading
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Iterator

import sqlalchemy as sa
from sqlalchemy import event
from sqlalchemy.dialects import sqlite
from sqlalchemy.engine import Connection, Engine, RootTransaction, make_url
from sqlalchemy.pool import StaticPool

from ._records import StoreError


class SQLiteBackend:
    name = "sqlite"

    def __init__(self, path: Path):
        self.path = Path(path)
        self.lock = threading.RLock()
        self._existed = False
        self._conn: Connection | None = None

    @classmethod
    def from_url(cls, url: str) -> "SQLiteBackend":
        return cls(Path(make_url(url).database or ""))

    def create_engine(self) -> Engine:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self._existed = self.path.exists() and self.path.stat().st_size > 0
        engine = sa.create_engine(f"sqlite:///{self.path}", poolclass=StaticPool,
                                  connect_args={"check_same_thread": False, "timeout": 30})

        @event.listens_for(engine, "connect")
        def _configure(dbapi_connection, _record):
            # the driver's own BEGIN off: a statement outside `begin(..., lock)` commits when it returns
            dbapi_connection.isolation_level = None
            dbapi_connection.execute("PRAGMA synchronous=NORMAL")   # WAL: a commit survives a killed process
            dbapi_connection.execute("PRAGMA busy_timeout=30000")

        @event.listens_for(engine, "begin")
        def _begin(conn: Connection):
            if conn.get_execution_options().get("sqlite_write_lock"):
                conn.exec_driver_sql("BEGIN IMMEDIATE")

        return engine

    @contextmanager
    def connect(self, engine: Engine) -> Iterator[Connection]:
        # the one connection, kept open (opening a SQLAlchemy connection per call would cost more than the call)
        with self.lock:
            if self._conn is None or self._conn.closed or self._conn.engine is not engine:
                self._conn = engine.connect()
            yield self._conn

    def close(self) -> None:
        with self.lock:
            if self._conn is not None:
                self._conn.close()
                self._conn = None

    def run(self, engine: Engine, sql: str, args: Any, *, fetch: bool, lock: str | None = None) -> Any:
        with self.connect(engine) as conn:      # autocommit: durable when the statement returns
            raw = conn.connection.dbapi_connection
            if lock is None:
                cursor = raw.execute(sql, args)
                return cursor.fetchall() if fetch else cursor.rowcount
            # the file's write lock from the start: what the statement reads cannot change before it writes
            raw.execute("BEGIN IMMEDIATE")
            try:
                cursor = raw.execute(sql, args)
                out = cursor.fetchall() if fetch else cursor.rowcount
            except BaseException:
                raw.execute("ROLLBACK")
                raise
            raw.execute("COMMIT")
            return out

    def prepare(self, engine: Engine, *, check: bool) -> bool:
        with self.connect(engine) as conn, conn.begin():
            if check and self._existed:
                problems = [r[0] for r in conn.exec_driver_sql("PRAGMA quick_check(5)").all()]
                if problems != ["ok"]:
                    raise StoreError(self._damaged("; ".join(problems)))
            conn.exec_driver_sql("PRAGMA journal_mode=WAL")        # kept by the file once set
        return self._existed

    def open_failed(self, error: BaseException) -> str:
        orig = getattr(error, "orig", error)
        if isinstance(orig, sqlite3.DatabaseError) and not _cannot_open(orig):
            return self._damaged(self.describe(error))
        return f"the database {self.path.name} cannot be opened: {self.describe(error)}"

    def _damaged(self, what: str) -> str:
        return (f"the database {self.path.name} is damaged ({what}). Stop every process using it, move it aside "
                f"(keep it: `sqlite3 {self.path.name} .recover` may save its grades) and start again with a new one.")

    def identity_warnings(self, db_id: str, existed: bool) -> list[str]:
        """Notice a database that vanished (or was swapped) since the last start, through the marker file beside
        it that holds the database's random id."""
        warnings = []
        marker = self.path.with_name(self.path.name + ".id")
        try:
            known = marker.read_text().strip() if marker.exists() else None
        except OSError:
            known = None
        if known and known != db_id:
            if not existed:
                warnings.append(
                    f"the database {self.path.name} existed at the last start and is missing now: every earlier "
                    "run, grade, cached answer and today's budget counts are gone (a new, empty database was "
                    "created). Restore it from a backup if you have one.")
            else:
                warnings.append(
                    f"the database {self.path.name} is not the one of the last start (it was replaced): runs and "
                    "budget counts are those of the file now in place.")
        if known != db_id:
            try:
                marker.write_text(db_id)
            except OSError as e:
                warnings.append(f"the marker file {marker.name} cannot be written ({e})")
        return warnings

    def begin(self, conn: Connection, *, lock: str | tuple[str, ...] | None = None,
              single: bool = False) -> RootTransaction:
        # SQLite has one write lock for the whole file: any `lock` name takes it. Without one, each statement
        # commits on its own (autocommit), as it always did.
        conn.execution_options(sqlite_write_lock=lock is not None)
        return conn.begin()

    def describe(self, error: BaseException) -> str:
        orig = getattr(error, "orig", None) or error
        text = str(orig) or type(orig).__name__
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

    # --- the SQL spellings that differ ---------------------------------------------------------------------
    def insert(self, table: sa.Table):
        return sqlite.insert(table)

    def json_text(self, doc: Any, key: str) -> sa.ColumnElement:
        return sa.func.json_extract(doc, f"$.{key}", type_=sa.Text)

    def json_number(self, doc: Any, key: str) -> sa.ColumnElement:
        return sa.func.json_extract(doc, f"$.{key}")

    def json_true(self, doc: Any, key: str) -> sa.ColumnElement:
        # SQLite's truth of a value: json_extract gives 1 / 0 for true / false, NULL when missing
        return sa.func.coalesce(sa.func.json_extract(doc, f"$.{key}"), 0) != 0

    def json_items(self, doc: Any) -> sa.TableValuedAlias:
        return sa.func.json_each(doc).table_valued("value", joins_implicitly=True)

    def byte_length(self, text: Any) -> sa.ColumnElement:
        return sa.func.length(sa.cast(text, sa.LargeBinary))

    def clock(self) -> sa.ColumnElement:
        # julianday('now') has millisecond precision; 2440587.5 is the Unix epoch's Julian day
        return sa.type_coerce((sa.func.julianday("now") - 2440587.5) * 86400.0, sa.Float)


def _cannot_open(error: sqlite3.Error) -> bool:
    return "unable to open" in str(error).lower()
