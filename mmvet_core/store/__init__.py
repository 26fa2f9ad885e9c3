"""The store: runs, grades, overrides, the judge-answer cache, Batch API submissions, judge checks, budgets'
usage, the leaderboard and what keeps storage bounded — in SQLite (the default: one file, nothing to run) or in
PostgreSQL (``MMVET_DATABASE_URL``: many processes and machines on one database).

``Store(location)`` opens either: a file path is SQLite, a ``postgresql://`` URL is PostgreSQL (`create_backend`
picks the backend from a table; no other module knows which one it talks to). Every query is written once with
SQLAlchemy Core over one schema (`_schema`); versioned migrations (Alembic, ``migrations/``) bring any database
to this release's schema when it opens, a SQLite file of an earlier release included.

Every judge answer is committed the moment it arrives (`Store.put_answer`), so a process killed at any moment
(kill -9) loses nothing it paid for. No API key is ever passed to this package. Faults are named, not generic:
a damaged SQLite file, an unreachable server or a failed write (disk full, read-only) raise `StoreError` saying
what is wrong and what to do; a SQLite database that vanished or was replaced since the last start is reported
in `Store.warnings`.
"""
from __future__ import annotations

from ._answers import AnswersFacet
from ._backend import DATABASE_URL_VAR, create_backend, store_exists
from ._board import BoardFacet
from ._checks import ChecksFacet
from ._database import Database
from ._keeping import KeepingFacet
from ._pace import PaceFacet
from ._queue import QueueFacet, RunSlots, SliceFacet, SlotsTaken
from ._records import GradeRow, RunRecord, StoreError, new_id, new_run_id
from ._runs import RunsFacet
from ._usage import UsageFacet

__all__ = ["DATABASE_URL_VAR", "GradeRow", "RunRecord", "RunSlots", "SlotsTaken", "STORE_UNREACHABLE", "Store",
           "StoreError", "create_backend", "new_id", "new_run_id", "store_exists"]

#: What pages and scripts are told while the database cannot be reached (a `StoreError` on a read): one wording
#: everywhere (the page's progress while it waits to follow again, the named API endpoints' errors).
STORE_UNREACHABLE = "the store is unreachable; nothing is lost"


class Store(RunsFacet, AnswersFacet, ChecksFacet, UsageFacet, KeepingFacet, BoardFacet, QueueFacet, SliceFacet,
            PaceFacet, Database):
    """The database at `location` (a SQLite file path, created with its folder when missing, or a PostgreSQL
    URL), with every facet the product stores. Safe to share between threads."""
