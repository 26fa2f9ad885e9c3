"""The leaderboard, one facet of the service (over `mmvet_core.board`): an owner publishes, republishes,
renames, unpublishes or restores their run's entry (one rate limit for all of them); the host hides or verifies an
entry; anyone reads the board's rows (ranked off the request path by `board_book.BoardBook`), one entry, or the
board as JSON."""
from __future__ import annotations

import copy
import threading
import time

from .. import __version__
from ..board.entries import board_rows, owner_hash
from ..board.fields import BoardError, check_link, clean_display_name
from ..board.rows import RANK_NOTE, set_estimate
from ..board.filters import MAX_ROWS, BoardFilter, filter_from_query, filter_rows
from ..board import publishing
from ..board.publishing import PIN_REASON, check_name_free, load_entry, publish_view
from ..runs import provenance as prov
from ..board.book import BoardBook
from ..runs.provenance import endpoint_netloc
from ..runs.jobs import JobManager
from ..runs.lifecycle import load_run_view
from ..store import Store
from .records import ServiceError
from .runs import Runs
from .settings import ServiceSettings

#: Bootstrap draws of a leaderboard entry's official-equivalent estimate: None, the run card's own default
#: (`calibration.DEFAULT_RESAMPLES`, same seed). With 300 draws here and 1000 on the card, the same run and check
#: read 7.4 [4.9, 9.8] on the board and 7.4 [5.0, 9.7] on the card (issue 29): one computation, rounded once in
#: `Equivalence.short`, is what every surface shows.
BOARD_RESAMPLES = None


#: The most rows one page of the API's or MCP's leaderboard holds (Gradio post-processes every value of an
#: answer: the whole board of 1,600 entries took about a second; 100 rows, the default page, take milliseconds).
MAX_PAGE = 500
#: The rows of a page whose size was not given (``limit: null`` too): the page cap holds for every answer.
DEFAULT_PAGE = 100
#: Pages kept as answered (filter, offset, size), for as long as the board's rows do not change: a crowd
#: reading the board again and again is answered from them.
PAGES_KEPT = 64
#: Filters whose sorted rows are kept (the most recent ones; a filter holds a visitor's text: bounded).
FILTERS_KEPT = 32


def page_bounds(offset: object = 0, limit: object = None) -> tuple[int, int | None]:
    """(`offset`, `limit`) as a page's bounds: offset at least 0, limit clamped to 1..`MAX_PAGE` (None, a
    visitor's ``null``: `DEFAULT_PAGE`; no answer is ever larger than a page). Whole numbers only (a visitor's
    value): `ServiceError` otherwise.

    >>> page_bounds(-5, 0), page_bounds("200", 10**9), page_bounds(3.0, None)
    ((0, 1), (200, 500), (3, 100))
    """
    def whole(value: object, name: str) -> int:
        try:
            number = float(value)
            if not number.is_integer():
                raise ValueError
            return int(number)
        except (TypeError, ValueError, OverflowError):
            raise ServiceError(f"{name} must be a whole number, not {str(value)[:20]!r}.") from None

    start = max(0, whole(offset or 0, "offset"))
    return start, DEFAULT_PAGE if limit is None else min(max(1, whole(limit, "limit")), MAX_PAGE)


