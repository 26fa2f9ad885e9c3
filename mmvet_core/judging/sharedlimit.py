"""One judge account, one limit, however many processes: an account's pace kept in the database.

`ratelimit.AccountLimiter` mirrors the server's rate-limit buckets (from OpenAI's ``x-ratelimit-*`` headers) and
pauses for a 429's ``retry-after``. In one process that mirror is exact; in N processes (grading workers, app
replicas) each would see only its own spending, start calls the server has no room for, and pause alone when
the server said "wait" to everyone. A `SharedPace` keeps the mirror and the pause of one account in the store
(`Store.update_pace`: one short transaction under the account's lock, on the database's clock) and every process
spends from it: a call starts only when the shared buckets hold its cost and no 429 pause is on, and every answer
re-synchronises the shared buckets from the server's own count (which counts every process's calls).

Each process keeps its own window of calls in flight and its own order of turns (retry chains first). Nothing
here knows a key: the account is `ratelimit.account_key`, a hash.

The same store keeps the **visitors' request buckets** when replicas share a database
(`requestlimit.SharedRequestLimiter`, issue 33: a host's protection, beside the limiter it shares).
"""
from __future__ import annotations

import logging
import time
from dataclasses import dataclass
from typing import Callable

from .ratelimit import Bucket, Ticket, read_bucket
from ..store import Store, StoreError

log = logging.getLogger("mmvet_grader")


@dataclass(frozen=True)
class Grant:
    """The shared pace's answer to a call asking for its turn."""

    wait: float             # 0: start now (its cost is spent); else seconds before asking again
    paused_for: float       # seconds the whole account stays paused for a 429 (0: none)
    now: float              # the database's clock (the ticket's send time)
    spent_requests: float = 0.0     # both buckets' spending so far, this call's included
    spent_tokens: float = 0.0


#: Seconds between two re-synchronisations of the shared buckets by one process from its answers' headers (each
#: is a transaction; the server's count is the same whichever process reads it). A 429 is always recorded.
OBSERVE_EVERY = 0.2


class SharedPace:
    """The requests and tokens buckets and the 429 pause of one judge account, shared through `store`."""

    def __init__(self, store: Store, account: str):
        self.store, self.account = store, account
        self._observed = 0.0            # time.monotonic() of this process's last re-synchronisation

    def take(self, cost: float) -> Grant:
        """Ask for a call's turn: one request and `cost` tokens from the shared buckets (unknown buckets never
        wait), unless the account is paused. Blocking (one transaction): call it from a thread."""
        def change(state: dict, paused: float, now: float):
            if now < paused:
                return Grant(paused - now, paused - now, now), None, paused
            requests, tokens = _buckets(state)
            wait = max(requests.wait(1, now), tokens.wait(cost, now))
            if wait > 0:
                return Grant(wait, 0.0, now), None, paused
            requests.spend(1, now)
            tokens.spend(cost, now)
            grant = Grant(0.0, 0.0, now, requests.spent, tokens.spent)
            return grant, {"requests": requests.state(), "tokens": tokens.state()}, paused

        return self.store.update_pace(self.account, change)

    def observe(self, ticket: Ticket, headers, *, rate_limited: bool, retry_after: float | None) -> float:
        """An answer to a call granted by `take` (its `ticket`): the shared buckets learn the server's count from
        its headers (at most every `OBSERVE_EVERY` seconds per process); a 429 pauses the account for everyone
        (for `retry_after`, else until the requests bucket refills one, else a second). Returns the seconds the
        account stays paused (0: none). A database fault is logged, not raised: the answer itself is what
        matters to the caller."""
        readings = (read_bucket(headers, "requests"), read_bucket(headers, "tokens"))
        if not rate_limited and (readings == (None, None) or time.monotonic() - self._observed < OBSERVE_EVERY):
            return 0.0
        self._observed = time.monotonic()

        def change(state: dict, paused: float, now: float):
            buckets = _buckets(state)
            for bucket, reading, mark in zip(buckets, readings, (ticket.spent_requests, ticket.spent_tokens)):
                if reading is not None:
                    bucket.observe(reading, spent_at_send=mark, sent_at=ticket.sent_at, now=now)
            if rate_limited:
                wait = retry_after if retry_after is not None else (buckets[0].wait(1, now) or 1.0)
                paused = max(paused, now + wait)
                for bucket, reading in zip(buckets, readings):
                    if reading is not None and bucket.known and reading.remaining < 1:
                        bucket.level = min(bucket.level, 0.0)
            return max(0.0, paused - now), {"requests": buckets[0].state(), "tokens": buckets[1].state()}, paused

        try:
            return self.store.update_pace(self.account, change)
        except StoreError as e:
            log.warning("the judge account's shared pace could not be updated: %s", e)
            return 0.0


def _buckets(state: dict) -> tuple[Bucket, Bucket]:
    return Bucket.from_state(state.get("requests")), Bucket.from_state(state.get("tokens"))


def pace_source(store: Store) -> Callable[[str], SharedPace]:
    """What `ratelimit.share_limits` takes: an account's `SharedPace` in `store`."""
    return lambda account: SharedPace(store, account)
