"""A visitor's file given as text: an http(s) URL to download, or a base64 ``data:`` URI (how agents pass files).

The page receives files through Gradio's upload route, which enforces the upload limit; an agent (the MCP tools,
`mmvet_app/mcp.py`) passes a string instead. `fetch_visitor_file` turns that string into a local file under the same
bounds, before any reader sees it:

- **Size.** A data URI longer than the limit allows is refused before it is decoded; a download is read through
  the judge's capped transport (`transport.make_http_client`, body cut at the limit, compressed bodies counted
  decompressed) and refused when it reached the cap, so neither memory nor disk takes more than the limit.
- **Destinations.** The same rule as a visitor's judge endpoint: http(s) only, and on a public host no loopback,
  private, link-local (cloud metadata) or reserved address, checked first for a clear message
  (`check_endpoint_url`) and again by the connection's own resolver (DNS rebinding changes nothing); redirects
  are not followed (a public URL cannot bounce the server to an internal one).
- **Time.** A download has one deadline for all of it (the name's lookup, connect, headers, body): a server that
  drips a byte every second is cut at ``deadline`` seconds (`DOWNLOAD_TIMEOUT`; ``MMVET_FETCH_DEADLINE_S``).
- **Slots.** Reading a visitor's file holds a slot (`FetchSlots`): a few at once for the whole server, and a
  share of them per visitor, so that one address (four slow URLs at once) cannot keep every other agent waiting.
  A URL is downloaded in a download slot of its own (more of them, one per address: a slow server costs a wait
  on the network, not a file slot), and takes its file slot once its bytes are here: slow URLs from a few
  addresses cannot hold every file slot either. Replicas on one database count the same slots
  (`SharedFetchSlots`: leases in the store, so an address has one share however many replicas it reaches, and a
  replica that dies frees what it held when its leases end).
- **Names.** The local file's name is made safe (no path, no odd characters); it only hints at the format and the
  model name, the readers look at the content.

The file is then read like an upload: `GradingService` checks its size and parses it in the bounded worker.
"""
from __future__ import annotations

import asyncio
import base64
import binascii
import contextlib
import logging
import re
import secrets
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from urllib.parse import unquote, urlsplit

from ..judging.transport import CAPPED, BlockedDestination, EndpointPolicy, check_endpoint_url, make_http_client
from ..store import Store, StoreError

log = logging.getLogger("mmvet_grader")

__all__ = ["FetchSlots", "RemoteFileError", "SharedFetchSlots", "SlotRefused", "decode_data_uri", "download_url",
           "fetch_visitor_file", "safe_file_name"]

#: seconds for the whole download (the name's lookup, connect, headers and body), unless the caller says otherwise
DOWNLOAD_TIMEOUT = 30.0
BUSY = "The server is busy reading other files; try again in a minute."
#: extensions the results readers know, by the media type of a data URI
MEDIA_EXTENSIONS = {"application/json": ".json", "application/jsonl": ".jsonl", "application/x-ndjson": ".jsonl",
                    "application/jsonlines": ".jsonl", "text/csv": ".csv", "text/tab-separated-values": ".tsv",
                    "application/vnd.openxmlformats-officedocument.spreadsheetml.sheet": ".xlsx"}


class RemoteFileError(ValueError):
    """The string is not a usable file: its message says why (shown to the visitor or agent)."""


class SlotRefused(RemoteFileError):
    """No slot to read a file now (`FetchSlots`): the message says whether the server or the visitor is busy."""


