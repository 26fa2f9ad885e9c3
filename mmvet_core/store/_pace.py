"""Each judge account's pace, shared by every process that calls it (`mmvet_core/judging/sharedlimit.py`)."""
from __future__ import annotations

import json
import time
from typing import Any, Callable

import sqlalchemy as sa

from . import _schema as t

#: change(state, paused_until, now) -> (result, the new state or None to keep it, the new paused_until)
PaceChange = Callable[[dict, float, float], tuple[Any, dict | None, float]]


class PaceFacet:
    def update_pace(self, account: str, change: PaceChange) -> Any:
        """Read, change and write an account's pace as one step that no other process interleaves (a lock named
        after the account): ``change(state, paused_until, now)`` gets the stored state (``{}`` at first), until
        when the account is paused and the database's clock, all in seconds on that clock, and returns ``(result,
        new state or None, new paused_until)``; nothing is written when neither changed. Returns ``result``.
        (Called twice per judge call of a shared account: its statements are built once per store.)"""
        read, write = self._prepared("pace_read", _read), self._prepared("pace_write", _write)
        with self._tx(lock=f"pace:{account}") as conn:
            row = conn.execute(read, {"account": account}).one()
            state, paused = json.loads(row.state) if row.state else {}, float(row.paused or 0.0)
            result, new_state, new_paused = change(state, paused, float(row.now))
            if new_state is not None or new_paused != paused:
                conn.execute(write, {"account": account, "paused_until": new_paused, "updated_at": time.time(),
                                     "state": json.dumps(new_state if new_state is not None else state)})
        return result


    def prune_paces(self, prefix: str, *, idle_s: float) -> int:
        """Forget the paces whose account starts with `prefix` and that nobody changed for `idle_s` seconds (the
        visitors' request buckets: `requestlimit.SharedRequestLimiter`); returns how many."""
        p = t.judge_pace
        return self._exec(sa.delete(p).where(p.c.account.startswith(prefix, autoescape=True),
                                             p.c.updated_at < time.time() - idle_s))


def _read(db) -> sa.Select:
    p, account = t.judge_pace, sa.bindparam("account")
    return sa.select(db.clock().label("now"),
                     sa.select(p.c.state).where(p.c.account == account).scalar_subquery().label("state"),
                     sa.select(p.c.paused_until).where(p.c.account == account).scalar_subquery().label("paused"))


def _write(db) -> sa.Insert:
    p = t.judge_pace
    insert = db.insert(p).values(account=sa.bindparam("account"), state=sa.bindparam("state"),
                                 paused_until=sa.bindparam("paused_until"), updated_at=sa.bindparam("updated_at"))
    return insert.on_conflict_do_update(index_elements=["account"],
                                        set_={k: insert.excluded[k] for k in ("state", "paused_until", "updated_at")})
