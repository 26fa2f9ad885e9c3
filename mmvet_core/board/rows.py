"""The board's rows: one `BoardRow` per entry or reference row, as the view's table (`TABLE_COLUMNS`), the
downloads, the API and the CLI (`describe_entries`) show it. Pure; the ranks come from `entries.board_rows`.

The paper's models (``assets/paper-scores.json``, judged by the official GPT-4-0613, 5 runs) appear as
**reference rows**: they are never ranked (the paper published totals without per-sample scores, so no paired
test is possible), and their interval column is empty.

**Official-equivalent column.** Ranks never mix judges. A successor judge's entry shows its official-equivalent
estimate (``mmvet_core/successors/equivalence.py``) when its judge has a check on this server: the service passes it
through the `estimate` parameter of `entries.board_rows`, a callable ``(entry) -> Equivalence.short() | None``
whose result fills (`set_estimate`) the row's ``official_equivalent`` ([estimate, low, high]), its label
(in-sample, extrapolated) and the check it rests on. Rows of the official judge (the paper's included) say "official metric" there instead. A view that ranks
those estimates across judges must say so with `OFFICIAL_EQUIVALENT_VIEW`; it is not built here.

An official judge that a file only claims, nobody verified (an imported backup naming ``gpt-4-0613``), reads as a
claim (`claimed_judge`, `CLAIMED_KIND`), never as the official judge or the official metric.
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Iterable

from ..runs import provenance as prov
from ..scores.terminal import fit_lines

RANK_NOTE = ("Rank “2–4” means: with 95 % confidence (paired bootstrap over the same samples) this entry is no "
             "better than 2nd and no worse than 4th among entries with the same judge, benchmark and samples; "
             "entries sharing a range are not significantly different, and reference rows (the paper's) are "
             "not ranked.")
#: What a view that ranks official-equivalent estimates across judges must be called (module docstring).
OFFICIAL_EQUIVALENT_VIEW = "official-equivalent"
SIX = ("rec", "ocr", "know", "gen", "spat", "math")
#: The column of the official-equivalent estimate (successor judges with a check; never the official metric).
ESTIMATE_COLUMN = "official-equivalent (estimate)"
OFFICIAL_METRIC = "official metric"
#: Columns of the board's table (CSV / the view), in order: the numbers first (rank range, name, total with its
#: interval, the estimate with its interval and label, judge), then the rest (the view shows them on request).
TABLE_COLUMNS = ["rank", "name", "total", "95% CI", ESTIMATE_COLUMN, "judge", "rank group", "estimate check", "kind",
                 "provenance", "benchmark", "runs", *SIX, "date", "version", "entry"]
#: The columns the view shows before a visitor chooses others (they fit 1440 px without sideways scrolling).
LEADING_COLUMNS = TABLE_COLUMNS[:6]
#: The kind of an entry whose file claims the official judge that nobody verified (never "official").
CLAIMED_KIND = "claimed, not verified"


def claimed_judge(judge: str, kind: str, verified: bool) -> tuple[str, str]:
    """(judge, kind) as a row shows them: an official claim nobody verified (an imported file naming gpt-4-0613)
    reads as a claim, never as the official judge or the official metric.

    >>> claimed_judge("gpt-4-0613", "official", False)
    ('claims gpt-4-0613 (not verified)', 'claimed, not verified')
    >>> claimed_judge("gpt-4-0613", "official", True), claimed_judge("gpt-4o", "successor", False)
    (('gpt-4-0613', 'official'), ('gpt-4o', 'successor'))
    """
    if kind == "official" and not verified:
        return f"claims {judge} (not verified)", CLAIMED_KIND
    return judge, kind


def format_rank(rank: tuple[int, int] | list[int] | None) -> str:
    """``"2–4"``, ``"1"`` or ``"—"`` (unranked).

    >>> format_rank((2, 4)), format_rank([1, 1]), format_rank(None)
    ('2–4', '1', '—')
    """
    if not rank:
        return "—"
    best, worst = rank[0], rank[1]
    return str(best) if best == worst else f"{best}–{worst}"



@dataclass
class BoardRow:
    """One row of the board: an entry, or a reference row of the paper (``entry == ""``, ``reference``)."""

    entry: str
    name: str
    link: str
    judge: str
    kind: str
    benchmark: str
    benchmark_label: str
    runs: int
    total: float | None
    ci: list[float | None]
    rank: list[int] | None
    group_size: int
    capabilities: dict[str, float | None]
    integrations: dict[str, float | None]
    date: str
    version: int
    reference: bool = False
    metric_note: str | None = None
    official_equivalent: list[float | None] | None = None
    provenance: str = ""                       # `provenance.label`: "imported, judge not verified", ...
    verified: bool = False                     # the judge is vouched for (graded here on a trusted endpoint, or host)
    rank_note: str = ""                        # why there is no rank ("not ranked: …", "ranking…"), "" when ranked
    provenance_detail: dict | None = None      # the frozen provenance record (API, MCP, JSON download)
    official_equivalent_label: str = ""     # in-sample, extrapolated
    official_equivalent_check: str = ""     # the check it rests on (id, date, reference models and their range)
    official_equivalent_note: str = ""      # why a successor entry has no estimate ("" when it has one)
    group: str = ""                         # its rank group in words: judge · endpoint · benchmark (`group_label`)

    def rank_cell(self) -> str:
        """The rank column: ``2–4``; ``ref`` for the paper's rows; ``…`` while the group is being ranked; ``—``
        for an entry that is not ranked (its `rank_note` says why)."""
        if self.reference:
            return "ref"
        if self.rank is None and self.rank_note.startswith("ranking"):
            return "…"
        return format_rank(self.rank)

    def estimate_text(self) -> str:
        """The estimate column's cell: ``33.0 [30.0, 36.3] · extrapolated · check 3f2a9c1b (…)``, "official metric"
        for the official judge, "" otherwise."""
        if self.kind == "official":
            # an unverified claim (an imported file that names gpt-4-0613) is not presented as the official metric
            return OFFICIAL_METRIC if (self.reference or self.verified) else "official judge claimed, not verified"
        if self.kind == CLAIMED_KIND:
            return "official judge claimed, not verified"
        if not self.official_equivalent:
            if self.kind == "baseline":
                return "no estimate: the keyword baseline reads no judgement"
            return f"no estimate: {self.official_equivalent_note}" if self.official_equivalent_note else ""
        est, low, high = self.official_equivalent
        parts = [f"{est:.1f} [{low:.1f}, {high:.1f}]", self.official_equivalent_label, self.official_equivalent_check]
        return " · ".join(p for p in parts if p)

    def estimate_cell(self) -> str:
        """The estimate column's cell: ``33.0 [30.0, 36.3] · extrapolated`` (the check it rests on is a column of
        its own), "official metric", or why there is none."""
        text = self.estimate_text()
        if self.official_equivalent and self.official_equivalent_check:
            return text.replace(f" · {self.official_equivalent_check}", "")
        return text

    def cells(self) -> list:
        """The row as the view's table shows it (`TABLE_COLUMNS`)."""
        ci = "" if None in self.ci else f"[{self.ci[0]:.1f}, {self.ci[1]:.1f}]"
        return [self.rank_cell(), self.name, _num(self.total), ci, self.estimate_cell(), self.judge, self.group,
                self.official_equivalent_check, self.kind, self.provenance, self.benchmark_label, self.runs,
                *[_num(self.capabilities.get(c)) for c in SIX], self.date,
                "paper" if self.reference else self.version, self.entry]

    def to_json(self, *, detail: bool = False) -> dict:
        """What ``leaderboard show --json``, the downloads and the API return for this row; `detail` adds the
        frozen provenance record (the downloads, one entry's card) to its label."""
        out = {"entry": self.entry, "name": self.name, "link": self.link, "judge": self.judge,
                "judge_kind": self.kind, "benchmark": self.benchmark, "benchmark_label": self.benchmark_label,
                "runs": self.runs, "total": self.total, "ci": list(self.ci), "rank": self.rank,
                "rank_group_size": self.group_size, "capabilities": self.capabilities,
                "integrations": self.integrations, "date": self.date, "version": self.version,
                "reference": self.reference, "metric_note": self.metric_note,
                "official_equivalent": self.official_equivalent,
                "official_equivalent_label": self.official_equivalent_label,
                "official_equivalent_check": self.official_equivalent_check,
                "official_equivalent_note": self.official_equivalent_note, "estimate_text": self.estimate_text(),
                "rank_group": self.group, "provenance": self.provenance,
                "verified": self.verified, "rank_note": self.rank_note}
        if detail:
            out["provenance_detail"] = self.provenance_detail
        return out


