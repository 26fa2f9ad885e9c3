"""Runs, their grades and their manual overrides."""
from __future__ import annotations

import json
import time

import sqlalchemy as sa

from . import _schema as t
from ._records import GradeRow, RunRecord, grade_row, new_run_id, run_record

_WRITTEN_ORDER = (t.grades.c.updated_at, t.grades.c.sample_id, t.grades.c.run_index)


#: Seconds a run's "running" (or "queued") status set by a start counts as a start in progress, for the start-once
#: claims (`RunsFacet.claim_start`, `claim_job`) of every process on the database.
START_FRESH_S = 60.0


class RunsFacet:
    """Runs (one results file graded by one judge configuration), grades and overrides."""

    # --- runs ------------------------------------------------------------------------------------------------
    def create_run(self, *, model_name: str, benchmark: dict, n_runs: int, judge: dict,
                   predictions: dict[str, str], results_format: str = "", owner: str = "",
                   fingerprint: str = "", run_id: str | None = None) -> str:
        assert "api_key" not in judge, "keys are never stored"
        run_id = run_id or new_run_id()
        now = time.time()
        self._exec(sa.insert(t.runs).values(
            id=run_id, created_at=now, updated_at=now, model_name=model_name, benchmark=json.dumps(benchmark),
            n_runs=n_runs, judge=json.dumps(judge), status="created", message="", results_format=results_format,
            predictions=json.dumps(predictions, ensure_ascii=False), owner=owner, fingerprint=fingerprint))
        return run_id

    def get_run(self, run_id: str) -> RunRecord | None:
        rows = self._rows(self._prepared("get_run", lambda _: sa.select(t.runs).where(
            t.runs.c.id == sa.bindparam("run_id"))), {"run_id": run_id})
        return run_record(rows[0]) if rows else None

    def find_run(self, fingerprint: str) -> RunRecord | None:
        """The most recent run with this fingerprint (the CLI resumes it)."""
        rows = self._rows(sa.select(t.runs).where(t.runs.c.fingerprint == fingerprint)
                          .order_by(t.runs.c.created_at.desc()).limit(1))
        return run_record(rows[0]) if rows else None

    def list_runs(self, owner: str) -> list[RunRecord]:
        """Runs of one owner only (no page lists other visitors' runs)."""
        rows = self._rows(sa.select(t.runs).where(t.runs.c.owner == owner).order_by(t.runs.c.created_at.desc()))
        return [run_record(r) for r in rows]

    def update_run_judge(self, run_id: str, judge: dict) -> None:
        """Replace a run's judge record (provenance: the endpoints a resumed run was graded on)."""
        assert "api_key" not in judge, "keys are never stored"
        self._exec(sa.update(t.runs).where(t.runs.c.id == run_id).values(judge=json.dumps(judge)))

    def rename_run(self, run_id: str, model_name: str) -> None:
        self._exec(sa.update(t.runs).where(t.runs.c.id == run_id)
                   .values(model_name=model_name, updated_at=time.time()))

    def delete_run(self, run_id: str) -> None:
        """A run and everything stored for it (grades, overrides, batches); the shared answer cache stays."""
        with self._tx() as conn:
            for table in (t.grades, t.overrides, t.batches, t.grading_queue):
                conn.execute(sa.delete(table).where(table.c.run_id == run_id))
            conn.execute(sa.delete(t.runs).where(t.runs.c.id == run_id))

    def mark_interrupted(self) -> int:
        """App runs left 'running' by a previous process (a restart) become 'stopped'; returns how many. A run in
        the grading queue is left alone: another process grades it, or will (`QueueFacet`)."""
        queued = sa.exists().where(t.grading_queue.c.run_id == t.runs.c.id)
        return self._exec(sa.update(t.runs).where(t.runs.c.status == "running", t.runs.c.owner != "",
                                                  ~queued).values(
            status="stopped", message="interrupted by a server restart; Resume continues without paying again",
            updated_at=time.time()))

    def claim_start(self, run_id: str, message: str = "", *, fresh_s: float = START_FRESH_S) -> bool:
        """Claim the start of a run's grading, once for every process on this database: the run becomes
        ``running`` unless it already is ``running`` or ``queued`` since less than `fresh_s` seconds (another
        process started it an instant ago: a resume clicked on two replicas at once). One statement under the
        run's lock. False when another start has it (nothing written). The caller has checked that no job grades
        the run (`JobManager.is_running`); a status older than `fresh_s` without a job is a dead process's."""
        r = t.runs
        with self._tx(lock=f"start:{run_id}") as conn:
            return conn.execute(sa.update(r).where(
                r.c.id == run_id,
                sa.or_(r.c.status.not_in(("running", "queued")), r.c.updated_at < time.time() - fresh_s))
                .values(status="running", message=message, updated_at=time.time())).rowcount == 1

    def claim_job(self, run_id: str, owner: str, fingerprint: str, *, fresh_s: float = START_FRESH_S) -> str:
        """Claim a new run's start for its job (`owner`, `fingerprint`), once for every process on this database:
        returns `run_id` (now ``running``) or, when another run of the same job was started by any process less
        than `fresh_s` seconds ago or is still ``running`` / ``queued``, that run's id (nothing written). One
        transaction under the job's lock: two replicas starting the same job at the same instant start it once."""
        r = t.runs
        with self._tx(lock=f"job:{owner}:{fingerprint}") as conn:
            other = conn.execute(sa.select(r.c.id).where(
                r.c.owner == owner, r.c.fingerprint == fingerprint, r.c.id != run_id,
                r.c.status.in_(("running", "queued")), r.c.updated_at >= time.time() - fresh_s)
                .order_by(r.c.created_at).limit(1)).scalar()
            if other is not None:
                return other
            conn.execute(sa.update(r).where(r.c.id == run_id)
                         .values(status="running", message="", updated_at=time.time()))
            return run_id

    def set_status(self, run_id: str, status: str, message: str = "") -> None:
        self._exec(sa.update(t.runs).where(t.runs.c.id == run_id)
                   .values(status=status, message=message, updated_at=time.time()))

    # --- grades ----------------------------------------------------------------------------------------------
    def put_grade(self, row: GradeRow) -> None:
        """Store a grade (replacing the run's earlier grade of the same sample and judge run); committed when
        this returns."""
        self._fast("put_grade", _put_grade, {
            "run_id": row.run_id, "sample_id": row.sample_id, "run_index": row.run_index, "status": row.status,
            "score": row.score, "content": row.content, "judge_model": row.judge_model,
            "attempts": json.dumps(row.attempts, ensure_ascii=False), "error": row.error,
            "flags": json.dumps(row.flags), "updated_at": row.updated_at})

    def grades(self, run_id: str, *, evidence_for: str | None = "*") -> list[GradeRow]:
        """A run's grades, in the order they were written. Decoding every attempt is the costly part of reading
        a run, so `evidence_for` says whose attempts to load: ``"*"`` all, a sample id that sample's only, None
        nobody's (``attempts=[]``)."""
        if evidence_for == "*":
            rows = self._query(self._prepared("grades", _grades_all), {"run_id": run_id})
        else:
            rows = self._query(self._prepared("grades_of", _grades_evidence_of),
                               {"run_id": run_id, "evidence_for": evidence_for or ""})
        return [grade_row(r._mapping) for r in rows]

    def grades_since(self, run_id: str, since: float) -> list[GradeRow]:
        g = t.grades
        rows = self._rows(sa.select(g).where(g.c.run_id == run_id, g.c.updated_at > since)
                          .order_by(*_WRITTEN_ORDER))
        return [grade_row(r) for r in rows]

    def run_usage(self, run_id: str) -> dict[str, int]:
        """Judge calls made for a run's stored grades and their tokens (answers from the cache or imported from a
        file cost nothing and are counted apart), summed by the database over the attempts' JSON."""
        db, g = self._backend, t.grades
        a = db.json_items(g.c.attempts).alias("a")
        cached = db.json_true(a.c.value, "cached")

        def paid(expr):
            return sa.func.coalesce(sa.func.sum(sa.case((cached, 0), else_=expr)), 0)

        row = self._query(
            sa.select(paid(1).label("calls"),
                      sa.func.coalesce(sa.func.sum(sa.case((cached, 1), else_=0)), 0).label("cached"),
                      paid(sa.func.coalesce(db.json_number(a.c.value, "prompt_tokens"), 0)).label("prompt_tokens"),
                      paid(sa.func.coalesce(db.json_number(a.c.value, "completion_tokens"), 0))
                      .label("completion_tokens"))
            .select_from(g).join(a, sa.true())
            .where(g.c.run_id == run_id, sa.not_(db.json_true(a.c.value, "imported"))))[0]
        return {"calls": int(row.calls), "cached_answers": int(row.cached), "prompt_tokens": int(row.prompt_tokens),
                "completion_tokens": int(row.completion_tokens)}

    def count_grades(self, run_id: str) -> dict[str, int]:
        g = t.grades
        rows = self._query(sa.select(g.c.status, sa.func.count().label("n")).where(g.c.run_id == run_id)
                           .group_by(g.c.status))
        return {r.status: int(r.n) for r in rows}

    # --- overrides -------------------------------------------------------------------------------------------
    def set_override(self, run_id: str, sample_id: str, score: float, reason: str) -> None:
        insert = self._backend.insert(t.overrides).values(run_id=run_id, sample_id=sample_id, score=score,
                                                          reason=reason, created_at=time.time())
        with self._tx() as conn:
            conn.execute(insert.on_conflict_do_update(
                index_elements=["run_id", "sample_id"],
                set_={"score": insert.excluded.score, "reason": insert.excluded.reason,
                      "created_at": insert.excluded.created_at}))
            conn.execute(sa.update(t.runs).where(t.runs.c.id == run_id).values(updated_at=time.time()))

    def clear_override(self, run_id: str, sample_id: str) -> None:
        o = t.overrides
        with self._tx() as conn:
            conn.execute(sa.delete(o).where(o.c.run_id == run_id, o.c.sample_id == sample_id))
            conn.execute(sa.update(t.runs).where(t.runs.c.id == run_id).values(updated_at=time.time()))

    def overrides(self, run_id: str) -> dict[str, tuple[float, str]]:
        o = t.overrides
        rows = self._query(sa.select(o.c.sample_id, o.c.score, o.c.reason).where(o.c.run_id == run_id))
        return {r.sample_id: (r.score, r.reason) for r in rows}


def _put_grade(db) -> sa.Insert:
    insert = db.insert(t.grades)
    keys = [c.name for c in t.grades.primary_key]
    return insert.on_conflict_do_update(
        index_elements=keys, set_={c.name: insert.excluded[c.name] for c in t.grades.c if c.name not in keys})


def _grades_all(_db) -> sa.Select:
    return sa.select(t.grades).where(t.grades.c.run_id == sa.bindparam("run_id")).order_by(*_WRITTEN_ORDER)


def _grades_evidence_of(_db) -> sa.Select:
    g = t.grades
    attempts = sa.case((g.c.sample_id == sa.bindparam("evidence_for"), g.c.attempts), else_=sa.literal("[]"))
    return (sa.select(*(c for c in g.c if c.name != "attempts"), attempts.label("attempts"))
            .where(g.c.run_id == sa.bindparam("run_id")).order_by(*_WRITTEN_ORDER))
