"""One limiter per judge account: adaptive concurrency and pacing to the endpoint's rate limits.

Every judge call of every run that uses the same key and endpoint goes through one `AccountLimiter` (see
`limiter_for`): runs share the account's limit instead of fighting over it. The limiter decides when a call may
start, from three things it learns as answers come back:

- **A concurrency window** (AIMD, as TCP does): it starts at `START_WINDOW` calls in flight and grows by one per
  answer (doubling per round trip) while answers come back without 429 and their latency stays flat, and holds
  while latency rises; a 429 or a timeout halves it (once per round trip), after which it grows by one per
  round trip. The run's ``--concurrency`` is a ceiling on top (its number of workers). A 429 whose headers say
  the requests bucket is empty does not halve it: that refusal is the request rate's, which the pause and the
  requests bucket's mirror answer exactly (a call costs one request); a window halved for it would cap the calls
  in flight below what the rate needs (rate x latency: 20 calls at 20 requests/s and a 1 s judge) and climb back
  one call per round trip. A tokens bucket's refusal still halves it: a call's tokens are an estimate, and the
  window bounds how far a wrong one overshoots.
- **Pacing to the server's buckets.** When answers carry OpenAI's ``x-ratelimit-limit/remaining/reset-requests``
  and ``-tokens`` headers, the limiter mirrors each bucket (capacity, refill rate, level) and starts a call only
  when the bucket holds its cost: 1 request, and the call's estimated tokens (prompt tokens, estimated from its
  characters and corrected from the ``usage`` the endpoint reports, plus ``max_tokens``) as OpenAI counts them.
- **Pauses.** A 429 pauses the whole limiter (every run on the account, not each worker) for the server's
  ``retry-after-ms`` / ``retry-after``; calls then resume in order of arrival, retry chains first.

Rate limits are waited out, never counted as failures; `waiting_until` tells the user until when. The pure
parts (header parsing, the bucket mirror, the window rules) are testable without a loop.

**Many processes, one account.** An event loop declared shared (`share_limits`, done by the grading workers and by
app processes on a shared database: `mmvet_core/runs/workers.py`) gives its limiters a `pace` (`mmvet_core.judging.sharedlimit`):
the buckets' mirror and the 429 pauses then live in the database, where every process spends from the same
buckets and honours the same pause, so N processes together keep to the account's limits instead of N times them.
Each process keeps its own window (its calls in flight) and its own order of turns.
"""
from __future__ import annotations

import asyncio
import hashlib
import heapq
import itertools
import math
import re
import time
import weakref
from dataclasses import dataclass, field

#: Calls in flight when an account starts (the window then grows while the endpoint keeps up).
START_WINDOW = 32
#: Upper bound of one account's window, whatever the runs' ceilings.
MAX_WINDOW = 1024
#: Pace at this share of a bucket's refill rate (a margin for clock and rounding differences).
PACE_MARGIN = 0.97

_DURATION = re.compile(r"(\d+(?:\.\d+)?)(ms|h|m|s)")


def parse_duration(text) -> float | None:
    """Seconds in an OpenAI reset header: ``"1s"``, ``"6m0s"``, ``"20ms"``, ``"1h2m3.5s"``, or a bare number of
    seconds; None when unreadable.

    >>> [parse_duration(t) for t in ("1s", "6m0s", "20ms", "1h2m3.5s", "0.25", "soon", None)]
    [1.0, 360.0, 0.02, 3723.5, 0.25, None, None]
    """
    if text is None:
        return None
    text = str(text).strip()
    try:
        value = float(text)
        return value if math.isfinite(value) and value >= 0 else None
    except ValueError:
        pass
    parts = _DURATION.findall(text)
    if not parts or "".join(n + u for n, u in parts) != text.replace(" ", ""):
        return None
    scale = {"ms": 0.001, "s": 1.0, "m": 60.0, "h": 3600.0}
    return sum(float(n) * scale[u] for n, u in parts)


def retry_after_seconds(headers) -> float | None:
    """Seconds a 429 asks to wait: ``retry-after-ms``, else ``retry-after`` (seconds; an HTTP date is not
    trusted); None when absent.

    >>> retry_after_seconds({"retry-after-ms": "250", "retry-after": "1"}), retry_after_seconds({"retry-after": "2"})
    (0.25, 2.0)
    >>> retry_after_seconds({}) is None
    True
    """
    headers = headers or {}
    for name, scale in (("retry-after-ms", 0.001), ("retry-after", 1.0)):
        try:
            value = float(headers.get(name)) * scale
        except (TypeError, ValueError):
            continue
        if math.isfinite(value) and value >= 0:
            return value
    return None


