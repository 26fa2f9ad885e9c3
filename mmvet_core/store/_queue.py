"""The grading queue: runs that a process is grading, or that a grading worker may take (`mmvet_core/runs/workers.py`).

Runs graded by the grading workers are rows nobody holds: their work is sliced into procrastinate's jobs
(`SliceFacet`, `mmvet_core/runs/taskqueue.py`). A row held by a process is a lease: its `holder` (a process id of `workers.process_id`) grades the run until `lease_until`, a time on
the database's clock (one clock for every machine), and renews it while it lives. A holder that dies stops renewing;
once its lease has passed a row only its holder could grade (a visitor's own key lives in that process's memory
alone) is reaped: its run becomes ``stopped`` and its owner resumes it.
"""
from __future__ import annotations

import json
import time
from dataclasses import dataclass

import sqlalchemy as sa

from . import _schema as t

@dataclass(frozen=True)
class RunSlots:
    """The bounds a run being queued must fit (0: no bound): live rows of its visitor (`per_visitor`) and of
    everyone (`max_active`); `besides_visitor` / `besides` count the caller's other work under the same slots that
    has no row (a process's judge checks)."""

    per_visitor: int = 0
    max_active: int = 0
    besides_visitor: int = 0
    besides: int = 0


class SlotsTaken(Exception):
    """No run slot is free: `scope` is ``"visitor"`` (the visitor's bound) or ``"server"`` (every run's)."""

    def __init__(self, scope: str):
        super().__init__(f"no free run slot ({scope})")
        self.scope = scope


INTERRUPTED = "interrupted: the process grading it stopped; Resume continues without paying again"


