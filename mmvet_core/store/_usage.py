"""Judge calls and tokens spent per day and visitor: what the host's budgets (`mmvet_core/budget.py`) count."""
from __future__ import annotations

import sqlalchemy as sa

from . import _schema as t


class UsageFacet:
    def add_usage(self, day: str, visitor: str, calls: int = 1, tokens: int = 0) -> None:
        """Add calls and tokens to a visitor's day (one atomic statement: processes counting at once add up)."""
        self._exec(self._prepared("add_usage", _add_usage),
                   {"day": day, "visitor": visitor, "calls": calls, "tokens": tokens})

    def token_usage(self, day: str, visitor: str | None = None) -> int:
        return self._count(t.usage.c.tokens, day, visitor)

    def usage(self, day: str, visitor: str | None = None) -> int:
        return self._count(t.usage.c.calls, day, visitor)

    def _count(self, column: sa.Column, day: str, visitor: str | None) -> int:
        u = t.usage.c
        if visitor is None:
            query = sa.select(sa.func.coalesce(sa.func.sum(column), 0)).where(u.day == day)
        else:
            query = sa.select(column).where(u.day == day, u.visitor == visitor)
        rows = self._query(query)
        return int(rows[0][0]) if rows else 0


def _add_usage(db) -> sa.Insert:
    insert = db.insert(t.usage)
    return insert.on_conflict_do_update(
        index_elements=["day", "visitor"],
        set_={"calls": t.usage.c.calls + insert.excluded.calls, "tokens": t.usage.c.tokens + insert.excluded.tokens})
