"""The successor board: every judge this server checked with its own key, side by side, to choose a successor to
the shut-down official judge (``gpt-4-0613``). A visitor's check of their own endpoint is theirs alone: listed
for them only, after the board, unranked and marked unverified (`board_rows` with ``visitor=True``); no endpoint
is ever shown by its address (`endpoint_label`: this server's judge, a known provider, or a visitor's endpoint by
its kind).

One row per checked judge (its current check: a check grows with every reference set the judge grades, so the
largest and latest of each judge and prompt; `current_checks`): the
judge, its endpoint's host, Δ̄ to the official grades, the total shift with its 95 % interval, Kendall's τ across the
reference models, the verdict, whether official-equivalent estimates are available, the shutdown date the endpoint
announced, the reference models and a link to the full report (``?check=<id>``). Pure: rows in, rows / CSV out.

How to read it: a good successor has a small Δ̄ (near GPT-4-0613's own run-to-run Δ̄, about 0.01; the keyword
baseline is about 0.12), a shift whose interval holds 0 or is narrow (then estimates are possible), τ = +1 (it
orders the reference models as the official judge does) and no near shutdown date.
"""
from __future__ import annotations

import csv
import io
import math
from dataclasses import asdict, dataclass
from datetime import date
from urllib.parse import urlsplit

from .judgecheck import JudgeCheckResult, format_shift

#: Sort keys of the board (column name shown in the app -> attribute).
SORT_KEYS = {"Δ̄ (closest first)": "delta_bar", "|shift| (smallest first)": "abs_shift",
             "τ (highest first)": "tau", "shutdown date (latest first)": "shutdown", "checked (newest first)":
             "checked"}
#: The app's table columns (`board_table`).
TABLE_HEADERS = ["judge", "endpoint", "Δ̄", "total shift [95 %]", "τ", "verdict", "estimates", "shutdown",
                 "references", "checked (UTC)", "report"]
BOARD_HEADER = ["judge", "endpoint", "delta_bar", "shift", "shift_ci_low", "shift_ci_high", "kendall_tau",
                "verdict", "estimates", "shutdown_date", "reference_models", "checked_utc", "link"]


@dataclass(frozen=True)
class BoardRow:
    """One checked judge."""

    check_id: str
    judge: str
    endpoint: str
    delta_bar: float
    shift: float
    shift_low: float | None
    shift_high: float | None
    tau: float | None
    verdict: str                    # close, drifts, unclear
    estimates: bool
    shutdown: str | None            # YYYY-MM-DD
    references: list[str]
    checked: float                  # unix time
    verified: bool = True           # this server's check (its own key); False: a visitor's own, unranked

    def shift_text(self) -> str:
        return format_shift(self.shift, (self.shift_low, self.shift_high) if self.shift_low is not None else None)

    def to_dict(self) -> dict:
        return asdict(self)


def endpoint_label(judge: dict, host_base_url: str | None = None, *, visitor: bool = False) -> str:
    """Where the judge was reached, as anyone may see it: never an address of this server's gateway or of a
    visitor's endpoint. This server's own endpoint: "this server's judge"; the offline baseline: "offline"; a
    known provider (`provenance.KNOWN_PROVIDERS`) by name; any other endpoint by its kind only: one the host
    checked (the CLI's check of another endpoint), or, with `visitor`, the visitor's own (shown to them only).

    >>> endpoint_label({"base_url": "https://api.example.com/v1/x?key=1"}), endpoint_label({"provider": "baseline"})
    ('an endpoint the host checked (public host)', 'offline')
    >>> endpoint_label({"base_url": "http://gpu-judge-07.corp.internal:8000/v1"}, visitor=True)
    'your endpoint (private host), unverified'
    >>> endpoint_label({"base_url": "http://10.0.0.7/v1"}, "http://10.0.0.7/v1")
    "this server's judge"
    """
    from ..runs.provenance import KNOWN_PROVIDERS, endpoint_netloc

    if judge.get("provider") == "baseline":
        return "offline"
    url = (judge.get("base_url") or "").rstrip("/")
    if not visitor and host_base_url is not None and url == (host_base_url or "").rstrip("/"):
        return "this server's judge"
    netloc = endpoint_netloc(url or None)
    if netloc in KNOWN_PROVIDERS:
        return f"{netloc} (your key), unverified" if visitor else netloc
    kind = "private host" if is_private_host(urlsplit(url).hostname or "") else "public host"
    return f"your endpoint ({kind}), unverified" if visitor else f"an endpoint the host checked ({kind})"


#: Name endings of hosts only a private network resolves.
PRIVATE_SUFFIXES = (".internal", ".local", ".lan", ".corp", ".home", ".intranet", ".localdomain", ".private",
                    ".localhost", ".home.arpa")


def is_private_host(host: str) -> bool:
    """Whether a host name or address is one of a private network (an address in a private, loopback or
    link-local range; a name without a dot, or ending in one of `PRIVATE_SUFFIXES`). Read from the name alone:
    nothing is resolved.

    >>> [is_private_host(h) for h in ("gpu-judge-07.corp.internal", "10.1.2.3", "localhost", "api.example.com")]
    [True, True, True, False]
    """
    import ipaddress

    host = (host or "").strip("[]").lower().rstrip(".")
    try:
        ip = ipaddress.ip_address(host)
        return not ip.is_global
    except ValueError:
        pass
    return "." not in host or host.endswith(PRIVATE_SUFFIXES)


