"""The leaderboard: published entries, honest rank groups, filters and exports (pure functions, plus the few that
read or write the store).

Filters and downloads (`filters`), publishing and reading entries back (`publishing`) and the backup
(`backup`) live in modules of their own, as do ranks themselves (`ranks`, `book`), provenance, names and the
schema.

An **entry** is a finished run published under a display name. Publishing freezes a copy of the run's per-sample
scores (per judge run) and of its metadata (judge, judge kind, benchmark and its sample ids, runs, totals,
capabilities, integrations, date): later overrides or the deletion of the run never change the board silently.
Republishing is explicit and stores a new **version** of the same entry (the old versions stay stored).

**Trust.** Every version records its **provenance** (`mmvet_core.runs.provenance`): graded here (which judge, which
endpoints) or imported from a file (the judge it claims). Only entries whose judge is *verified* — graded on this
server's own judge endpoint, the public OpenAI API or offline, or vouched for by the host (`verify_entry`) — and
without human overrides are ranked (`rank_key`); the others are listed, marked, unranked. A display name cannot
impersonate another owner's (`mmvet_core.board.names`: no invisible characters, no equal TR39 skeleton), and another
owner's grades cannot be published again (`find_copy`). Backups and stored rows are checked field by field
(`mmvet_core.board.schema`).

**Ranks.** Entries are ranked only against entries of the same *rank group* (`rank_key`): the same judge kind,
the same judge (the official ``gpt-4-0613`` and its alias ``gpt-4`` are one judge; a prompt ablation is another
judge; any other judge also by the endpoints that served it), the same benchmark and the very same samples (ids,
questions and answers). Within a group every pair is compared with a **paired
bootstrap** over samples: `RANK_RESAMPLES` draws of the samples (seed `RANK_SEED`; the draws depend only on the
number of samples, so every entry of a group sees the same draws and results are reproducible), each entry's total
recomputed on each draw. Entry *j* is **significantly better** than *i* when fewer than 2.5 % of the draws have
``T_j − T_i ≤ 0`` (the paired 95 % percentile interval of the difference lies above 0). Then, as Chatbot Arena's
"rank (UB)" but with both ends:

* ``best(i)  = 1 + #{j : j significantly better than i}``
* ``worst(i) = #{j : j not significantly worse than i}`` (i itself included)

so an entry's rank is the range ``best–worst`` ("2–4"); entries whose differences are noise share ranges.
`RANK_NOTE` says it in one sentence under the table. The computation (identical grades counted once, groups
updated incrementally) is `mmvet_core.board.ranks`; a server keeps its board ranked off the request path with
`mmvet_core.board.book`.

The paper's models (``assets/paper-scores.json``, judged by the official GPT-4-0613, 5 runs) appear as
**reference rows**: they are never ranked (the paper published totals without per-sample scores, so no paired
test is possible), and their interval column is empty.

**Official-equivalent column.** Ranks never mix judges. A successor judge's entry shows its official-equivalent
estimate (``mmvet_core/successors/equivalence.py``) when its judge has a check on this server: the service passes it through
the `estimate` parameter of `board_rows`, a callable ``(entry) -> Equivalence.short() | None`` whose result fills
the row's ``official_equivalent`` ([estimate, low, high]), its label (in-sample, extrapolated) and the check it
rests on. Rows of the official judge (the paper's included) say "official metric" there instead. A view that ranks
those estimates across judges must say so with `OFFICIAL_EQUIVALENT_VIEW`; it is not built here.
"""
from __future__ import annotations

import copy
import hashlib
import json
import logging
import math
import re
import time
import unicodedata
from dataclasses import dataclass
from functools import cached_property
from typing import Callable, Iterable
from urllib.parse import urlsplit

import numpy as np

from ..runs import provenance as prov
from .ranks import MAX_GRADE_SETS, GroupRanks, better_matrix, bounds_from
from .schema import SchemaError, check_version
from ..successors.equivalence import estimate_keys
from .names import NameRefused, check_visible_name, is_invisible
from ..scores.stats import score_intervals
from ..store import new_id
from ..scores.terminal import fit_lines

log = logging.getLogger(__name__)

