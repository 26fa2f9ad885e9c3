"""Judge-call budgets that protect a host's own API key on a public deployment.

When a visitor grades with the host's key, every paid call is charged to the visitor and to the day's global
total before it is made; past either limit the call is refused with `BudgetExceeded` (the run stops, its grades
are kept) and the visitor is told to bring their own key. Calls with a visitor's own key are never charged.
Counts live in the store, so they survive restarts. A limit of 0 means "no limit".
"""
from __future__ import annotations

import datetime as dt
import hashlib
import threading
from dataclasses import dataclass

from .grading import BudgetExceeded
from .store import Store


@dataclass(frozen=True)
class BudgetLimits:
    per_visitor_daily: int = 2000
    global_daily: int = 20000


def visitor_id(raw: str, salt: str = "") -> str:
    """An opaque id for a visitor (IP address or session token); the raw value is never stored."""
    return hashlib.sha256(f"{salt}:{raw}".encode()).hexdigest()[:24]


def today() -> str:
    return dt.datetime.now(dt.timezone.utc).strftime("%Y-%m-%d")


class HostBudget:
    """Charges host-key calls to a visitor and to the day's global total (thread-safe)."""

    def __init__(self, store: Store, limits: BudgetLimits):
        self.store, self.limits = store, limits
        self._lock = threading.Lock()

    def remaining(self, visitor: str) -> tuple[int | None, int | None]:
        day = today()
        per = self.limits.per_visitor_daily - self.store.usage(day, visitor) if self.limits.per_visitor_daily else None
        glob = self.limits.global_daily - self.store.usage(day) if self.limits.global_daily else None
        return per, glob

    def charge(self, visitor: str) -> None:
        """Count one call, or raise `BudgetExceeded` with a message for the visitor."""
        with self._lock:
            per, glob = self.remaining(visitor)
            if per is not None and per <= 0:
                raise BudgetExceeded(
                    f"daily limit of {self.limits.per_visitor_daily} judge calls with the host's key reached for "
                    "you; grades so far are kept. Enter your own API key to continue.")
            if glob is not None and glob <= 0:
                raise BudgetExceeded(
                    f"this server's daily budget of {self.limits.global_daily} judge calls with its own key is "
                    "used up; grades so far are kept. Enter your own API key to continue.")
            self.store.add_usage(today(), visitor, 1)

    def hook(self, visitor: str):
        """A zero-argument callable for `grade_run(budget=...)`."""
        return lambda: self.charge(visitor)
