"""Background grading jobs: one asyncio loop in a daemon thread runs every run of the process.

A job persists each grade as it arrives, so closing the browser tab never stops or loses it. Each job has its
own judge client and its own concurrency bound, so a slow or failing judge of one visitor only holds that
visitor's slots while the others keep progressing.

Stopping takes new calls off at once and gives the calls in flight `STOP_GRACE` seconds to answer (an answer that
arrives is stored: it was paid for); calls still running then are cancelled, so an endpoint that never answers
cannot hold a run (their cost, if the endpoint bills them, is the run owner's). The job then ends ``stopped``.

Run slots are bounded: at most `max_active` jobs at once and `per_visitor` per visitor, for new runs and resumed
ones alike (`TooManyRuns`). A job that fails on the database (`StoreError`, e.g. a full disk) ends ``failed`` with
the reason; when even that status cannot be written, `JobManager.failure` still reports it and the status is
written as soon as the database takes writes again (`JobManager.retry_unsaved`), so the row on disk never keeps
saying ``running`` for a run that ended.
"""
from __future__ import annotations

import asyncio
import threading
from concurrent.futures import Future
from dataclasses import dataclass, field
from typing import Callable

from ..inputs.benchmark import Benchmark
from ..judging.grading import RunOutcome, grade_run
from ..judging.judge import Judge
from ..store import Store, StoreError

#: Seconds the calls in flight get to answer after Stop before they are cancelled.
STOP_GRACE = 5.0
STOPPED = "stopped by the user; resume continues without paying again"


class TooManyRuns(Exception):
    """No run slot is free (for everyone, or for this visitor); the message says which and what to do."""


@dataclass
class Job:
    run_id: str
    future: Future
    stop: asyncio.Event
    visitor: str | None = None
    outcome: RunOutcome | None = None
    error: str | None = None
    task: asyncio.Task | None = None
    calls: dict = field(default_factory=dict)
    judge: Judge | None = None


