"""The server's leaderboard kept up to date off the request path: a reader is never the one who pays for ranks.

`BoardBook` holds the board's rows as of a store stamp (`Store.board_stamp`), every entry's decoded and checked
frozen copy (held compactly: `entries.compact`), and one `board_ranks.GroupRanks` per rank group. `rows` answers
from the last snapshot; when the store changed since, the reader brings the snapshot up to date itself only when
that is cheap — a few entries to decode, groups that change by a few grade sets (incremental: milliseconds at
1,600 entries), small groups built from scratch — and otherwise leaves the work to a background thread and
answers with the previous snapshot (entries of a group being ranked show "ranking…"). Writers of this process
(publish, unpublish, rename, hide, verify) call `refresh` after writing, so their own next read is up to date.
Whoever holds the refresh lock, readers never wait on it once a first snapshot exists.

A stored version that does not fit the schema (`board_schema`) is skipped and named once in the host's log.
"""
from __future__ import annotations

import logging
import queue
import threading

from .entries import (RANK_LEVEL, RANK_RESAMPLES, RANK_SEED, BoardEntry, board_rows, compact, describe_bad_row,
                      entry_from_row, group_grade_sets, rank_key)
from .rows import BoardRow, paper_rows
from .ranks import GroupRanks
from .schema import SchemaError
from ..store import StoreError

log = logging.getLogger(__name__)

#: Rows a refresh decodes and checks on the request path at most (more: in the background).
DECODE_ON_REQUEST = 8
#: New pairs of grade sets a refresh compares on the request path at most (each pair: 2 × 2,000 draws compared):
#: 20,000 pairs ≈ 0.1 s. A group needing more is (re)built in the background.
PAIRS_ON_REQUEST = 20_000


