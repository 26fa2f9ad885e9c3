"""Grading beyond one process: runs under leases in the database, and grading workers that share them.

Its size (over 600 lines) has a reason: the leases, the worker's loop and its hand-over are one protocol over the
same queue rows; the queue's engine itself lives apart (`taskqueue`).

One machine, one process (the default: SQLite, ``MMVET_WORKERS`` unset) needs none of this: `jobs.JobManager`
grades every run in the app's process. As soon as processes share a database (PostgreSQL, or grading workers
beside the app), each of them uses `LeasedJobs` instead:

- **Every run being graded is a row of the grading queue** (`Store.enqueue_run`). A run a process grades itself
  (a visitor's own key, which lives only in that process's memory; every run without ``MMVET_WORKERS=external``)
  is held under a lease on the database's clock that a heartbeat thread renews every `lease / 5` seconds: any
  process then knows which runs grade anywhere (`is_running`), until when one waits out a rate limit, and can
  stop it (Stop sets the row's flag, which its holder reads at its next renewal). A holder that dies stops
  renewing; its run becomes ``stopped`` (`Store.reap_leases`) and its owner resumes it from any replica; a holder
  that lost its lease ends its grading and writes no status over anyone's (`Store.set_status_if_held`).
- **Workers** (`python -m mmvet_core worker`, `Worker`) grade the runs the app hands them with
  ``MMVET_WORKERS=external`` (the host's key, or the offline baseline): such a run's row is held by nobody and
  its pairs are cut into slices, jobs of procrastinate on the queue of its judge endpoint
  (`mmvet_core/runs/taskqueue.py`): N workers share one run, a dead worker's slices are queued again by the others
  (heartbeats), and the worker that stores the run's last grade ends it. A worker serves the endpoints it holds
  the host's key for (their base URLs compared in one spelling: `endpoint_of`), and says which, so a run no
  worker serves says so (`LeasedJobs.queue_note`).
- **Run slots hold across processes**: a run's row takes its slot in the transaction that counts the visitor's
  (and the server's) live rows, under the database's lock for that visitor (`Store.enqueue_run` with `RunSlots`),
  so replicas starting runs of one visitor at the same instant never pass `max_runs_per_visitor` together.
- **One judge account, one limit**: the limiters of the processes' loops pace through the database
  (`ratelimit.share_limits`, `sharedlimit.SharedPace`); the host's daily budgets are charged in one transaction
  of the database (`budget.HostBudget`).
"""
from __future__ import annotations

import asyncio
import logging
import os
import secrets
import socket
import threading
import time

from ..inputs.benchmark import Benchmark
from ..judging.budget import HostBudget
from .jobs import STOP_GRACE, STOPPED, JobManager, TooManyRuns
from ..judging.judge import Judge, JudgeSettings, make_judge
from ..judging.ratelimit import same_address, share_limits
from ..judging.sharedlimit import pace_source
from ..store import RunSlots, SlotsTaken, Store, StoreError
from .taskqueue import queue_name

log = logging.getLogger("mmvet_grader")

#: Seconds a lease lasts unless renewed (a dead holder's run moves on after at most this); renewed 5 times as often.
LEASE_SECONDS = 10.0
#: Seconds a process reuses what it read of another process's run (`LeasedJobs.is_running`, pages following it).
REMOTE_TTL = 0.5
QUEUED = "waiting for a grading worker"
IN_PROCESS, EXTERNAL = "in-process", "external"


def process_id() -> str:
    """A name for this process in the queue's rows, unique among processes: ``host:pid:random``."""
    return f"{socket.gethostname()[:40]}:{os.getpid()}:{secrets.token_hex(3)}"