@dataclass
class BucketReading:
    """One bucket as a response's headers describe it."""

    limit: float
    remaining: float
    reset: float | None     # seconds until the bucket is full again


def read_bucket(headers, kind: str) -> BucketReading | None:
    """The ``requests`` or ``tokens`` bucket from OpenAI's ``x-ratelimit-*`` headers, or None.

    >>> read_bucket({"x-ratelimit-limit-requests": "20", "x-ratelimit-remaining-requests": "19",
    ...              "x-ratelimit-reset-requests": "50ms"}, "requests")
    BucketReading(limit=20.0, remaining=19.0, reset=0.05)
    """
    headers = headers or {}
    try:
        limit = float(headers.get(f"x-ratelimit-limit-{kind}"))
        remaining = float(headers.get(f"x-ratelimit-remaining-{kind}"))
    except (TypeError, ValueError):
        return None
    if not (math.isfinite(limit) and math.isfinite(remaining)) or limit <= 0:
        return None
    reset = parse_duration(headers.get(f"x-ratelimit-reset-{kind}"))
    return BucketReading(limit, max(0.0, min(remaining, limit)), reset)


def refused_for_requests(headers) -> bool:
    """Whether a 429's headers say the server's requests bucket is empty (``x-ratelimit-remaining-requests`` 0):
    a refusal of the request rate, whose cost (one request a call) the buckets' mirror knows exactly.

    >>> refused_for_requests({"x-ratelimit-limit-requests": "20", "x-ratelimit-remaining-requests": "0"})
    True
    >>> refused_for_requests({"x-ratelimit-limit-requests": "20", "x-ratelimit-remaining-requests": "7"})
    False
    >>> refused_for_requests({"retry-after": "1"}), refused_for_requests(None)
    (False, False)
    """
    reading = read_bucket(headers, "requests")
    return reading is not None and reading.remaining < 1


class Bucket:
    """Our mirror of one server bucket (requests or tokens): capacity, refill rate, current level.

    The level is re-synchronised from every response: the server's ``remaining`` when it counted the call, minus
    what we spent since we sent it, plus the refill since then. The refill rate comes from ``(limit - remaining)
    / reset`` (the server refills to full in ``reset`` seconds), weighted towards readings of a well-used bucket,
    whose integer ``remaining`` rounds least.

    >>> b = Bucket()
    >>> b.observe(BucketReading(20, 10, 0.5), spent_at_send=0, sent_at=0.0, now=0.0)
    >>> round(b.rate, 1), b.wait(1, 0.0), b.wait(11, 0.0) > 0
    (19.0, 0.0, True)
    """

    def __init__(self) -> None:
        self.limit: float | None = None
        self.rate: float | None = None
        self.level = 0.0
        self.stamp = 0.0
        self.spent = 0.0            # everything spent so far (to discount what was sent after a reading)
        self._w = 0.0
        self._wr = 0.0

    @property
    def known(self) -> bool:
        return self.limit is not None and bool(self.rate)

    def state(self) -> dict:
        """Everything the mirror knows, JSON-able (a shared pace keeps it in the database)."""
        return {"limit": self.limit, "rate": self.rate, "level": self.level, "stamp": self.stamp,
                "spent": self.spent, "w": self._w, "wr": self._wr}

    @classmethod
    def from_state(cls, state: dict | None) -> "Bucket":
        """The bucket `state` describes (a new, unknown one for None).

        >>> b = Bucket.from_state({"limit": 20, "rate": 19.0, "level": 3.0, "stamp": 5.0, "spent": 7.0,
        ...                        "w": 1.0, "wr": 19.0})
        >>> Bucket.from_state(b.state()).state() == b.state(), b.known, Bucket.from_state(None).known
        (True, True, False)
        """
        bucket = cls()
        if state:
            bucket.limit, bucket.rate, bucket.level = state["limit"], state["rate"], state["level"]
            bucket.stamp, bucket.spent, bucket._w, bucket._wr = state["stamp"], state["spent"], state["w"], state["wr"]
        return bucket

    def _refill(self, now: float) -> None:
        if self.known and now > self.stamp:
            self.level = min(self.limit, self.level + (now - self.stamp) * self.rate * PACE_MARGIN)
        self.stamp = max(self.stamp, now)

    def wait(self, cost: float, now: float) -> float:
        """Seconds until the bucket holds `cost` (0: now). Unknown buckets never wait."""
        if not self.known:
            return 0.0
        self._refill(now)
        need = min(cost, self.limit)
        return 0.0 if self.level >= need else (need - self.level) / (self.rate * PACE_MARGIN)

    def spend(self, cost: float, now: float) -> None:
        self._refill(now)
        self.level -= cost
        self.spent += cost

    def observe(self, reading: BucketReading, *, spent_at_send: float, sent_at: float, now: float) -> None:
        used = reading.limit - reading.remaining
        if reading.reset and reading.reset > 0 and used >= 1:
            weight = used - 0.5
            self._w, self._wr = self._w * 0.98 + weight, self._wr * 0.98 + weight * ((used - 0.5) / reading.reset)
            self.rate = self._wr / self._w
        first = self.limit is None
        self.limit = reading.limit
        if not self.rate:
            return
        if first:
            self.level, self.stamp = reading.remaining, now
            return
        self._refill(now)
        since = self.spent - spent_at_send
        self.level = min(self.limit, reading.remaining - since + (now - sent_at) * self.rate * PACE_MARGIN)