class QueueFacet:
    """Leases on grading work, on the database's clock."""

    def enqueue_run(self, run_id: str, *, work: dict, endpoint: str, visitor: str = "", claimable: bool,
                    holder: str | None = None, lease: float = 0.0, slots: RunSlots | None = None) -> None:
        """Put a run in the queue: held by `holder` for `lease` seconds (a process grading it itself), or waiting
        for a worker (`holder` None). A row left by an earlier grading of the run is replaced. `work` (JSON) says
        how to grade it and must hold no key.

        With `slots`, the run takes a run slot: the live rows (see `queued_run`) of `visitor`, and of everyone,
        are counted and the row inserted in one transaction under the database's lock for that visitor's slots
        (and the server's, when it bounds every run), so processes starting runs at the same instant never pass a
        bound together. `SlotsTaken` when no slot is free (nothing is written)."""
        q = t.grading_queue
        assert "api_key" not in json.dumps(work), "keys are never stored"
        values = dict(run_id=run_id, endpoint=endpoint, claimable=int(claimable), holder=holder,
                      lease_until=self._backend.clock() + lease if holder else None, visitor=visitor,
                      work=json.dumps(work), stop=0, claims=1 if holder else 0, waiting_until=None,
                      enqueued_at=time.time(), claimed_at=time.time() if holder else None)
        insert = self._backend.insert(q).values(**values)
        upsert = insert.on_conflict_do_update(
            index_elements=["run_id"], set_={k: insert.excluded[k] for k in values if k != "run_id"})
        if slots is None or not (slots.per_visitor or slots.max_active):
            self._exec(upsert)
            return
        # the server's lock first, then the visitor's: every process takes them in this order (no deadlock)
        locks = (("run-slots",) if slots.max_active else ()) + \
            ((f"run-slots:{visitor}",) if slots.per_visitor else ())
        live = sa.and_(q.c.run_id != run_id, sa.or_(q.c.claimable == 1, q.c.lease_until >= self._backend.clock()))
        with self._tx(lock=locks) as conn:
            if slots.max_active:
                taken = conn.execute(sa.select(sa.func.count()).select_from(q).where(live)).scalar_one()
                if taken + slots.besides >= slots.max_active:
                    raise SlotsTaken("server")
            if slots.per_visitor:
                taken = conn.execute(sa.select(sa.func.count()).select_from(q)
                                     .where(live, q.c.visitor == visitor)).scalar_one()
                if taken + slots.besides_visitor >= slots.per_visitor:
                    raise SlotsTaken("visitor")
            conn.execute(upsert)

    def renew_leases(self, holder: str, lease: float) -> dict[str, bool]:
        """Extend every lease `holder` holds by `lease` seconds from now: ``{run id: Stop pressed}`` of the rows it
        still holds (a run missing there was taken over, or dequeued: its grading must end)."""
        q = t.grading_queue
        with self._tx() as conn:
            rows = conn.execute(sa.update(q).where(q.c.holder == holder)
                                .values(lease_until=self._backend.clock() + lease)
                                .returning(q.c.run_id, q.c.stop)).all()
        return {r.run_id: bool(r.stop) for r in rows}

    def release_run(self, run_id: str, holder: str, *, requeue: bool = False) -> bool:
        """`holder` lets go of a run: its row goes (the grading ended), or with `requeue` the run waits for another
        worker (a worker that shuts down hands its runs over). False when `holder` did not hold it."""
        q = t.grading_queue
        mine = sa.and_(q.c.run_id == run_id, q.c.holder == holder)
        if requeue:
            return self._exec(sa.update(q).where(mine, q.c.claimable == 1)
                              .values(holder=None, lease_until=None, waiting_until=None)) > 0
        return self._exec(sa.delete(q).where(mine)) > 0

    def set_status_if_held(self, run_id: str, holder: str, status: str, message: str = "") -> bool:
        """`set_status`, only while `holder` holds the run's lease: a process whose run was taken over never writes
        over the status of the process grading it now. False when it wrote nothing."""
        q, r = t.grading_queue, t.runs
        held = sa.exists().where(q.c.run_id == run_id, q.c.holder == holder)
        return self._exec(sa.update(r).where(r.c.id == run_id, held)
                          .values(status=status, message=message, updated_at=time.time())) > 0

    def set_waiting(self, run_id: str, holder: str, until: float | None) -> None:
        """Record until when (wall clock) the run's calls wait out the judge account's rate limit (None: not)."""
        q = t.grading_queue
        self._exec(sa.update(q).where(q.c.run_id == run_id, q.c.holder == holder).values(waiting_until=until))

    def request_stop(self, run_id: str, message: str) -> str:
        """Stop a queued run, from any process: a run nobody grades (waiting for a worker, or its holder gone)
        leaves the queue and becomes ``stopped`` with `message` at once (``"stopped"``); a run being graded gets its
        Stop flag, which its holder reads at its next renewal (``"asked"``); ``"none"``: not in the queue."""
        q, r = t.grading_queue, t.runs
        now = self._backend.clock()
        with self._tx(lock="grading-queue") as conn:
            gone = conn.execute(sa.delete(q).where(q.c.run_id == run_id,
                                                   sa.or_(q.c.holder.is_(None), q.c.lease_until < now))).rowcount
            if gone:
                conn.execute(sa.update(r).where(r.c.id == run_id)
                             .values(status="stopped", message=message, updated_at=time.time()))
                return "stopped"
            asked = conn.execute(sa.update(q).where(q.c.run_id == run_id).values(stop=1)).rowcount
        return "asked" if asked else "none"

    def queued_run(self, run_id: str) -> dict | None:
        """The run's row (``work`` decoded) with ``live``: a process grades it (its lease holds) or a worker may
        still take it; None when it is not in the queue."""
        q = t.grading_queue
        live = sa.or_(q.c.claimable == 1, q.c.lease_until >= self._backend.clock())
        rows = self._rows(sa.select(q, live.label("live")).where(q.c.run_id == run_id))
        return {**_decoded(rows[0]), "live": bool(rows[0]["live"])} if rows else None

    def queued_runs(self, visitor: str | None = None) -> list[str]:
        """Ids of the runs in the queue that are live (see `queued_run`), of `visitor` only when given."""
        q = t.grading_queue
        query = sa.select(q.c.run_id).where(sa.or_(q.c.claimable == 1, q.c.lease_until >= self._backend.clock()))
        if visitor is not None:
            query = query.where(q.c.visitor == visitor)
        return [r.run_id for r in self._query(query)]

    def reap_leases(self, message: str = INTERRUPTED) -> list[str]:
        """Runs whose holder is gone and that no other process can continue (not claimable): their rows go and
        the runs become ``stopped`` with `message` (their owners resume them). Returns their ids."""
        q, r = t.grading_queue, t.runs
        with self._tx(lock="grading-queue") as conn:
            dead = [row.run_id for row in conn.execute(sa.select(q.c.run_id).where(
                q.c.claimable == 0, q.c.lease_until < self._backend.clock()))]
            if dead:
                conn.execute(sa.delete(q).where(q.c.run_id.in_(dead)))
                conn.execute(sa.update(r).where(r.c.id.in_(dead), r.c.status.in_(("running", "created", "queued")))
                             .values(status="stopped", message=message, updated_at=time.time()))
        return dead

    def database_time(self) -> float:
        """The database's clock now (seconds since the epoch)."""
        return float(self._query(sa.select(self._backend.clock()))[0][0])


