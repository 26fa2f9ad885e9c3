"""Which clients are still there, and how long the server keeps what a gone one left (no Gradio here).

A page holds a stream open while it lives (Gradio's heartbeat), a script holds one while it waits for an answer
(the queue's data stream, or the REST result stream ``call/<api>/<event>``). `ClientStreams` counts the streams
open per session and remembers when each session last had one; a session with none open for `gone_after_s` is
gone. `SessionLimits` says what the server does with what gone sessions left (``mmvet_app/sessions.py`` applies it to
Gradio's queue and per-session state):

- their **queued events** are dropped (a share-link open no longer waits behind events nobody will read), and
  their running generators stop at their next update;
- their **state** (what Gradio keeps per session: up to 10,000 sessions by default; the page's copy in each is
  built as it is read, `mmvet_app.sessions.lean_sessions`) is forgotten: a script's session after `idle_after_s`
  without a call, a closed page's after `closed_after_s` (time for a reconnect), and never more than
  `max_sessions` in all;
- the streams that follow a grading run (one per open page) have their own pool of `max_followers`, so that a
  crowd of viewers never takes the workers every other event needs.
"""
from __future__ import annotations

import threading
import time
from dataclasses import dataclass
from typing import Callable, Mapping

from .policy import env_number

__all__ = ["ClientStreams", "SessionLimits"]


@dataclass(frozen=True)
class SessionLimits:
    gone_after_s: float = 30.0       # MMVET_GONE_AFTER_S: no stream open this long: the client has gone
    idle_after_s: float = 120.0      # MMVET_SESSION_IDLE_S: a session without a page forgets its state after
    closed_after_s: float = 300.0    # MMVET_CLOSED_PAGE_S: a closed page's state is kept this long (a reconnect)
    max_sessions: int = 2000         # MMVET_MAX_SESSIONS: sessions whose state is kept at most
    max_followers: int = 200         # MMVET_MAX_FOLLOWERS: pages following a grading run at once
    sweep_every_s: float = 5.0       # how often gone clients are looked for

    @classmethod
    def from_env(cls, env: Mapping[str, str]) -> "SessionLimits":
        d = cls()
        return cls(gone_after_s=env_number(env, "MMVET_GONE_AFTER_S", d.gone_after_s),
                   idle_after_s=env_number(env, "MMVET_SESSION_IDLE_S", d.idle_after_s),
                   closed_after_s=env_number(env, "MMVET_CLOSED_PAGE_S", d.closed_after_s),
                   max_sessions=max(10, int(env_number(env, "MMVET_MAX_SESSIONS", d.max_sessions))),
                   max_followers=max(1, int(env_number(env, "MMVET_MAX_FOLLOWERS", d.max_followers))),
                   sweep_every_s=env_number(env, "MMVET_SWEEP_EVERY_S", d.sweep_every_s) or d.sweep_every_s)


class ClientStreams:
    """Streams open per session, and when each session last had one (thread-safe; `clock` is monotonic).

    >>> t = [0.0]; streams = ClientStreams(gone_after_s=30, clock=lambda: t[0])
    >>> streams.opened("page"); t[0] = 100.0
    >>> streams.gone("page", since=0.0), streams.gone("script", since=90.0), streams.gone("script", since=0.0)
    (False, False, True)
    >>> streams.closed("page"); t[0] = 129.0; streams.gone("page", since=0.0)
    False
    >>> t[0] = 131.0; streams.gone("page", since=0.0)
    True
    """

    def __init__(self, gone_after_s: float = 30.0, clock: Callable[[], float] = time.monotonic):
        self.gone_after_s, self.clock = gone_after_s, clock
        self._open: dict[str, int] = {}
        self._seen: dict[str, float] = {}          # session -> when a stream of it last opened or closed
        self._lock = threading.Lock()

    def opened(self, session: str) -> None:
        with self._lock:
            self._open[session] = self._open.get(session, 0) + 1
            self._seen[session] = self.clock()

    def closed(self, session: str) -> None:
        with self._lock:
            left = self._open.get(session, 0) - 1
            if left > 0:
                self._open[session] = left
            else:
                self._open.pop(session, None)
            self._seen[session] = self.clock()

    def is_open(self, session: str) -> bool:
        return session in self._open

    def gone(self, session: str, since: float) -> bool:
        """Whether `session` has gone: no stream open, and none for `gone_after_s` since the later of `since` (when
        its event came, on this clock) and its last stream."""
        with self._lock:
            if session in self._open:
                return False
            return self.clock() - max(since, self._seen.get(session, since)) > self.gone_after_s

    def idle_for(self, session: str) -> float | None:
        """Seconds since `session` last had a stream (0 while one is open), or None when it never had one."""
        with self._lock:
            if session in self._open:
                return 0.0
            seen = self._seen.get(session)
            return None if seen is None else self.clock() - seen

    def forget_older_than(self, age_s: float) -> int:
        """Drop the memory of sessions with no stream for `age_s` seconds (the bookkeeping stays bounded)."""
        now = self.clock()
        with self._lock:
            old = [s for s, at in self._seen.items() if s not in self._open and now - at > age_s]
            for s in old:
                del self._seen[s]
        return len(old)

    def __len__(self) -> int:
        return len(self._seen)
