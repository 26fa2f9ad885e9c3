"""What part of the board a visitor asks for, and the board as a download: `BoardFilter` (a judge, a benchmark, a
text in names, a sort), the deep link that carries it (``?board=judge=…&q=…``: visitor input, bounded and
normalised, never an error), and the rows as CSV (formula-safe) or JSON. Pure functions over `BoardRow`s.
"""
from __future__ import annotations

import csv
import io
import json
import re
from dataclasses import asdict, dataclass
from urllib.parse import parse_qsl, urlencode

from .rows import CLAIMED_KIND, RANK_NOTE, SIX, TABLE_COLUMNS, BoardRow
from .snapshot import OFFICIAL_JUDGE_KEY

#: How many entries a CSV / JSON download or the API returns at most (the board is bounded anyway).
MAX_ROWS = 5000
#: Sortable keys of `BoardFilter.sort`.
SORT_KEYS = ("rank", "name", "judge", "kind", "benchmark", "runs", "total", "ci_low", "ci_high", *SIX, "date")

_CONTROL = re.compile(r"[\x00-\x1f\x7f-\x9f\u200b-\u200f\u2028-\u202e\u2066-\u2069\ufeff]+")


@dataclass
class BoardFilter:
    """What the board shows: a judge (its name or kind), a benchmark key, a text in names, the sort column and
    direction, and whether the paper's reference rows are included. Empty fields do not filter."""

    judge: str = ""
    benchmark: str = ""
    query: str = ""
    sort: str = "rank"
    descending: bool = False
    references: bool = True

    def normalised(self) -> "BoardFilter":
        """Bounded, known values only (a deep link is visitor input)."""
        sort = self.sort if self.sort in SORT_KEYS else "rank"
        return BoardFilter(judge=_short(self.judge), benchmark=_short(self.benchmark), query=_short(self.query),
                           sort=sort, descending=bool(self.descending), references=bool(self.references))


def _short(text: object, limit: int = 80) -> str:
    return re.sub(r"\s+", " ", _CONTROL.sub(" ", str(text or ""))).strip()[:limit]


def _sort_value(row: BoardRow, key: str):
    """A sort key with missing values last whatever the direction (handled by the caller)."""
    if key == "rank":
        return None if row.rank is None else (row.benchmark, row.group, row.rank[0], row.rank[1])
    if key in SIX:
        return row.capabilities.get(key)
    if key == "ci_low":
        return row.ci[0]
    if key == "ci_high":
        return row.ci[1]
    if key in ("name", "judge", "kind", "benchmark", "date"):
        return str(getattr(row, key)).lower()
    return getattr(row, key)


def filter_rows(rows: list[BoardRow], f: BoardFilter) -> list[BoardRow]:
    """The rows `f` selects, sorted by `f.sort` (rank: by benchmark, judge, then rank range; rows without a value
    in the sort column last, reference rows after ranked ones)."""
    f = f.normalised()
    q = f.query.lower()
    judge = f.judge.lower()
    out = [r for r in rows
           if (f.references or not r.reference)
           and (not judge or judge in (r.judge.lower(), r.kind.lower())
                or (judge in (OFFICIAL_JUDGE_KEY, "official") and r.kind in ("official", CLAIMED_KIND)))
           and (not f.benchmark or r.benchmark == f.benchmark)
           and (not q or q in r.name.lower())]
    present = [r for r in out if _sort_value(r, f.sort) is not None]
    missing = [r for r in out if _sort_value(r, f.sort) is None]
    present.sort(key=lambda r: _sort_value(r, f.sort), reverse=f.descending)
    if f.sort == "rank":        # within a rank range, the higher total first
        present.sort(key=lambda r: (r.benchmark, r.group, r.rank[0], -(r.total or 0), r.rank[1]))
        missing.sort(key=lambda r: (r.benchmark, r.reference, r.group, -(r.total or 0)))
    return present + missing


def filter_to_query(f: BoardFilter) -> str:
    """The deep link's ``board`` parameter value for `f` (``judge=…&benchmark=…``; defaults left out)."""
    f = f.normalised()
    d = BoardFilter()
    items = [(k, v) for k, v in (("judge", f.judge), ("benchmark", f.benchmark), ("q", f.query),
                                 ("sort", f.sort), ("desc", "1" if f.descending else ""),
                                 ("refs", "" if f.references else "0"))
             if v and not (k == "sort" and v == d.sort)]
    return urlencode(items) or "all"


def filter_from_query(text: str | None) -> BoardFilter:
    """A `BoardFilter` from a deep link's ``board`` value; unknown keys and values are ignored (never an error).

    >>> filter_from_query(filter_to_query(BoardFilter(judge="gpt-4o", query="llava", descending=True)))
    BoardFilter(judge='gpt-4o', benchmark='', query='llava', sort='rank', descending=True, references=True)
    """
    values = dict(parse_qsl(str(text or "")[:1000], keep_blank_values=True))
    return BoardFilter(judge=values.get("judge", ""), benchmark=values.get("benchmark", ""),
                       query=values.get("q", ""), sort=values.get("sort", "rank"),
                       descending=values.get("desc") == "1", references=values.get("refs") != "0").normalised()


# --------------------------------------------------------------------------------------------------------------
# Downloads


def _cell_safe(value):
    """A CSV cell a spreadsheet shows as text: a leading ``= + - @`` (a formula) gets a quote in front."""
    if isinstance(value, str) and value[:1] in ("=", "+", "-", "@", "\t", "\r"):
        return "'" + value
    return value


def rows_csv(rows: list[BoardRow]) -> str:
    """The board as CSV (`TABLE_COLUMNS` plus the link), formula-safe."""
    buffer = io.StringIO()
    w = csv.writer(buffer, lineterminator="\n")
    w.writerow([*TABLE_COLUMNS, "link"])
    for r in rows[:MAX_ROWS]:
        w.writerow([_cell_safe(c) if c is not None else "" for c in [*r.cells(), r.link]])
    return buffer.getvalue()


def rows_json(rows: list[BoardRow], f: BoardFilter | None = None) -> str:
    """The board as JSON: ``{"filter", "rank_note", "entries": [row.to_json()]}``."""
    return json.dumps({"filter": asdict((f or BoardFilter()).normalised()), "rank_note": RANK_NOTE,
                       "entries": [r.to_json(detail=True) for r in rows[:MAX_ROWS]]}, ensure_ascii=False, indent=1)
