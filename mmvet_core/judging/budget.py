"""Judge budgets that protect a host's own API key on a public deployment.

When a visitor grades with the host's key, every paid call is charged to the visitor and to the day's global
total *before* it is made, in tokens (the prompt's UTF-8 bytes / 4 plus the answer's ``max_tokens``: an upper
estimate for English text) and in calls; when the answer arrives the estimate is corrected by the token counts
the endpoint reports. A call that would pass a limit is refused with `BudgetExceeded` (the run stops, its grades are
kept) and the visitor is told to bring their own key. Tokens, not calls, because padding predictions made the
same 218 charged calls cost 67 times the tokens. Predictions longer than `BudgetLimits.max_prediction_chars` are
refused before a host-key run starts (`check_prediction_lengths`). Calls with a visitor's own key are never
charged. Counts live in the store, so they survive restarts. A limit of 0 means "no limit".

Visitors are identified by their IP address, salted and hashed (`visitor_id`). The salt is private to the
server (`private_salt`: a random file in the data folder, never sent to a browser). The address is the socket's
peer unless the host says how many proxies in front of it append to ``X-Forwarded-For`` (`client_address`): a
client can write anything in that header, so only the entries added by trusted proxies count.
"""
from __future__ import annotations

import datetime as dt
import hashlib
import secrets
import threading
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

from .grading import BudgetExceeded
from ..store import Store


@dataclass(frozen=True)
class BudgetLimits:
    per_visitor_daily: int = 2000              # judge calls
    global_daily: int = 20000
    tokens_per_visitor_daily: int = 1_500_000  # about nine MM-Vet v1 runs of ordinary answers (165k tokens each)
    tokens_global_daily: int = 15_000_000
    max_prediction_chars: int = 8000           # the longest real answer in the test data is 4,363 characters


