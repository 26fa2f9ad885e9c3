"""What keeps storage bounded (`mmvet_core/hosting/keeping.py`) and what pages poll: change stamps, run summaries,
quotas, expiry and pins."""
from __future__ import annotations

import time

import sqlalchemy as sa

from . import _schema as t


class KeepingFacet:
    def change_stamp(self, run_id: str) -> tuple | None:
        """What changes whenever a run's status, name, overrides or grades change (None: no such run): one cheap
        query, so a status asked by many viewers is recomputed only when this differs."""
        rows = self._fast("change_stamp", _change_stamp, {"run_id": run_id}, fetch=True)
        return (*rows[0][:3], int(rows[0][3]), rows[0][4]) if rows else None

    def run_summaries(self, owner: str, limit: int = 100) -> list[dict]:
        """An owner's runs, newest first, with only what a list shows (no predictions or samples decoded)."""
        db, r, k = self._backend, t.runs, t.run_keeping
        return self._rows(
            sa.select(r.c.id, r.c.model_name, r.c.n_runs, r.c.created_at, r.c.updated_at, r.c.status,
                      db.json_text(r.c.judge, "model").label("judge_model"),
                      db.json_text(r.c.judge, "provider").label("provider"),
                      db.json_text(r.c.benchmark, "name").label("bench_name"),
                      db.json_text(r.c.benchmark, "subset").label("subset"), k.c.total, k.c.total_stamp)
            .select_from(r.outerjoin(k, k.c.run_id == r.c.id))
            .where(r.c.owner == owner).order_by(r.c.created_at.desc()).limit(limit))

    def keep_run(self, run_id: str, visitor: str, *, host: bool = False) -> None:
        """Record who stored a run (its visitor's quota) and whether the host's key graded it (never expires)."""
        k = t.run_keeping
        insert = self._backend.insert(k).values(run_id=run_id, visitor=visitor, host=int(host),
                                                opened_at=time.time())
        self._exec(insert.on_conflict_do_update(
            index_elements=["run_id"],
            set_={"host": sa.case((insert.excluded.host > k.c.host, insert.excluded.host), else_=k.c.host)}))

    def touch_run(self, run_id: str, when: float | None = None) -> None:
        """Someone opened the run now (it does not expire before the expiry time has passed again)."""
        self._exec(self._prepared("touch_run", _touch_run),
                   {"run_id": run_id, "opened_at": time.time() if when is None else when})

    def set_total(self, run_id: str, total: float | None, stamp: str) -> None:
        insert = self._backend.insert(t.run_keeping).values(run_id=run_id, opened_at=time.time(), total=total,
                                                            total_stamp=stamp)
        self._exec(insert.on_conflict_do_update(
            index_elements=["run_id"],
            set_={"total": insert.excluded.total, "total_stamp": insert.excluded.total_stamp}))

    def visitor_storage(self, visitor: str) -> tuple[int, int]:
        """(runs, bytes) a visitor stores: predictions, samples, grades with their judge answers."""
        size, r, g, k = self._backend.byte_length, t.runs, t.grades, t.run_keeping
        grades = (sa.select(sa.func.sum(size(g.c.attempts) + sa.func.coalesce(size(g.c.content), 0)))
                  .where(g.c.run_id == r.c.id).scalar_subquery())
        row = self._query(
            sa.select(sa.func.count(),
                      sa.func.coalesce(sa.func.sum(size(r.c.predictions) + size(r.c.benchmark)
                                                   + sa.func.coalesce(grades, 0)), 0))
            .select_from(k.join(r, r.c.id == k.c.run_id)).where(k.c.visitor == visitor))[0]
        return int(row[0]), int(row[1])

    def pin_run(self, run_id: str, reason: str) -> None:
        """Keep a run whoever opens it or not (`protected_run_ids`); `reason` names why (``published``)."""
        self._exec(self._backend.insert(t.run_pins).values(run_id=run_id, reason=reason).on_conflict_do_nothing())

    def unpin_run(self, run_id: str, reason: str) -> None:
        p = t.run_pins
        self._exec(sa.delete(p).where(p.c.run_id == run_id, p.c.reason == reason))

    def protected_run_ids(self) -> set[str]:
        """Runs that never expire: pinned ones (`pin_run`) and those graded with the host's key."""
        k = t.run_keeping
        rows = self._query(sa.union(sa.select(t.run_pins.c.run_id), sa.select(k.c.run_id).where(k.c.host == 1)))
        return {r[0] for r in rows}

    def unopened_runs(self, before: float, limit: int = 500) -> list[str]:
        """App runs (an owner, not the CLI's) nobody opened since `before` (never-opened ones count from their last
        change), pinned and host-key runs excepted, oldest first."""
        r, k = t.runs, t.run_keeping
        opened = sa.func.coalesce(k.c.opened_at, r.c.updated_at)
        rows = self._query(
            sa.select(r.c.id).select_from(r.outerjoin(k, k.c.run_id == r.c.id))
            .where(r.c.owner != "", r.c.status != "running", sa.func.coalesce(k.c.host, 0) == 0, opened < before,
                   r.c.id.not_in(sa.select(t.run_pins.c.run_id)))
            .order_by(opened).limit(limit))
        return [row[0] for row in rows]

    def forget_run(self, run_id: str) -> None:
        """`delete_run` and the run's keeping rows."""
        self.delete_run(run_id)
        with self._tx() as conn:
            conn.execute(sa.delete(t.run_keeping).where(t.run_keeping.c.run_id == run_id))
            conn.execute(sa.delete(t.run_pins).where(t.run_pins.c.run_id == run_id))


def _change_stamp(_db) -> sa.Select:
    r, g = t.runs, t.grades
    n = sa.select(sa.func.count()).where(g.c.run_id == r.c.id).scalar_subquery()
    last = sa.select(sa.func.max(g.c.updated_at)).where(g.c.run_id == r.c.id).scalar_subquery()
    return sa.select(r.c.status, r.c.updated_at, r.c.message, n, last).where(r.c.id == sa.bindparam("run_id"))


def _touch_run(db) -> sa.Insert:
    insert = db.insert(t.run_keeping)
    return insert.on_conflict_do_update(index_elements=["run_id"], set_={"opened_at": insert.excluded.opened_at})
