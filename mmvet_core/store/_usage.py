"""Judge calls and tokens spent per day and visitor: what the host's budgets (`mmvet_core/budget.py`) count."""
from __future__ import annotations

import sqlalchemy as sa

from . import _schema as t


class UsageFacet:
    def add_usage(self, day: str, visitor: str, calls: int = 1, tokens: int = 0) -> None:
        """Add calls and tokens to a visitor's day (one atomic statement: processes counting at once add up)."""
        self._fast("add_usage", _add_usage, {"day": day, "visitor": visitor, "calls": calls, "tokens": tokens})

    def charge_usage(self, day: str, visitor: str, tokens: int, *, calls_per_visitor: int = 0,
                     calls_global: int = 0, tokens_per_visitor: int = 0, tokens_global: int = 0) -> str | None:
        """Count one call of `tokens` tokens for `visitor` and the day, unless it would pass a daily limit (0: no
        limit): a limit of calls is reached when the count is at it, one of tokens when fewer than `tokens` are
        left. The counts are read and written in one transaction under the budget's lock, so processes charging
        at once never pass a limit together. Returns the name of the limit that refused (``calls_per_visitor``,
        ``calls_global``, ``tokens_per_visitor``, ``tokens_global``), or None when the call was counted."""
        u = t.usage.c
        limits = [("calls_per_visitor", calls_per_visitor, u.calls, visitor, 1),
                  ("calls_global", calls_global, u.calls, None, 1),
                  ("tokens_per_visitor", tokens_per_visitor, u.tokens, visitor, tokens),
                  ("tokens_global", tokens_global, u.tokens, None, tokens)]
        with self._tx(lock="budget") as conn:
            for name, limit, column, who, cost in limits:
                if not limit:
                    continue
                query = sa.select(sa.func.coalesce(sa.func.sum(column), 0)).where(u.day == day)
                if who is not None:
                    query = query.where(u.visitor == who)
                if limit - int(conn.execute(query).scalar()) < cost:
                    return name
            insert = self._backend.insert(t.usage).values(day=day, visitor=visitor, calls=1, tokens=tokens)
            conn.execute(insert.on_conflict_do_update(
                index_elements=["day", "visitor"],
                set_={"calls": t.usage.c.calls + insert.excluded.calls,
                      "tokens": t.usage.c.tokens + insert.excluded.tokens}))
        return None

    def token_usage(self, day: str, visitor: str | None = None) -> int:
        return self._count("tokens", day, visitor)

    def usage(self, day: str, visitor: str | None = None) -> int:
        return self._count("calls", day, visitor)

    def _count(self, column: str, day: str, visitor: str | None) -> int:
        name = f"usage:{column}:{'all' if visitor is None else 'visitor'}"
        params = {"day": day} if visitor is None else {"day": day, "visitor": visitor}
        rows = self._fast(name, lambda _: _count_usage(column, visitor is not None), params, fetch=True)
        return int(rows[0][0]) if rows else 0


def _add_usage(db) -> sa.Insert:
    insert = db.insert(t.usage)
    return insert.on_conflict_do_update(
        index_elements=["day", "visitor"],
        set_={"calls": t.usage.c.calls + insert.excluded.calls, "tokens": t.usage.c.tokens + insert.excluded.tokens})


def _count_usage(column: str, of_visitor: bool) -> sa.Select:
    u = t.usage.c
    if of_visitor:
        return sa.select(u[column]).where(u.day == sa.bindparam("day"), u.visitor == sa.bindparam("visitor"))
    return sa.select(sa.func.coalesce(sa.func.sum(u[column]), 0)).where(u.day == sa.bindparam("day"))
