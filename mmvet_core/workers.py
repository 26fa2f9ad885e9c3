"""Grading beyond one process: runs under leases in the database, and grading workers that take them.

One machine, one process (the default: SQLite, ``MMVET_WORKERS`` unset) needs none of this: `jobs.JobManager`
grades every run in the app's process. As soon as processes share a database (PostgreSQL, or grading workers
beside the app), each of them uses `LeasedJobs` instead:

- **Every run being graded is a row of the grading queue** (`Store.enqueue_run`), held by the process grading it
  under a lease on the database's clock that a heartbeat thread renews every `lease / 5` seconds. Any process
  then knows which runs grade anywhere (`is_running`), until when one waits out a rate limit, and can stop it:
  Stop sets the row's flag, which its holder reads at its next renewal.
- **Workers** (`python -m mmvet_core worker`, `Worker`) take queued runs (`Store.claim_run`: ``FOR UPDATE SKIP
  LOCKED`` on PostgreSQL) whose judge they can call: a run graded with the host's key at the endpoint the worker
  has the host's key for, or with no key (the offline baseline). With ``MMVET_WORKERS=external`` the app only
  queues such runs; a run graded with a visitor's own key still grades in the app process that received the key
  (keys never leave the memory of the process they were typed into, and are never stored).
- **A holder that dies** (kill -9, a machine gone) stops renewing. Once its lease has passed, another worker takes
  the run over and grades what is missing: every answer was committed as it arrived (the answer cache), so only
  the calls in flight at the death can be asked again. A run only its dead holder could grade (a visitor's key)
  becomes ``stopped`` (`Store.reap_leases`) and its owner resumes it from any replica.
- **A holder that lost its lease** (it stalled past it and another took over) ends its grading at its next
  renewal and writes no status over the new holder's (`Store.set_status_if_held`).
- **Run slots hold across processes**: a run's row takes its slot in the transaction that counts the visitor's
  (and the server's) live rows, under the database's lock for that visitor (`Store.enqueue_run` with `RunSlots`),
  so replicas starting runs of one visitor at the same instant never pass `max_runs_per_visitor` together.
- **One judge account, one limit**: the limiters of the processes' loops pace through the database
  (`ratelimit.share_limits`, `sharedlimit.SharedPace`); the host's daily budgets are charged in one transaction
  of the database (`budget.HostBudget`).
"""
from __future__ import annotations

import logging
import os
import secrets
import socket
import threading
import time

