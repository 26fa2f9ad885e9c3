"""Stored judge checks (`mmvet_core/successors/judgecheck.py`): a judge graded the reference sets, here is how it did; and the
one stored official-equivalent estimate per check and graded answers (`mmvet_core/successors/equivalence.py`).

A check records who made it (``scope``): this server with its own key (``host``), or a visitor with their own key
(``visitor``, with the visitor's owner hash: only that visitor sees it). Checks stored before scopes existed read
``""``: nobody can tell who made them, so nothing trusts them."""
from __future__ import annotations

import json
import time

import sqlalchemy as sa

from . import _schema as t
from ._records import new_run_id


class ChecksFacet:
    def put_judge_check(self, fingerprint: str, judge: dict, result: dict, *, prompt: str = "",
                        refs: str = "", scope: str = "host", owner_hash: str = "") -> str:
        """Store the result of a judge check under its judge (fingerprint: `judgecheck.check_fingerprint`, the
        endpoint, model and token limit, scoped by who made it; the endpoint and model are kept in their own
        columns too), the prompt it graded with, its reference sets (`judgecheck.references_key`) and who made it
        (`scope`: ``host`` or ``visitor``; `owner_hash` for a visitor's); returns its id."""
        assert "api_key" not in judge, "keys are never stored"
        check_id = new_run_id()
        self._exec(sa.insert(t.judge_checks).values(
            id=check_id, created_at=time.time(), fingerprint=fingerprint, judge=json.dumps(judge),
            result=json.dumps(result), endpoint=(judge.get("base_url") or "").rstrip("/"),
            judge_model=str(judge.get("model") or ""), prompt=prompt, refs=refs, scope=scope,
            owner_hash=owner_hash))
        return check_id

    def latest_judge_check(self, fingerprint: str, *, refs: str | None = None) -> dict | None:
        """The latest stored check result of the judge with this fingerprint (of these reference sets when
        `refs` is given), or None; never a check stored before checks recorded who made them."""
        c = t.judge_checks.c
        query = sa.select(c.result).where(c.fingerprint == fingerprint, c.scope.in_(("host", "visitor")))
        if refs is not None:
            query = query.where(c.refs == refs)
        rows = self._query(query.order_by(c.created_at.desc()).limit(1))
        return json.loads(rows[0].result) if rows else None

    def judge_checks_stamp(self) -> tuple[int, float]:
        """(how many checks are stored, when the latest was): changes whenever a check is stored."""
        c = t.judge_checks.c
        row = self._query(sa.select(sa.func.count(), sa.func.coalesce(sa.func.max(c.created_at), 0)))[0]
        return int(row[0]), float(row[1])

    def judge_checks(self, limit: int = 500) -> list[dict]:
        """The latest check of every (judge, prompt, reference sets) stored, newest first: dicts with ``id``,
        ``created_at``, ``fingerprint``, ``endpoint``, ``judge_model``, ``prompt``, ``refs``, ``scope``,
        ``owner_hash``, ``judge`` and ``result`` (parsed). Every scope: the caller filters (`judgecheck`)."""
        c = t.judge_checks
        latest = (sa.select(c.c.fingerprint, c.c.prompt, c.c.refs, sa.func.max(c.c.created_at).label("latest"))
                  .group_by(c.c.fingerprint, c.c.prompt, c.c.refs).subquery("l"))
        rows = self._rows(
            sa.select(c).join(latest, sa.and_(c.c.fingerprint == latest.c.fingerprint,
                                              c.c.prompt == latest.c.prompt, c.c.refs == latest.c.refs,
                                              c.c.created_at == latest.c.latest))
            .order_by(c.c.created_at.desc()).limit(int(limit)))
        out = []
        for r in rows:
            judge = json.loads(r["judge"])
            out.append({**r, "judge": judge, "result": json.loads(r["result"]),
                        # checks stored before these columns existed: read them from the judge's settings
                        "endpoint": r["endpoint"] or (judge.get("base_url") or "").rstrip("/"),
                        "judge_model": r["judge_model"] or str(judge.get("model") or "")})
        return out

    # --- the one stored estimate per check and graded answers (`equivalence.stored_estimate`) ---------------
    def get_estimate(self, check_id: str, inputs: str) -> dict | None:
        """The stored estimate (an `equivalence.Equivalence` dict) of these inputs under this check, or None."""
        e = t.estimates.c
        rows = self._query(sa.select(e.result).where(e.check_id == check_id, e.inputs == inputs))
        return json.loads(rows[0].result) if rows else None

    def put_estimate(self, check_id: str, inputs: str, result: dict) -> dict:
        """Store an estimate unless one is stored already, and return the stored one: the first stored wins, so
        two processes computing it at once end up showing the same one."""
        self._exec(self._backend.insert(t.estimates).values(check_id=check_id, inputs=inputs,
                                                            result=json.dumps(result), created_at=time.time())
                   .on_conflict_do_nothing())
        return self.get_estimate(check_id, inputs) or result