def endpoint_of(settings: JudgeSettings) -> str:
    """Where a judge's calls go, without any key: ``provider|base URL|API version`` ('' for the offline baseline,
    which any worker can run), the base URL in one spelling (`ratelimit.same_address`: a worker configured with
    ``localhost`` serves the runs of replicas configured with ``127.0.0.1``). A worker takes only runs of the
    endpoints it holds a key for.

    >>> endpoint_of(JudgeSettings(base_url="http://Judge:80/v1/")), endpoint_of(JudgeSettings(provider="baseline"))
    ('openai|http://judge/v1|', '')
    """
    if settings.provider == "baseline":
        return ""
    return "|".join([settings.provider, same_address(settings.base_url), settings.api_version or ""])


def describe_endpoint(endpoint: str, model: str = "") -> str:
    """An endpoint for a person: ``judge gpt-4o at http://127.0.0.1:8000/v1`` ('' the offline baseline).

    >>> describe_endpoint("openai|http://127.0.0.1:9/v1|", "gpt-4o"), describe_endpoint("")
    ('judge gpt-4o at http://127.0.0.1:9/v1', 'the offline baseline')
    """
    if not endpoint:
        return "the offline baseline"
    provider, url, version = (endpoint.split("|") + ["", ""])[:3]
    where = url + (f" (API version {version})" if version else "") + ("" if provider == "openai" else f" ({provider})")
    return f"judge {model or '?'} at {where}"


class QueueUnavailable(TooManyRuns):
    """The database refused the run's row in the grading queue: nothing was started (said like a full slot)."""


class _HeldStore:
    """The store as a job under a lease writes to it: a status only while this process holds the run's lease,
    and none while it hands its runs over (`LeasedJobs.shutdown`: the run goes on elsewhere)."""

    def __init__(self, jobs: "LeasedJobs"):
        self._jobs, self._store = jobs, jobs.store

    def __getattr__(self, name):
        return getattr(self._store, name)

    def set_status(self, run_id: str, status: str, message: str = "") -> None:
        if not self._jobs.handing_over:
            self._store.set_status_if_held(run_id, self._jobs.holder, status, message)


