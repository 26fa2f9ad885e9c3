"""Background grading jobs: one asyncio loop in a daemon thread runs every run of the process.

A job persists each grade as it arrives, so closing the browser tab never stops or loses it. Each job has its
own judge client and its own concurrency bound, so a slow or failing judge of one visitor only holds that
visitor's slots while the others keep progressing. Stopping is graceful: calls already in flight finish and
are stored (they were paid for), then the job ends with status ``stopped``.
"""
from __future__ import annotations

import asyncio
import threading
from concurrent.futures import Future
from dataclasses import dataclass, field
from typing import Callable

from .benchmark import Benchmark
from .grading import RunOutcome, grade_run
from .judge import Judge
from .store import Store


@dataclass
class Job:
    run_id: str
    future: Future
    stop: asyncio.Event
    outcome: RunOutcome | None = None
    error: str | None = None
    calls: dict = field(default_factory=dict)


class JobManager:
    """Starts, stops and tracks grading jobs on a private event loop thread."""

    def __init__(self, store: Store):
        self.store = store
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._loop.run_forever, name="mmvet-jobs", daemon=True)
        self._thread.start()
        self._jobs: dict[str, Job] = {}
        self._lock = threading.Lock()

    def is_running(self, run_id: str) -> bool:
        job = self._jobs.get(run_id)
        return job is not None and not job.future.done()

    def running_count(self) -> int:
        return sum(not j.future.done() for j in list(self._jobs.values()))

    def start(self, run_id: str, benchmark: Benchmark, judge: Judge, *, concurrency: int = 16,
              budget: Callable[[], None] | None = None) -> bool:
        """Start grading `run_id` in the background; False when it is already running."""
        with self._lock:
            if self.is_running(run_id):
                return False
            stop = asyncio.Event()
            coro = self._run(run_id, benchmark, judge, concurrency, budget, stop)
            future = asyncio.run_coroutine_threadsafe(coro, self._loop)
            self._jobs[run_id] = Job(run_id, future, stop)
            return True

    async def _run(self, run_id, benchmark, judge, concurrency, budget, stop) -> RunOutcome | None:
        job = None
        try:
            outcome = await grade_run(self.store, run_id, benchmark, judge, concurrency=concurrency,
                                      stop=stop, budget=budget)
            job = self._jobs.get(run_id)
            if job is not None:
                job.outcome = outcome
            return outcome
        except Exception as e:  # never lose the reason: it is shown to the user
            self.store.set_status(run_id, "failed", f"{type(e).__name__}: {e}")
            job = self._jobs.get(run_id)
            if job is not None:
                job.error = str(e)
            return None
        finally:
            await judge.aclose()

    def stop(self, run_id: str) -> bool:
        """Ask a running job to stop after its in-flight calls; False when it was not running."""
        job = self._jobs.get(run_id)
        if job is None or job.future.done():
            return False
        self._loop.call_soon_threadsafe(job.stop.set)
        return True

    def wait(self, run_id: str, timeout: float | None = None) -> RunOutcome | None:
        job = self._jobs.get(run_id)
        return job.future.result(timeout) if job is not None else None

    def shutdown(self) -> None:
        for run_id in list(self._jobs):
            self.stop(run_id)
        self._loop.call_soon_threadsafe(self._loop.stop)
