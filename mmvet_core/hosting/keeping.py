"""Bounded storage: what a visitor may keep on a shared server, how long it stays, and when new work is refused.

A public server's disk is shared by every visitor, and a full disk fails everyone's runs. Four rules bound it:

* **Every run's predictions are capped** (`cap_predictions`): a prediction longer than the cap is cut to it and
  the run records how many were cut and the longest original length (shown on its run card). A free run of 218
  answers of 200 KB each stored 163 MB before.
* **A quota per visitor** (`StorageLimits.runs_per_visitor`, ``bytes_per_visitor``): the runs a visitor (a salted
  hash of their address) stores and their bytes (predictions, samples, grades with the judge's answers); a new
  run beyond it is refused with what to do.
* **Expiry**: app runs nobody opened for ``expire_days`` days are deleted (a share-link view or its owner's
  reopening counts as opened). Runs graded with the host's key and pinned runs (`Store.pin_run`, e.g. a
  published leaderboard entry) never expire: `Store.protected_run_ids` lists them.
* **A free-space floor** (``min_free_mb``): below it, new work is refused with a clear message before the disk
  is full.

`RunKeeper` applies them for the service; settings come from the environment through `StorageLimits.from_env`
(docs/hosting.md).
"""
from __future__ import annotations

import shutil
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Iterable, Mapping

from ..store import Store, StoreError
from .policy import env_number

__all__ = ["StorageLimits", "StorageRefused", "RunKeeper", "cap_predictions", "cut_note"]

MB = 1024 * 1024


class StorageRefused(Exception):
    """New work refused to keep storage bounded (a quota, a nearly full disk); the message is for the visitor."""


@dataclass(frozen=True)
class StorageLimits:
    """Bounds on what visitors store (0: no bound)."""

    runs_per_visitor: int = 200           # MMVET_MAX_STORED_RUNS: runs one visitor keeps
    mb_per_visitor: int = 200             # MMVET_MAX_STORED_MB: their bytes (an ordinary v1 run is ~0.3 MB)
    expire_days: float = 90.0             # MMVET_EXPIRE_DAYS: runs nobody opened for this long are deleted
    min_free_mb: int = 500                # MMVET_MIN_FREE_MB: new work is refused below this much free disk
    sweep_every_s: float = 600.0          # how often expiry looks for old runs (from whatever request comes by)

    @classmethod
    def from_env(cls, env: Mapping[str, str]) -> "StorageLimits":
        d = cls()
        return cls(runs_per_visitor=int(env_number(env, "MMVET_MAX_STORED_RUNS", d.runs_per_visitor)),
                   mb_per_visitor=int(env_number(env, "MMVET_MAX_STORED_MB", d.mb_per_visitor)),
                   expire_days=env_number(env, "MMVET_EXPIRE_DAYS", d.expire_days),
                   min_free_mb=int(env_number(env, "MMVET_MIN_FREE_MB", d.min_free_mb)))


def cap_predictions(predictions: Mapping[str, str], max_chars: int) -> tuple[dict[str, str], dict | None]:
    """Predictions cut to `max_chars` characters, and what was cut (None when nothing was): the cap, how many, the
    longest original length and each cut sample's original length (pure).

    >>> cap_predictions({"v1_0": "abcdef", "v1_1": "ok"}, 3)
    ({'v1_0': 'abc', 'v1_1': 'ok'}, {'limit': 3, 'cut': 1, 'longest': 6, 'lengths': {'v1_0': 6}})
    >>> cap_predictions({"v1_0": "ok"}, 3)
    ({'v1_0': 'ok'}, None)
    """
    if not max_chars:
        return dict(predictions), None
    lengths = {sid: len(p) for sid, p in predictions.items() if isinstance(p, str) and len(p) > max_chars}
    if not lengths:
        return dict(predictions), None
    capped = {sid: (p[:max_chars] if sid in lengths else p) for sid, p in predictions.items()}
    return capped, {"limit": max_chars, "cut": len(lengths), "longest": max(lengths.values()), "lengths": lengths}


def cut_note(info: dict | None) -> str | None:
    """The run card's line about cut predictions (pure).

    >>> cut_note({"limit": 8000, "cut": 2, "longest": 200000, "lengths": {}})
    '2 predictions cut to 8,000 characters for storage (longest 200,000): the judge saw the first 8,000'
    """
    if not info:
        return None
    n = info["cut"]
    return (f"{n} prediction{'s' if n != 1 else ''} cut to {info['limit']:,} characters for storage (longest "
            f"{info['longest']:,}): the judge saw the first {info['limit']:,}")