from .benchmark import Benchmark
from .budget import HostBudget
from .jobs import STOPPED, JobManager, TooManyRuns
from .judge import Judge, JudgeSettings, make_judge
from .ratelimit import share_limits
from .sharedlimit import pace_source
from .store import RunSlots, SlotsTaken, Store, StoreError

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
    which any worker can run). A worker takes only runs of the endpoints it holds a key for.

    >>> endpoint_of(JudgeSettings(base_url="http://judge/v1/")), endpoint_of(JudgeSettings(provider="baseline"))
    ('openai|http://judge/v1|', '')
    """
    if settings.provider == "baseline":
        return ""
    return "|".join([settings.provider, (settings.base_url or "").rstrip("/"), settings.api_version or ""])


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
        claimable = bool(host) or settings.provider == "baseline"
        self._remote.pop(run_id, None)
        # `start` checked the slots already; other processes may be starting runs of this visitor at this very
        # instant, so the row takes its slot in one transaction with the count (the store's lock per visitor)
        slots = self._slots(visitor)
        try:
            if self.external and claimable:
                self.store.enqueue_run(run_id, work=work, endpoint=endpoint_of(settings), visitor=visitor or "",
                                       claimable=True, slots=slots)
                self.store.set_status(run_id, "queued", QUEUED)
                self.call(judge.aclose(), timeout=10)      # (never used: a worker builds its own)
                return
            self.store.enqueue_run(run_id, work=work, endpoint=endpoint_of(settings), visitor=visitor or "",
                                   claimable=False, holder=self.holder, lease=self.lease, slots=slots)
        except SlotsTaken as e:
            raise self.too_many(e.scope) from None
        except StoreError as e:
            raise QueueUnavailable(f"The run could not be queued: {e}") from None
        self.adopt(run_id, benchmark, judge, concurrency=concurrency, budget=budget, visitor=visitor,
                   batch_poll=batch_poll)

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


def make_jobs(store: Store, *, workers: str = IN_PROCESS, lease: float = LEASE_SECONDS, max_active: int = 0,
              per_visitor: int = 0) -> JobManager:
    """The app's job manager: `JobManager` for the single-machine default (a SQLite store, grading in-process),
    `LeasedJobs` when processes share the database (PostgreSQL) or `workers` is ``external``."""
    if workers not in (IN_PROCESS, EXTERNAL):
        raise ValueError(f"MMVET_WORKERS must be {IN_PROCESS!r} (the default) or {EXTERNAL!r}, not {workers!r}")
    if store.backend == "sqlite" and workers == IN_PROCESS:
        return JobManager(store, max_active=max_active, per_visitor=per_visitor)
    return LeasedJobs(store, external=workers == EXTERNAL, lease=lease, max_active=max_active,
                      per_visitor=per_visitor)


# --- the worker ------------------------------------------------------------------------------------------------
class Worker:
    """Takes queued runs and grades up to `slots` of them at once, each with the judge its row names (the host's
    key from `settings`, or none for the offline baseline); polls the queue every `poll` seconds."""

    def __init__(self, store: Store, settings, *, slots: int = 4, lease: float = LEASE_SECONDS, poll: float = 1.0):
        self.store, self.settings, self.slots, self.poll = store, settings, max(1, slots), poll
        self.jobs = LeasedJobs(store, lease=lease)
        self.budget = HostBudget(store, settings.limits)
        host = settings.host_settings()
        self.endpoints = [""] + ([endpoint_of(host)] if settings.host_key else [])
        self.taken = 0

    @property
    def holder(self) -> str:
        return self.jobs.holder

    def busy(self) -> int:
        return sum(self.jobs.is_running(r) for r in list(self.jobs._leased))

    def take(self) -> str | None:
        """Claim one run and start grading it; its id, or None when the queue has none for this worker."""
        with self.jobs._lock:       # the heartbeat lets go of rows held without a job: not of this one
            row = self.store.claim_run(self.holder, self.jobs.lease, self.endpoints)
            if row is None:
                return None
            run_id = row["run_id"]
            if run_id in self.jobs._leased:     # its own run, whose lease passed while the database was away
                return None
            try:
                started = self._start(row)
            except Exception:
                self.store.release_run(run_id, self.holder, requeue=True)   # another worker may manage
                raise
        if started:
            self.taken += 1
            log.info("run %s taken (claim %d)", run_id, row["claims"])
            return run_id
        return None

    def _start(self, row: dict) -> bool:
        from .runs import benchmark_from_stored
        from .transport import EndpointPolicy

        run_id, work = row["run_id"], row["work"]
        run = self.store.get_run(run_id)
        if run is None or row["stop"]:      # deleted, or stopped while nobody graded it
            if run is not None:
                self.store.set_status_if_held(run_id, self.holder, "stopped", STOPPED)
            self.store.release_run(run_id, self.holder)
            return False
        jset = JudgeSettings(**{k: v for k, v in work["judge"].items() if k in JudgeSettings.__dataclass_fields__})
        key = self.settings.host_key if work.get("host") else None
        judge = make_judge(jset, key, policy=EndpointPolicy(block_private=False), redact=True)
        budget = self.budget.hook(row["visitor"]) if work.get("host") else None
        self.jobs.adopt(run_id, benchmark_from_stored(run.benchmark), judge,
                        concurrency=int(work.get("concurrency") or 16), budget=budget, visitor=row["visitor"],
                        batch_poll=work.get("batch_poll"))
        return True

    def run(self, stop: threading.Event) -> None:
        """Take and grade runs until `stop` is set; then hand the runs being graded back to the queue."""
        try:
            while not stop.is_set():
                took = None
                if self.busy() < self.slots:
                    try:
                        took = self.take()
                    except StoreError as e:
                        log.warning("the queue cannot be read: %s", e)
                if took is None:
                    stop.wait(self.poll)
        finally:
            self.jobs.shutdown(requeue=True)
