"""Board entries: a published run's frozen copy under a display name, who is ranked with whom, and the ranks.

An **entry** is a finished run published under a display name (`publishing.publish_view`), with its frozen copy
(`snapshot.make_snapshot`). Republishing is explicit and stores a new **version** of the same entry (the old
versions stay stored). `entry_from_row` decodes a stored version, checked against the schema
(`mmvet_core.board.schema`) when it comes from the store.

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

The rows these entries become, the paper's reference rows and the official-equivalent column are `rows`; what a
visitor types is `fields`; filters and downloads `filters`; publishing and reading entries back `publishing`; the
backup `backup`.
"""
from __future__ import annotations

import copy
import hashlib
import json
import logging
from dataclasses import dataclass, replace
from functools import cached_property
from typing import Callable, Iterable

import numpy as np

from ..runs import provenance as prov
from ..store import new_id
from .fields import MAX_DISPLAY_NAME, BoardError, check_link
from .names import NameRefused, check_visible_name
from .ranks import MAX_GRADE_SETS, GroupRanks, better_matrix, bounds_from
from .rows import BoardRow, entry_row, set_estimate
from .schema import SchemaError, check_version
from .snapshot import ScoreTable, compact_entry_parts, grades_digest, sample_means

log = logging.getLogger(__name__)

#: Paired bootstrap of the ranks: resamples, seed, level.
RANK_RESAMPLES = 2000
RANK_SEED = 0
RANK_LEVEL = 0.95


def owner_hash(owner: str) -> str:
    """What an entry keeps of its owner: a hash of the owner's token (the token itself never leaves the server,
    even in an export). The CLI's runs have the empty owner (only the host's CLI acts on them)."""
    return hashlib.sha256(f"mmvet-board:{owner or ''}".encode("utf-8")).hexdigest()


def new_entry_id() -> str:
    """A short, unguessable-enough public entry id (72 random bits), never starting with ``-`` (`store.new_id`)."""
    return new_id(9)


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
    scores: dict[str, list[float | None]] | ScoreTable        # a ScoreTable once `compact`

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
    def row(self) -> BoardRow:
        """The entry's row without a rank (`board_rows` adds it): built once per decoded entry."""
        return entry_row(self, rank_note=unranked_reason(self),
                         group=group_label(self.meta, rank_key(self) is not None))


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


def group_label(meta: dict, ranked: bool) -> str:
    """An entry's rank group in words, as the board's group headings and the ``rank group`` column say it:
    ``judge-x · this server's judge #3f2a · MM-Vet v1`` (a successor judge by the endpoints that served it, never
    by their address: one model name on two servers is two groups), ``gpt-4-0613 · MM-Vet v1``; an entry that is
    not ranked: ``… · not ranked``."""
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


def compact(entry: BoardEntry) -> BoardEntry:
    """The same entry, held compactly for a long-lived board (`snapshot.compact_entry_parts`): its scores as one
    array, its sample ids and capabilities shared with the entries that have them equal. Only for an entry
    checked against the schema (`entry_from_row(..., check=True)`)."""
    meta, scores = compact_entry_parts(entry.meta, entry.scores)
    return replace(entry, meta=meta, scores=scores)


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
