"""The leaderboard, one facet of the service (over `mmvet_core.leaderboard`): an owner publishes, republishes,
renames, unpublishes or restores their run's entry; the host hides an entry; anyone reads the board's rows (ranked
once per change of the board), one entry, or the board as JSON."""
from __future__ import annotations

import threading
import time
from dataclasses import replace

from .. import __version__
from .. import leaderboard as lb
from ..jobs import JobManager
from ..runs import load_run_view
from ..store import Store
from .records import ServiceError
from .runs import Runs
from .settings import ServiceSettings

#: Bootstrap draws of a leaderboard entry's official-equivalent estimate (a run's card uses the default 1000).
BOARD_RESAMPLES = 300


class Board:
    """Published runs and their honest ranks; every refusal a `ServiceError`."""

    def __init__(self, settings: ServiceSettings, store: Store, jobs: JobManager, runs: Runs):
        self.settings, self.store, self.jobs, self.runs = settings, store, jobs, runs
        self._board: tuple[tuple, list] | None = None     # (store.board_stamp(), rows): ranks are costly
        self._board_lock = threading.Lock()
        self._board_entries: dict[tuple[str, int], object] = {}    # decoded frozen versions
        self._rank_cache: dict = {}                                   # ranks per rank group (members, versions)
        self._estimates: dict[str, tuple[tuple, dict | None]] = {}    # entry id -> (version, checks, estimate)

    def publish(self, run_id: str, name: str, link: str, owner: str, *, visitor: str = "",
                republish: bool = False) -> dict:
        """Publish the owner's finished run to the leaderboard under `name` (plain text, bounded) with an
        optional https `link`; with `republish`, store the run's current scores as a new version of its entry.
        Only the run's owner may; `publish_per_hour` publishes per visitor and hour. Returns the entry's row
        (``row.to_json()``); `ServiceError` says what is refused."""
        run = self.runs.owned(run_id, owner)
        if self.jobs.is_running(run.id):
            raise ServiceError("Wait until the run ends before publishing it.")
        try:
            clean, url = lb.clean_display_name(name), lb.check_link(link)
        except lb.BoardError as e:
            raise ServiceError(str(e)) from None
        limit = self.settings.publish_per_hour
        if limit >= 0 and self.store.count_publishes(visitor or owner, time.time() - 3600) >= limit:
            raise ServiceError(f"You published {limit} times in the last hour; try again later.")
        view = load_run_view(self.store, run.id)
        try:
            entry = lb.publish_view(self.store, view, name=clean, link=url, owner=owner, republish=republish,
                                    tool_version=__version__)
        except lb.BoardError as e:
            raise ServiceError(str(e)) from None
        self.store.log_publish(visitor or owner)
        return self._entry_row(entry)

    def _owned_entry(self, entry_id: str, owner: str):
        entry = lb.load_entry(self.store, entry_id or "")
        if entry is None:
            raise ServiceError("No such leaderboard entry.")
        if not owner or entry.owner_hash != lb.owner_hash(owner):
            raise ServiceError("Only the owner of this entry can change it.")
        return entry

    def rename_entry(self, entry_id: str, owner: str, name: str, link: str | None = None) -> str:
        """The owner renames an entry (and sets or clears its link when `link` is not None)."""
        entry = self._owned_entry(entry_id, owner)
        try:
            fields = {"name": lb.clean_display_name(name)}
            if link is not None:
                fields["link"] = lb.check_link(link)
        except lb.BoardError as e:
            raise ServiceError(str(e)) from None
        self.store.update_board_entry(entry.id, **fields)
        return f"Entry renamed to {fields['name']}."

    def unpublish(self, entry_id: str, owner: str) -> str:
        """The owner takes an entry off the board (its versions stay stored; publishing again restores it)."""
        entry = self._owned_entry(entry_id, owner)
        self.store.update_board_entry(entry.id, published=0)
        self.store.unpin_run(entry.run_id, lb.PIN_REASON)       # the run may expire again like any other
        return f"{entry.name} is no longer on the leaderboard."

    def restore_entry(self, entry_id: str, owner: str) -> str:
        """The owner puts an unpublished entry back (the same frozen version; republish to update it)."""
        entry = self._owned_entry(entry_id, owner)
        self.store.update_board_entry(entry.id, published=1)
        self.store.pin_run(entry.run_id, lb.PIN_REASON)
        return f"{entry.name} is on the leaderboard again (version {entry.version})."

    def hide_entry(self, entry_id: str, secret: str, hidden: bool = True) -> str:
        """The host hides (or shows again) any entry. Needs the host secret (``MMVET_HOST_SECRET``); a server
        without one has no such control (the CLI's ``leaderboard hide`` is the host's other way)."""
        import hmac
        expected = self.settings.host_secret
        if not expected or not hmac.compare_digest(str(secret or "").encode("utf-8"), expected.encode("utf-8")):
            raise ServiceError("Only the host can hide entries.")
        entry = lb.load_entry(self.store, entry_id or "")
        if entry is None:
            raise ServiceError("No such leaderboard entry.")
        self.store.update_board_entry(entry.id, hidden=int(bool(hidden)))
        return f"{entry.name} is {'hidden' if hidden else 'shown again'}."

    def board_rows(self) -> list:
        """Every row of the board (entries with their ranks, then the paper's reference rows), computed once per
        change of the board (ranks cost a paired bootstrap per rank group)."""
        stamp = (self.store.board_stamp(), self.store.judge_checks_stamp())   # a new check changes estimates
        cached = self._board
        if cached is not None and cached[0] == stamp:
            return cached[1]
        with self._board_lock:
            if self._board is not None and self._board[0] == stamp:
                return self._board[1]
            entries = []
            for row in self.store.board_entries():
                known = self._board_entries.get((row["id"], row["version"]))
                if known is None:                       # decode each frozen version once
                    known = lb.entry_from_row(row)
                else:                                   # names, links and flags change without a new version
                    known = replace(known, name=row["name"], link=row["link"], published=bool(row["published"]),
                                    hidden=bool(row["hidden"]))
                entries.append(known)
            self._board_entries = {(e.id, e.version): e for e in entries}
            rows = lb.board_rows(entries, lb.rank_groups(entries, cache=self._rank_cache),
                                 estimate=self._entry_estimate) + lb.paper_rows()
            self._board = (stamp, rows)
            return rows

    def _entry_estimate(self, entry) -> dict | None:
        """A successor entry's official-equivalent estimate on the board (`equivalence.entry_equivalence`),
        computed once per entry version and stored check."""
        from ..equivalence import entry_equivalence

        key = (entry.version, self.store.judge_checks_stamp())
        hit = self._estimates.get(entry.id)
        if hit is None or hit[0] != key:
            hit = self._estimates[entry.id] = (key, entry_equivalence(self.store, entry,
                                                                      resamples=BOARD_RESAMPLES).short())
        return hit[1]

    def leaderboard(self, filters=None) -> list:
        """The board's rows (`leaderboard.BoardRow`) that `filters` (`leaderboard.BoardFilter`, a dict of its
        fields, or a deep link's ``board`` text) selects, sorted as it says."""
        return lb.filter_rows(self.board_rows(), self.board_filter(filters))

    @staticmethod
    def board_filter(filters=None):
        if filters is None:
            return lb.BoardFilter()
        if isinstance(filters, lb.BoardFilter):
            return filters.normalised()
        if isinstance(filters, str):
            return lb.filter_from_query(filters)
        if isinstance(filters, dict):
            known = {k: v for k, v in filters.items() if k in lb.BoardFilter.__dataclass_fields__}
            return lb.BoardFilter(**known).normalised()
        raise ServiceError("Filters are a dict with judge, benchmark, query, sort, descending, references.")

    def leaderboard_json(self, filters=None) -> dict:
        """What the API and the JSON download return: the filter, the note on ranks and one dict per row."""
        f = self.board_filter(filters)
        return {"filter": {k: getattr(f, k) for k in lb.BoardFilter.__dataclass_fields__},
                "rank_note": lb.RANK_NOTE, "entries": [r.to_json() for r in self.leaderboard(f)[:lb.MAX_ROWS]]}

    def _entry_row(self, entry) -> dict:
        for row in self.board_rows():
            if row.entry == entry.id:
                return row.to_json()
        return lb.board_rows([entry], {})[0].to_json()        # not on the board (unpublished, hidden)

    def board_entry(self, entry_id: str) -> dict:
        """One entry as the board shows it (read-only, anyone): its row, its frozen metadata and its frozen
        per-sample scores. Entries taken off the board are not shown."""
        entry = lb.load_entry(self.store, entry_id or "")
        if entry is None or not entry.published or entry.hidden:
            raise ServiceError("No such leaderboard entry (it may have been unpublished).")
        meta = {k: v for k, v in entry.meta.items() if k not in ("sample_caps",)}
        samples = [{"id": sid, "capabilities": entry.meta.get("sample_caps", {}).get(sid, ""),
                    "scores": entry.scores.get(sid, [])} for sid in entry.meta.get("sample_ids", entry.scores)]
        return {"row": self._entry_row(entry), "meta": meta, "samples": samples,
                "versions": [v["version"] for v in self.store.board_versions(entry.id)]}

    def entry_of_run(self, run_id: str, owner: str) -> dict | None:
        """The entry published from the owner's run (for its publish control): id, name, link, version,
        published, hidden, and whether the run changed since (``stale``: republish to update); None when the run
        was never published or `owner` does not own it."""
        run = self.store.get_run(run_id or "") if run_id else None
        if run is None or not owner or run.owner != owner:
            return None
        row = self.store.board_entry_for_run(run.id)
        if row is None:
            return None
        entry = lb.load_entry(self.store, row["id"])
        return {"entry": entry.id, "name": entry.name, "link": entry.link, "version": entry.version,
                "published": entry.published, "hidden": entry.hidden,
                "stale": run.updated_at > entry.published_at}