#: Paired bootstrap of the ranks: resamples, seed, level.
RANK_RESAMPLES = 2000
RANK_SEED = 0
RANK_LEVEL = 0.95
#: Bounds of what a visitor types.
MAX_DISPLAY_NAME = 80
MAX_LINK = 300
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
#: Columns of the board's table (CSV / the view), in order: the numbers first (rank range, name, total with its
#: interval, the estimate with its interval and label, judge), then the rest (the view shows them on request).
TABLE_COLUMNS = ["rank", "name", "total", "95% CI", ESTIMATE_COLUMN, "judge", "rank group", "estimate check", "kind",
                 "provenance", "benchmark", "runs", *SIX, "date", "version", "entry"]
#: The columns the view shows before a visitor chooses others (they fit 1440 px without sideways scrolling).
LEADING_COLUMNS = TABLE_COLUMNS[:6]


class BoardError(ValueError):
    """A refused leaderboard action or input; the message says what to do (shown to visitors as a toast)."""


# --------------------------------------------------------------------------------------------------------------
# What a visitor types: bounded, inert


def clean_display_name(name: object) -> str:
    """A display name: one line of plain visible text (`names.check_visible_name`: whitespace collapsed, and
    refused when it holds an invisible or formatting character, shows nothing or stacks accents), at most
    `MAX_DISPLAY_NAME` characters. It stays text everywhere (never markup): the view shows it in a table cell,
    the CSV download neutralises formulas. Raises `BoardError` naming the fault.

    >>> clean_display_name("  LLaVA\\n 1.5  13b ")
    'LLaVA 1.5 13b'
    """
    try:
        text = check_visible_name(name)
    except NameRefused as e:
        raise BoardError(str(e)) from None
    if not text:
        raise BoardError("Give the entry a display name.")
    if len(text) > MAX_DISPLAY_NAME:
        raise BoardError(f"A display name has at most {MAX_DISPLAY_NAME} characters ({len(text)} given).")
    return text


def visible_text(text: object, limit: int = 300) -> str:
    """`text` with its invisible and formatting characters dropped, whitespace collapsed, bounded: for a run's
    model name frozen into an entry (shown on its card, never its identity on the board)."""
    kept = "".join(ch for ch in unicodedata.normalize("NFC", str(text or "")) if not is_invisible(ch))
    return re.sub(r"\s+", " ", kept).strip()[:limit]


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
    """A short, unguessable-enough public entry id (72 random bits), never starting with ``-`` (`store.new_id`)."""
    return new_id(9)


# --------------------------------------------------------------------------------------------------------------
# The frozen copy of a run


def judge_kind(judge: dict, metric_note: str | None) -> str:
    """``official`` (the official prompt with gpt-4-0613 / gpt-4: the MM-Vet metric), ``baseline`` (the offline
    keyword baseline) or ``successor`` (any other LLM judge or prompt)."""
    if judge.get("provider") == "baseline":
        return "baseline"
    return "official" if metric_note is None else "successor"


def judge_key(judge_name: str, kind: str) -> str:
    """The judge a rank group is about: the official judges are one (`rank_key` adds the kind, so a successor
    named ``gpt-4-0613`` — the official model with another prompt or overrides — is another group)."""
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


def sample_means(ids: list[str], scores: dict) -> np.ndarray:
    """Per-sample mean over the judge runs, in the order of `ids` (NaN where a sample has no score)."""
    try:
        table = np.array([scores[sid] for sid in ids], dtype=np.float64)       # complete: the usual case
        if table.ndim == 2 and table.shape[1] and not np.isnan(table).any():
            return table.mean(axis=1)
    except (KeyError, TypeError, ValueError):
        pass
    out = np.full(len(ids), np.nan)
    for i, sid in enumerate(ids):
        vals = [float(v) for v in (scores.get(sid) or []) if v is not None]
        if vals:
            out[i] = sum(vals) / len(vals)
    return out


def grades_digest(ids: list[str], means: np.ndarray) -> str:
    """Identity of a grade set: its sample ids and per-sample means (to 1e-6). Two entries with the same digest
    have the same grades, whatever the number of judge runs that gave them."""
    h = hashlib.sha256(json.dumps(list(ids)).encode("utf-8"))
    h.update(np.round(np.nan_to_num(np.asarray(means, dtype=np.float64), nan=-1.0), 6).tobytes())
    return h.hexdigest()[:32]