class LeasedJobs(JobManager):
    """`JobManager` for a process that shares its database: its runs are rows of the grading queue under leases
    it renews (see the module docstring); `is_running`, `stop` and `waiting_until` answer for runs graded by any
    process. `external`: runs a worker can grade (host key, or no key) are queued for the workers instead of
    graded here."""

    def __init__(self, store: Store, *, external: bool = False, lease: float = LEASE_SECONDS,
                 holder: str | None = None, **kwargs):
        super().__init__(store, **kwargs)
        self.external, self.lease = external, float(lease)
        self.holder = holder or process_id()
        self._leased: set[str] = set()             # local jobs that hold a row of the queue
        self._waiting: dict[str, float | None] = {}   # what each row says of its rate-limit wait
        self._remote: dict[str, tuple[float, dict | None]] = {}    # run -> (read at, its row)
        self._tasks: set[str] = set()              # local tasks that are not runs (judge checks)
        self._stopping: set[str] = set()           # runs whose Stop (pressed elsewhere) was passed on
        self.handing_over = False                  # shutting down: runs go back to the queue, not to `stopped`
        self._slices = None                        # the task queue's deferring side (`taskqueue.SliceQueue`)
        self._served_at: tuple[float, set[str]] | None = None
        share_limits(self._loop, pace_source(store))
        self._beating = threading.Event()
        self._beat = threading.Thread(target=self._heartbeat, name="mmvet-leases", daemon=True)
        self._beat.start()

    # --- what every process can ask about any run ------------------------------------------------------------
    def _row(self, run_id: str) -> dict | None:
        now = time.monotonic()
        hit = self._remote.get(run_id)
        if hit is not None and now - hit[0] < REMOTE_TTL:
            return hit[1]
        try:
            row = self.store.queued_run(run_id)
        except StoreError:
            return hit[1] if hit is not None else None
        if len(self._remote) > 10_000:
            self._remote.clear()
        self._remote[run_id] = (now, row)
        return row

    def is_running(self, run_id: str) -> bool:
        if super().is_running(run_id):
            return True
        row = self._row(run_id) if run_id and run_id not in self._tasks else None
        return row is not None and row["live"]

    def start_task(self, key: str, make, *, visitor: str | None = None):
        self._tasks.add(key)
        return super().start_task(key, make, visitor=visitor)

    def waiting_until(self, run_id: str) -> float | None:
        if super().is_running(run_id):
            return super().waiting_until(run_id)
        row = self._row(run_id)
        until = row.get("waiting_until") if row is not None and row["live"] else None
        return until if until and until > time.time() else None

    def running_ids(self) -> list[str]:
        try:
            queued = self.store.queued_runs()
        except StoreError:
            queued = []
        return sorted(set(super().running_ids()) | set(queued))

    def running_count(self, visitor: str | None = None) -> int:
        """Runs grading (or queued) on every process of the database, and this process's other tasks."""
        others = sum(not j.future.done() and key not in self._leased and (visitor is None or j.visitor == visitor)
                     for key, j in list(self._jobs.items()))
        try:
            return len(self.store.queued_runs(visitor)) + others
        except StoreError:
            return super().running_count(visitor)

    def stop(self, run_id: str) -> bool:
        """Stop a run wherever it grades: here at once; on another process at its holder's next renewal; a run
        no process grades yet leaves the queue (``stopped``)."""
        if super().stop(run_id):
            return True
        self._remote.pop(run_id, None)
        try:
            return self.store.request_stop(run_id, STOPPED) != "none"
        except StoreError:
            return False

    # --- starting a run ----------------------------------------------------------------------------------------
    def _begin(self, run_id: str, benchmark: Benchmark, judge: Judge, *, concurrency, budget, visitor,
               batch_poll, host) -> None:
        settings = judge.settings
        work = {"judge": settings.to_dict(), "host": bool(host), "concurrency": concurrency,
                "batch_poll": batch_poll}
        # a worker grades runs of the host's key or of no key, live (a Batch API run stays where it started)
        claimable = (bool(host) or settings.provider == "baseline") and batch_poll is None
        self._remote.pop(run_id, None)
        # `start` checked the slots already; other processes may be starting runs of this visitor at this very
        # instant, so the row takes its slot in one transaction with the count (the store's lock per visitor)
        slots = self._slots(visitor)
        try:
            if self.external and claimable:
                endpoint = endpoint_of(settings)
                self.store.enqueue_run(run_id, work=work, endpoint=endpoint, visitor=visitor or "",
                                       claimable=True, slots=slots)
                self.store.set_status(run_id, "queued", QUEUED)
                self.call(judge.aclose(), timeout=10)      # (never used: a worker builds its own)
                self._defer_slices(run_id, benchmark, endpoint)
                return
            self.store.enqueue_run(run_id, work=work, endpoint=endpoint_of(settings), visitor=visitor or "",
                                   claimable=False, holder=self.holder, lease=self.lease, slots=slots)
        except SlotsTaken as e:
            raise self.too_many(e.scope) from None
        except StoreError as e:
            raise QueueUnavailable(f"The run could not be queued: {e}") from None
        self.adopt(run_id, benchmark, judge, concurrency=concurrency, budget=budget, visitor=visitor,
                   batch_poll=batch_poll)

    def _defer_slices(self, run_id: str, benchmark: Benchmark, endpoint: str) -> None:
        """Hand the run's missing pairs to the workers, in slices (`mmvet_core/runs/taskqueue.py`); a queue that
        refuses them takes the run out of the queue again (`QueueUnavailable`: nothing was started)."""
        from ..judging.grading import missing_pairs

        try:
            row, run = self.store.queued_run(run_id), self.store.get_run(run_id)
            pairs = missing_pairs(self.store, run_id, benchmark, run.n_runs)
            self._slice_queue().defer(run_id, row["enqueued_at"], endpoint, pairs)
        except Exception as e:      # noqa: BLE001 — the task queue's faults, named for the visitor
            log.warning("run %s could not be handed to the workers: %s", run_id, e)
            try:
                self.store.finish_queued(run_id, row["enqueued_at"], "stopped",
                                         "stopped: the grading queue refused the run; Resume tries again")
            except Exception:       # noqa: BLE001
                pass
            raise QueueUnavailable(f"The run could not be queued for the grading workers: {e}") from None

    def _slice_queue(self):
        if self._slices is None:
            from .taskqueue import SliceQueue

            if not self.store.conninfo:
                raise StoreError("grading workers need a PostgreSQL database (MMVET_DATABASE_URL)")
            self._slices = SliceQueue(self.store.conninfo)
        return self._slices

    def queue_note(self, run_id: str) -> str | None:
        """Why a run waiting for the workers is not graded, when no live worker serves its judge: ``no worker
        serves judge M at URL`` (None: a worker serves it, or the run is not waiting for one)."""
        row = self._row(run_id)
        if row is None or row.get("holder") or not row.get("claimable"):
            return None
        served = self._served()
        if served is None or row["endpoint"] in served:
            return None
        return "no worker serves " + describe_endpoint(row["endpoint"], (row["work"].get("judge") or {}).get("model"))

    def _served(self) -> set[str] | None:
        """The endpoints the live workers serve (read at most every 2 s; None when the database cannot say)."""
        now = time.monotonic()
        if self._served_at is None or now - self._served_at[0] > 2.0:
            try:
                live = self.store.live_workers(max_age=max(3 * self.lease, 10.0))
            except StoreError:
                return None
            self._served_at = (now, {e for said in live.values() for e in said.get("serves", [])})
        return self._served_at[1]

    def _slots(self, visitor: str | None) -> RunSlots:
        """The bounds a run of `visitor` must fit in the database, with this process's other tasks (judge checks:
        they hold slots but no row of the queue)."""
        tasks = [j for key, j in list(self._jobs.items()) if key in self._tasks and not j.future.done()]
        per_visitor = self.per_visitor if visitor is not None else 0
        return RunSlots(per_visitor=per_visitor, max_active=self.max_active, besides=len(tasks),
                        besides_visitor=sum(j.visitor == visitor for j in tasks))

    def adopt(self, run_id: str, benchmark: Benchmark, judge: Judge, *, concurrency: int, budget=None,
              visitor: str | None = None, batch_poll: float | None = None) -> None:
        """Grade here a run whose row this process holds (just enqueued, or claimed by a worker)."""
        self._leased.add(run_id)
        super()._begin(run_id, benchmark, judge, concurrency=concurrency, budget=budget, visitor=visitor,
                       batch_poll=batch_poll, host=False)

    def _store_of(self, run_id: str):
        return _HeldStore(self) if run_id in self._leased else self.store

    def _ended(self, run_id: str) -> None:
        if run_id in self._leased:
            # a run that ended on a database fault (its end status could not even be written) goes back to the
            # queue: a worker continues it once the database is back, where a single process would wait for Resume
            try:
                self._let_go(run_id, requeue=self.handing_over or run_id in self._unsaved)
            except StoreError as e:         # the heartbeat lets go of it once the database answers again
                log.warning("run %s ended but its queue row could not be released: %s", run_id, e)
            self._leased.discard(run_id)
            self._stopping.discard(run_id)
            self._waiting.pop(run_id, None)
            self._remote.pop(run_id, None)

    def _let_go(self, run_id: str, *, requeue: bool) -> None:
        """Release a row this process holds: back to the queue with `requeue` when a worker may grade it (the
        status the database refused is then moot), else out of the queue."""
        if requeue and self.store.release_run(run_id, self.holder, requeue=True):
            self._unsaved.pop(run_id, None)
        else:
            self.store.release_run(run_id, self.holder)

    # --- the heartbeat -----------------------------------------------------------------------------------------
    @property
    def renew_every(self) -> float:
        return self.lease / 5

    def _heartbeat(self) -> None:
        beats = 0
        while not self._beating.wait(self.renew_every):
            try:
                self.renew()
                if beats % 5 == 0:
                    for run_id in self.store.reap_leases():
                        log.warning("run %s: the process grading it is gone; it is stopped (Resume continues)",
                                    run_id)
            except StoreError as e:       # the database is away: the leases run on until it is back
                log.warning("the grading leases could not be renewed: %s", e)
            except Exception:   # noqa: BLE001 — the heartbeat must outlive any one fault
                log.exception("grading leases")
            beats += 1

    def renew(self) -> None:
        """Renew this process's leases; end the grading of runs another process took over; pass on Stop pressed
        on other processes and this process's rate-limit waits; let go of rows it holds but grades no more."""
        with self._lock:        # (not between a row's claim and the start of its job: `start`, `Worker.take`)
            held = self.store.renew_leases(self.holder, self.lease)
            for run_id in held.keys() - self._leased:      # its job ended while the database was away
                self._let_go(run_id, requeue=True)
            for run_id in list(self._leased):
                job = self._jobs.get(run_id)
                if job is None or job.future is None or job.future.done():
                    continue
                if run_id not in held:
                    log.warning("run %s: its lease was taken over; this process stops grading it", run_id)
                    self._abandon(job)
                elif held[run_id] and run_id not in self._stopping:
                    self._stopping.add(run_id)
                    super().stop(run_id)
                waiting = super().waiting_until(run_id)
                if waiting != self._waiting.get(run_id):
                    self.store.set_waiting(run_id, self.holder, waiting)
                    self._waiting[run_id] = waiting

    def _abandon(self, job) -> None:
        """End a job at once, writing nothing (its lease is another process's now)."""
        def cancel() -> None:
            job.stop.set()
            if job.task is not None:
                job.task.cancel()
        self._loop.call_soon_threadsafe(cancel)

    def shutdown(self, timeout: float = 10.0, *, requeue: bool = False) -> None:
        """Stop every job and the heartbeat. `requeue` (a worker leaving): the runs stop as Stop does (no new
        call; the calls in flight get their grace and their answers are stored), then those another worker can
        grade go back to the queue, where one takes them over at once, their status untouched."""
        self.handing_over = requeue
        super().shutdown(timeout)
        self._beating.set()
        self._beat.join(timeout)
        if self._slices is not None:
            self._slices.close()


