"""The leaderboard: published entries, honest rank groups, filters and exports (pure functions, plus the few that
read or write the store).

An **entry** is a finished run published under a display name. Publishing freezes a copy of the run's per-sample
scores (per judge run) and of its metadata (judge, judge kind, benchmark and its sample ids, runs, totals,
capabilities, integrations, date): later overrides or the deletion of the run never change the board silently.
Republishing is explicit and stores a new **version** of the same entry (the old versions stay stored).

**Ranks.** Entries are ranked only against entries of the same *rank group*: the same judge (the official
``gpt-4-0613`` and its alias ``gpt-4`` are one judge; a prompt ablation is another judge), the same benchmark and
the very same samples (ids, questions and answers). Within a group every pair is compared with a **paired
bootstrap** over samples: `RANK_RESAMPLES` draws of the samples (seed `RANK_SEED`; the draws depend only on the
number of samples, so every entry of a group sees the same draws and results are reproducible), each entry's total
recomputed on each draw. Entry *j* is **significantly better** than *i* when fewer than 2.5 % of the draws have
``T_j − T_i ≤ 0`` (the paired 95 % percentile interval of the difference lies above 0). Then, as Chatbot Arena's
"rank (UB)" but with both ends:

* ``best(i)  = 1 + #{j : j significantly better than i}``
* ``worst(i) = #{j : j not significantly worse than i}`` (i itself included)

so an entry's rank is the range ``best–worst`` ("2–4"); entries whose differences are noise share ranges.
`RANK_NOTE` says it in one sentence under the table.

The paper's models (``assets/paper-scores.json``, judged by the official GPT-4-0613, 5 runs) appear as
**reference rows**: they are never ranked (the paper published totals without per-sample scores, so no paired
test is possible), and their interval column is empty.

**Official-equivalent column.** Ranks never mix judges. A successor judge's entry shows its official-equivalent
estimate (``mmvet_core/equivalence.py``) when its judge has a check on this server: the service passes it through
the `estimate` parameter of `board_rows`, a callable ``(entry) -> Equivalence.short() | None`` whose result fills
the row's ``official_equivalent`` ([estimate, low, high]), its label (in-sample, extrapolated) and the check it
rests on. Rows of the official judge (the paper's included) say "official metric" there instead. A view that ranks
those estimates across judges must say so with `OFFICIAL_EQUIVALENT_VIEW`; it is not built here.
"""
from __future__ import annotations

import csv
import hashlib
import io
import json
import math
import re
import secrets
import time
import unicodedata
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Callable, Iterable
from urllib.parse import parse_qsl, urlencode, urlsplit

import numpy as np

from .graded import is_official_judge
from .stats import draw_counts, score_intervals

#: Paired bootstrap of the ranks: resamples, seed, level.
RANK_RESAMPLES = 2000
RANK_SEED = 0
RANK_LEVEL = 0.95
#: Bounds of what a visitor types.
MAX_DISPLAY_NAME = 80
MAX_LINK = 300
#: How many entries a CSV / JSON download or the API returns at most (the board is bounded anyway).
MAX_ROWS = 5000
RANK_NOTE = ("Rank “2–4” means: with 95 % confidence (paired bootstrap over the same samples) this entry is no "
             "better than 2nd and no worse than 4th among entries with the same judge, benchmark and samples; "
             "entries sharing a range are not significantly different, and reference rows (the paper's) are "
             "not ranked.")
OFFICIAL_EQUIVALENT_VIEW = "official-equivalent"
OFFICIAL_JUDGE_KEY = "gpt-4-0613"
KINDS = ("official", "successor", "baseline")
SIX = ("rec", "ocr", "know", "gen", "spat", "math")
#: The column of the official-equivalent estimate (successor judges with a check; never the official metric).
ESTIMATE_COLUMN = "official-equivalent (estimate)"
OFFICIAL_METRIC = "official metric"
#: Columns of the board's table (CSV / the view), in order.
TABLE_COLUMNS = ["rank", "name", "judge", "kind", "benchmark", "runs", "total", "95% CI", ESTIMATE_COLUMN, *SIX,
                 "date", "version", "entry"]