class SliceFacet:
    """What the grading workers keep beside procrastinate's jobs (`mmvet_core/runs/taskqueue.py`): a run waiting for
    workers is a claimable row of the queue that nobody holds (its slots, its Stop flag, its generation
    ``enqueued_at``), graded slice by slice; the worker that stores its last grade ends it. And which judge
    endpoints the live workers serve (rows ``worker:<holder>`` of ``meta``), so a run nobody can grade says so."""

    def mark_running(self, run_id: str) -> None:
        """A worker started grading a queued run: ``queued`` becomes ``running`` (any other status stays)."""
        r = t.runs
        self._exec(sa.update(r).where(r.c.id == run_id, r.c.status == "queued")
                   .values(status="running", message="", updated_at=time.time()))

    def queue_marks(self, run_ids: list[str]) -> dict[str, tuple[float, bool]]:
        """``{run id: (enqueued_at, Stop pressed)}`` of those of `run_ids` still in the queue (one query)."""
        if not run_ids:
            return {}
        q = t.grading_queue
        rows = self._query(sa.select(q.c.run_id, q.c.enqueued_at, q.c.stop).where(q.c.run_id.in_(run_ids)))
        return {r.run_id: (float(r.enqueued_at), bool(r.stop)) for r in rows}

    def finish_queued(self, run_id: str, generation: float, status: str, message: str) -> bool:
        """End a run graded by slices: its row of this `generation` leaves the queue and the run gets `status`, in
        one transaction; False (nothing written) when the row is gone (another worker ended it, Stop, a delete)
        or belongs to a later grading (Resume)."""
        q, r = t.grading_queue, t.runs
        with self._tx() as conn:
            gone = conn.execute(sa.delete(q).where(q.c.run_id == run_id, q.c.holder.is_(None),
                                                   q.c.enqueued_at == generation)).rowcount
            if gone:
                conn.execute(sa.update(r).where(r.c.id == run_id)
                             .values(status=status, message=message, updated_at=time.time()))
        return bool(gone)

    def waiting_runs(self) -> list[dict]:
        """The runs waiting for grading workers (claimable rows nobody holds), oldest first (``work`` decoded)."""
        q = t.grading_queue
        return [_decoded(row) for row in self._rows(sa.select(q).where(q.c.claimable == 1, q.c.holder.is_(None))
                                                    .order_by(q.c.enqueued_at))]

    def announce_worker(self, holder: str, serves: list[str], info: dict | None = None) -> None:
        """A grading worker says it lives and which judge endpoints it serves (`workers.endpoint_of`); repeated
        while it runs, on the database's clock."""
        m = t.meta
        value = json.dumps({"serves": serves, "at": self.database_time(), **(info or {})})
        insert = self._backend.insert(m).values(key=f"worker:{holder}", value=value)
        self._exec(insert.on_conflict_do_update(index_elements=["key"], set_={"value": insert.excluded.value}))

    def forget_worker(self, holder: str) -> None:
        self._exec(sa.delete(t.meta).where(t.meta.c.key == f"worker:{holder}"))

    def live_workers(self, max_age: float) -> dict[str, dict]:
        """The workers that announced themselves in the last `max_age` seconds: ``{holder: what it said}``; rows
        older than an hour are removed (workers that died)."""
        m, now = t.meta, self.database_time()
        out = {}
        for row in self._query(sa.select(m.c.key, m.c.value).where(m.c.key.like("worker:%"))):
            try:
                said = json.loads(row.value)
                age = now - float(said["at"])
            except (ValueError, KeyError, TypeError):
                continue
            if age <= max_age:
                out[row.key.split(":", 1)[1]] = said
            elif age > 3600:
                self._exec(sa.delete(m).where(m.c.key == row.key))
        return out


def _decoded(row) -> dict:
    out = dict(row)
    out["work"] = json.loads(out["work"])
    out["stop"] = bool(out["stop"])
    return out