def make_jobs(store: Store, *, workers: str = IN_PROCESS, lease: float = LEASE_SECONDS, max_active: int = 0,
              per_visitor: int = 0) -> JobManager:
    """The app's job manager: `JobManager` for the single-machine default (a SQLite store, grading in-process),
    `LeasedJobs` when processes share the database (PostgreSQL) or `workers` is ``external``."""
    if workers not in (IN_PROCESS, EXTERNAL):
        raise ValueError(f"MMVET_WORKERS must be {IN_PROCESS!r} (the default) or {EXTERNAL!r}, not {workers!r}")
    if store.backend == "sqlite" and workers == EXTERNAL:
        raise ValueError("MMVET_WORKERS=external needs a PostgreSQL database (MMVET_DATABASE_URL): grading workers "
                         "share its task queue; with the embedded SQLite database the app grades its runs itself")
    if store.backend == "sqlite":
        return JobManager(store, max_active=max_active, per_visitor=per_visitor)
    return LeasedJobs(store, external=workers == EXTERNAL, lease=lease, max_active=max_active,
                      per_visitor=per_visitor)


# --- the worker ------------------------------------------------------------------------------------------------
class Worker:
    """A grading worker: takes the slices of queued runs (procrastinate's jobs, `mmvet_core/runs/taskqueue.py`) of the
    judge endpoints it serves (the host's, with `settings`' key, and the offline baseline), up to `slices` at once,
    each graded with the judge its run names; every `poll` seconds it says it lives (and what it serves), passes
    Stop pressed anywhere to its slices and logs, once per run, a queued run it cannot serve and why. On PostgreSQL
    only: the embedded default (SQLite) grades in the app's process."""

    def __init__(self, store: Store, settings, *, slices: int = 8, lease: float = LEASE_SECONDS, poll: float = 1.0):
        if not store.conninfo:
            raise StoreError("grading workers need a PostgreSQL database (MMVET_DATABASE_URL=postgresql://...); "
                             "with the embedded SQLite database the app grades its runs itself")
        self.store, self.settings, self.slots, self.poll = store, settings, max(1, slices), poll
        self.jobs = LeasedJobs(store, lease=lease)
        self.lease = float(lease)
        self.budget = HostBudget(store, settings.limits)
        host = settings.host_settings()
        self.endpoints = [""] + ([endpoint_of(host)] if settings.host_key else [])
        self.runs: set[str] = set()          # runs this worker graded a slice of
        self.slices_done = 0
        self.sweeps = 0                       # looks for stalled slices made (each `lease / 4` s, 0.5 s at least)
        self.grades = 0                       # grades this worker stored
        self._active: dict[str, set[asyncio.Event]] = {}     # run -> the stop events of its slices graded here
        self._jobs_here: set[int] = set()     # procrastinate's ids of the slices' jobs being processed here
        self._context: dict[tuple[str, float], tuple] = {}  # (run, generation) -> (run, benchmark, work, visitor)
        self._judges: dict[tuple[str, float], Judge] = {}   # (run, generation) -> its judge (the loop's only)
        self._skipped: set[str] = set()       # queued runs this worker said it cannot serve
        self._leaving = False
        self._serving = None
        self._task: asyncio.Task | None = None
        self._served = threading.Event()           # set when procrastinate's worker has ended

    @property
    def holder(self) -> str:
        return self.jobs.holder

    @property
    def taken(self) -> int:
        """Runs this worker graded a slice of."""
        return len(self.runs)

    def busy(self) -> int:
        """Slices being graded now."""
        return sum(len(events) for events in list(self._active.values()))

    # --- the process's life ------------------------------------------------------------------------------------
    def run(self, stop: threading.Event) -> None:
        """Serve slices until `stop` is set; then hand the slices being graded back to the queue (after their
        calls in flight answered) for other workers."""
        from .taskqueue import ensure_schema

        ensure_schema(self.store.conninfo)
        self._serving = asyncio.run_coroutine_threadsafe(self._serve(), self.jobs._loop)
        try:
            while True:
                self.tend()
                if stop.wait(self.poll):
                    break
        finally:
            self.leave()

    def leave(self, timeout: float = 30.0) -> None:
        """Stop taking slices; the slices being graded stop as Stop does (their calls in flight get their grace,
        their answers are stored) and go back to the queue; then the loop ends."""
        self._leaving = True
        for events in list(self._active.values()):
            for event in list(events):
                self.jobs._loop.call_soon_threadsafe(event.set)
        if self._serving is not None:
            def cancel() -> None:
                if self._task is not None:
                    self._task.cancel()
            self.jobs._loop.call_soon_threadsafe(cancel)
            self._served.wait(STOP_GRACE + timeout)     # procrastinate hands the slices back, then unregisters
        try:
            self.store.forget_worker(self.holder)
        except StoreError:
            pass
        self.jobs.shutdown()

    def tend(self) -> None:
        """One look at the database (every `poll` seconds): say this worker lives, pass Stop (and deletes, and
        runs resumed since) to the slices graded here, say once why a queued run is not served here."""
        try:
            self.store.announce_worker(self.holder, self.endpoints, {"slices": self.slots})
            # the runs known before the marks are read: a run whose first slice begins meanwhile has no mark read
            # and is left to the next look (taken for gone, its new slice would be stopped and never graded)
            known = {run_id for run_id, _ in list(self._context)} | set(self._active)
            marks = self.store.queue_marks(sorted(known))
            for (run_id, generation), _ctx in list(self._context.items()):
                if run_id not in known:
                    continue
                mark = marks.get(run_id)
                if mark is None or mark[0] != generation or mark[1]:
                    for event in list(self._active.get(run_id, ())):
                        self.jobs._loop.call_soon_threadsafe(event.set)
                    if not self._active.get(run_id):
                        self._context.pop((run_id, generation), None)
            for row in self.store.waiting_runs():
                if row["endpoint"] not in self.endpoints and row["run_id"] not in self._skipped:
                    self._skipped.add(row["run_id"])
                    model = (row["work"].get("judge") or {}).get("model")
                    mine = "; ".join(describe_endpoint(e, "*") for e in self.endpoints)
                    log.warning("run %s waits for %s; this worker serves only %s (set OPENAI_BASE_URL and "
                                "OPENAI_API_KEY as the app replicas do)", row["run_id"],
                                describe_endpoint(row["endpoint"], model), mine)
        except StoreError as e:
            log.warning("the database cannot be read: %s", e)

    async def _serve(self) -> None:
        """procrastinate's worker on this process's loop (where the accounts' limiters live), started again
        after a fault of the database; a sweep queues again the slices of workers that died."""
        self._task = asyncio.current_task()
        try:
            await self._serve_until_cancelled()
        finally:
            for judge in self._judges.values():
                await judge.aclose()
            self._judges.clear()
            self._served.set()

    async def _serve_until_cancelled(self) -> None:
        from .taskqueue import requeue_stalled, worker_app

        while True:
            app = worker_app(self.store.conninfo, self._grade_slice)
            sweeper = None
            try:
                async with app.open_async():
                    async def sweep() -> None:
                        while True:
                            await asyncio.sleep(max(0.5, self.lease / 4))
                            try:
                                for job_id in await requeue_stalled(app, self.lease, self._jobs_here):
                                    log.warning("slice %s was taken by a worker that stopped answering: queued "
                                                "again", job_id)
                            except Exception as e:      # noqa: BLE001 — the next sweep tries again
                                log.warning("stalled slices could not be looked for: %s", e)
                            self.sweeps += 1

                    sweeper = asyncio.create_task(sweep())
                    await app.run_worker_async(
                        queues=[queue_name(e) for e in self.endpoints], concurrency=self.slots,
                        name=self.holder, install_signal_handlers=False, listen_notify=True,
                        update_heartbeat_interval=max(0.5, self.lease / 5), stalled_worker_timeout=self.lease,
                        fetch_job_polling_interval=self.poll, delete_jobs="successful",
                        shutdown_graceful_timeout=STOP_GRACE + 10)
            except asyncio.CancelledError:
                raise
            except Exception as e:      # noqa: BLE001 — the database went away: serve again once it is back
                log.warning("the task queue failed (%s); serving again in 1 s", e)
            finally:
                if sweeper is not None:
                    sweeper.cancel()
            if self._leaving:
                return
            await asyncio.sleep(1.0)

    # --- one slice ----------------------------------------------------------------------------------------------
    def _context_of(self, run_id: str, generation: float) -> tuple | None:
        """(run, benchmark, work, visitor) of a run's grading `generation`; None when it ended, was stopped or
        deleted, or was resumed since (a later generation)."""
        from .lifecycle import benchmark_from_stored

        row = self.store.queued_run(run_id)
        if row is None or row["enqueued_at"] != generation or row["stop"] or row["holder"]:
            return None
        key = (run_id, generation)
        if key not in self._context:
            run = self.store.get_run(run_id)
            if run is None:
                return None
            self._context[key] = (run, benchmark_from_stored(run.benchmark), row["work"], row["visitor"])
        return self._context[key]

    async def _close_judges(self) -> None:
        """Close the judges of the runs no longer graded here (ended, stopped, resumed since: `tend` forgets their
        context) with no slice of theirs being graded."""
        for key in [k for k in self._judges if k not in self._context and not self._active.get(k[0])]:
            judge = self._judges.pop(key, None)
            if judge is not None:
                await judge.aclose()

    async def _grade_slice(self, run_id: str, generation: float, pairs: list, *, job_id: int) -> str:
        """procrastinate's task (its job `job_id`): grade `pairs` of a run; the worker that stores the run's last
        grade ends it. The job is this worker's until the task returns: its sweep never queues it again."""
        self._jobs_here.add(job_id)
        try:
            return await self._grade_slice_here(run_id, generation, pairs)
        finally:
            self._jobs_here.discard(job_id)

    async def _grade_slice_here(self, run_id: str, generation: float, pairs: list) -> str:
        from ..judging.grading import grade_pairs, run_outcome
        from .taskqueue import HandOver
        from ..judging.transport import EndpointPolicy

        if self._leaving:
            raise HandOver()
        ctx = await asyncio.to_thread(self._context_of, run_id, generation)
        if ctx is None:
            return "skipped: the run's grading ended, was stopped or resumed since"
        run, benchmark, work, visitor = ctx
        judge = self._judges.get((run_id, generation))
        if judge is None:       # one judge (one client, its connections) for every slice of the run graded here
            jset = JudgeSettings(**{k: v for k, v in work["judge"].items()
                                    if k in JudgeSettings.__dataclass_fields__})
            key = self.settings.host_key if work.get("host") else None
            judge = self._judges[(run_id, generation)] = make_judge(jset, key, redact=True,
                                                                    policy=EndpointPolicy(block_private=False))
        budget = self.budget.hook(visitor) if work.get("host") else None
        stop = asyncio.Event()
        self._active.setdefault(run_id, set()).add(stop)
        try:
            await asyncio.to_thread(self.store.mark_running, run_id)
            self.runs.add(run_id)        # (after the store says so: whoever sees it here sees the run running)
            todo = [(sid, int(r)) for sid, r in pairs]
            grading = asyncio.ensure_future(grade_pairs(
                self.store, run, benchmark, judge, todo, budget=budget, stop=stop,
                concurrency=max(1, min(len(todo), int(work.get("concurrency") or len(todo))))))
            halted = asyncio.ensure_future(stop.wait())
            await asyncio.wait({grading, halted}, return_when=asyncio.FIRST_COMPLETED)
            if not grading.done():      # Stop: no new call; the calls in flight get their grace, then go
                done, _ = await asyncio.wait({grading}, timeout=STOP_GRACE)
                if not done:
                    grading.cancel()
                    await asyncio.gather(grading, return_exceptions=True)
            halted.cancel()
            state, stats = grading.result() if not grading.cancelled() else (None, None)
        finally:
            self._active.get(run_id, set()).discard(stop)
            await self._close_judges()
        if state is not None:
            self.grades += state["graded"] + state["errored"]
        if state is not None and state["store"]:
            raise StoreError(state["store"])                   # the slice goes back to the queue
        if stop.is_set():
            if self._leaving:
                raise HandOver()                               # another worker grades what is missing
            return "stopped"
        self.slices_done += 1
        ended = None
        if state["fatal"]:
            ended = ("failed", f"stopped: {state['fatal']}")
        elif state["budget"]:
            ended = ("stopped", state["budget"])
        else:
            counts = await asyncio.to_thread(self.store.count_grades, run_id)
            if sum(counts.values()) >= len(benchmark) * run.n_runs:      # every pair has its grade (or error)
                outcome = run_outcome(self.store, run_id, benchmark, run.n_runs, state, None, stats)
                ended = (outcome.status, outcome.message)
        if ended is not None and await asyncio.to_thread(self.store.finish_queued, run_id, generation, *ended):
            self._context.pop((run_id, generation), None)
            await self._close_judges()
            log.info("run %s ended: %s %s", run_id, *ended)
        return f"{state['graded']} graded, {state['errored']} failed"