#: Sortable keys of `BoardFilter.sort`.
SORT_KEYS = ("rank", "name", "judge", "kind", "benchmark", "runs", "total", "ci_low", "ci_high", *SIX, "date")
EXPORT_FILE = "board.jsonl"


class BoardError(ValueError):
    """A refused leaderboard action or input; the message says what to do (shown to visitors as a toast)."""


# --------------------------------------------------------------------------------------------------------------
# What a visitor types: bounded, inert


_CONTROL = re.compile(r"[\x00-\x1f\x7f-\x9f\u200b-\u200f\u2028-\u202e\u2066-\u2069\ufeff]+")


def clean_display_name(name: object) -> str:
    """A display name: one line of plain text, control and bidi-override characters removed, whitespace collapsed,
    at most `MAX_DISPLAY_NAME` characters. It stays text everywhere (never markup): the view shows it in a table
    cell, the CSV download neutralises formulas. Raises `BoardError` when nothing is left.

    >>> clean_display_name("  LLaVA\\n 1.5\\u202e  13b ")
    'LLaVA 1.5 13b'
    """
    text = unicodedata.normalize("NFC", str(name if name is not None else ""))
    text = re.sub(r"\s+", " ", _CONTROL.sub(" ", text)).strip()
    if not text:
        raise BoardError("Give the entry a display name.")
    if len(text) > MAX_DISPLAY_NAME:
        raise BoardError(f"A display name has at most {MAX_DISPLAY_NAME} characters ({len(text)} given).")
    return text


_LINK_CHARS = re.compile(r"^[A-Za-z0-9\-._~:/?#\[\]@!$&'()*+,;=%]+$")


def check_link(url: object) -> str:
    """An optional link (paper, model card): ``""`` or an ``https://host/...`` URL of at most `MAX_LINK`
    characters, with no credentials, spaces, quotes or angle brackets. Anything else (``javascript:``, ``data:``,
    ``http:``, a relative path) raises `BoardError`.

    >>> check_link(" https://arxiv.org/abs/2308.02490 "), check_link("")
    ('https://arxiv.org/abs/2308.02490', '')
    """
    text = str(url if url is not None else "").strip()
    if not text:
        return ""
    if len(text) > MAX_LINK:
        raise BoardError(f"A link has at most {MAX_LINK} characters.")
    if not _LINK_CHARS.match(text):
        raise BoardError("A link may not contain spaces, quotes or angle brackets.")
    parts = urlsplit(text)
    if parts.scheme.lower() != "https" or not text.lower().startswith("https://"):
        raise BoardError("Only https:// links are accepted (a paper or a model card).")
    if not parts.hostname or parts.username is not None or parts.password is not None:
        raise BoardError("A link needs a host name and no user name or password.")
    return text


def owner_hash(owner: str) -> str:
    """What an entry keeps of its owner: a hash of the owner's token (the token itself never leaves the server,
    even in an export). The CLI's runs have the empty owner (only the host's CLI acts on them)."""
    return hashlib.sha256(f"mmvet-board:{owner or ''}".encode("utf-8")).hexdigest()


def new_entry_id() -> str:
    """A short, unguessable-enough public entry id (72 random bits)."""
    return secrets.token_urlsafe(9)


# --------------------------------------------------------------------------------------------------------------
# The frozen copy of a run


def judge_kind(judge: dict, metric_note: str | None) -> str:
    """``official`` (the official prompt with gpt-4-0613 / gpt-4: the MM-Vet metric), ``baseline`` (the offline
    keyword baseline) or ``successor`` (any other LLM judge or prompt)."""
    if judge.get("provider") == "baseline":
        return "baseline"
    return "official" if metric_note is None else "successor"


def judge_key(judge_name: str, kind: str) -> str:
    """The judge a rank group is about: the official judges are one."""
    return OFFICIAL_JUDGE_KEY if kind == "official" else ("baseline" if kind == "baseline" else judge_name)