def current_checks(checks: list[dict]) -> list[dict]:
    """One check per judge (endpoint, model, token limit: the fingerprint) and prompt: the one with the most
    reference models, the latest of those (a check grows; a smaller check stored before checks grew never shows
    beside it with another answer). Order kept.

    >>> c = lambda i, fp, n, t: {"id": i, "fingerprint": fp, "prompt": "p", "created_at": t,
    ...                          "result": {"models": list(range(n))}}
    >>> [x["id"] for x in current_checks([c("a", "j", 2, 3.0), c("b", "j", 4, 1.0), c("c", "k", 1, 2.0)])]
    ['b', 'c']
    """
    best: dict[tuple, tuple] = {}
    for c in checks:
        key = (c.get("fingerprint"), c.get("prompt") or "")
        size = len((c.get("result") or {}).get("models") or [])
        rank = (size, float(c.get("created_at") or 0.0))
        if key not in best or rank > best[key][0]:
            best[key] = (rank, c.get("id"))
    keep = {v[1] for v in best.values()}
    return [c for c in checks if c.get("id") in keep]


def board_rows(checks: list[dict], *, host_base_url: str | None = None,
               shutdowns: dict[str, date] | None = None, visitor: bool = False) -> list[BoardRow]:
    """Rows from `Store.judge_checks` entries, one per judge (`current_checks`). The shutdown date is the one the
    endpoint announced when the judge was checked (recorded with the judge), else a known retirement from
    `shutdowns` (model -> date). `visitor`: these are a visitor's own checks (shown to that visitor only):
    unverified, and no estimates."""
    rows = []
    for c in current_checks(checks):
        try:
            result = JudgeCheckResult.from_dict(c["result"])
        except (KeyError, TypeError, ValueError):
            continue                          # a damaged entry is left out, not a crash of the board
        judge = c.get("judge") or result.judge
        model = str(judge.get("model") or c.get("judge_model") or "?")
        total = result.total
        low, high = total.shift_interval or (None, None)
        shutdown = judge.get("shutdown_date") or (shutdowns or {}).get(model)
        rows.append(BoardRow(c.get("id", ""), model, endpoint_label(judge, host_base_url, visitor=visitor),
                             float(total.delta_bar), float(total.shift), low, high, result.tau, result.verdict_kind or
                             ("close" if result.close else "drifts"), bool(result.correctable) and not visitor,
                             shutdown.isoformat() if isinstance(shutdown, date) else shutdown,
                             list(result.models), float(c.get("created_at") or result.created_at or 0.0),
                             verified=not visitor))
    return rows


def sort_rows(rows: list[BoardRow], key: str = "delta_bar") -> list[BoardRow]:
    """`rows` sorted by `key` (a value of `SORT_KEYS`); rows without the value go last.

    >>> r = lambda j, d, s, t: BoardRow("", j, "", d, s, None, None, t, "", False, None, [], 0.0)
    >>> [x.judge for x in sort_rows([r("a", 0.2, 1.0, None), r("b", 0.1, -3.0, 1.0)], "abs_shift")]
    ['a', 'b']
    >>> [x.judge for x in sort_rows([r("a", 0.2, 1.0, None), r("b", 0.1, -3.0, 1.0)], "tau")]
    ['b', 'a']
    """
    def value(r: BoardRow):
        v = {"delta_bar": r.delta_bar, "abs_shift": abs(r.shift), "tau": None if r.tau is None else -r.tau,
             "shutdown": None if not r.shutdown else -date.fromisoformat(r.shutdown).toordinal(),
             "checked": -r.checked}.get(key, r.delta_bar)
        missing = v is None or (isinstance(v, float) and math.isnan(v))
        return (missing, 0.0 if missing else v)
    return sorted(rows, key=value)


def check_link(check_id: str, base: str = "") -> str:
    """The link of a row: the page with the check's report (``?check=<id>``)."""
    return f"{base.rstrip('/')}/?check={check_id}" if base else f"?check={check_id}"


def _checked_text(t: float) -> str:
    import time
    return time.strftime("%Y-%m-%d %H:%M", time.gmtime(t)) if t else ""


def board_table(rows: list[BoardRow]) -> list[list]:
    """The app's table: one list per row (the link cell is Markdown; every visitor-made text is escaped by the
    caller's Markdown sanitiser and by `_cell`)."""
    # (the endpoint cell is `endpoint_label`'s own words, never a visitor's text: its parentheses are kept)
    return [[_cell(r.judge), r.endpoint, f"{r.delta_bar:.3f}", r.shift_text(),
             "" if r.tau is None else f"{r.tau:+.2f}", r.verdict, "yes" if r.estimates else "no",
             r.shutdown or "—", len(r.references), _checked_text(r.checked),
             f"[report]({check_link(r.check_id)})"] for r in rows]


def _cell(text: str) -> str:
    """A judge name as a table cell: no Markdown or HTML control characters survive."""
    return "".join(ch for ch in str(text) if ch not in "<>[]()`*_|\\")[:120]


def make_board_csv_text(rows: list[BoardRow], base: str = "") -> str:
    """The board as CSV (`BOARD_HEADER`), formula-like cells neutralised like every export."""
    from ..scores.export import csv_safe

    buffer = io.StringIO()
    writer = csv.writer(buffer, lineterminator="\n")
    writer.writerow(BOARD_HEADER)
    for r in rows:
        writer.writerow([csv_safe(r.judge), csv_safe(r.endpoint), f"{r.delta_bar:.4f}", f"{r.shift:+.2f}",
                         "" if r.shift_low is None else f"{r.shift_low:+.2f}",
                         "" if r.shift_high is None else f"{r.shift_high:+.2f}",
                         "" if r.tau is None else f"{r.tau:+.3f}", r.verdict, "yes" if r.estimates else "no",
                         r.shutdown or "", "+".join(r.references), _checked_text(r.checked),
                         check_link(r.check_id, base)])
    return buffer.getvalue()