class Board:
    """Published runs and their honest ranks; every refusal a `ServiceError`."""

    def __init__(self, settings: ServiceSettings, store: Store, jobs: JobManager, runs: Runs):
        self.settings, self.store, self.jobs, self.runs = settings, store, jobs, runs
        self.book = BoardBook(store)               # the leaderboard, ranked off the request path (board_book.py)
        if store.board_stamp()[0]:                 # every entry decoded and checked before the first reader comes
            self.book.refresh()                    # (seconds at thousands); large groups are ranked in the background
        self._publish_lock = threading.Lock()      # name and copy checks, then the write: one publish at a time
        self._estimates: dict[str, tuple[tuple, dict | None]] = {}    # entry id -> (version, checks, estimate)
        self._with_estimates: tuple | None = None  # (the book's rows, checks stamp, rows with their estimates)
        self._filtered: dict[tuple, tuple[list, list]] = {}   # filter -> (the board's rows, the rows it selects)
        self._filtered_lock = threading.Lock()
        self._pages: dict[tuple, tuple[list, dict]] = {}     # (filter, offset, size) -> (the board's rows, answer)

    def _board_action(self, who: str) -> None:
        """Publishing, republishing, renaming, unpublishing, restoring and a host control with a wrong secret
        share one limit: `publish_per_hour` per visitor and hour (refusals before it cost nothing)."""
        limit = self.settings.publish_per_hour
        if limit >= 0 and self.store.count_publishes(who, time.time() - 3600) >= limit:
            raise ServiceError(f"You published or changed leaderboard entries {limit} times in the last hour; "
                               "try again later.")

    def trusted_endpoints(self) -> set[str]:
        """The endpoints whose grades this server vouches for besides the public OpenAI API: its own judge's."""
        return {endpoint_netloc(self.settings.host_base_url)}

    def publish(self, run_id: str, name: str, link: str, owner: str, *, visitor: str = "",
                republish: bool = False) -> dict:
        """Publish the owner's finished run to the leaderboard under `name` (plain visible text, bounded, not a
        look-alike of another owner's) with an optional https `link`; with `republish`, store the run's current
        scores as a new version of its entry. Only the run's owner may; `publish_per_hour` board actions per
        visitor and hour; another owner's grades are refused. Returns the entry's row (``row.to_json()``: its
        provenance says whether its judge is verified); `ServiceError` says what is refused."""
        run = self.runs.owned(run_id, owner)
        if self.jobs.is_running(run.id):
            raise ServiceError("Wait until the run ends before publishing it.")
        try:
            clean, url = clean_display_name(name), check_link(link)
        except BoardError as e:
            raise ServiceError(str(e)) from None
        self._board_action(visitor or owner)
        view = load_run_view(self.store, run.id)
        with self._publish_lock:
            self.book.refresh()                 # every entry decoded: the copy check sees them all
            try:
                entry = publish_view(self.store, view, name=clean, link=url, owner=owner, republish=republish,
                                     tool_version=__version__, trusted=self.trusted_endpoints(),
                                     others=self.book.entries())
            except BoardError as e:
                # a look-alike name or copied grades cost a check of every entry: it counts (probing is bounded)
                self.store.log_publish(visitor or owner)
                raise ServiceError(str(e)) from None
            self.store.log_publish(visitor or owner)
            self.book.refresh()
        return self._entry_row(entry)

    def _owned_entry(self, entry_id: str, owner: str):
        entry = self._entry(entry_id)
        if not owner or entry.owner_hash != owner_hash(owner):
            raise ServiceError("Only the owner of this entry can change it.")
        return entry

    def _entry(self, entry_id: str):
        try:
            entry = load_entry(self.store, entry_id or "")
        except (ValueError, TypeError, KeyError, RecursionError):     # a damaged stored copy (the board logs it)
            entry = None
        if entry is None:
            raise ServiceError("No such leaderboard entry.")
        return entry

    def rename_entry(self, entry_id: str, owner: str, name: str, link: str | None = None, *,
                     visitor: str = "") -> str:
        """The owner renames an entry (and sets or clears its link when `link` is not None); a board action
        (rate limited); a name that looks like another owner's is refused."""
        entry = self._owned_entry(entry_id, owner)
        try:
            fields = {"name": clean_display_name(name)}
            if link is not None:
                fields["link"] = check_link(link)
            self._board_action(visitor or owner)
        except BoardError as e:
            raise ServiceError(str(e)) from None
        with self._publish_lock:
            try:
                check_name_free(self.store.board_heads(include_withdrawn=True), fields["name"],
                                entry.owner_hash, entry_id=entry.id)
            except BoardError as e:
                self.store.log_publish(visitor or owner)        # probing names is bounded, as on publish
                raise ServiceError(str(e)) from None
            self.store.update_board_entry(entry.id, **fields)
        self.store.log_publish(visitor or owner)
        self.book.refresh()
        return f"Entry renamed to {fields['name']}."

    def unpublish(self, entry_id: str, owner: str, *, visitor: str = "") -> str:
        """The owner takes an entry off the board (its versions stay stored; publishing again restores it); a
        board action (rate limited)."""
        entry = self._owned_entry(entry_id, owner)
        self._board_action(visitor or owner)
        self.store.update_board_entry(entry.id, published=0)
        self.store.unpin_run(entry.run_id, PIN_REASON)          # the run may expire again like any other
        self.store.log_publish(visitor or owner)
        self.book.refresh()
        return f"{entry.name} is no longer on the leaderboard."

    def restore_entry(self, entry_id: str, owner: str, *, visitor: str = "") -> str:
        """The owner puts an unpublished entry back (the same frozen version; republish to update it); a board
        action (rate limited)."""
        entry = self._owned_entry(entry_id, owner)
        self._board_action(visitor or owner)
        self.store.update_board_entry(entry.id, published=1)
        self.store.pin_run(entry.run_id, PIN_REASON)
        self.store.log_publish(visitor or owner)
        self.book.refresh()
        return f"{entry.name} is on the leaderboard again (version {entry.version})."

    def _host_only(self, secret: str, visitor: str, what: str) -> None:
        """The host secret (``MMVET_HOST_SECRET``) or `ServiceError`; a wrong secret counts as a board action of
        `visitor` (so guessing it is bounded by the publish limit), checked before the secret is."""
        import hmac
        expected = self.settings.host_secret
        if not expected:
            raise ServiceError(f"Only the host can {what} entries.")
        self._board_action(visitor or "host-control")
        if not hmac.compare_digest(str(secret or "").encode("utf-8"), expected.encode("utf-8")):
            self.store.log_publish(visitor or "host-control")
            raise ServiceError(f"Only the host can {what} entries.")

    def hide_entry(self, entry_id: str, secret: str, hidden: bool = True, *, visitor: str = "") -> str:
        """The host hides (or shows again) any entry. Needs the host secret (``MMVET_HOST_SECRET``); a server
        without one has no such control (the CLI's ``leaderboard hide`` is the host's other way)."""
        self._host_only(secret, visitor, "hide")
        entry = self._entry(entry_id)
        self.store.update_board_entry(entry.id, hidden=int(bool(hidden)))
        self.book.refresh()
        return f"{entry.name} is {'hidden' if hidden else 'shown again'}."

    def verify_entry(self, entry_id: str, secret: str, verified: bool = True, *, visitor: str = "") -> str:
        """The host vouches for an entry's judge at its current version (imported grades, an endpoint this
        server does not know), so that it is ranked; or withdraws that. Needs the host secret (the CLI's
        ``leaderboard verify`` is the host's other way)."""
        self._host_only(secret, visitor, "verify")
        entry = self._entry(entry_id)
        entry = publishing.verify_entry(self.store, entry.id, verified)
        self.book.refresh()
        state = "verified by the host: it is ranked" if verified else "no longer verified by the host"
        return f"{entry.name} (version {entry.version}) is {state} ({prov.label(entry.provenance)})."

    def board_rows(self) -> list:
        """Every row of the board (entries with their ranks, provenance and official-equivalent estimates, then
        the paper's reference rows), as of the last refresh: a reader never waits for ranks (`board_book.BoardBook`);
        estimates are added once per board and stored check."""
        rows = self.book.rows()
        checks = self.store.judge_checks_stamp()            # a new or grown check changes estimates
        cached = self._with_estimates
        if cached is not None and cached[0] is rows and cached[1] == checks:
            return cached[2]
        entries = {e.id: e for e in self.book.entries()}
        out = []
        for row in rows:
            entry = entries.get(row.entry) if row.entry else None
            if entry is not None and entry.meta.get("judge_kind") == "successor":
                row = copy.copy(row)
                set_estimate(row, self._entry_estimate(entry))
            out.append(row)
        self._with_estimates = (rows, checks, out)
        return out

    def _entry_estimate(self, entry) -> dict | None:
        """A successor entry's official-equivalent estimate on the board (`equivalence.entry_estimate`): the one
        stored estimate of its grades under the server's current check of its judge (its run's card reads the same
        one), kept here once per entry version and stored check."""
        from ..successors.equivalence import entry_estimate

        key = (entry.version, self.store.judge_checks_stamp())
        hit = self._estimates.get(entry.id)
        if hit is None or hit[0] != key:
            hit = self._estimates[entry.id] = (key, entry_estimate(self.store, entry, resamples=BOARD_RESAMPLES))
        return hit[1]

    def leaderboard(self, filters=None) -> list:
        """The board's rows (`rows.BoardRow`) that `filters` (`filters.BoardFilter`, a dict of its
        fields, or a deep link's ``board`` text) selects, sorted as it says (a new list: the caller's to change)."""
        f = self.board_filter(filters)
        rows = self.board_rows()
        key = tuple(getattr(f, k) for k in BoardFilter.__dataclass_fields__)
        with self._filtered_lock:
            hit = self._filtered.get(key)
        if hit is None or hit[0] is not rows:
            # sorted once per board and filter: a script paging through the board (or the view turning pages)
            # does not sort its 1,600 rows again for every page
            hit = (rows, filter_rows(rows, f))
            with self._filtered_lock:
                self._filtered.pop(key, None)
                while len(self._filtered) >= FILTERS_KEPT:
                    self._filtered.pop(next(iter(self._filtered)))
                self._filtered[key] = hit
        return list(hit[1])

    @staticmethod
    def board_filter(filters=None):
        if filters is None:
            return BoardFilter()
        if isinstance(filters, BoardFilter):
            return filters.normalised()
        if isinstance(filters, str):
            return filter_from_query(filters)
        if isinstance(filters, dict):
            known = {k: v for k, v in filters.items() if k in BoardFilter.__dataclass_fields__}
            return BoardFilter(**known).normalised()
        raise ServiceError("Filters are a dict with judge, benchmark, query, sort, descending, references.")

    def leaderboard_json(self, filters=None, *, offset: object = 0, limit: object = None) -> dict:
        """What the API (`leaderboard`) and MCP (`read_leaderboard`) return: the filter, the note on ranks, `count`
        (the rows the filter selects) and one dict per row (``BoardRow.to_json``) of the page that starts at row
        `offset` (0-based) and holds `limit` rows (clamped to 1..`MAX_PAGE`; None: `DEFAULT_PAGE`), with
        `next_offset` (the next page's `offset`, None after the last page): a client pages through the whole board
        by passing `next_offset` back until it is None. The downloads hold every row (`filters.rows_json`). A
        page asked again while the board's rows are the same is the answer kept (`PAGES_KEPT`; a new dict each
        time, its rows shared: not to be changed). A bad `offset` or `limit` is a `ServiceError`."""
        f = self.board_filter(filters)
        start, size = page_bounds(offset, limit)
        rows = self.board_rows()
        key = (tuple(getattr(f, k) for k in BoardFilter.__dataclass_fields__), start, size)
        with self._filtered_lock:
            hit = self._pages.get(key)
        if hit is not None and hit[0] is rows:
            return dict(hit[1])
        selected = self.leaderboard(f)
        count = min(len(selected), MAX_ROWS)
        end = min(count, start + size)
        answer = {"filter": {k: getattr(f, k) for k in BoardFilter.__dataclass_fields__},
                  "rank_note": RANK_NOTE, "count": count, "offset": start, "limit": size,
                  "next_offset": end if end < count else None,
                  "entries": [r.to_json() for r in selected[start:end]]}
        with self._filtered_lock:
            self._pages.pop(key, None)
            while len(self._pages) >= PAGES_KEPT:
                self._pages.pop(next(iter(self._pages)))
            self._pages[key] = (rows, answer)
        return dict(answer)

    def _entry_row(self, entry) -> dict:
        for row in self.board_rows():
            if row.entry == entry.id and row.version == entry.version:
                return row.to_json(detail=True)
        return board_rows([entry], {})[0].to_json(detail=True)        # not on the board (unpublished, hidden)

    def board_entry(self, entry_id: str) -> dict:
        """One entry as the board shows it (read-only, anyone): its row, its frozen metadata and its frozen
        per-sample scores. Entries taken off the board are not shown."""
        self.board_rows()                                     # up to date when cheap (never waits)
        entry = next((e for e in self.book.entries() if e.id == entry_id), None) if entry_id else None
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
        try:
            entry = load_entry(self.store, row["id"])
        except (ValueError, TypeError, KeyError, RecursionError):     # a damaged stored copy (the board logs it)
            return None
        if entry is None:
            return None
        return {"entry": entry.id, "name": entry.name, "link": entry.link, "version": entry.version,
                "published": entry.published, "hidden": entry.hidden,
                "stale": run.updated_at > entry.published_at, "provenance": prov.label(entry.provenance),
                "verified": prov.is_verified(entry.provenance)}