def benchmark_label(version: str, subset: str | None, n: int) -> tuple[str, str]:
    """(filter key, label) of a benchmark: ``v1`` / ``MM-Vet v1``, ``v1-bard`` / ``MM-Vet v1 · Bard set``."""
    version = version or "?"
    if subset:
        sub = "bard" if subset in ("bard", "bardset") else re.sub(r"[^\w.-]+", "_", str(subset))[:40]
        return f"{version}-{sub}", f"MM-Vet {version} · {'Bard set' if sub == 'bard' else sub} ({n})"
    return version, f"MM-Vet {version}"


def samples_sha(samples: dict[str, dict]) -> str:
    """Identity of a benchmark's samples: ids, questions and answers (two uploads with the same ids but other
    questions are not the same samples)."""
    h = hashlib.sha256()
    for sid in sorted(samples):
        s = samples[sid]
        h.update(json.dumps([sid, s.get("question"), s.get("answer")], ensure_ascii=False).encode("utf-8"))
    return h.hexdigest()[:16]


def make_snapshot(view, *, tool_version: str = "") -> tuple[dict, dict[str, list[float | None]]]:
    """(meta, scores): the frozen copy of a finished run (`runs.RunView`) that a board entry keeps.

    Raises `BoardError` when the run is not complete (a sample without a score in every run): a partial run
    would rank on other samples than its group. Overrides are part of the run's scores, as everywhere."""
    if not view.scores.complete:
        raise BoardError("Only a finished run (every sample graded in every run) can be published.")
    run, s = view.run, view.scores
    scores = view.effective_scores()
    kind = judge_kind(run.judge, view.metric_note)
    key, label = benchmark_label(view.benchmark.version, view.benchmark.subset_name, len(view.benchmark))
    ci = next((r for r in score_intervals(view.benchmark, scores) if r.kind == "total"), None)
    meta = {
        "model": run.model_name,
        "judge": view.judge_name,
        "judge_text": view.judge_text,
        "judge_kind": kind,
        "judge_key": judge_key(view.judge_name, kind),
        "metric_note": view.metric_note,
        "benchmark": key,
        "benchmark_label": label,
        "benchmark_name": view.benchmark.name,
        "version": view.benchmark.version,
        "subset": view.benchmark.subset_name,
        "samples_sha": samples_sha(run.benchmark.get("samples") or {}),
        "sample_ids": list(view.benchmark.ids),
        "sample_caps": {sid: ",".join(smp.capabilities) for sid, smp in view.benchmark.samples.items()},
        "runs": run.n_runs,
        "total": s.total.mean,
        "total_std": s.total.std,
        "ci": [ci.low, ci.high] if ci else [None, None],
        "capabilities": {c.name: c.mean for c in s.capabilities},
        "integrations": {c.name: c.mean for c in s.integrations},
        "overrides": len(view.overrides),
        "date": time.strftime("%Y-%m-%d", time.gmtime(run.created_at)),
        "tool_version": tool_version,
    }
    meta.update(estimate_keys(run, kind))
    return meta, scores


def estimate_keys(run, kind: str) -> dict:
    """What a successor entry keeps to find its official-equivalent estimate later (never the endpoint's address):
    the fingerprint of its judge's check and its answers' hashes (the in-sample test)."""
    if kind != "successor" or run.judge.get("provider") in ("imported", "baseline") \
            or run.judge.get("prompt_examples") is not None:
        return {}
    from .judge import JudgeSettings
    from .judgecheck import check_settings, prediction_hash

    settings = JudgeSettings(**{k: v for k, v in run.judge.items() if k in JudgeSettings.__dataclass_fields__})
    return {"judge_check_fingerprint": check_settings(settings).fingerprint(),
            "prediction_hashes": {sid: prediction_hash(p) for sid, p in run.predictions.items()}}


# --------------------------------------------------------------------------------------------------------------
# Entries