class FetchSlots:
    """Slots for reading visitors' files (a download or a decode, then the parse): at most `total` at once, at most
    `per_visitor` of them held by one visitor. A visitor at their share is refused at once (their own files are
    what they wait for); another waits up to `wait` seconds for a free slot, then is told the server is busy.
    Thread-safe (the agents' tools run on the server's worker threads)."""

    def __init__(self, total: int = 4, per_visitor: int = 1, wait: float = 10.0, downloads: int = 16):
        self.total, self.per_visitor, self.wait = max(1, total), max(1, per_visitor), wait
        self.downloads = max(1, downloads)
        self._held: dict[str, int] = {}
        self._downloading: dict[str, int] = {}
        self._cond = threading.Condition()

    @contextlib.contextmanager
    def download(self, visitor: str):
        """Hold a download slot for `visitor` while a URL is read (before its file slot, `slot`): at most
        `downloads` at once, one per visitor (their second is refused at once); `SlotRefused` when none is free.

        >>> slots = FetchSlots(total=1, downloads=2, wait=0.0)
        >>> with slots.download("a"), slots.download("b"), slots.slot("c"): pass     # two slow URLs, c is read
        >>> with slots.download("a"):
        ...     with slots.download("a"): pass
        Traceback (most recent call last):
        mmvet_core.hosting.remote_files.SlotRefused: Your address is already reading 1 file here (at most 1 at once): wait until it is read, then try again.
        """
        with self._cond:
            if self._downloading.get(visitor, 0) >= 1 or self._held.get(visitor, 0) >= self.per_visitor:
                raise SlotRefused(_yours(1 if visitor in self._downloading else self.per_visitor))
            if sum(self._downloading.values()) >= self.downloads:
                raise SlotRefused(BUSY)
            self._downloading[visitor] = self._downloading.get(visitor, 0) + 1
        try:
            yield
        finally:
            with self._cond:
                self._downloading[visitor] -= 1
                if not self._downloading[visitor]:
                    del self._downloading[visitor]

    def in_use(self) -> int:
        with self._cond:
            return sum(self._held.values())

    @contextlib.contextmanager
    def slot(self, visitor: str):
        """Hold a slot for `visitor` while the block runs; `SlotRefused` when none is given.

        >>> slots = FetchSlots(total=2, per_visitor=1, wait=0.0)
        >>> with slots.slot("a"):
        ...     with slots.slot("a"): pass
        Traceback (most recent call last):
        mmvet_core.hosting.remote_files.SlotRefused: Your address is already reading 1 file here (at most 1 at once): wait until it is read, then try again.
        >>> with slots.slot("a"), slots.slot("b"):
        ...     with slots.slot("c"): pass
        Traceback (most recent call last):
        mmvet_core.hosting.remote_files.SlotRefused: The server is busy reading other files; try again in a minute.
        """
        with self._cond:
            if self._held.get(visitor, 0) >= self.per_visitor:
                raise SlotRefused(_yours(self.per_visitor))
            deadline = time.monotonic() + self.wait
            while sum(self._held.values()) >= self.total:
                left = deadline - time.monotonic()
                if left <= 0 or not self._cond.wait(left):
                    if sum(self._held.values()) >= self.total:
                        raise SlotRefused(BUSY)
            self._held[visitor] = self._held.get(visitor, 0) + 1
        try:
            yield
        finally:
            with self._cond:
                self._held[visitor] -= 1
                if not self._held[visitor]:
                    del self._held[visitor]
                self._cond.notify()


def _yours(n: int) -> str:
    return (f"Your address is already reading {n} file{'s' if n > 1 else ''} here (at most {n} at once): wait until "
            "it is read, then try again.")


#: The store's pace row that keeps every replica's file slots (`SharedFetchSlots`; a judge account's is a hash).
FILE_SLOTS = "fileslots:"
#: Seconds a slot taken in the database lasts unless its process renews it (every third of it while held): what a
#: replica that died held is free again after this.
SLOT_LEASE_S = 30.0
#: Seconds between two looks at the database while waiting for a file slot another replica holds.
SLOT_POLL_S = 0.25
_WAIT = object()        # no file slot free yet: look again


