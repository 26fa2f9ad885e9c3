"""Each judge account's pace, shared by every process that calls it (`mmvet_core/sharedlimit.py`)."""
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
        new state or None, new paused_until)``; nothing is written when neither changed. Returns ``result``."""
        p, clock = t.judge_pace, self._backend.clock()
        with self._tx(lock=f"pace:{account}") as conn:
            row = conn.execute(sa.select(
                clock.label("now"),
                sa.select(p.c.state).where(p.c.account == account).scalar_subquery().label("state"),
                sa.select(p.c.paused_until).where(p.c.account == account).scalar_subquery().label("paused"))).one()
            state, paused = json.loads(row.state) if row.state else {}, float(row.paused or 0.0)
            result, new_state, new_paused = change(state, paused, float(row.now))
            if new_state is not None or new_paused != paused:
                values = dict(state=json.dumps(new_state if new_state is not None else state),
                              paused_until=new_paused, updated_at=time.time())
                insert = self._backend.insert(p).values(account=account, **values)
                conn.execute(insert.on_conflict_do_update(index_elements=["account"],
                                                          set_={k: insert.excluded[k] for k in values}))
        return result