@dataclass
class BoardEntry:
    """One entry at its current version: its public facts, the frozen meta and the frozen per-sample scores."""

    id: str
    version: int
    run_id: str
    owner_hash: str
    name: str
    link: str
    published: bool
    hidden: bool
    published_at: float
    meta: dict
    scores: dict[str, list[float | None]]

    @property
    def group(self) -> tuple[str, str, str]:
        """The rank group: (judge, benchmark, samples)."""
        m = self.meta
        return (m.get("judge_key", ""), m.get("benchmark", ""), m.get("samples_sha", ""))

    def sample_means(self, ids: list[str]) -> np.ndarray:
        """Per-sample mean over the graded runs, in the order of `ids` (NaN where a sample has none)."""
        try:
            table = np.array([self.scores[sid] for sid in ids], dtype=np.float64)    # complete: the usual case
            if table.ndim == 2 and table.shape[1] and not np.isnan(table).any():
                return table.mean(axis=1)
        except (KeyError, TypeError, ValueError):
            pass
        out = np.full(len(ids), np.nan)
        for i, sid in enumerate(ids):
            vals = [float(v) for v in (self.scores.get(sid) or []) if v is not None]
            if vals:
                out[i] = sum(vals) / len(vals)
        return out


def entry_from_row(row: dict) -> BoardEntry:
    """A `BoardEntry` from a `Store.board_entries` row."""
    return BoardEntry(id=row["id"], version=int(row["version"]), run_id=row["run_id"], owner_hash=row["owner_hash"],
                      name=row["name"], link=row["link"], published=bool(row["published"]),
                      hidden=bool(row["hidden"]), published_at=float(row["published_at"]),
                      meta=json.loads(row["meta"]) if isinstance(row["meta"], str) else row["meta"],
                      scores=json.loads(row["scores"]) if isinstance(row["scores"], str) else row["scores"])


# --------------------------------------------------------------------------------------------------------------
# Ranks


def _not_ahead_counts(totals: np.ndarray, pairs: np.ndarray | None = None) -> np.ndarray:
    """``not_ahead[i, j]`` = number of draws (rows of `totals`, R × m) with ``T_j ≤ T_i``; only where `pairs`
    is True when given (elsewhere -1)."""
    m = totals.shape[1]
    by_entry = np.ascontiguousarray(totals.T)                 # m × R: one entry's draws are contiguous
    out = np.full((m, m), -1, dtype=np.int64)
    for i in range(m):
        cols = np.arange(m) if pairs is None else np.flatnonzero(pairs[i])
        if len(cols):
            out[i, cols] = np.count_nonzero(by_entry[cols] <= by_entry[i], axis=1)
    return out


#: Cantelli's inequality on the draws' own mean μ and sd σ of T_j − T_i decides most pairs without counting:
#: μ > 6.5 σ  ⇒ at most σ²/(σ²+μ²) < 2.4 % of the draws have T_j − T_i ≤ 0 (significant);
#: μ < −0.2 σ ⇒ at least μ²/(σ²+μ²) > 3.8 % of them do (not significant). The others are counted.
_SURE_BETTER, _SURE_NOT = 6.5, -0.2


def rank_bounds(sample_scores: np.ndarray, *, resamples: int = RANK_RESAMPLES, seed: int = RANK_SEED,
                level: float = RANK_LEVEL, prune: bool = True) -> list[tuple[int, int]]:
    """``[(best, worst)]`` per entry of one rank group, from its ``m × n`` per-sample scores (entries × the
    same samples, each a mean over its runs). See the module docstring for the rule. `prune` decides the pairs
    that Cantelli's inequality settles without counting their draws (the same answer, faster).

    >>> strong, weak = np.r_[np.ones(30), np.zeros(10)], np.r_[np.zeros(30), np.ones(10)]
    >>> rank_bounds(np.vstack([weak, strong, strong]), resamples=500)
    [(3, 3), (1, 2), (1, 2)]
    """
    scores = np.asarray(sample_scores, dtype=np.float64)
    m = scores.shape[0]
    if m == 0:
        return []
    if m == 1:
        return [(1, 1)]
    counts = draw_counts(scores.shape[1], resamples, seed)
    totals = counts @ scores.T                                # R × m: every entry's total (× n) in every draw
    cut = (1.0 - level) / 2.0 * resamples                    # fewer draws than this with T_j − T_i ≤ 0
    if prune:
        mean = totals.mean(axis=0)
        centred = totals - mean
        cov = centred.T @ centred / resamples
        var = np.diag(cov)
        sd = np.sqrt(np.maximum(var[:, None] + var[None, :] - 2.0 * cov, 0.0))
        gap = mean[None, :] - mean[:, None]                  # gap[i, j]: mean of T_j − T_i over the draws
        eps = 1e-9 * max(1.0, float(np.abs(totals).max()))
        sure_better = gap > _SURE_BETTER * sd + eps
        sure_not = gap < _SURE_NOT * sd - eps
        not_ahead = _not_ahead_counts(totals, ~(sure_better | sure_not))
        better = np.where(sure_better, True, np.where(sure_not, False, (not_ahead >= 0) & (not_ahead < cut)))
    else:
        better = _not_ahead_counts(totals) < cut              # better[i, j]: j significantly better than i
    np.fill_diagonal(better, False)
    n_better = better.sum(axis=1)                             # entries significantly better than i
    n_worse = better.sum(axis=0)                              # entries i is significantly better than
    return [(1 + int(n_better[i]), m - int(n_worse[i])) for i in range(m)]


