"""`worker`: grade the runs the app queues (``MMVET_WORKERS=external``), beside `mmvet_core.workers`."""
from __future__ import annotations

from ..workers import LEASE_SECONDS, cmd_worker
from .parser import Command, option

WORKER = Command("worker", "grade the runs the app queues (MMVET_WORKERS=external), on any machine that reaches the "
                           "database and the judge", (
    option("--db", default=None, help="the database (default: $MMVET_DATABASE_URL, else the data folder's "
                                      "mmvet-grader.db)"),
    option("--runs", type=int, default=4, help="runs graded at once by this worker (default 4)"),
    option("--lease", type=float, default=None,
           help=f"seconds of a lease (default $MMVET_LEASE_SECONDS, else {LEASE_SECONDS:g}): a run whose worker "
                "died moves on after at most this"),
    option("--poll", type=float, default=1.0, help="seconds between two looks at the queue (default 1)"),
), run=cmd_worker)