@dataclass
class Ticket:
    """A granted call: when it was sent and what the buckets had spent by then."""

    cost: float
    sent_at: float
    spent_requests: float
    spent_tokens: float
    window_epoch: int


@dataclass
class LimiterStats:
    calls: int = 0
    rate_limited: int = 0           # 429 answers
    waits: float = 0.0              # seconds spent paused by 429s
    peak_window: float = 0.0


@dataclass(order=True)
class _Waiter:
    priority: int
    seq: int
    cost: float = field(compare=False)
    future: asyncio.Future = field(compare=False)


class AccountLimiter:
    """Decides when each judge call of one account may start (see the module docstring). One event loop only.
    With a `pace` (`sharedlimit.SharedPace`) the buckets and pauses are the database's, shared by every process."""

    def __init__(self, *, window: float = START_WINDOW, max_window: float = MAX_WINDOW, pace=None):
        self.pace = pace
        self._granter: asyncio.Task | None = None
        self.window = float(window)
        self.max_window = float(max_window)
        self.ssthresh = math.inf
        self.in_flight = 0
        self.paused_until = 0.0                 # time.monotonic() before which nothing starts
        self.requests = Bucket()
        self.tokens = Bucket()
        self.stats = LimiterStats(peak_window=self.window)
        self.tokens_per_char = 0.25             # learned from the endpoint's usage counts
        self.limited_since: float | None = None  # first 429 since the last answer
        self._base_latency: float | None = None
        self._avg_latency: float | None = None
        self._answers = 0
        self._epoch = 0                         # bumped at each decrease: one decrease per round trip
        self._waiters: list[_Waiter] = []
        self._seq = itertools.count()
        self._timer: asyncio.TimerHandle | None = None

    # --- what callers use ------------------------------------------------------------------------------------
    def estimate_tokens(self, prompt_chars: int, max_tokens: int) -> float:
        return prompt_chars * self.tokens_per_char + max_tokens

    async def acquire(self, cost: float = 0.0, *, priority: int = 1) -> Ticket:
        """Wait for the turn of a call estimated at `cost` tokens. Lower `priority` goes first (retry chains)."""
        future = asyncio.get_running_loop().create_future()
        heapq.heappush(self._waiters, _Waiter(priority, next(self._seq), cost, future))
        self._pump()
        try:
            return await future
        except asyncio.CancelledError:
            if future.done() and not future.cancelled():      # granted just as we were cancelled
                self._finish(future.result())
            raise

    def release(self, ticket: Ticket, *, outcome: str, headers=None, latency: float | None = None,
                prompt_chars: int | None = None, prompt_tokens: int | None = None,
                retry_after: float | None = None) -> None:
        """A call ended. `outcome`: ``ok``, ``rate_limited`` (429), ``timeout`` or ``error``."""
        now = time.monotonic()
        self._finish(ticket)
        if self.pace is not None:       # the shared buckets learn from the answer; a 429 pauses every process
            self._pause_for(self.pace.observe(ticket, headers, rate_limited=outcome == "rate_limited",
                                              retry_after=retry_after))
        else:
            self._observe_headers(headers, ticket, now)
        if outcome == "ok":
            self.limited_since = None
            if prompt_chars and prompt_tokens:
                self.tokens_per_char = 0.9 * self.tokens_per_char + 0.1 * (prompt_tokens / prompt_chars)
            self._on_answer(latency, now)
        elif outcome == "rate_limited":
            self.stats.rate_limited += 1
            if self.limited_since is None:
                self.limited_since = now
            if not refused_for_requests(headers):   # the request rate's refusal is paced by its bucket, not the window
                self._decrease(ticket)
            if self.pace is not None:
                return self._pump()
            wait = retry_after if retry_after is not None else self._fallback_wait()
            if now + wait > self.paused_until:
                self.stats.waits += now + wait - max(now, self.paused_until)
                self.paused_until = now + wait
            for bucket, reading in ((self.requests, read_bucket(headers, "requests")),
                                    (self.tokens, read_bucket(headers, "tokens"))):
                if reading is not None and bucket.known and reading.remaining < 1:
                    bucket.level = min(bucket.level, 0.0)
        elif outcome == "timeout":
            self._decrease(ticket)
        self._pump()

    def waiting_until(self) -> float | None:
        """Wall-clock time (``time.time()``) until which calls wait for the rate limit, or None."""
        now = time.monotonic()
        return time.time() + (self.paused_until - now) if self.paused_until > now else None

    def status(self) -> dict:
        until = self.waiting_until()
        return {"window": round(self.window, 1), "in_flight": self.in_flight, "rate_limited": self.stats.rate_limited,
                "waiting_until": until}

    # --- internals ---------------------------------------------------------------------------------------
    def _fallback_wait(self) -> float:
        """A 429 without retry-after: the requests bucket's estimate, else one second."""
        wait = self.requests.wait(1, time.monotonic())
        return wait if wait > 0 else 1.0

    def _finish(self, ticket: Ticket) -> None:
        self.in_flight = max(0, self.in_flight - 1)

    def _observe_headers(self, headers, ticket: Ticket, now: float) -> None:
        if not headers:
            return
        for bucket, kind, mark in ((self.requests, "requests", ticket.spent_requests),
                                   (self.tokens, "tokens", ticket.spent_tokens)):
            reading = read_bucket(headers, kind)
            if reading is not None:
                bucket.observe(reading, spent_at_send=mark, sent_at=ticket.sent_at, now=now)

    def _on_answer(self, latency: float | None, now: float) -> None:
        """Grow the window by one per answer (doubling per round trip) below `ssthresh`, by one per window above
        it, while the window is in use and latency is flat; hold it while latency rises (the endpoint queues)."""
        self._answers += 1
        if latency is not None and latency >= 0:
            self._base_latency = latency if self._base_latency is None else min(self._base_latency, latency)
            self._avg_latency = latency if self._avg_latency is None else 0.95 * self._avg_latency + 0.05 * latency
            # the first answers carry connection set-up and warm-up: judge flatness once a few are in
            if self._answers > 16 and self._avg_latency > 1.5 * self._base_latency + 0.05:
                return
        if self.in_flight + 1 < 0.8 * self.window:     # the window is not what limits us: no reason to grow
            return
        self.window = min(self.max_window, self.window + (1.0 if self.window < self.ssthresh else 1.0 / self.window))
        self.stats.peak_window = max(self.stats.peak_window, self.window)

    def _decrease(self, ticket: Ticket) -> None:
        if ticket.window_epoch != self._epoch:         # already decreased since this call was sent
            return
        self._epoch += 1
        self.window = max(1.0, self.window / 2)
        self.ssthresh = self.window

    def _pause_for(self, seconds: float) -> None:
        """The shared pace says every call of the account waits `seconds` more (a 429 somewhere)."""
        if seconds > 0:
            now = time.monotonic()
            if now + seconds > self.paused_until:
                self.stats.waits += now + seconds - max(now, self.paused_until)
                self.paused_until = now + seconds

    def _pump(self) -> None:
        """Start as many waiting calls as the pause, the window and the buckets allow; else set a timer."""
        if self.pace is not None:
            if self._granter is None or self._granter.done():
                self._granter = asyncio.get_running_loop().create_task(self._grant_shared())
            return
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
        now = time.monotonic()
        while self._waiters:
            head = self._waiters[0]
            if head.future.done():                      # cancelled while waiting
                heapq.heappop(self._waiters)
                continue
            if now < self.paused_until:
                return self._wake_in(self.paused_until - now)
            if self.in_flight >= max(1, int(self.window)):
                return                                   # a release pumps again
            wait = max(self.requests.wait(1, now), self.tokens.wait(head.cost, now))
            if wait > 0:
                return self._wake_in(wait)
            heapq.heappop(self._waiters)
            self.requests.spend(1, now)
            self.tokens.spend(head.cost, now)
            self.in_flight += 1
            self.stats.calls += 1
            # the marks include this call's own cost: the server's `remaining` for it does too
            head.future.set_result(Ticket(head.cost, now, self.requests.spent, self.tokens.spent, self._epoch))

    def _head(self) -> _Waiter | None:
        while self._waiters and self._waiters[0].future.done():     # cancelled while waiting
            heapq.heappop(self._waiters)
        return self._waiters[0] if self._waiters else None

    async def _grant_shared(self) -> None:
        """The shared pump: while a call waits and the window has room, ask the shared pace for its turn (one
        database transaction: the pause, both buckets), and start it or sleep what the pace says. One such task
        per limiter; a new waiter or a release starts it again when it has ended."""
        while True:
            head = self._head()
            if head is None or self.in_flight >= max(1, int(self.window)):
                return
            try:
                grant = await asyncio.to_thread(self.pace.take, head.cost)
            except Exception as e:      # the shared pace cannot be read (the database is away): the call fails
                if (head := self._head()) is not None:
                    heapq.heappop(self._waiters)
                    head.future.set_exception(e)
                continue
            self._pause_for(grant.paused_for)
            if grant.wait > 0:
                await asyncio.sleep(grant.wait)
                continue
            head = self._head()             # the first in line now (one may have come ahead, or left)
            if head is None:
                return                      # (its turn is lost: a call cancelled while it was asked)
            heapq.heappop(self._waiters)
            self.in_flight += 1
            self.stats.calls += 1
            head.future.set_result(Ticket(head.cost, grant.now, grant.spent_requests, grant.spent_tokens,
                                          self._epoch))

    def _wake_in(self, seconds: float) -> None:
        self._timer = asyncio.get_running_loop().call_later(max(0.001, seconds), self._pump)