def rank_groups(entries: list[BoardEntry], *, cache: dict | None = None, **kwargs) -> dict[str, tuple[int, int, int]]:
    """Entry id -> (best, worst, group size), each entry ranked within its rank group only. `cache` (a dict the
    caller keeps) holds each group's ranks under its members' (id, version): a publish recomputes its group
    only."""
    groups: dict[tuple, list[BoardEntry]] = {}
    for e in entries:
        groups.setdefault(e.group, []).append(e)
    out: dict[str, tuple[int, int, int]] = {}
    fresh = {}
    for group, members in groups.items():
        key = (group, tuple((e.id, e.version) for e in members))
        bounds = cache.get(key) if cache is not None else None
        if bounds is None:
            ids = list(members[0].meta.get("sample_ids") or sorted(members[0].scores))
            matrix = np.vstack([e.sample_means(ids) for e in members])
            matrix = np.nan_to_num(matrix, nan=0.0)      # published entries are complete: no NaN in practice
            bounds = rank_bounds(matrix, **kwargs)
        fresh[key] = bounds
        for e, (best, worst) in zip(members, bounds):
            out[e.id] = (best, worst, len(members))
    if cache is not None:
        cache.clear()
        cache.update(fresh)
    return out


def format_rank(rank: tuple[int, int] | list[int] | None) -> str:
    """``"2–4"``, ``"1"`` or ``"—"`` (unranked).

    >>> format_rank((2, 4)), format_rank([1, 1]), format_rank(None)
    ('2–4', '1', '—')
    """
    if not rank:
        return "—"
    best, worst = rank[0], rank[1]
    return str(best) if best == worst else f"{best}–{worst}"


# --------------------------------------------------------------------------------------------------------------
# Rows of the table


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
    official_equivalent_label: str = ""     # in-sample, extrapolated
    official_equivalent_check: str = ""     # the check it rests on (id, date, reference models and their range)

    def estimate_text(self) -> str:
        """The estimate column's cell: ``33.0 [30.0, 36.3] · extrapolated · check 3f2a9c1b (…)``, "official metric"
        for the official judge, "" otherwise."""
        if self.kind == "official":
            return OFFICIAL_METRIC
        if not self.official_equivalent:
            return ""
        est, low, high = self.official_equivalent
        parts = [f"{est:.1f} [{low:.1f}, {high:.1f}]", self.official_equivalent_label, self.official_equivalent_check]
        return " · ".join(p for p in parts if p)

    def cells(self) -> list:
        """The row as the view's table shows it (`TABLE_COLUMNS`)."""
        ci = "" if None in self.ci else f"[{self.ci[0]:.1f}, {self.ci[1]:.1f}]"
        return [format_rank(self.rank) if not self.reference else "ref", self.name, self.judge, self.kind,
                self.benchmark_label, self.runs, _num(self.total), ci, self.estimate_text(),
                *[_num(self.capabilities.get(c)) for c in SIX], self.date,
                "paper" if self.reference else self.version, self.entry]

    def to_json(self) -> dict:
        """What ``leaderboard show --json``, the downloads and the API return for this row."""
        return {"entry": self.entry, "name": self.name, "link": self.link, "judge": self.judge,
                "judge_kind": self.kind, "benchmark": self.benchmark, "benchmark_label": self.benchmark_label,
                "runs": self.runs, "total": self.total, "ci": list(self.ci), "rank": self.rank,
                "rank_group_size": self.group_size, "capabilities": self.capabilities,
                "integrations": self.integrations, "date": self.date, "version": self.version,
                "reference": self.reference, "metric_note": self.metric_note,
                "official_equivalent": self.official_equivalent,
                "official_equivalent_label": self.official_equivalent_label,
                "official_equivalent_check": self.official_equivalent_check}