def make_snapshot(view, *, tool_version: str = "", trusted=None) -> tuple[dict, dict[str, list[float | None]]]:
    """(meta, scores): the frozen copy of a finished run (`runs.RunView`) that a board entry keeps, with its
    provenance (`provenance.run_provenance`; `trusted`: the endpoints this server trusts, None for the host's
    CLI, which trusts its own runs).

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
        "model": visible_text(run.model_name),
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
        "provenance": prov.run_provenance(view, trusted=trusted),
    }
    meta["grades_sha"] = grades_digest(meta["sample_ids"], sample_means(meta["sample_ids"], scores))
    meta.update(estimate_keys(run, kind, trusted))
    return meta, scores


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
    def provenance(self) -> dict:
        """The frozen provenance record (`mmvet_core.runs.provenance`); ``unknown`` for a version stored before it."""
        return self.meta.get("provenance") or {"source": prov.UNKNOWN}

    @property
    def group(self) -> tuple | None:
        """The rank group (`rank_key`), or None when the entry is not ranked."""
        return rank_key(self)

    @property
    def sample_ids(self) -> list[str]:
        return list(self.meta.get("sample_ids") or sorted(self.scores))

    def sample_means(self, ids: list[str]) -> np.ndarray:
        """Per-sample mean over the graded runs, in the order of `ids` (NaN where a sample has none)."""
        return sample_means(ids, self.scores)

    @cached_property
    def grade_set(self) -> tuple[str, np.ndarray]:
        """(digest, per-sample means in sample order): the entry's grades as the ranks and the copy check see
        them (NaN → 0; published entries are complete). Computed once per decoded entry."""
        means = np.nan_to_num(self.sample_means(self.sample_ids), nan=0.0)
        return grades_digest(self.sample_ids, means), means

    @cached_property
    def row(self) -> "BoardRow":
        """The entry's row without a rank (`board_rows` adds it): built once per decoded entry."""
        m, record = self.meta, self.provenance
        judge, kind = claimed_judge(str(m.get("judge", "?")), str(m.get("judge_kind", "?")),
                                    prov.is_verified(record))
        return BoardRow(
            entry=self.id, name=self.name, link=self.link, judge=judge, kind=kind,
            benchmark=str(m.get("benchmark", "?")),
            benchmark_label=str(m.get("benchmark_label", "?")), runs=int(m.get("runs", 0)),
            total=_num(m.get("total")), ci=_ci(m), rank=None, group_size=0,
            capabilities={c: _num(v) for c, v in (m.get("capabilities") or {}).items()},
            integrations={c: _num(v) for c, v in (m.get("integrations") or {}).items()},
            date=str(m.get("date", "")), version=self.version, metric_note=m.get("metric_note"),
            provenance=prov.label(record), verified=prov.is_verified(record), rank_note=unranked_reason(self),
            provenance_detail=prov.public_record(record), group=group_label(m, rank_key(self) is not None))


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


def rank_key(entry: BoardEntry) -> tuple | None:
    """The rank group of an entry, or None when it is not ranked. Ranked: a verified judge (`provenance`) and no
    human override. The group: the judge kind (an official-prompt gpt-4-0613 is never ranked with the same model
    under another prompt or with overrides), the judge (the official ``gpt-4-0613`` and ``gpt-4`` are one; any
    other judge also by the endpoints that served it: one model name on two servers may be two models), the
    benchmark and its very samples."""
    m = entry.meta
    if not prov.is_verified(m.get("provenance")) or m.get("overrides"):
        return None
    kind = str(m.get("judge_kind", ""))
    judge = str(m.get("judge_key", ""))
    if kind == "successor":
        endpoints = sorted((m.get("provenance") or {}).get("endpoints") or [])
        judge = f"{judge} @ {', '.join(endpoints)}" if endpoints else judge
    return (kind, judge, str(m.get("benchmark", "")), str(m.get("samples_sha", "")))


