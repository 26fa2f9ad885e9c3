"""Judge calls and tokens spent per day and visitor: what the host's budgets (`mmvet_core/judging/budget.py`) count."""
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
        params = {"day": day, "visitor": visitor, "tokens": tokens, "calls_per_visitor": calls_per_visitor,
                  "calls_global": calls_global, "tokens_per_visitor": tokens_per_visitor,
                  "tokens_global": tokens_global}
        # one statement compiled once (it runs before every paid call of a host-key run: built and executed by
        # SQLAlchemy each time, it cost the app as much CPU as grading itself), under the budget's lock
        if self._fast("charge_usage", _charge_usage, params, lock="budget"):
            return None
        limits = [("calls_per_visitor", calls_per_visitor, self.usage(day, visitor), 1),
                  ("calls_global", calls_global, self.usage(day), 1),
                  ("tokens_per_visitor", tokens_per_visitor, self.token_usage(day, visitor), tokens),
                  ("tokens_global", tokens_global, self.token_usage(day), tokens)]
        # refused: which limit (read after the fact, outside the lock: a refusal only needs naming)
        return next((name for name, limit, used, cost in limits if limit and limit - used < cost),
                    "calls_global")

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


def _charge_usage(db) -> sa.Insert:
    """Count one call of ``:tokens`` for ``:visitor`` on ``:day`` only when no daily limit (0: none) would be
    passed: the limits are checked by the statement that counts (rows changed: 1 counted, 0 refused)."""
    u = t.usage.c
    day, visitor = sa.bindparam("day", type_=sa.Text), sa.bindparam("visitor", type_=sa.Text)
    tokens = sa.bindparam("tokens", type_=sa.Integer)

    def within(limit: str, column, cost, of_visitor: bool):
        used = sa.select(sa.func.coalesce(sa.func.sum(column), 0)).where(u.day == day)
        if of_visitor:
            used = used.where(u.visitor == visitor)
        bound = sa.bindparam(limit, type_=sa.Integer)
        return sa.or_(bound == 0, used.scalar_subquery() + cost <= bound)

    allowed = sa.and_(within("calls_per_visitor", u.calls, 1, True), within("calls_global", u.calls, 1, False),
                      within("tokens_per_visitor", u.tokens, tokens, True),
                      within("tokens_global", u.tokens, tokens, False))
    insert = db.insert(t.usage).from_select(
        ["day", "visitor", "calls", "tokens"],
        sa.select(day, visitor, sa.literal(1, sa.Integer), tokens).where(allowed))
    return insert.on_conflict_do_update(
        index_elements=["day", "visitor"],
        set_={"calls": t.usage.c.calls + insert.excluded.calls, "tokens": t.usage.c.tokens + insert.excluded.tokens})