def _num(x) -> float | None:
    return None if x is None or (isinstance(x, float) and math.isnan(x)) else round(float(x), 1)


def _ci(meta: dict) -> list[float | None]:
    ci = meta.get("ci") or [None, None]
    return [None if v is None else round(float(v), 1) for v in ci[:2]] + [None] * (2 - len(ci[:2]))


def board_rows(entries: list[BoardEntry], ranks: dict[str, tuple[int, int, int]], *,
               estimate: Callable[[BoardEntry], dict | None] | None = None) -> list[BoardRow]:
    """One `BoardRow` per entry, with its rank from `rank_groups`. `estimate` gives a successor entry's
    official-equivalent estimate (see the module docstring): None leaves ``official_equivalent`` empty."""
    rows = []
    for e in entries:
        m = e.meta
        best, worst, size = ranks.get(e.id, (None, None, 0))
        eq = estimate(e) if estimate is not None and m.get("judge_kind") == "successor" else None
        rows.append(BoardRow(
            entry=e.id, name=e.name, link=e.link, judge=str(m.get("judge", "?")), kind=str(m.get("judge_kind", "?")),
            benchmark=str(m.get("benchmark", "?")), benchmark_label=str(m.get("benchmark_label", "?")),
            runs=int(m.get("runs", 0)), total=_num(m.get("total")), ci=_ci(m),
            rank=[best, worst] if best is not None else None, group_size=size,
            capabilities={c: _num(v) for c, v in (m.get("capabilities") or {}).items()},
            integrations={c: _num(v) for c, v in (m.get("integrations") or {}).items()},
            date=str(m.get("date", "")), version=e.version, metric_note=m.get("metric_note"),
            official_equivalent=[eq["estimate"], eq["low"], eq["high"]] if eq else None,
            official_equivalent_label=eq.get("label", "") if eq else "",
            official_equivalent_check=eq.get("check_text", "") if eq else ""))
    return rows


def paper_rows() -> list[BoardRow]:
    """The paper's models as reference rows (full set: ``v1``; Bard set: ``v1-bard``), judge gpt-4-0613."""
    from .charts import load_paper_scores

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
                                date="2023 (paper)", version=0, reference=True))
    return out


# --------------------------------------------------------------------------------------------------------------
# Filters, sorting, deep links


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
        return None if row.rank is None else (row.benchmark, row.judge, row.rank[0], row.rank[1])
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
                or (judge == OFFICIAL_JUDGE_KEY and r.kind == "official"))
           and (not f.benchmark or r.benchmark == f.benchmark)
           and (not q or q in r.name.lower())]
    present = [r for r in out if _sort_value(r, f.sort) is not None]
    missing = [r for r in out if _sort_value(r, f.sort) is None]
    present.sort(key=lambda r: _sort_value(r, f.sort), reverse=f.descending)
    if f.sort == "rank":        # within a rank range, the higher total first
        present.sort(key=lambda r: (r.benchmark, r.judge, r.rank[0], -(r.total or 0), r.rank[1]))
        missing.sort(key=lambda r: (r.benchmark, -(r.total or 0)))
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
                       "entries": [r.to_json() for r in rows[:MAX_ROWS]]}, ensure_ascii=False, indent=1)


# --------------------------------------------------------------------------------------------------------------
# The store side: publish, rename, unpublish, hide (permission checks are the service's)


#: Why a published run is pinned in the store (`Store.pin_run`: runs nobody opens expire, published ones never).
PIN_REASON = "published"