def unranked_reason(entry: BoardEntry) -> str:
    """Why an entry has no rank (shown beside it), "" when it is ranked by `rank_key`."""
    m = entry.meta
    if not prov.is_verified(m.get("provenance")):
        return f"not ranked: {prov.label(m.get('provenance'))}"
    if m.get("overrides"):
        return "not ranked: human overrides (the owner's corrected score)"
    return ""


def entry_from_row(row: dict, *, check: bool = False) -> BoardEntry:
    """A `BoardEntry` from a `Store.board_entries` row. With `check`, its frozen copy must fit the schema
    (`board_schema.check_version`; `SchemaError` names the field) and its name the board's rules."""
    meta = json.loads(row["meta"]) if isinstance(row["meta"], str) else row["meta"]
    scores = json.loads(row["scores"]) if isinstance(row["scores"], str) else row["scores"]
    if check:
        check_version(meta, scores)
        if not isinstance(row["name"], str) or not row["name"] or len(row["name"]) > MAX_DISPLAY_NAME \
                or row["name"] != _shown_name(row["name"]):
            raise SchemaError("name", "is not a visible display name")
        try:                                      # the card makes it a link: only what a visitor could store
            if check_link(row["link"]) != row["link"]:
                raise BoardError("not as stored")
        except BoardError as e:
            raise SchemaError("link", f"is not an https link ({e})") from None
    return BoardEntry(id=row["id"], version=int(row["version"]), run_id=row["run_id"], owner_hash=row["owner_hash"],
                      name=row["name"], link=row["link"], published=bool(row["published"]),
                      hidden=bool(row["hidden"]), published_at=float(row["published_at"]), meta=meta, scores=scores)


def _shown_name(name: str) -> str:
    try:
        return check_visible_name(name)
    except NameRefused:
        return ""


def describe_bad_row(row: dict, err: Exception) -> str:
    """How the host's log names a stored row the board skips."""
    return (f"leaderboard: skipped entry {str(row.get('id'))[:40]!r} version {row.get('version')!r} "
            f"(stored copy does not fit the schema: {err})")


# --------------------------------------------------------------------------------------------------------------
# Ranks


def rank_bounds(sample_scores: np.ndarray, *, resamples: int = RANK_RESAMPLES, seed: int = RANK_SEED,
                level: float = RANK_LEVEL, prune: bool = True) -> list[tuple[int, int]]:
    """``[(best, worst)]`` per entry of one rank group, from its ``m × n`` per-sample scores (entries × the
    same samples, each a mean over its runs). See the module docstring for the rule. `prune` decides the pairs
    that Cantelli's inequality settles without counting their draws (the same answer, faster;
    `board_ranks.better_matrix`).

    >>> strong, weak = np.r_[np.ones(30), np.zeros(10)], np.r_[np.zeros(30), np.ones(10)]
    >>> rank_bounds(np.vstack([weak, strong, strong]), resamples=500)
    [(3, 3), (1, 2), (1, 2)]
    """
    scores = np.asarray(sample_scores, dtype=np.float64)
    if scores.shape[0] == 0:
        return []
    _, better = better_matrix(scores, resamples=resamples, seed=seed, level=level, prune=prune)
    return bounds_from(better)


def group_grade_sets(members: list[BoardEntry]) -> tuple[dict[str, np.ndarray], dict[str, int], dict[str, str]]:
    """(grade set -> per-sample means, grade set -> entries, entry id -> grade set) of one rank group's
    members, at most `MAX_GRADE_SETS` grade sets (the first published; later ones are left out, unranked)."""
    vectors: dict[str, np.ndarray] = {}
    mult: dict[str, int] = {}
    of: dict[str, str] = {}
    for e in members:
        digest, means = e.grade_set
        if digest not in vectors:
            if len(vectors) >= MAX_GRADE_SETS:
                continue
            vectors[digest] = means
        mult[digest] = mult.get(digest, 0) + 1
        of[e.id] = digest
    return vectors, mult, of