class RunKeeper:
    """Applies `StorageLimits` to one store (thread-safe; no background thread: `maybe_expire` is called from
    requests)."""

    def __init__(self, store: Store, limits: StorageLimits, data_dir: Path, *,
                 on_expire: Callable[[str], None] | None = None, touch_every_s: float = 3600.0):
        self.store, self.limits, self.data_dir = store, limits, Path(data_dir)
        self.on_expire = on_expire
        self.touch_every_s = touch_every_s
        self._touched: dict[str, float] = {}
        self._last_sweep = float("-inf")
        self._lock = threading.Lock()

    # --- refusing new work ---
    def check_disk(self) -> None:
        """`StorageRefused` when the data folder's disk has less than ``min_free_mb`` free."""
        if not self.limits.min_free_mb:
            return
        try:
            free = shutil.disk_usage(self.data_dir).free
        except OSError:
            return
        if free < self.limits.min_free_mb * MB:
            raise StorageRefused(f"This server's disk is almost full ({free / 1e6:,.0f} MB free): new runs and "
                                 "uploads are refused until space is freed. Your stored runs are safe; try again "
                                 "later.")

    def check_quota(self, visitor: str | None, adding_bytes: int = 0) -> None:
        """`StorageRefused` when `visitor` already keeps their quota of runs or bytes (with `adding_bytes` more)."""
        lim = self.limits
        if visitor is None or not (lim.runs_per_visitor or lim.mb_per_visitor):
            return
        runs, used = self.store.visitor_storage(visitor)
        if lim.runs_per_visitor and runs >= lim.runs_per_visitor:
            raise StorageRefused(f"You keep {runs} runs here, the most allowed per visitor: delete some in "
                                 "My runs (or download them first) to start another.")
        if lim.mb_per_visitor and used + adding_bytes > lim.mb_per_visitor * MB:
            raise StorageRefused(f"Your runs here take {used / 1e6:,.1f} MB and this one would add "
                                 f"{adding_bytes / 1e6:,.1f} MB: the most allowed per visitor is "
                                 f"{lim.mb_per_visitor * MB / 1e6:,.0f} MB. Delete some in My runs to continue.")

    def check_new_run(self, visitor: str | None, adding_bytes: int = 0) -> None:
        """`check_disk`, then `check_quota`."""
        self.check_disk()
        self.check_quota(visitor, adding_bytes)

    # --- remembering use ---
    def stored(self, run_id: str, visitor: str | None, *, host: bool = False) -> None:
        """A run was stored for `visitor` (graded with the host's key: `host`)."""
        self.store.keep_run(run_id, visitor or "", host=host)
        self._touched[run_id] = time.monotonic()

    def opened(self, run_id: str) -> None:
        """Someone opened the run (written at most once every `touch_every_s` per run)."""
        now = time.monotonic()
        last = self._touched.get(run_id)
        if last is not None and now - last < self.touch_every_s:
            return
        if len(self._touched) > 100_000:
            self._touched.clear()
        self._touched[run_id] = now
        try:
            self.store.touch_run(run_id)
        except StoreError:          # a viewer never fails because the time of their visit cannot be written
            self._touched.pop(run_id, None)

    # --- expiry ---
    def expire(self, running: Iterable[str] = (), now: float | None = None) -> list[str]:
        """Delete app runs nobody opened for ``expire_days`` (pinned, host-key and running ones excepted);
        returns their ids."""
        if not self.limits.expire_days:
            return []
        now = time.time() if now is None else now
        busy = set(running)
        gone = []
        for run_id in self.store.unopened_runs(now - self.limits.expire_days * 86400):
            if run_id in busy:
                continue
            self.store.forget_run(run_id)
            self._touched.pop(run_id, None)
            if self.on_expire is not None:
                self.on_expire(run_id)
            gone.append(run_id)
        return gone

    def maybe_expire(self, running: Callable[[], Iterable[str]] | None = None) -> list[str] | None:
        """`expire` at most once every ``sweep_every_s`` seconds."""
        with self._lock:
            if time.monotonic() - self._last_sweep < self.limits.sweep_every_s:
                return None
            self._last_sweep = time.monotonic()
        return self.expire(running() if running is not None else ())