# --- one limiter per account, per event loop ---------------------------------------------------------------

_LIMITERS: "weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, dict[str, AccountLimiter]]" = \
    weakref.WeakKeyDictionary()
#: Loops whose limiters pace through the database: loop -> a callable giving an account's `SharedPace`.
_SHARED: "weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, object]" = weakref.WeakKeyDictionary()


def share_limits(loop: asyncio.AbstractEventLoop, pace_of) -> None:
    """Make every account limiter created on `loop` from now on pace through ``pace_of(account)`` (a
    `sharedlimit.SharedPace`): the buckets and pauses every process on the database shares."""
    _SHARED[loop] = pace_of


#: The base URL the openai SDK uses when none is given.
OPENAI_BASE_URL = "https://api.openai.com/v1"
_LOOPBACK = {"localhost", "127.0.0.1", "::1", "ip6-localhost", "localhost.localdomain"}


def same_address(base_url: str | None) -> str:
    """One spelling of a judge's base URL, so that processes configured by different hands agree on it: scheme
    and host in lower case, ``localhost`` / ``::1`` as ``127.0.0.1``, no default port (80, 443), no trailing
    slash, OpenAI's address for none.

    >>> same_address("HTTP://LocalHost:80/v1/"), same_address("https://api.openai.com:443/v1"), same_address(None)
    ('http://127.0.0.1/v1', 'https://api.openai.com/v1', 'https://api.openai.com/v1')
    """
    from urllib.parse import urlsplit, urlunsplit

    url = (base_url or "").strip() or OPENAI_BASE_URL
    try:
        parts = urlsplit(url)
        host, port = (parts.hostname or "").lower(), parts.port
    except ValueError:          # not a URL we can read: compared as written
        return url.rstrip("/")
    scheme = parts.scheme.lower()
    if host in _LOOPBACK:
        host = "127.0.0.1"
    elif ":" in host:
        host = f"[{host}]"
    if port is not None and (scheme, port) not in (("http", 80), ("https", 443)):
        host = f"{host}:{port}"
    return urlunsplit((scheme, host, parts.path.rstrip("/"), parts.query, ""))


def account_key(provider: str, base_url: str | None, api_version: str | None, api_key: str | None) -> str:
    """Identity of a judge account: endpoint (`same_address`) and a hash of the key (the key itself is never
    kept here)."""
    ident = "\n".join([provider, same_address(base_url), api_version or "", api_key or ""])
    return hashlib.sha256(ident.encode("utf-8")).hexdigest()


def limiter_for(account: str) -> AccountLimiter:
    """The limiter of `account` on the running event loop (created on first use; shared by every run)."""
    loop = asyncio.get_running_loop()
    per_loop = _LIMITERS.setdefault(loop, {})
    limiter = per_loop.get(account)
    if limiter is None:
        pace_of = _SHARED.get(loop)
        limiter = per_loop[account] = AccountLimiter(pace=pace_of(account) if pace_of is not None else None)
    return limiter
