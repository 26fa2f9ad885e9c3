"""The one protocol both databases answer, and the table that picks one from where the database is.

Every query of the store is written once (SQLAlchemy Core, `_schema`); a backend holds only what truly differs:
how to connect (one shared SQLite connection, or a pool of PostgreSQL connections), what to check when opening,
how to take a write lock, how to name a fault, and the few SQL spellings SQLAlchemy leaves to the dialect (an
insert with ON CONFLICT, reading a field of JSON kept as text, the elements of a JSON array, a length in bytes).
"""
from __future__ import annotations

from contextlib import AbstractContextManager
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

import sqlalchemy as sa
from sqlalchemy.engine import Connection, Engine, RootTransaction

if TYPE_CHECKING:
    from sqlalchemy.sql.dml import Insert

#: The setting that selects PostgreSQL (its URL); unset, the store is the SQLite file in the data folder.
DATABASE_URL_VAR = "MMVET_DATABASE_URL"


class Backend(Protocol):
    """A database the store can live in."""

    #: ``"sqlite"`` or ``"postgresql"`` (SQLAlchemy's dialect name)
    name: str
    #: `Store.path`: the SQLite file, or the PostgreSQL URL without its password (for messages and logs)
    path: Path | str
    #: held around every use of a connection: one shared SQLite connection needs it, a pool does not
    lock: AbstractContextManager

    def create_engine(self) -> Engine:
        """The engine (and its pool) the store uses until `Store.close`."""

    def connect(self, engine: Engine) -> AbstractContextManager[Connection]:
        """A connection for one store call (held under `lock`), released when the block ends."""

    def close(self) -> None:
        """Release what `connect` keeps open (before the engine is disposed)."""

    def run(self, engine: Engine, sql: str, args: Any, *, fetch: bool, lock: str | None = None) -> Any:
        """Run one compiled statement on a driver connection and commit: its rows (tuples) with `fetch`, else
        how many rows changed; with `lock`, in a transaction that holds the database's write lock of that name
        first (as `begin` does), for a statement that reads what it then writes. Raises the driver's or
        SQLAlchemy's exception."""

    def prepare(self, engine: Engine, *, check: bool) -> bool:
        """Check the database before its schema is touched (`check`: the thorough checks); returns whether it
        held a database before. Raises `StoreError` saying what is wrong."""

    def open_failed(self, error: BaseException) -> str:
        """The message of a `StoreError` for a database that cannot be opened or migrated."""

    def identity_warnings(self, db_id: str, existed: bool) -> list[str]:
        """Warnings when the database is not the one of the last start (SQLite: a marker file beside it)."""

    def begin(self, conn: Connection, *, lock: str | tuple[str, ...] | None = None,
              single: bool = False) -> RootTransaction:
        """Begin a transaction on `conn`; with `lock` (a name, or several taken in their order) it holds the
        database's write lock for each name until it ends, so that read-then-write sequences of several processes
        do not interleave. `single`: only one statement will run (it may commit on its own, without a transaction
        around it)."""

    def describe(self, error: BaseException) -> str:
        """A fault of the database in words (disk full, read-only, unreachable...), without a server path."""

    # --- the SQL spellings that differ ---------------------------------------------------------------------
    def insert(self, table: sa.Table) -> "Insert":
        """An INSERT that offers ``on_conflict_do_nothing`` / ``on_conflict_do_update`` (both dialects spell
        them alike in SQLAlchemy, from their own module)."""

    def json_text(self, doc: Any, key: str) -> sa.ColumnElement:
        """The string at ``doc[key]`` (NULL when missing) of a JSON object held as text or JSON."""

    def json_number(self, doc: Any, key: str) -> sa.ColumnElement:
        """The number at ``doc[key]`` (NULL when missing)."""

    def json_true(self, doc: Any, key: str) -> sa.ColumnElement:
        """Whether ``doc[key]`` is truthy (missing, false, 0 and null are not)."""

    def json_items(self, doc: Any) -> sa.TableValuedAlias:
        """The elements of a JSON array held as text, as a FROM item with one column ``value`` (JSON)."""

    def byte_length(self, text: Any) -> sa.ColumnElement:
        """The length of a text in UTF-8 bytes."""

    def clock(self) -> sa.ColumnElement:
        """The database's clock, in seconds since the epoch (a float): one clock for every process and machine
        that compares leases (`mmvet_core/runs/workers.py`) or paces a judge account (`mmvet_core/judging/sharedlimit.py`)."""


def is_url(location: str | Path) -> bool:
    return isinstance(location, str) and "://" in location


def create_backend(location: str | Path) -> Backend:
    """The backend for `location`: a file path (SQLite), or a URL whose scheme names the database
    (``postgresql://``, ``postgres://``, ``postgresql+psycopg://``, ``sqlite:///path``). Raises `StoreError`
    for any other scheme."""
    from ._postgres import PostgresBackend
    from ._records import StoreError
    from ._sqlite import SQLiteBackend

    if not is_url(location):
        return SQLiteBackend(Path(location))
    scheme = str(location).split("://", 1)[0].split("+", 1)[0].lower()
    backends = {"sqlite": SQLiteBackend.from_url, "postgresql": PostgresBackend, "postgres": PostgresBackend}
    if scheme not in backends:
        raise StoreError(f"{DATABASE_URL_VAR}: unknown database {scheme!r} (use postgresql://user:password@host"
                         "/database, or leave it unset for the SQLite file in the data folder)")
    return backends[scheme](str(location))


def store_exists(location: str | Path) -> bool:
    """Whether a store is there to read without creating one: a database server always is; a SQLite file only
    when the file exists."""
    return is_url(location) or Path(location).exists()