def rank_groups(entries: list[BoardEntry], *, resamples: int = RANK_RESAMPLES, seed: int = RANK_SEED,
                level: float = RANK_LEVEL) -> dict[str, tuple[int, int, int]]:
    """Entry id -> (best, worst, group size), each ranked entry (`rank_key`) ranked within its rank group only;
    entries with identical grades count once in the work and each in the ranks (`board_ranks`). Entries not
    ranked are absent. A long-lived board keeps its groups up to date instead (`board_book.BoardBook`)."""
    groups: dict[tuple, list[BoardEntry]] = {}
    for e in entries:
        key = rank_key(e)
        if key is not None:
            groups.setdefault(key, []).append(e)
    out: dict[str, tuple[int, int, int]] = {}
    for members in groups.values():
        vectors, mult, of = group_grade_sets(members)
        ranks = GroupRanks(len(members[0].sample_ids), resamples=resamples, seed=seed, level=level)
        bounds = ranks.build(vectors, mult).bounds()
        for e in members:
            if e.id in of:
                out[e.id] = (*bounds[of[e.id]], ranks.size)
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


#: The rank note of an entry whose group is being ranked in the background.
RANKING_NOTE = "ranking… (its group is being ranked; reload in a moment)"
GROUP_FULL_NOTE = f"not ranked: its rank group holds {MAX_GRADE_SETS} distinct grade sets already"


def board_rows(entries: list[BoardEntry], ranks: dict[str, tuple[int, int, int]], *,
               estimate: Callable[[BoardEntry], dict | None] | None = None,
               pending: Iterable[str] = ()) -> list[BoardRow]:
    """One `BoardRow` per entry, with its rank from `rank_groups` and its provenance. `estimate` gives a successor
    entry's official-equivalent estimate (see the module docstring): None leaves ``official_equivalent`` empty.
    Entries in `pending` belong to a group being ranked (`RANKING_NOTE`)."""
    rows = []
    pending = set(pending)
    for e in entries:
        best, worst, size = ranks.get(e.id, (None, None, 0))
        base = e.row
        row = copy.copy(base)                    # a shallow copy: the rank is the row's own, the rest shared
        if best is not None:
            row.rank, row.group_size, row.rank_note = [best, worst], size, ""
        else:
            row.rank_note = RANKING_NOTE if e.id in pending else base.rank_note or GROUP_FULL_NOTE
        if estimate is not None and e.meta.get("judge_kind") == "successor":
            set_estimate(row, estimate(e))
        rows.append(row)
    return rows


def set_estimate(row: BoardRow, eq: dict | None) -> None:
    """Fill a successor row's estimate fields from `equivalence.Equivalence.short()` (the numbers rounded once,
    there), or its reason from ``{"reason": …}`` when there is none."""
    has = bool(eq) and "estimate" in eq
    row.official_equivalent = [eq["estimate"], eq["low"], eq["high"]] if has else None
    row.official_equivalent_label = eq.get("label", "") if has else ""
    row.official_equivalent_check = eq.get("check_text", "") if has else ""
    row.official_equivalent_note = "" if has else str((eq or {}).get("reason") or "")


def group_label(meta: dict, ranked: bool) -> str:
    """An entry's rank group in words, as the board's group headings and the ``rank group`` column say it:
    ``judge-x · this server's judge #3f2a · MM-Vet v1`` (a successor judge by the endpoints that served it, never
    by their address: one model name on two servers is two groups), ``gpt-4-0613 · MM-Vet v1``; an entry that is not ranked: ``… · not ranked``."""
    judge, bench = str(meta.get("judge", "?")), str(meta.get("benchmark_label", "?"))
    parts = [judge]
    if meta.get("judge_kind") == "successor":
        record = meta.get("provenance") or {}
        endpoints = sorted(record.get("endpoints") or [])
        # never an address (issue 33): a provider by name, else a kind with a short digest of the address, so two
        # endpoints serving one model name stay two groups without telling anyone where they are
        shown = []
        for e in endpoints:
            name = prov.shown_endpoint(str(e), str(record.get("verified_by") or ""))
            if name != str(e).split(":")[0]:
                name += " #" + hashlib.sha256(f"mmvet-endpoint:{e}".encode("utf-8")).hexdigest()[:4]
            shown.append(name)
        parts.append(", ".join(shown) or "endpoint unknown")
    elif meta.get("judge_kind") == "baseline":
        parts.append("offline")
    parts.append(bench)
    return " · ".join(parts) + ("" if ranked else " · not ranked")


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
