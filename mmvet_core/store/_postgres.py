"""PostgreSQL, for a host that outgrows one process or one machine (``MMVET_DATABASE_URL=postgresql://...``).

A pool of connections (SQLAlchemy's, over psycopg 3), each checked before use (``pool_pre_ping``), so connections
left dead by a database restart are replaced instead of failing a request. Every store call is its own
transaction, committed when it returns (an answer paid for is on the server before the call comes back).
Read-then-write sequences take a transaction-scoped advisory lock named after what they protect, so processes on
several machines do not interleave them. The driver (``psycopg``) is imported only when this backend is chosen.
"""
from __future__ import annotations

import contextlib
import hashlib
from typing import Any

import sqlalchemy as sa
from sqlalchemy.dialects import postgresql
from sqlalchemy.dialects.postgresql import JSONB
from sqlalchemy.engine import Connection, Engine, RootTransaction, make_url

from ._records import StoreError

#: Connections a process keeps open, and how many more it may open under load (each store call holds one for
#: the length of one statement or transaction).
POOL_SIZE, POOL_OVERFLOW = 5, 10
#: Seconds to wait for the server to answer a new connection, and for a free connection of the pool.
CONNECT_TIMEOUT, POOL_TIMEOUT = 10, 30


class PostgresBackend:
    name = "postgresql"

    def __init__(self, url: str):
        try:
            parsed = make_url(url)
        except sa.exc.ArgumentError as e:
            raise StoreError(f"the database URL cannot be read ({e})") from None
        self._url = parsed.set(drivername="postgresql+psycopg")
        if not self._url.database:
            raise StoreError("the database URL names no database (postgresql://user:password@host:port/database)")
        #: for messages and logs: never the password
        self.path = self._url.set(drivername="postgresql").render_as_string(hide_password=True)
        self.lock = contextlib.nullcontext()

    @property
    def conninfo(self) -> str:
        """The URL as libpq takes it, password included: for the task queue's own connections, never shown."""
        return self._url.set(drivername="postgresql").render_as_string(hide_password=False)

    def create_engine(self) -> Engine:
        try:
            import psycopg  # noqa: F401  (checked here for a clear message; SQLAlchemy imports it itself)
        except ImportError:
            raise StoreError("MMVET_DATABASE_URL selects PostgreSQL but its driver is not installed: "
                             "pip install -r requirements.txt (psycopg[binary])") from None
        return sa.create_engine(self._url, pool_size=POOL_SIZE, max_overflow=POOL_OVERFLOW,
                                pool_timeout=POOL_TIMEOUT, pool_pre_ping=True, pool_recycle=1800,
                                connect_args={"connect_timeout": CONNECT_TIMEOUT,
                                              "application_name": "mmvet-grader"})

    def connect(self, engine: Engine) -> Connection:
        return engine.connect()           # a connection of the pool, checked (pre-ping) and returned after use

    def close(self) -> None:
        pass

    def run(self, engine: Engine, sql: str, args: Any, *, fetch: bool, lock: str | None = None) -> Any:
        raw = engine.raw_connection()          # from the pool, checked before use
        try:
            with raw.cursor() as cursor:
                if lock is not None:           # (the statement's snapshot is taken after the lock is held)
                    cursor.execute("SELECT pg_advisory_xact_lock(%(key)s)", {"key": _lock_key(lock)})
                cursor.execute(sql, args)
                out = cursor.fetchall() if fetch else cursor.rowcount
            raw.commit()
            return out
        finally:
            raw.close()                        # back to the pool (rolled back there if the commit did not happen)

    def prepare(self, engine: Engine, *, check: bool) -> bool:
        with engine.connect() as conn:
            return sa.inspect(conn).has_table("meta")

    def open_failed(self, error: BaseException) -> str:
        orig = getattr(error, "orig", None) or error
        detail = (str(orig).strip().splitlines() or [type(orig).__name__])[0]
        return f"the database {self.path} cannot be used: {detail}"

    def identity_warnings(self, db_id: str, existed: bool) -> list[str]:
        return []       # the server keeps its databases: no file beside the app to vanish or be swapped

    def begin(self, conn: Connection, *, lock: str | tuple[str, ...] | None = None,
              single: bool = False) -> RootTransaction:
        if single and lock is None:
            # one statement is atomic by itself: no BEGIN / COMMIT round trips around it
            conn.execution_options(isolation_level="AUTOCOMMIT")
        tx = conn.begin()
        for name in (lock,) if isinstance(lock, str) else lock or ():
            conn.execute(sa.select(sa.func.pg_advisory_xact_lock(_lock_key(name))))
        return tx

    def describe(self, error: BaseException) -> str:
        if isinstance(error, sa.exc.TimeoutError):
            return "the database server is too busy (no free connection in time)"
        orig = getattr(error, "orig", None) or error
        state = getattr(orig, "sqlstate", None) or ""
        first = (str(orig).strip().splitlines() or [type(orig).__name__])[0]
        if state == "53100":
            return f"the disk holding the database is full ({first})"
        if state == "25006":
            return "the database cannot be written (it is read-only)"
        if _connection_fault(orig, state, first):
            # the server's address stays out of the message (it may reach a visitor); the host's log has it
            return "the database server cannot be reached (it may be restarting: try again shortly)"
        return first

    # --- the SQL spellings that differ ---------------------------------------------------------------------
    def insert(self, table: sa.Table):
        return postgresql.insert(table)

    def json_text(self, doc: Any, key: str) -> sa.ColumnElement:
        return _jsonb(doc)[key].astext

    def json_number(self, doc: Any, key: str) -> sa.ColumnElement:
        return sa.cast(_jsonb(doc)[key].astext, sa.Numeric)

    def json_true(self, doc: Any, key: str) -> sa.ColumnElement:
        return sa.func.coalesce(_jsonb(doc)[key].astext.not_in(["false", "0"]), sa.false())

    def json_items(self, doc: Any) -> sa.TableValuedAlias:
        return sa.func.jsonb_array_elements(_jsonb(doc)).table_valued(sa.column("value", JSONB),
                                                                      joins_implicitly=True)

    def byte_length(self, text: Any) -> sa.ColumnElement:
        return sa.func.octet_length(text)

    def clock(self) -> sa.ColumnElement:
        # clock_timestamp(), not now(): the time of the statement, not of the transaction's start
        return sa.cast(sa.func.extract("epoch", sa.func.clock_timestamp()), postgresql.DOUBLE_PRECISION)


def _connection_fault(orig: BaseException, state: str, first: str) -> bool:
    """A connection lost or refused (the server down or restarting, the network, a database closed to new
    connections), as opposed to a statement the server refused."""
    if state.startswith("08") or state in ("57P01", "57P02", "57P03"):
        return True
    return type(orig).__name__ in ("OperationalError", "InterfaceError") and (
        not state or "connection" in first.lower())


def _jsonb(doc: Any) -> sa.ColumnElement:
    """JSON kept as text (both databases hold the bytes `json.dumps` wrote) read as ``jsonb``."""
    return doc if isinstance(getattr(doc, "type", None), JSONB) else sa.cast(doc, JSONB)


def _lock_key(name: str) -> int:
    """A stable 64-bit advisory-lock key for a lock name (the same in every process)."""
    return int.from_bytes(hashlib.sha256(f"mmvet-grader:{name}".encode()).digest()[:8], "big", signed=True)
