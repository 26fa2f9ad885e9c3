"""Versioned migrations (Alembic) run by the store itself when it opens a database, on either backend.

The migration scripts live in ``migrations/versions`` (one file per revision, frozen once released). `upgrade`
runs on a connection the store opened inside a transaction that holds the backend's schema lock (SQLite: ``BEGIN
IMMEDIATE``; PostgreSQL: an advisory lock), so processes starting together on one database migrate it once. A new
revision: copy ``script.py.mako`` to ``versions/NNNN_what.py``, set ``down_revision`` to the previous head, write
``upgrade()`` with ``op.*`` (``op.batch_alter_table`` to alter a SQLite table) and change ``_schema.py`` to match;
tests/test_store.py compares every migrated database with ``_schema.metadata``.

Alembic itself is imported only when a database is not at this release's revision: a process that opens a
database already at head (every command, worker and replica after the first start) reads the revision with one
query and the head from the version files' ``revision`` lines (Alembic's import alone was 80 ms of every command's
start; `tests/test_store.py` holds that the two heads agree).
"""
from __future__ import annotations

import re
import threading
from functools import lru_cache
from pathlib import Path

import sqlalchemy as sa
from sqlalchemy.engine import Connection

from ._records import StoreError

MIGRATIONS = Path(__file__).resolve().parent / "migrations"
VERSION_TABLE = "alembic_version"         # Alembic's default, where it keeps a database's revision
#: Alembic keeps the migration it runs in module globals (`alembic.context`, `alembic.op`): one at a time per process
#: (threads opening new databases side by side failed with "'script'" or "table runs already exists").
_ONE_MIGRATION = threading.Lock()
_REVISION_LINE = re.compile(r'^(down_revision|revision)\s*=\s*(?:"([^"]*)"|\'([^\']*)\'|None)\s*$', re.M)


def _config(connection: Connection | None = None):
    from alembic.config import Config

    cfg = Config()
    cfg.set_main_option("script_location", str(MIGRATIONS).replace("%", "%%"))
    cfg.attributes["connection"] = connection
    return cfg


@lru_cache(maxsize=1)
def _scripts():
    from alembic.script import ScriptDirectory

    return ScriptDirectory.from_config(_config())


@lru_cache(maxsize=1)
def head_revision() -> str:
    """The revision this release's schema is at: the one revision of ``migrations/versions`` that no other revises
    (read from the files' ``revision`` / ``down_revision`` lines, without Alembic)."""
    revisions, revised = set(), set()
    for path in (MIGRATIONS / "versions").glob("*.py"):
        for name, double, single in _REVISION_LINE.findall(path.read_text("utf-8")):
            value = double or single
            if value:
                (revisions if name == "revision" else revised).add(value)
    heads = revisions - revised
    if len(heads) != 1:
        raise StoreError(f"the store's migrations have {len(heads)} heads ({', '.join(sorted(heads))}); one expected")
    return heads.pop()


def current_revision(connection: Connection) -> str | None:
    """The revision of the database on `connection` (None: never migrated: new, or made before migrations)."""
    if not sa.inspect(connection).has_table(VERSION_TABLE):
        return None
    rows = connection.execute(sa.text(f"SELECT version_num FROM {VERSION_TABLE}")).all()
    if len(rows) > 1:
        raise StoreError(f"the database holds {len(rows)} schema revisions ({', '.join(r[0] for r in rows)}); "
                         "one expected")
    return rows[0][0] if rows else None


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
    from alembic import command

    with _ONE_MIGRATION:
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