def publish_view(store, view, *, name: str, link: str = "", owner: str = "", republish: bool = False,
                 tool_version: str = "") -> BoardEntry:
    """Publish a finished run (`runs.RunView`) as a new entry, or with `republish` as a new version of the entry
    already published from it. Validates name and link; `BoardError` when refused (a run already on the board
    without `republish`, an incomplete run, a bad name or link)."""
    clean, url = clean_display_name(name), check_link(link)
    existing = store.board_entry_for_run(view.run.id)
    if existing is not None and not republish:
        raise BoardError(f"This run is already on the board as entry {existing['id']} (version "
                         f"{existing['version']}): rename it, or republish it to store a new version.")
    meta, scores = make_snapshot(view, tool_version=tool_version)
    entry_id = existing["id"] if existing else new_entry_id()
    store.add_board_version(entry_id, run_id=view.run.id, owner_hash=owner_hash(owner), name=clean, link=url,
                            meta=meta, scores=scores)
    store.pin_run(view.run.id, PIN_REASON)          # a published run never expires (its card stays openable)
    return load_entry(store, entry_id)


def load_entry(store, entry_id: str) -> BoardEntry | None:
    """An entry at its current version (published or not), or None."""
    row = store.board_entry(entry_id or "")
    if row is None:
        return None
    versions = {v["version"]: v for v in store.board_versions(entry_id)}
    v = versions[row["version"]]
    return entry_from_row({**row, "published_at": v["published_at"], "meta": v["meta"], "scores": v["scores"]})


def load_entries(store, *, include_withdrawn: bool = False) -> list[BoardEntry]:
    """The entries on the board (published, not hidden), or every entry with `include_withdrawn`."""
    return [entry_from_row(r) for r in store.board_entries(include_withdrawn=include_withdrawn)]


# --------------------------------------------------------------------------------------------------------------
# Export / import: a folder `datasets.load_dataset` reads


CARD = """---
configs:
- config_name: default
  data_files:
  - split: train
    path: board.jsonl
license: cc-by-nc-4.0
tags:
- mm-vet
- leaderboard
---
# MM-Vet Grader leaderboard backup

One row per stored version of every entry of an MM-Vet Grader leaderboard (`current` marks each entry's current
version; `published` 0 = unpublished by its owner, `hidden` 1 = hidden by the host). `meta` and `scores` are JSON
texts: the frozen run metadata and the frozen per-sample scores (`{{sample id: [score per judge run]}}`).
`owner_hash` is a hash of the owner's token (never the token). Restore with
`python -m mmvet_core leaderboard import DIR`.

Exported {n_entries} entries ({n_rows} versions) on {date}. MM-Vet (Yu et al., ICML 2024) content is licensed
CC BY-NC 4.0.
"""

EXPORT_COLUMNS = ["entry_id", "version", "current", "run_id", "owner_hash", "name", "link", "published", "hidden",
                  "published_at", "judge", "judge_kind", "benchmark", "total", "ci_low", "ci_high", "runs",
                  "meta", "scores"]


def export_board(store, out_dir: str | Path) -> Path:
    """Write every entry and version (withdrawn ones too, with their flags) to ``out_dir/board.jsonl`` plus a
    dataset card ``README.md``: a folder ``datasets.load_dataset(out_dir)`` reads and ``huggingface-cli upload``
    can push to a dataset repository. Returns the JSONL path."""
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    entries = store.board_entries(include_withdrawn=True)
    lines = []
    for e in entries:
        for v in store.board_versions(e["id"]):
            meta = json.loads(v["meta"])
            ci = meta.get("ci") or [None, None]
            lines.append(json.dumps({
                "entry_id": e["id"], "version": v["version"], "current": v["version"] == e["version"],
                "run_id": e["run_id"], "owner_hash": e["owner_hash"], "name": e["name"], "link": e["link"],
                "published": bool(e["published"]), "hidden": bool(e["hidden"]), "published_at": v["published_at"],
                "judge": meta.get("judge"), "judge_kind": meta.get("judge_kind"), "benchmark": meta.get("benchmark"),
                "total": meta.get("total"), "ci_low": ci[0], "ci_high": ci[1], "runs": meta.get("runs"),
                "meta": v["meta"], "scores": v["scores"]}, ensure_ascii=False))
    path = out / EXPORT_FILE
    path.write_text("".join(line + "\n" for line in lines), encoding="utf-8")
    (out / "README.md").write_text(CARD.format(n_entries=len(entries), n_rows=len(lines),
                                               date=time.strftime("%Y-%m-%d")), encoding="utf-8")
    return path