def _num(x) -> float | None:
    return None if x is None or (isinstance(x, float) and math.isnan(x)) else round(float(x), 1)


def _ci(meta: dict) -> list[float | None]:
    ci = meta.get("ci") or [None, None]
    return [None if v is None else round(float(v), 1) for v in ci[:2]] + [None] * (2 - len(ci[:2]))


def entry_row(entry, *, rank_note: str, group: str) -> BoardRow:
    """The row of an entry (`entries.BoardEntry`) without a rank (`entries.board_rows` adds it): its frozen facts as
    the table shows them, its provenance, `rank_note` (why it is not ranked, "" when it is) and `group` (its rank
    group in words, `entries.group_label`)."""
    m, record = entry.meta, entry.provenance
    judge, kind = claimed_judge(str(m.get("judge", "?")), str(m.get("judge_kind", "?")), prov.is_verified(record))
    return BoardRow(
        entry=entry.id, name=entry.name, link=entry.link, judge=judge, kind=kind,
        benchmark=str(m.get("benchmark", "?")),
        benchmark_label=str(m.get("benchmark_label", "?")), runs=int(m.get("runs", 0)),
        total=_num(m.get("total")), ci=_ci(m), rank=None, group_size=0,
        capabilities={c: _num(v) for c, v in (m.get("capabilities") or {}).items()},
        integrations={c: _num(v) for c, v in (m.get("integrations") or {}).items()},
        date=str(m.get("date", "")), version=entry.version, metric_note=m.get("metric_note"),
        provenance=prov.label(record), verified=prov.is_verified(record), rank_note=rank_note,
        provenance_detail=prov.public_record(record), group=group)