class SharedFetchSlots(FetchSlots):
    """`FetchSlots` counted in `store` for every process on the database (issue 33: with per-process slots, an
    address had one share per replica and the server N times its slots). Each slot held is a lease in one row of
    the store's paces (`Store.update_pace`: one short transaction, on the database's clock): ``{token: [visitor,
    "file" | "download", expires at]}``. Every change drops the expired leases, and a thread of each process renews
    its own every ``lease / 3`` seconds, so a slot lives as long as its process holds it and at most ``lease``
    seconds after the process died. A visitor's share, the server's totals and the refusals are `FetchSlots`'s;
    a wait for a file slot looks again every `SLOT_POLL_S` (at once when this process gives one back). When the
    database fails, the process counts its own slots until it answers again (a file is never refused for the
    database's sake). Blocking: called from the tools' worker threads."""

    def __init__(self, store: Store, total: int = 4, per_visitor: int = 1, wait: float = 10.0,
                 downloads: int = 16, *, lease: float = SLOT_LEASE_S):
        super().__init__(total, per_visitor, wait, downloads)
        self.store, self.lease = store, lease
        self._mine: set[str] = set()            # the leases this process holds
        self._renewer: threading.Thread | None = None

    def download(self, visitor: str):
        """`FetchSlots.download`, counted for every replica."""
        return self._leased(visitor, "download", super().download)

    def slot(self, visitor: str):
        """`FetchSlots.slot`, counted for every replica."""
        return self._leased(visitor, "file", super().slot)

    @contextlib.contextmanager
    def _leased(self, visitor: str, kind: str, alone):
        """A lease of `kind` held while the block runs; `alone` (this process's own count) while the database
        fails."""
        try:
            token = self._take(visitor, kind)
        except StoreError as e:
            log.warning("file slots are counted by this process alone while the database fails: %s", e)
            with alone(visitor):
                yield
            return
        try:
            yield
        finally:
            self._give_back(token)

    def in_use(self) -> int:
        """File slots held by every replica (this process's own while the database fails)."""
        try:
            return sum(1 for h in self.leases().values() if h[1] == "file")
        except StoreError:
            return super().in_use()

    def leases(self) -> dict[str, list]:
        """The leases alive now: ``{token: [visitor, kind, expires at]}`` (on the database's clock)."""
        return self.store.update_pace(FILE_SLOTS, lambda state, paused, now: (
            {t: h for t, h in state.get("holds", {}).items() if h[2] > now}, None, paused))

    # ---- the leases ----
    def _take(self, visitor: str, kind: str) -> str:
        """A new lease of `kind` for `visitor`; `SlotRefused` when `FetchSlots` would refuse it (a file slot
        waits up to `wait` seconds for another's to be given back)."""
        token = secrets.token_hex(8)
        deadline = time.monotonic() + self.wait

        def change(state: dict, paused: float, now: float):
            stored = state.get("holds", {})
            holds = {t: h for t, h in stored.items() if h[2] > now}
            theirs = [h[1] for h in holds.values() if h[0] == visitor]
            kinds = [h[1] for h in holds.values()]
            if kind == "download":
                if "download" in theirs or theirs.count("file") >= self.per_visitor:
                    result = SlotRefused(_yours(1 if "download" in theirs else self.per_visitor))
                else:
                    result = SlotRefused(BUSY) if kinds.count("download") >= self.downloads else None
            elif theirs.count("file") >= self.per_visitor:
                result = SlotRefused(_yours(self.per_visitor))
            else:
                result = _WAIT if kinds.count("file") >= self.total else None
            if result is None:
                holds[token] = [visitor, kind, now + self.lease]
            return result, ({"holds": holds} if holds != stored else None), paused

        while True:
            result = self.store.update_pace(FILE_SLOTS, change)
            if result is None:
                break
            left = deadline - time.monotonic()
            if result is not _WAIT:
                raise result
            if left <= 0:
                raise SlotRefused(BUSY)
            with self._cond:                    # woken at once when this process gives a slot back
                self._cond.wait(min(SLOT_POLL_S, left))
        with self._cond:
            self._mine.add(token)
            if self._renewer is None:
                self._renewer = threading.Thread(target=self._renew, name="file-slot-leases", daemon=True)
                self._renewer.start()
        return token

    def _give_back(self, token: str) -> None:
        with self._cond:
            self._mine.discard(token)

        def change(state: dict, paused: float, now: float):
            holds = {t: h for t, h in state.get("holds", {}).items() if h[2] > now and t != token}
            return None, {"holds": holds}, paused
        try:
            self.store.update_pace(FILE_SLOTS, change)
        except StoreError as e:         # the lease ends by itself
            log.warning("a file slot could not be given back (it is free again within %.0f s): %s", self.lease, e)
        with self._cond:
            self._cond.notify_all()

    def _renew(self) -> None:
        """This process's leases, renewed every third of a lease while it lives (the thread dies with it)."""
        while True:
            time.sleep(self.lease / 3)
            with self._cond:
                mine = set(self._mine)
            if not mine:
                continue

            def change(state: dict, paused: float, now: float):
                holds = state.get("holds", {})
                for t in mine & holds.keys():
                    holds[t][2] = now + self.lease
                return None, {"holds": holds}, paused
            try:
                self.store.update_pace(FILE_SLOTS, change)
            except StoreError as e:
                log.warning("file slot leases could not be renewed: %s", e)


def safe_file_name(name: str, default: str = "results") -> str:
    """A local file name from a visitor's name: its last path component, unusual characters replaced, bounded.

    >>> safe_file_name("../../etc/passwd"), safe_file_name("llava 13b.jsonl"), safe_file_name("")
    ('passwd', 'llava_13b.jsonl', 'results')
    """
    base = re.split(r"[/\\]", str(name or ""))[-1]
    clean = re.sub(r"[^\w.+=@-]+", "_", base).strip("._")[:100]
    return clean or default


def decode_data_uri(text: str, max_bytes: int) -> tuple[bytes, str]:
    """(the bytes, the extension its media type suggests) of a base64 ``data:`` URI, refused before decoding
    when it would exceed `max_bytes`.

    >>> decode_data_uri("data:application/json;base64,eyJhIjogMX0=", 100)
    (b'{"a": 1}', '.json')
    """
    head, sep, payload = text.partition(",")
    if not sep or not head.startswith("data:"):
        raise RemoteFileError("a data URI looks like data:application/json;base64,<base64 text>")
    params = head[len("data:"):].split(";")
    if "base64" not in params[1:]:
        raise RemoteFileError("only base64 data URIs are accepted (data:<type>;base64,<base64 text>)")
    payload = re.sub(r"\s+", "", payload)
    if len(payload) // 4 * 3 > max_bytes + 2:
        raise RemoteFileError(f"the file is larger than this server's upload limit ({max_bytes // (1024 * 1024)} "
                              "MB)")
    try:
        data = base64.b64decode(payload, validate=True)
    except (binascii.Error, ValueError):
        raise RemoteFileError("the data URI is not valid base64") from None
    if len(data) > max_bytes:
        raise RemoteFileError(f"the file is larger than this server's upload limit ({max_bytes // (1024 * 1024)} "
                              "MB)")
    return data, MEDIA_EXTENSIONS.get(params[0].strip().lower(), "")