def _check_import_row(row: dict, n: int) -> tuple[dict, dict]:
    where = f"{EXPORT_FILE} line {n}"
    try:
        meta, scores = json.loads(row["meta"]), json.loads(row["scores"])
        if not isinstance(meta, dict) or not isinstance(scores, dict):
            raise ValueError("meta and scores must be JSON objects")
        for sid, runs in scores.items():
            if not isinstance(runs, list) or any(v is not None and not (0.0 <= float(v) <= 1.0) for v in runs):
                raise ValueError(f"sample {sid}: scores must be lists of numbers in [0, 1]")
        means = [sum(float(v) for v in r if v is not None) / max(1, sum(v is not None for v in r))
                 for r in scores.values()]
        total = meta.get("total")
        # the frozen total must be what the frozen scores give (a tampered file is refused)
        if total is not None and means and abs(100.0 * sum(means) / len(means) - float(total)) > 0.051:
            raise ValueError(f"its total {total} is not what its scores give "
                             f"({100.0 * sum(means) / len(means):.2f})")
        clean_display_name(row["name"])
        check_link(row.get("link", ""))
        if not re.fullmatch(r"[\w-]{1,40}", str(row["entry_id"])) or int(row["version"]) < 1:
            raise ValueError("bad entry id or version")
    except (KeyError, TypeError, ValueError, BoardError) as e:
        raise BoardError(f"{where}: {e}") from None
    return meta, scores


def import_board(store, in_dir: str | Path) -> int:
    """Restore the entries of an `export_board` folder (its ``board.jsonl``) into `store`; existing versions of the
    same entries are replaced, other entries kept. Every row is checked before anything is written (names,
    links, scores in [0, 1], totals consistent with scores); `BoardError` names the first bad line. Returns the
    number of versions imported."""
    path = Path(in_dir) / EXPORT_FILE
    if not path.is_file():
        raise BoardError(f"{in_dir} holds no {EXPORT_FILE} (write one with `leaderboard export`).")
    rows = []
    for n, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
        if not line.strip():
            continue
        try:
            row = json.loads(line)
        except json.JSONDecodeError as e:
            raise BoardError(f"{EXPORT_FILE} line {n}: not JSON ({e.msg})") from None
        rows.append((row, *_check_import_row(row, n)))
    rows.sort(key=lambda t: (t[0]["entry_id"], int(t[0]["version"])))
    for row, meta, scores in rows:
        store.add_board_version(row["entry_id"], run_id=str(row.get("run_id", "")),
                                owner_hash=str(row.get("owner_hash", owner_hash(""))),
                                name=clean_display_name(row["name"]), link=check_link(row.get("link", "")),
                                meta=meta, scores=scores, published_at=float(row.get("published_at") or time.time()),
                                version=int(row["version"]), published=bool(row.get("published", True)),
                                hidden=bool(row.get("hidden", False)))
    for row, _, _ in rows:        # flags and the current version as exported
        if row.get("current"):
            store.set_board_current(row["entry_id"], int(row["version"]), published=bool(row.get("published", True)),
                                    hidden=bool(row.get("hidden", False)), name=clean_display_name(row["name"]),
                                    link=check_link(row.get("link", "")))
    return len(rows)


def describe_entries(rows: Iterable[BoardRow]) -> str:
    """A plain-text table of rows for the CLI."""
    lines = [f"{'rank':>7}  {'total':>5}  {'95% CI':>13}  {'judge':<18} {'benchmark':<10} runs  name (entry)"]
    for r in rows:
        ci = "" if None in r.ci else f"[{r.ci[0]:.1f}, {r.ci[1]:.1f}]"
        rank = "ref" if r.reference else format_rank(r.rank)
        total = "" if r.total is None else f"{r.total:.1f}"
        lines.append(f"{rank:>7}  {total:>5}  {ci:>13}  {r.judge[:18]:<18} {r.benchmark[:10]:<10} {r.runs:>4}  "
                     f"{r.name}" + (f" ({r.entry}, v{r.version})" if r.entry else ""))
    return "\n".join(lines)