def set_estimate(row: BoardRow, eq: dict | None) -> None:
    """Fill a successor row's estimate fields from `equivalence.Equivalence.short()` (the numbers rounded once,
    there), or its reason from ``{"reason": …}`` when there is none."""
    has = bool(eq) and "estimate" in eq
    row.official_equivalent = [eq["estimate"], eq["low"], eq["high"]] if has else None
    row.official_equivalent_label = eq.get("label", "") if has else ""
    row.official_equivalent_check = eq.get("check_text", "") if has else ""
    row.official_equivalent_note = "" if has else str((eq or {}).get("reason") or "")



def paper_rows() -> list[BoardRow]:
    """The paper's models as reference rows (full set: ``v1``; Bard set: ``v1-bard``), judge gpt-4-0613."""
    from ..scores.charts import load_paper_scores

    out = []
    for subset, key, label in ((None, "v1", "MM-Vet v1"), ("bard", "v1-bard", "MM-Vet v1 · Bard set (168)")):
        for model, s in load_paper_scores(subset=subset).items():
            if s.get("total") is None:
                continue
            out.append(BoardRow(entry="", name=f"{model} (paper)", link="https://arxiv.org/abs/2308.02490",
                                judge="gpt-4-0613 (paper)", kind="official", benchmark=key, benchmark_label=label,
                                runs=5, total=_num(s["total"]), ci=[None, None], rank=None, group_size=0,
                                capabilities={c: _num(v) for c, v in s["capabilities"].items()},
                                integrations={c: _num(v) for c, v in s["integrations"].items()},
                                date="2023 (paper)", version=0, reference=True, provenance=prov.PAPER_LABEL,
                                verified=True, rank_note="reference row: the paper's published totals (not ranked)",
                                group=f"gpt-4-0613 (paper) · {label} · the paper's models (not ranked)"))
    return out



def describe_entries(rows: Iterable[BoardRow], width: int | None = 100) -> str:
    """A plain-text table of rows for the CLI, each rank group under a heading that names it (judge, endpoint,
    benchmark): rank range, total, 95 % interval, official-equivalent estimate (or why there is none), name;
    the provenance on the next line. At most `width` columns (names and long estimate notes are cut with …)."""
    def cut(text: str, n: int) -> str:
        return text if len(text) <= n else text[:n - 1] + "…"
    lines = [f"{'rank':>7}  {'total':>5}  {'95% CI':>12}  {'estimate (official-equivalent)':<34}  name (entry)"]
    group = None
    for r in rows:
        if r.group != group:
            group = r.group
            lines += ["", cut(f"── {group} ──", width or 10 ** 6)]
        ci = "" if None in r.ci else f"[{r.ci[0]:.1f}, {r.ci[1]:.1f}]"
        total = "" if r.total is None else f"{r.total:.1f}"
        est = r.estimate_text()
        if r.official_equivalent:        # the number, its interval and label (the check goes on the next line)
            est = " · ".join(p for p in (est.split(" · ")[0], r.official_equivalent_label) if p)
        elif est.startswith("no estimate: "):
            est = "none (why: below)"
        name = r.name + (f" ({r.entry}, v{r.version})" if r.entry else "")
        line = f"{r.rank_cell():>7}  {total:>5}  {ci:>12}  {cut(est, 34):<34}  {name}"
        lines.append(cut(line, width) if width else line)
        why = r.estimate_text() if est == "none (why: below)" else r.official_equivalent_check
        lines += fit_lines([f"{'':>9}{'; '.join(p for p in (r.provenance, why) if p)}"], width)
    return "\n".join(lines)