class BoardBook:
    """The board of one store (module docstring). Thread-safe."""

    def __init__(self, store, *, resamples: int = RANK_RESAMPLES, seed: int = RANK_SEED,
                 level: float = RANK_LEVEL, paper: bool = True):
        self.store = store
        self.resamples, self.seed, self.level = resamples, seed, level
        self._paper = paper_rows() if paper else []
        self._lock = threading.Lock()                      # one refresh at a time
        self._snap: tuple[tuple, list[BoardRow]] | None = None
        self._all: tuple[BoardEntry, ...] = ()             # every decoded entry, as of the last refresh
        self._entries: dict[str, tuple[tuple, BoardEntry]] = {}      # id -> ((version, updated_at), entry)
        self._bad: dict[str, tuple] = {}                   # id -> the row key that was skipped (logged once)
        self._groups: dict[tuple, GroupRanks] = {}
        self._building: set[tuple] = set()                 # groups the background thread is building
        self._decode_behind = False                        # rows left to decode in the background
        self._jobs: queue.Queue = queue.Queue()
        self._worker: threading.Thread | None = None
        self._busy = False                                 # the background thread is working on a job
        self.refreshes = 0                                 # counters for the bench and the tests
        self.background_builds = 0

    # ---- reading ----
    def rows(self) -> list[BoardRow]:
        """The board's rows (entries with ranks, then the paper's reference rows). Never waits for another
        thread's refresh once a first snapshot exists."""
        stamp = self.store.board_stamp()
        snap = self._snap
        if snap is not None and (snap[0] == stamp or self._decode_behind):
            return snap[1]                       # current, or the background is reading the rest of a big change
        if not self._lock.acquire(blocking=snap is None):
            return snap[1]                       # someone is refreshing: this board now, theirs on the next read
        try:
            return self._refresh(decode_all=snap is None)
        finally:
            self._lock.release()

    def refresh(self) -> list[BoardRow]:
        """Bring the board up to date now (a writer, before a check that needs every entry or after its write):
        every changed row is decoded; ranking a group that needs more than a few comparisons still goes to the
        background."""
        with self._lock:
            return self._refresh(decode_all=True)

    def entries(self, *, withdrawn: bool = True) -> list[BoardEntry]:
        """Every decoded entry as of the last refresh (withdrawn ones too by default): the copy check's input."""
        return [e for e in self._all if withdrawn or (e.published and not e.hidden)]

    def pending(self) -> bool:
        """Whether background work is queued or running (the bench waits for it)."""
        return bool(self._building) or self._decode_behind or self._busy or not self._jobs.empty()

    # ---- the refresh ----
    def _refresh(self, *, decode_all: bool) -> list[BoardRow]:
        stamp = self.store.board_stamp()           # read first: a write after it makes the next read refresh
        heads = self.store.board_heads(include_withdrawn=True)
        known = {h["id"] for h in heads}
        for gone in [i for i in self._entries if i not in known]:
            del self._entries[gone]
        todo = []
        for h in heads:
            key = (h["version"], h["updated_at"])
            have = self._entries.get(h["id"])
            if have is not None and have[0] == key:
                continue
            if self._bad.get(h["id"]) == key:
                continue
            todo.append((h, key))
        self._decode_behind = not decode_all and len(todo) > DECODE_ON_REQUEST
        if self._decode_behind:
            self._submit(("refresh", None))
            todo = todo[:DECODE_ON_REQUEST]
        for h, key in todo:
            self._decode(h, key)

        self._all = tuple(e for _, e in self._entries.values())
        board = [e for e in self._all if e.published and not e.hidden]
        board.sort(key=lambda e: e.published_at)
        groups: dict[tuple, list[BoardEntry]] = {}
        for e in board:
            key = rank_key(e)
            if key is not None:
                groups.setdefault(key, []).append(e)
        for key in [k for k in self._groups if k not in groups]:
            del self._groups[key]
        ranks: dict[str, tuple[int, int, int]] = {}
        pending: set[str] = set()
        for key, members in groups.items():
            vectors, mult, of = group_grade_sets(members)
            g = self._sync(key, members, vectors, mult)
            bounds = g.bounds() if g is not None else {}
            for e in members:
                if e.id in of and of[e.id] in bounds:
                    ranks[e.id] = (*bounds[of[e.id]], g.size)
                elif e.id in of:
                    pending.add(e.id)
        rows = board_rows(board, ranks, pending=pending) + self._paper
        self._snap = ((), rows) if self._decode_behind else (stamp, rows)     # partial: the next read looks again
        self.refreshes += 1
        return rows

    def _decode(self, head: dict, key: tuple) -> None:
        # keyed by (version, updated_at): a rename or a verification (which rewrites the version's meta) reads
        # the one version again
        row = self.store.board_version(head["id"], head["version"])
        if row is None:
            self._skip(head, key, "its current version is missing")
            return
        full = {**head, "published_at": row["published_at"], "meta": row["meta"], "scores": row["scores"]}
        try:
            entry = compact(entry_from_row(full, check=True))
        except (SchemaError, ValueError, TypeError, KeyError, RecursionError) as e:
            self._skip(head, key, e)
            return
        self._bad.pop(head["id"], None)
        self._entries[head["id"]] = (key, entry)

    def _skip(self, head: dict, key: tuple, err) -> None:
        self._entries.pop(head["id"], None)
        if self._bad.get(head["id"]) != key:
            log.warning("%s", describe_bad_row(head, err))
        self._bad[head["id"]] = key

    def _sync(self, key: tuple, members: list[BoardEntry], vectors: dict, mult: dict) -> GroupRanks | None:
        """Group `key` brought to these grade sets when that takes few comparisons (removals always; a few new
        sets incrementally). Otherwise its new sets go to the background thread (`GroupRanks.extended`) and the
        group answers meanwhile for the sets it had, ranked among themselves; the new ones show "ranking…".
        None when the group has nothing ranked yet."""
        g = self._groups.get(key)
        n = len(members[0].sample_ids)
        if g is None or g.n != n:
            g = GroupRanks(n, resamples=self.resamples, seed=self.seed, level=self.level)
        self._groups[key] = g
        if g.sync(vectors, mult, max_adds=0 if key in self._building else _max_new(len(g.keys))):
            return g
        if key not in self._building:
            self._building.add(key)
            self._submit(("build", (key, g.copy(), dict(vectors), dict(mult))))
        return g if g.keys else None

    # ---- the background thread ----
    def _submit(self, job) -> None:
        self._jobs.put(job)
        if self._worker is None or not self._worker.is_alive():
            self._worker = threading.Thread(target=self._work, name="board-ranks", daemon=True)
            self._worker.start()

    def _work(self) -> None:
        while True:
            try:
                kind, payload = self._jobs.get(timeout=30)
            except queue.Empty:
                return
            self._busy = True
            try:
                if kind == "build":
                    key, base, vectors, mult = payload
                    g = base.extended(vectors, mult)      # the heavy part, outside the lock
                    with self._lock:
                        self._groups[key] = g
                        self._building.discard(key)
                        self.background_builds += 1
                        self._refresh(decode_all=True)
                else:
                    with self._lock:
                        self._refresh(decode_all=True)
            except StoreError as e:       # the store went away (the server is stopping): nothing to rank
                log.warning("leaderboard: background refresh stopped: %s", e)
                with self._lock:
                    self._building.clear()
                    self._decode_behind = False
            except Exception:  # noqa: BLE001 — the board keeps its last snapshot; the host's log says why
                log.exception("leaderboard: background refresh failed")
                with self._lock:
                    self._building.clear()
                    self._decode_behind = False
            finally:
                self._busy = False
                self._jobs.task_done()


def _max_new(d: int) -> int:
    """New grade sets a group of `d` may take without a rebuild: the largest k with k × (d + k) ≤
    `PAIRS_ON_REQUEST` (at least 1: one new entry is always compared at once).

    >>> _max_new(0), _max_new(1600)
    (141, 12)
    """
    k = int(((d * d + 4 * PAIRS_ON_REQUEST) ** 0.5 - d) / 2)
    return max(1, k)