def estimate_tokens(prompt: str, max_tokens: int = 3) -> int:
    """Tokens a call will cost at most, for English text (4 bytes a token); corrected after the call (pure).

    >>> estimate_tokens("x" * 400)
    103
    """
    return -(-len(prompt.encode("utf-8")) // 4) + max_tokens


def check_prediction_lengths(predictions: dict[str, str], max_chars: int) -> str | None:
    """A message for the visitor when a prediction is longer than the host's judge accepts, else None (pure).

    >>> check_prediction_lengths({"v1_0": "ok", "v1_1": "x" * 10}, 5)
    "1 prediction is longer than this server's judge accepts (5 characters; v1_1 has 10). Shorten them, or grade with your own API key."
    """
    if not max_chars:
        return None
    long = sorted(((len(p), sid) for sid, p in predictions.items() if len(p or "") > max_chars), reverse=True)
    if not long:
        return None
    n, (size, sid) = len(long), long[0]
    return (f"{n} prediction{'s are' if n > 1 else ' is'} longer than this server's judge accepts ({max_chars} "
            f"characters; {sid} has {size}). Shorten them, or grade with your own API key.")


def visitor_id(raw: str, salt: str = "") -> str:
    """An opaque id for a visitor (IP address or session token); the raw value is never stored."""
    return hashlib.sha256(f"{salt}:{raw}".encode()).hexdigest()[:24]


def private_salt(data_dir: Path) -> str:
    """The salt of visitor ids: random, created once in `data_dir`, readable by the server only, and used for
    nothing else (in particular not as a browser-state secret, which Gradio publishes in ``/config``)."""
    path = Path(data_dir) / ".visitor-salt"
    if not path.exists():
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(secrets.token_urlsafe(32))
        path.chmod(0o600)
    return path.read_text().strip()


def client_address(peer: str | None, forwarded_for: str | None, trusted_hops: int = 0) -> str:
    """The client's address: the socket `peer`, or with `trusted_hops` proxies in front of the server, the entry
    of ``X-Forwarded-For`` the outermost trusted proxy appended (pure). Each proxy appends the address it saw, so
    the last `trusted_hops` entries are trustworthy and anything before them is the client's own writing.

    >>> client_address("10.0.0.5", "6.6.6.6, 1.2.3.4", 0)        # no proxy trusted: the header is ignored
    '10.0.0.5'
    >>> client_address("10.0.0.5", "6.6.6.6, 1.2.3.4", 1)        # one proxy: the entry it appended
    '1.2.3.4'
    >>> client_address("10.0.0.5", "6.6.6.6, 1.2.3.4, 10.0.0.9", 2)
    '1.2.3.4'
    >>> client_address("10.0.0.5", None, 1)                        # a trusted proxy that sent nothing
    '10.0.0.5'
    """
    peer = peer or "unknown"
    if trusted_hops <= 0 or not forwarded_for:
        return peer
    entries = [e.strip() for e in forwarded_for.split(",") if e.strip()]
    if not entries:
        return peer
    return entries[-min(trusted_hops, len(entries))]


def today() -> str:
    return dt.datetime.now(dt.timezone.utc).strftime("%Y-%m-%d")


class HostBudget:
    """Charges host-key calls and tokens to a visitor and to the day's global total (thread-safe)."""

    def __init__(self, store: Store, limits: BudgetLimits):
        self.store, self.limits = store, limits
        self._lock = threading.Lock()

    def remaining(self, visitor: str) -> tuple[int | None, int | None]:
        """Calls left today for `visitor` and for everyone (None: no limit)."""
        day = today()
        per = self.limits.per_visitor_daily - self.store.usage(day, visitor) if self.limits.per_visitor_daily else None
        glob = self.limits.global_daily - self.store.usage(day) if self.limits.global_daily else None
        return per, glob

    def remaining_tokens(self, visitor: str) -> tuple[int | None, int | None]:
        """Tokens left today for `visitor` and for everyone (None: no limit)."""
        day, lim = today(), self.limits
        per = lim.tokens_per_visitor_daily - self.store.token_usage(day, visitor) \
            if lim.tokens_per_visitor_daily else None
        glob = lim.tokens_global_daily - self.store.token_usage(day) if lim.tokens_global_daily else None
        return per, glob

    def charge(self, visitor: str, tokens: int = 0) -> None:
        """Count one call of about `tokens` tokens, or raise `BudgetExceeded` with a message for the visitor. The
        check and the count are one transaction of the store (`Store.charge_usage`): app replicas and grading
        workers charging at once share the day's budgets, never passing them together."""
        lim = self.limits
        with self._lock:
            refused = self.store.charge_usage(
                today(), visitor, tokens, calls_per_visitor=lim.per_visitor_daily, calls_global=lim.global_daily,
                tokens_per_visitor=lim.tokens_per_visitor_daily, tokens_global=lim.tokens_global_daily)
        if refused == "calls_per_visitor":
            raise BudgetExceeded(
                f"daily limit of {lim.per_visitor_daily} judge calls with the host's key reached for "
                "you; grades so far are kept. Enter your own API key to continue.")
        if refused == "calls_global":
            raise BudgetExceeded(
                f"this server's daily budget of {lim.global_daily} judge calls with its own key is "
                "used up; grades so far are kept. Enter your own API key to continue.")
        if refused == "tokens_per_visitor":
            raise BudgetExceeded(
                f"daily limit of {lim.tokens_per_visitor_daily:,} judge tokens with the host's key "
                "reached for you; grades so far are kept. Enter your own API key to continue.")
        if refused == "tokens_global":
            raise BudgetExceeded(
                f"this server's daily budget of {lim.tokens_global_daily:,} judge tokens with its own "
                "key is used up; grades so far are kept. Enter your own API key to continue.")

    def correct(self, visitor: str, day: str, estimated: int, reply) -> None:
        """Replace a call's estimate by the tokens the endpoint reported (when it reported them)."""
        used = (reply.prompt_tokens or 0) + (reply.completion_tokens or 0)
        if reply.prompt_tokens is None or used == estimated:
            return
        with self._lock:
            self.store.add_usage(day, visitor, 0, used - estimated)

    def hook(self, visitor: str, max_tokens: int = 3) -> Callable[[str], Callable]:
        """The budget hook of `grade_run(budget=...)`: called with each prompt before its call, it charges the
        estimate and returns the callable that corrects it with the reply."""
        def charge(prompt: str) -> Callable:
            tokens, day = estimate_tokens(prompt, max_tokens), today()
            self.charge(visitor, tokens)
            return lambda reply: self.correct(visitor, day, tokens, reply)
        return charge
