"""The connection side of the store: open a database through its backend (checks, migrations, identity), run
statements in transactions, turn every database fault into a `StoreError` that names it."""
from __future__ import annotations

import secrets
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Callable, Iterator

import sqlalchemy as sa
from sqlalchemy.engine import Connection, Row

from . import _migrate
from . import _schema as t
from ._backend import Backend, create_backend
from ._records import StoreError


class Database:
    """A database the store lives in, opened at `location`: a SQLite file path, or a database URL
    (``postgresql://user:password@host:port/database``); see `create_backend`."""

    def __init__(self, location: str | Path, *, check: bool = True, migrate: bool = True):
        """Open (or create) the database and bring its schema to this release's (Alembic migrations; a SQLite
        file of an earlier release is upgraded in place). `check` runs the backend's thorough checks (SQLite:
        ``PRAGMA quick_check``, where a damaged file raises `StoreError` with what it found) and compares the
        database with the one of the last start (`warnings`). Without `migrate` (a grading worker) a database at
        another schema revision than this release's is refused (`StoreError` saying which and what to do)."""
        self._backend: Backend = create_backend(location)
        #: the SQLite file (a Path), or the PostgreSQL URL without its password
        self.path = self._backend.path
        #: ``"sqlite"`` or ``"postgresql"``
        self.backend = self._backend.name
        self.warnings: list[str] = []
        self._lock = self._backend.lock
        self._statements: dict[str, Any] = {}
        self._engine = self._backend.create_engine()
        try:
            existed = self._backend.prepare(self._engine, check=check)
            with self._backend.connect(self._engine) as conn, self._backend.begin(conn, lock="schema"):
                if migrate:
                    _migrate.upgrade(conn, self._name())
                else:
                    _migrate.require_head(conn, self._name())
                db_id = self._identity(conn)
        except StoreError:
            self.close()
            raise
        except Exception as e:      # the driver's, SQLAlchemy's and Alembic's faults alike: named by the backend
            self.close()
            raise StoreError(self._backend.open_failed(e)) from e
        if check:
            self.warnings.extend(self._backend.identity_warnings(db_id, existed))

    @property
    def conninfo(self) -> str | None:
        """The PostgreSQL URL with its password, for the task queue's own connections (None on SQLite)."""
        return getattr(self._backend, "conninfo", None)

    def _name(self) -> str:
        return self.path.name if isinstance(self.path, Path) else str(self.path)

    @staticmethod
    def _identity(conn: Connection) -> str:
        """The database's random id (``meta.id``), created with the database."""
        db_id = conn.execute(sa.select(t.meta.c.value).where(t.meta.c.key == "id")).scalar()
        if db_id is None:
            db_id = secrets.token_hex(8)
            conn.execute(sa.insert(t.meta).values(key="id", value=db_id))
        return db_id

    def lasting_secret(self, name: str) -> str:
        """A random secret (256 bits, URL-safe) kept in the database under `name`: the same for every process
        and machine on this database, and across restarts (the first to ask creates it; a race keeps the first).
        For what must outlive a host's disk when the database is a server (a Space without persistent storage,
        replicas on several machines): e.g. the salt of visitor ids, the key of browser-side owner tokens."""
        key = f"secret:{name}"
        with self._tx() as conn:
            conn.execute(self._backend.insert(t.meta).values(key=key, value=secrets.token_urlsafe(32))
                         .on_conflict_do_nothing())
            return conn.execute(sa.select(t.meta.c.value).where(t.meta.c.key == key)).scalar_one()

    def close(self) -> None:
        with self._lock:
            self._backend.close()
            self._engine.dispose()

    @contextmanager
    def _tx(self, *, lock: str | tuple[str, ...] | None = None, write: bool = True,
            single: bool = False) -> Iterator[Connection]:
        """A connection in a transaction that commits when the block ends (rolls back on an exception). `lock`
        names what a read-then-write sequence protects (see `Backend.begin`); `single`: the block runs one
        statement (no transaction needed: it commits on its own). A database fault raises `StoreError`."""
        try:
            with self._backend.connect(self._engine) as conn, self._backend.begin(conn, lock=lock, single=single):
                yield conn
        except sa.exc.SQLAlchemyError as e:
            raise StoreError(f"the server could not {'write to' if write else 'read'} its database: "
                             f"{self._backend.describe(e)}") from e

    def _exec(self, statement: Any, params: Any = None) -> int:
        """Run one statement that writes: a SQLAlchemy statement (with `params`, a dict, for its bind
        parameters), or raw SQL with the driver's parameters (a tuple); returns how many rows it changed."""
        with self._tx(single=True) as conn:
            return _execute(conn, statement, params).rowcount

    def _query(self, statement: Any, params: Any = None) -> list[Row]:
        """The rows of one statement that reads (columns by index or by name: ``row.name``)."""
        with self._tx(write=False, single=True) as conn:
            return _execute(conn, statement, params).all()

    def _rows(self, statement: Any, params: dict | None = None) -> list[dict[str, Any]]:
        """The rows of one statement that reads, as dicts."""
        return [dict(r._mapping) for r in self._query(statement, params)]

    def _prepared(self, name: str, build: Callable[[Backend], Any]) -> Any:
        """The statement `build(backend)` makes, built once per store (building one costs more than running
        it), for the usual execution (`_query`, `_rows`, `_exec`)."""
        statement = self._statements.get(name)
        if statement is None:
            statement = self._statements[name] = build(self._backend)
        return statement

    def _fast(self, name: str, build: Callable[[Backend], Any], params: dict[str, Any], *,
              fetch: bool = False, lock: str | None = None) -> Any:
        """Run the statement `build(backend)` makes (named bind parameters: `params`) straight on the driver's
        connection, compiled once per store by SQLAlchemy for this database: the rows (tuples) with `fetch`, else
        how many rows changed. For the calls made for every judge answer and every poll, where SQLAlchemy's
        execution would cost several times what the database does; committed when this returns. `lock`: the
        statement reads what it writes, under the database's write lock of that name (see `Backend.begin`)."""
        ready = self._statements.get(name)
        if ready is None:
            ready = self._statements[name] = _Compiled(build(self._backend), self._engine.dialect, list(params))
        try:
            return self._backend.run(self._engine, ready.sql, ready.args(params), fetch=fetch, lock=lock)
        except (sa.exc.SQLAlchemyError, self._engine.dialect.loaded_dbapi.Error) as e:
            raise StoreError(f"the server could not {'read' if fetch else 'write to'} its database: "
                             f"{self._backend.describe(e)}") from e

    def table_names(self) -> list[str]:
        """The tables the database holds (those of the schema, and Alembic's version table)."""
        with self._tx(write=False) as conn:
            return sorted(sa.inspect(conn).get_table_names())

    def iter_tables(self) -> Iterator[tuple[str, list[dict[str, Any]]]]:
        """Every table's rows (used by tests that check no secret was written)."""
        for name in self.table_names():
            yield name, self._rows(sa.text(f'SELECT * FROM "{name}"'))


def _execute(conn: Connection, statement: Any, params: Any):
    if isinstance(statement, str):
        return conn.exec_driver_sql(statement, params or ())
    return conn.execute(statement, params)


class _Compiled:
    """A statement compiled for one dialect: its SQL, and how to turn named values into the driver's
    parameters (SQLite's are positional, psycopg's named), through the bind processors of the columns' types
    (PostgreSQL's text: a NUL becomes U+FFFD)."""

    def __init__(self, statement: Any, dialect: sa.Dialect, keys: list[str]):
        compiled = statement.compile(dialect=dialect, column_keys=keys)
        self.sql = compiled.string
        self.order = tuple(compiled.positiontup) if compiled.positional else None
        self.defaults = {name: b.effective_value for name, b in compiled.binds.items() if name not in keys}
        self.processors = {name: p for name, b in compiled.binds.items()
                           if (p := b.type.dialect_impl(dialect).bind_processor(dialect)) is not None}

    def args(self, params: dict[str, Any]) -> Any:
        values = {**self.defaults, **params}
        for name, process in self.processors.items():
            values[name] = process(values[name])
        return tuple(values[name] for name in self.order) if self.order is not None else values
