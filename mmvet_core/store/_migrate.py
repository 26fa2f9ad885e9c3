"""Versioned migrations (Alembic) run by the store itself when it opens a database, on either backend.

The migration scripts live in ``migrations/versions`` (one file per revision, frozen once released). `upgrade`
runs on a connection the store opened inside a transaction that holds the backend's schema lock (SQLite: ``BEGIN
IMMEDIATE``; PostgreSQL: an advisory lock), so processes starting together on one database migrate it once. A new
revision: copy ``script.py.mako`` to ``versions/NNNN_what.py``, set ``down_revision`` to the previous head, write
``upgrade()`` with ``op.*`` (``op.batch_alter_table`` to alter a SQLite table) and change ``_schema.py`` to match;
tests/test_store.py compares every migrated database with ``_schema.metadata``.
"""
from __future__ import annotations

from functools import lru_cache
from pathlib import Path

from alembic import command
from alembic.config import Config
from alembic.runtime.migration import MigrationContext
from alembic.script import ScriptDirectory
from sqlalchemy.engine import Connection

from ._records import StoreError

MIGRATIONS = Path(__file__).resolve().parent / "migrations"


def _config(connection: Connection | None = None) -> Config:
    cfg = Config()
    cfg.set_main_option("script_location", str(MIGRATIONS).replace("%", "%%"))
    cfg.attributes["connection"] = connection
    return cfg


@lru_cache(maxsize=1)
def _scripts() -> ScriptDirectory:
    return ScriptDirectory.from_config(_config())


def head_revision() -> str:
    """The revision this release's schema is at."""
    return _scripts().get_current_head()


def current_revision(connection: Connection) -> str | None:
    """The revision of the database on `connection` (None: never migrated: new, or made before migrations)."""
    return MigrationContext.configure(connection).get_current_revision()


def upgrade(connection: Connection, name: str) -> bool:
    """Bring the database on `connection` to `head_revision` (a no-op when it is there already); True when a
    migration ran. Raises `StoreError` for a database migrated by a newer release (`name` says which database):
    this release cannot know its schema."""
    current = current_revision(connection)
    head = head_revision()
    if current == head:
        return False
    if current is not None and not _known(current):
        raise StoreError(f"the database {name} was made by a newer release of MM-Vet Grader (schema revision "
                         f"{current}; this one knows up to {head}): run that release, or a newer one")
    command.upgrade(_config(connection), "head")
    return True


def require_head(connection: Connection, name: str) -> None:
    """Refuse (`StoreError`) a database whose schema is not this release's, without changing it: what a grading
    worker does, so that a worker of another release never writes rows the app's release does not expect."""
    current, head = current_revision(connection), head_revision()
    if current == head:
        return
    if current is None:
        why = "has no schema of MM-Vet Grader yet"
        fix = "start the app (python app.py) of this release on it once: it creates the schema"
    elif _known(current):
        why = f"is at an older schema (revision {current}; this release's is {head})"
        fix = "upgrade the app replicas to this release first (the first to start migrates the database), then " \
              "start the workers"
    else:
        why = f"was made by a newer release (schema revision {current}; this release knows up to {head})"
        fix = "run workers of the same release as the app replicas"
    raise StoreError(f"the database {name} {why}: a grading worker never migrates it; {fix}")


def _known(revision: str) -> bool:
    try:
        return _scripts().get_revision(revision) is not None
    except Exception:       # alembic raises its own ResolutionError / CommandError for an unknown id
        return False