class JobManager:
    """Starts, stops and tracks grading jobs on a private event loop thread. `max_active` and `per_visitor`
    bound the jobs running at once (0: no bound)."""

    def __init__(self, store: Store, *, max_active: int = 0, per_visitor: int = 0, stop_grace: float = STOP_GRACE):
        self.store = store
        self.max_active, self.per_visitor, self.stop_grace = max_active, per_visitor, stop_grace
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._loop.run_forever, name="mmvet-jobs", daemon=True)
        self._thread.start()
        self._jobs: dict[str, Job] = {}
        self._lock = threading.Lock()
        self._unsaved: dict[str, tuple[str, str]] = {}   # run -> (status, message) the database refused

    def is_running(self, run_id: str) -> bool:
        job = self._jobs.get(run_id)
        return job is not None and not job.future.done()

    def running_ids(self) -> list[str]:
        """The runs (and other tasks) being graded now."""
        return [key for key in list(self._jobs) if self.is_running(key)]

    def running_count(self, visitor: str | None = None) -> int:
        """Jobs running now (of `visitor` only, when given)."""
        return sum(not j.future.done() and (visitor is None or j.visitor == visitor)
                   for j in list(self._jobs.values()))

    def check_capacity(self, visitor: str | None = None) -> None:
        """Raise `TooManyRuns` when a new job of `visitor` would exceed a bound."""
        if self.max_active and self.running_count() >= self.max_active:
            raise self.too_many("server")
        if visitor is not None and self.per_visitor and self.running_count(visitor) >= self.per_visitor:
            raise self.too_many("visitor")

    def too_many(self, scope: str) -> TooManyRuns:
        """The refusal when the server's slots (`scope` ``"server"``) or the visitor's are all taken."""
        if scope == "server":
            return TooManyRuns("The server is grading as many runs as it can; try again in a minute.")
        return TooManyRuns(f"You already have {self.per_visitor} run(s) grading, the most allowed at once "
                           "here: stop one or wait until it ends.")

    def start(self, run_id: str, benchmark: Benchmark, judge: Judge, *, concurrency: int = 16,
              budget: Callable[[str], object] | None = None, visitor: str | None = None, batch: bool = False,
              batch_poll: float = 30.0, host: bool = False) -> bool:
        """Start grading `run_id` in the background (a new run or a resumed one), live or, with `batch`, through
        the judge's Batch API (polled every `batch_poll` seconds); False when it is already running;
        `TooManyRuns` when no slot is free (then `judge` is closed). `host`: `judge` holds the host's key (a
        grading worker may then grade the run instead: `workers.LeasedJobs`)."""
        with self._lock:
            if self.is_running(run_id):
                return False
            try:
                self.check_capacity(visitor)
                self._begin(run_id, benchmark, judge, concurrency=concurrency, budget=budget, visitor=visitor,
                            batch_poll=batch_poll if batch else None, host=host)
            except TooManyRuns:
                asyncio.run_coroutine_threadsafe(judge.aclose(), self._loop)
                raise
            return True

    def _begin(self, run_id: str, benchmark: Benchmark, judge: Judge, *, concurrency: int,
               budget: Callable[[str], object] | None, visitor: str | None, batch_poll: float | None,
               host: bool) -> None:
        """Start the job of `start` (its slot is free) on this process's loop."""
        stop = asyncio.Event()
        job = Job(run_id, None, stop, visitor)      # type: ignore[arg-type]  (the future is set just below)
        job.judge = judge
        self._jobs[run_id] = job
        job.future = asyncio.run_coroutine_threadsafe(
            self._run(job, benchmark, judge, concurrency, budget, batch_poll), self._loop)

    def _store_of(self, run_id: str) -> Store:
        """The store a job writes through (`workers.LeasedJobs`: statuses only while the job holds its lease)."""
        return self.store

    def _ended(self, run_id: str) -> None:
        """Called on the jobs' loop when the job of `run_id` has ended (its status written)."""

    async def _run(self, job: Job, benchmark, judge, concurrency, budget, batch_poll) -> RunOutcome | None:
        run_id = job.run_id
        store = self._store_of(run_id)
        if batch_poll is not None:
            from ..judging.batch import grade_run_batch
            work = grade_run_batch(store, run_id, benchmark, judge, poll=batch_poll, stop=job.stop,
                                   budget=budget)
        else:
            work = grade_run(store, run_id, benchmark, judge, concurrency=concurrency, stop=job.stop,
                             budget=budget)
        job.task = asyncio.ensure_future(work)
        try:
            await asyncio.wait({job.task})
            if job.task.cancelled():     # Stop's grace ran out: the calls still in flight were cancelled
                job.outcome = RunOutcome("stopped", STOPPED + " (the calls still in flight were cancelled)", 0, 0)
                self._set_status(job, "stopped", job.outcome.message)
                return job.outcome
            job.outcome = job.task.result()
            return job.outcome
        except Exception as e:  # never lose the reason: it is shown to the user
            reason = str(e) if isinstance(e, StoreError) else f"{type(e).__name__}: {e}"
            message = reason if reason.startswith("stopped: ") else \
                f"stopped: {reason}; the grades stored before are kept"
            job.error = message
            job.outcome = RunOutcome("failed", message, 0, 0)
            self._set_status(job, "failed", message)
            return job.outcome
        finally:
            await judge.aclose()
            self._ended(run_id)

    def call(self, coro, timeout: float | None = None):
        """Run a short coroutine (a model list, a preflight) on the jobs' loop, where the accounts' limiters live,
        and return its result (its exception is raised here; `TimeoutError` after `timeout` seconds)."""
        return asyncio.run_coroutine_threadsafe(coro, self._loop).result(timeout)

    def start_task(self, key: str, make: Callable[[asyncio.Event], object], *, visitor: str | None = None) -> Future:
        """Run another background task (a judge check) under the same slots as runs: ``make(stop)`` builds its
        coroutine (`stop` is set by `stop(key)` and `shutdown`). `TooManyRuns` when no slot is free. Its state is
        `is_running(key)` and the returned future; a task already running under `key` is not started again."""
        with self._lock:
            if self.is_running(key):
                return self._jobs[key].future
            self.check_capacity(visitor)
            stop = asyncio.Event()
            job = Job(key, None, stop, visitor)      # type: ignore[arg-type]
            self._jobs[key] = job
            job.future = asyncio.run_coroutine_threadsafe(make(stop), self._loop)
            return job.future

    def _set_status(self, job: Job, status: str, message: str) -> None:
        try:
            self._store_of(job.run_id).set_status(job.run_id, status, message)
            self._unsaved.pop(job.run_id, None)
        except StoreError:      # the database cannot even take the status (a full disk): `failure` keeps it
            self._unsaved[job.run_id] = (status, message)

    def retry_unsaved(self) -> int:
        """Write the end statuses the database refused earlier (a full disk since freed); returns how many are
        still unsaved. Cheap when there are none (call it from requests)."""
        for run_id, (status, message) in list(self._unsaved.items()):
            try:
                self.store.set_status(run_id, status, message)
            except StoreError:
                return len(self._unsaved)
            self._unsaved.pop(run_id, None)
        return 0

    def on_end(self, run_id: str, fn: Callable[[str], None]) -> None:
        """Call ``fn(run_id)`` (on the jobs' thread) when the job of `run_id` ends; at once when it is not running."""
        job = self._jobs.get(run_id)
        if job is None or job.future is None:
            fn(run_id)
            return
        job.future.add_done_callback(lambda _f: fn(run_id))

    def waiting_until(self, run_id: str) -> float | None:
        """While a running job's calls wait out the judge account's rate limit (a 429's retry-after): until when
        (``time.time()``); else None."""
        job = self._jobs.get(run_id)
        if job is None or job.future is None or job.future.done():
            return None
        waiting = getattr(job.judge, "waiting_until", None)
        return waiting() if waiting is not None else None

    def queue_note(self, run_id: str) -> str | None:
        """Why a queued run waits, when no grading worker can take it (`workers.LeasedJobs`); None here."""
        return None

    def failure(self, run_id: str) -> str | None:
        """Why a job of this process failed, when it did. Views show it over the stored status, which a full disk
        may have kept at ``running``."""
        job = self._jobs.get(run_id)
        if job is None or not job.future.done():
            return None
        if job.error or (job.outcome and job.outcome.status == "failed"):
            return job.error or job.outcome.message
        error = None if job.future.cancelled() else job.future.exception()    # a task's own exception
        return str(error) if error is not None else None

    def stop(self, run_id: str) -> bool:
        """Stop a running job: no new call starts; the calls in flight get `stop_grace` seconds to answer (their
        answers are stored), then they are cancelled. False when it was not running."""
        job = self._jobs.get(run_id)
        if job is None or job.future.done():
            return False

        def cancel_later() -> None:
            job.stop.set()
            if job.task is not None:
                self._loop.call_later(self.stop_grace, job.task.cancel)
        self._loop.call_soon_threadsafe(cancel_later)
        return True

    def wait(self, run_id: str, timeout: float | None = None) -> RunOutcome | None:
        job = self._jobs.get(run_id)
        return job.future.result(timeout) if job is not None else None

    def shutdown(self, timeout: float = 10.0) -> None:
        """Stop every job (as `stop` does, calls in flight cancelled after the grace), then the loop."""
        for run_id in list(self._jobs):
            self.stop(run_id)
        for job in list(self._jobs.values()):
            try:
                job.future.result(self.stop_grace + timeout)
            except BaseException:       # noqa: BLE001 — a job's own failure is already recorded
                pass
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(timeout)
        if not self._thread.is_alive():
            self._loop.close()
