"""The grading workers' queue: slices of runs as jobs of procrastinate, a task queue that lives in PostgreSQL.

A run the app hands to the workers (``MMVET_WORKERS=external``) is cut into **slices** of `SLICE_SIZE` (sample,
judge run) pairs, each a procrastinate job on the queue of its judge endpoint (`queue_name`): every worker that
serves the endpoint takes slices of it, so N workers share one run, and two runs share the workers. What the
engine gives, and what we no longer write ourselves:

- **taking work**: a job is taken by one worker only (procrastinate's ``FOR UPDATE SKIP LOCKED`` fetch, woken by
  ``LISTEN/NOTIFY``);
- **dead workers**: each worker sends heartbeats; a job whose worker stopped sending them for a lease is found
  (`JobManager.get_stalled_jobs`) by any live worker and queued again (`retry_job`). Every answer was stored as
  it arrived (the answer cache), so the slice graded again costs only the calls that were in flight at the death;
- **retries**: a slice that ends on a database fault, or that a leaving worker hands over, goes back to the queue
  (`RetryStrategy`).

The run itself stays a row of our grading queue (`store.SliceFacet`): its run slots, its Stop flag and its
*generation* (``enqueued_at``; a slice of an earlier grading of the run, before a Stop and a Resume, does nothing).
The worker that stores a run's last grade ends it (`Store.finish_queued`: one of them, once). Keys never enter a
job: a job names its run; the worker builds the judge from the run's stored settings and its own host key.
"""
from __future__ import annotations

import hashlib
import logging
from collections.abc import Collection

log = logging.getLogger("mmvet_grader")

#: procrastinate's name of the task that grades one slice.
TASK = "mmvet.grade_slice"
#: (sample, judge run) pairs per job: small enough that workers share a run and a death costs little, large enough
#: that a worker keeps the judge busy with a few jobs at once.
SLICE_SIZE = 12
_SCHEMA_LOCK = "mmvet-grader:procrastinate-schema"


class HandOver(Exception):
    """A leaving worker ended a slice after its calls in flight answered: the job goes back to the queue."""


def queue_name(endpoint: str) -> str:
    """The procrastinate queue of a judge endpoint (`workers.endpoint_of`; '' the offline baseline): a worker
    listens on the queues of the endpoints it serves. A hash: an endpoint may be longer than a queue name.

    >>> queue_name(""), queue_name("openai|http://127.0.0.1:9/v1|")[:6]
    ('judge-offline', 'judge-')
    """
    if not endpoint:
        return "judge-offline"
    return "judge-" + hashlib.sha256(endpoint.encode("utf-8")).hexdigest()[:24]


def slices(pairs: list[tuple[str, int]], size: int = SLICE_SIZE) -> list[list[list]]:
    """`pairs` cut into slices of `size`, in their order (JSON-ready: ``[[sample id, run index], ...]``).

    >>> slices([("a", 0), ("b", 0), ("a", 1)], 2)
    [[['a', 0], ['b', 0]], [['a', 1]]]
    """
    return [[[sid, r] for sid, r in pairs[i:i + size]] for i in range(0, len(pairs), size)]


def ensure_schema(conninfo: str) -> None:
    """Create procrastinate's tables in the database when they are missing (the first process on a new database;
    one at a time under an advisory lock). Its schema ships with the package (`SchemaManager.get_schema`)."""
    import psycopg
    from procrastinate.schema import SchemaManager

    with psycopg.connect(conninfo, autocommit=True, connect_timeout=10) as conn:
        conn.execute("SELECT pg_advisory_lock(hashtext(%s))", (_SCHEMA_LOCK,))
        try:
            if conn.execute("SELECT to_regclass('procrastinate_jobs')").fetchone()[0] is None:
                conn.execute(SchemaManager.get_schema())
                log.info("the task queue's tables (procrastinate) were created")
        finally:
            conn.execute("SELECT pg_advisory_unlock(hashtext(%s))", (_SCHEMA_LOCK,))


class SliceQueue:
    """The app's side: defers a run's slices (a small pool of its own: 1 or 2 connections, opened on first use)."""

    def __init__(self, conninfo: str):
        self.conninfo = conninfo
        self._app = None

    def _opened(self):
        if self._app is None:
            import procrastinate

            ensure_schema(self.conninfo)
            app = procrastinate.App(connector=procrastinate.SyncPsycopgConnector(
                conninfo=self.conninfo, min_size=1, max_size=2, kwargs={"application_name": "mmvet-grader"}))
            app.open()
            self._app = app
        return self._app

    def defer(self, run_id: str, generation: float, endpoint: str, pairs: list[tuple[str, int]],
              size: int = SLICE_SIZE) -> int:
        """Queue the slices of `pairs` of a run (of the grading `generation`) for the workers of `endpoint`, in
        one statement; returns how many jobs."""
        cut = slices(pairs, size)
        if cut:
            deferrer = self._opened().configure_task(TASK, queue=queue_name(endpoint))
            deferrer.batch_defer(*({"run_id": run_id, "generation": generation, "pairs": s} for s in cut))
        return len(cut)

    def close(self) -> None:
        if self._app is not None:
            self._app.close()
            self._app = None


def worker_app(conninfo: str, grade_slice, *, retry_wait: float = 1.0):
    """The worker's procrastinate app: one task, `grade_slice(run_id, generation, pairs, job_id=...)` (a coroutine;
    `job_id` is procrastinate's id of the slice's job), retried (the slice goes back to the queue) when it raises
    `HandOver` or a database fault."""
    import procrastinate

    from ..store import StoreError

    app = procrastinate.App(connector=procrastinate.PsycopgConnector(
        conninfo=conninfo, min_size=1, max_size=4, kwargs={"application_name": "mmvet-grader-worker"}))

    async def grade(context, run_id: str, generation: float, pairs: list):
        return await grade_slice(run_id, generation, pairs, job_id=context.job.id)

    app.task(name=TASK, pass_context=True,
             retry=procrastinate.RetryStrategy(max_attempts=1000, wait=retry_wait,
                                               retry_exceptions={HandOver, StoreError}))(grade)
    return app


async def requeue_stalled(app, seconds: float, mine: Collection[int] = ()) -> list[int]:
    """Queue again the slices taken by workers that sent no heartbeat for `seconds` (dead, or cut off): the ids
    of the jobs queued again. Any live worker may do it; a job another worker queued first is skipped. `mine`:
    the jobs the calling worker is grading itself, never queued again by it (it knows it lives, whatever its
    heartbeat row says: a heartbeat late on a busy machine, or stopped while it hands its slices over)."""
    moved = []
    for job in await app.job_manager.get_stalled_jobs(seconds_since_heartbeat=seconds):
        if job.id in mine:
            continue
        try:
            await app.job_manager.retry_job(job)
        except Exception:       # noqa: BLE001 — another worker queued it again first
            continue
        moved.append(job.id)
    return moved
