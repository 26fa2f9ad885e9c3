"""`worker`: grade the runs the app queues (``MMVET_WORKERS=external``), beside `mmvet_core.runs.workers`."""
from __future__ import annotations

import logging
import signal
import sys
import threading

from ..service import ServiceSettings
from ..store import Store, StoreError
from ..runs.workers import LEASE_SECONDS, Worker, describe_endpoint
from .parser import Command, option


def cmd_worker(args) -> int:
    """``python -m mmvet_core worker``: grade slices of queued runs until SIGTERM / Ctrl-C (the slices being graded
    then go back to the queue for other workers). Exit 2: no PostgreSQL database, or one of another schema."""
    logging.basicConfig(level=logging.INFO, format="%(asctime)s worker %(levelname)s %(message)s")
    for chatty in ("httpx", "httpx2", "openai", "procrastinate", "alembic"):   # a line per call, per slice
        logging.getLogger(chatty).setLevel(logging.WARNING)
    settings = ServiceSettings.from_env()
    location = args.db or settings.database_url
    if not location:
        print("error: a grading worker needs the app's PostgreSQL database: set MMVET_DATABASE_URL (or --db) as "
              "on the app replicas; with the embedded SQLite database the app grades its runs itself",
              file=sys.stderr)
        return 2
    try:
        store = Store(location, migrate=False)      # a worker never migrates: the replicas' release does
        lease = args.lease if args.lease is not None else settings.lease_seconds
        worker = Worker(store, settings, slices=args.slices, lease=lease, poll=args.poll)
    except StoreError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    if settings.host_key:
        # a worker exists to call the judge: its SDK is imported now, not when the worker takes over a dead
        # worker's run (seconds on a busy machine, while the run waits)
        import openai  # noqa: F401

        from ..judging import transport  # noqa: F401
    stop = threading.Event()
    for sig in (signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, lambda *_: stop.set())
    serves = "; ".join(describe_endpoint(e, "*") for e in worker.endpoints)
    if not settings.host_key:
        serves += " (no host key: OPENAI_API_KEY unset)"
    print(f"worker {worker.holder}: {store.backend} {store.path}; serves {serves}; {worker.slots} slices at once; "
          f"lease {lease:g} s", flush=True)
    try:
        worker.run(stop)
    finally:
        store.close()
    print(f"worker {worker.holder}: stopped after grading {worker.slices_done} slice(s) of {worker.taken} run(s), "
          f"{worker.grades} grade(s)", flush=True)
    return 0

WORKER = Command("worker", "grade the runs the app queues (MMVET_WORKERS=external), on any machine that reaches the "
                           "database and the judge", (
    option("--db", default=None, help="the PostgreSQL database (default: $MMVET_DATABASE_URL)"),
    option("--slices", type=int, default=8, help="slices of runs (12 grades each) graded at once by this worker "
                                                 "(default 8)"),
    option("--lease", type=float, default=None,
           help=f"seconds of a lease (default $MMVET_LEASE_SECONDS, else {LEASE_SECONDS:g}): a run whose worker "
                "died moves on after at most this"),
    option("--poll", type=float, default=1.0, help="seconds between two looks at the queue (default 1)"),
), run=cmd_worker)
