"""Judge calls and tokens spent per day and visitor: what the host's budgets (`mmvet_core/budget.py`) count."""
from __future__ import annotations

import sqlalchemy as sa

from . import _schema as t


class UsageFacet:
    def add_usage(self, day: str, visitor: str, calls: int = 1, tokens: int = 0) -> None:
        """Add calls and tokens to a visitor's day (one atomic statement: processes counting at once add up)."""
        self._fast("add_usage", _add_usage, {"day": day, "visitor": visitor, "calls": calls, "tokens": tokens})

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
