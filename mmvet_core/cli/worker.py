"""`worker`: grade the runs the app queues (``MMVET_WORKERS=external``), beside `mmvet_core.workers`."""
from __future__ import annotations

import logging
import signal
import sys
import threading
from pathlib import Path

from ..service import ServiceSettings
from ..store import Store, StoreError
from ..workers import LEASE_SECONDS, Worker
from .parser import Command, option


def cmd_worker(args) -> int:
    """``python -m mmvet_core worker``: take and grade queued runs until SIGTERM / Ctrl-C (the runs being graded
    then go back to the queue for another worker)."""
    logging.basicConfig(level=logging.INFO, format="%(asctime)s worker %(levelname)s %(message)s")
    for chatty in ("httpx", "httpx2", "openai"):      # one line per judge call otherwise
        logging.getLogger(chatty).setLevel(logging.WARNING)
    settings = ServiceSettings.from_env()
    location = args.db or settings.database_url or Path(settings.data_dir) / "mmvet-grader.db"
    try:
        store = Store(location)
    except StoreError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    lease = args.lease if args.lease is not None else settings.lease_seconds
    worker = Worker(store, settings, slots=args.runs, lease=lease, poll=args.poll)
    if settings.host_key:
        # a worker exists to call the judge: its SDK is imported now, not when the worker takes over a dead
        # worker's run (seconds on a busy machine, while the run waits)
        import openai  # noqa: F401

        from .. import transport  # noqa: F401
    stop = threading.Event()
    for sig in (signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, lambda *_: stop.set())
    judge = "the host's judge at " + (settings.host_base_url or "OpenAI") if settings.host_key else \
        "no host key: offline-baseline runs only"
    print(f"worker {worker.holder}: {store.backend} {store.path}; {judge}; {worker.slots} runs at once; "
          f"lease {lease:g} s", flush=True)
    try:
        worker.run(stop)
    finally:
        store.close()
    print(f"worker {worker.holder}: stopped after taking {worker.taken} run(s)", flush=True)
    return 0

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