async def _get(url: str, max_bytes: int, block_private: bool, deadline: float) -> tuple[bytes, bool, int]:
    # the name is looked up inside the deadline too (a resolver that takes its time is a slow server)
    await asyncio.to_thread(check_endpoint_url, url, block_private=block_private)
    client = make_http_client(deadline, EndpointPolicy(max_body_bytes=max_bytes + 1, block_private=block_private))
    try:
        response = await client.get(url)
        return response.content, bool(response.extensions.get(CAPPED)), response.status_code
    finally:
        await client.aclose()


def _run_within(coro, deadline: float):
    """Run `coro` on a loop of its own and return its result, or `TimeoutError` after `deadline` seconds. Unlike
    `asyncio.run`, the end never waits for a name lookup still running in a thread (a resolver that hangs is cut
    by the deadline like a server that drips)."""
    loop = asyncio.new_event_loop()
    pool = ThreadPoolExecutor(max_workers=2, thread_name_prefix="fetch-lookup")
    loop.set_default_executor(pool)
    try:
        return loop.run_until_complete(asyncio.wait_for(coro, deadline))
    finally:
        pool.shutdown(wait=False, cancel_futures=True)
        try:
            loop.run_until_complete(loop.shutdown_asyncgens())
        finally:
            loop.close()


def download_url(url: str, max_bytes: int, *, block_private: bool, deadline: float = DOWNLOAD_TIMEOUT) -> bytes:
    """The body of an http(s) URL, at most `max_bytes`, all of it within `deadline` seconds; `RemoteFileError` for
    a refused destination (see the module), a redirect, an error status, the deadline or a body over the limit."""
    try:
        check_endpoint_url(url, block_private=False)         # the form only: the address is checked in time
    except BlockedDestination as e:
        raise RemoteFileError(f"URL refused: {str(e).replace('base URL', 'URL')}") from None
    try:
        data, capped, status = _run_within(_get(url, max_bytes, block_private, deadline), deadline)
    except BlockedDestination as e:
        raise RemoteFileError(f"URL refused: {str(e).replace('base URL', 'URL')}") from None
    except TimeoutError:
        raise RemoteFileError(f"the download took longer than {deadline:g} s (this server's limit for a whole "
                              "file)") from None
    except Exception as e:   # connection errors, TLS, a destination refused inside the transport
        cause = e
        while cause is not None and not isinstance(cause, BlockedDestination):
            cause = cause.__cause__ or cause.__context__
        if cause is not None:
            raise RemoteFileError(f"URL refused: {cause}") from None
        if "timeout" in type(e).__name__.lower():
            raise RemoteFileError(f"the download took longer than {deadline:g} s (this server's limit for a whole "
                                  "file)") from None
        raise RemoteFileError(f"the download failed ({type(e).__name__})") from None
    if 300 <= status < 400:
        raise RemoteFileError("the URL redirects; give the final address (redirects are not followed)")
    if status != 200:
        raise RemoteFileError(f"the download failed (HTTP {status})")
    if capped or len(data) > max_bytes:
        raise RemoteFileError(f"the file is larger than this server's upload limit ({max_bytes // (1024 * 1024)} "
                              "MB)")
    return data


def fetch_visitor_file(source: str, dest_dir: str | Path, *, max_bytes: int, block_private: bool,
                       file_name: str = "", deadline: float = DOWNLOAD_TIMEOUT) -> Path:
    """Write the file `source` names (an http(s) URL or a base64 data URI) into `dest_dir` and return its path.
    `file_name` (else the URL's last path component, else ``results`` with the data URI's extension) names it.
    Raises `RemoteFileError` (see the module for what is refused)."""
    text = (source or "").strip()
    if text.startswith("data:"):
        data, ext = decode_data_uri(text, max_bytes)
        name = safe_file_name(file_name, "results" + ext)
    elif re.match(r"(?i)https?://", text):
        data = download_url(text, max_bytes, block_private=block_private, deadline=deadline)
        name = safe_file_name(file_name or unquote(urlsplit(text).path.rstrip("/").rsplit("/", 1)[-1]))
    else:
        raise RemoteFileError("pass the results file as an https:// URL or as a base64 data URI "
                              "(data:application/json;base64,...)")
    path = Path(dest_dir) / name
    path.write_bytes(data)
    return path
