"""Publishing: the leaderboard's store side. An owner publishes a finished run as an entry (a new version when
republished), the host vouches for an entry's judge (`verify_entry`), and the board's entries are read back,
each stored row checked against the schema (one bad row is skipped and logged, never takes the board down).
Permission checks are the service's (`mmvet_core.service.board`).

Two rules hold here: a display name may not look like another owner's entry or a paper's reference row
(`check_name_free`, by TR39 skeleton: `mmvet_core.board.names`), and another owner's grades cannot be published
again under a new name (`find_copy`: the same per-sample grades, or all but `COPY_SHARE` of them).
"""
from __future__ import annotations

import logging
from functools import lru_cache
from typing import Iterable

import numpy as np

from ..runs import provenance as prov
from .entries import BoardEntry, describe_bad_row, entry_from_row, new_entry_id, owner_hash
from .fields import BoardError, check_link, clean_display_name
from .rows import paper_rows
from .snapshot import make_snapshot, sample_means
from .names import name_key
from .schema import SchemaError, check_version

log = logging.getLogger(__name__)

#: Why a published run is pinned in the store (`Store.pin_run`: runs nobody opens expire, published ones never).
PIN_REASON = "published"


#: Grades that differ from another owner's entry on at most this share of the samples (at least one sample) are
#: a copy of it: an honest second grading of other answers never agrees on 99 % of MM-Vet's open-ended samples.
COPY_SHARE = 0.01


@lru_cache(maxsize=1)
def _paper_keys() -> dict[str, str]:
    return {name_key(r.name): r.name for r in paper_rows()}


def check_name_free(heads: Iterable[dict], name: str, owner_h: str, *, entry_id: str = "") -> None:
    """Refuse (`BoardError`) a display name that looks like another owner's entry (`names.name_key`: the same
    TR39 skeleton, case folded) or like one of the paper's reference rows. `heads` are `Store.board_heads` rows
    (every entry, withdrawn ones too: a name stays its owner's); the entries of `owner_h` (an `owner_hash`) and
    `entry_id` (the entry being renamed) do not count."""
    key = name_key(name)
    if key in _paper_keys():
        raise BoardError(f"“{name}” looks like the paper's reference row “{_paper_keys()[key]}”: choose a name "
                         "that says whose run this is.")
    mine = owner_h
    for h in heads:
        if h["id"] != entry_id and h["owner_hash"] != mine and name_key(h["name"]) == key:
            raise BoardError(f"“{name}” looks the same as the name of another owner's entry ({h['id']}); names "
                             "that read alike (letters of other scripts, case, look-alike digits) belong to the "
                             "first owner. Choose another name.")


def find_copy(entries: Iterable[BoardEntry], meta: dict, scores: dict, owner: str, *,
              entry_id: str = "") -> tuple[BoardEntry, int] | None:
    """(entry, samples that differ) of another owner whose grades are the same as these (per-sample means over
    the judge runs, on the same samples), or differ on at most `COPY_SHARE` of the samples; None otherwise."""
    mine, ids = owner_hash(owner), list(meta.get("sample_ids") or sorted(scores))
    means = np.nan_to_num(sample_means(ids, scores), nan=0.0)
    allowed = max(1, int(len(ids) * COPY_SHARE))
    same = [e for e in entries if e.id != entry_id and e.owner_hash != mine
            and e.meta.get("samples_sha") == meta.get("samples_sha") and e.sample_ids == ids]
    if not same:
        return None
    others = np.vstack([e.grade_set[1] for e in same])
    differ = np.count_nonzero(np.abs(others - means[None, :]) > 1e-6, axis=1)
    best = int(np.argmin(differ))
    return (same[best], int(differ[best])) if differ[best] <= allowed else None


def copy_message(found: tuple[BoardEntry, int], n: int) -> str:
    entry, differ = found
    where = "on the board" if entry.published and not entry.hidden else "published"
    how = "" if differ == 0 else f" (all but {differ} of {n} samples graded the same)"
    return (f"These grades are already {where} as “{entry.name}” (entry {entry.id}){how}: another owner's "
            "grades cannot be published again under a new name.")


def publish_view(store, view, *, name: str, link: str = "", owner: str = "", republish: bool = False,
                 tool_version: str = "", trusted=None, others: list[BoardEntry] | None = None) -> BoardEntry:
    """Publish a finished run (`runs.RunView`) as a new entry, or with `republish` as a new version of the entry
    already published from it. Validates name and link; `BoardError` when refused: a run already on the board
    without `republish`, an incomplete run, a bad name or link, a name that looks like another owner's
    (`check_name_free`), grades that are another owner's entry's (`find_copy`). `trusted`: the endpoints this
    server trusts (`provenance.run_provenance`); `others`: every entry (withdrawn too) when the caller holds them
    decoded, else they are read from the store."""
    clean, url = clean_display_name(name), check_link(link)
    existing = store.board_entry_for_run(view.run.id)
    if existing is not None and not republish:
        raise BoardError(f"This run is already on the board as entry {existing['id']} (version "
                         f"{existing['version']}): rename it, or republish it to store a new version.")
    meta, scores = make_snapshot(view, tool_version=tool_version, trusted=trusted)
    entry_id = existing["id"] if existing else new_entry_id()
    check_name_free(store.board_heads(include_withdrawn=True), clean, owner_hash(owner), entry_id=entry_id)
    found = find_copy(load_entries(store, include_withdrawn=True) if others is None else others, meta, scores,
                      owner, entry_id=entry_id)
    if found is not None:
        raise BoardError(copy_message(found, len(meta["sample_ids"])))
    store.add_board_version(entry_id, run_id=view.run.id, owner_hash=owner_hash(owner), name=clean, link=url,
                            meta=meta, scores=scores)
    store.pin_run(view.run.id, PIN_REASON)          # a published run never expires (its card stays openable)
    return load_entry(store, entry_id)


def verify_entry(store, entry_id: str, verified: bool = True) -> BoardEntry:
    """The host vouches for an entry's judge at its current version (or withdraws that): written into the
    version's provenance (`provenance.mark_verified`); a later version starts unverified. `BoardError` when there
    is no such entry."""
    try:
        entry = load_entry(store, entry_id or "")
        if entry is not None:
            check_version(entry.meta, entry.scores)
    except (SchemaError, ValueError, TypeError, KeyError, RecursionError) as e:
        raise BoardError(f"Entry {entry_id}'s stored copy is damaged ({e}): it cannot be verified.") from None
    if entry is None:
        raise BoardError("No such leaderboard entry.")
    meta = {**entry.meta, "provenance": prov.mark_verified(entry.meta.get("provenance"), verified)}
    store.set_board_meta(entry.id, entry.version, meta)
    return load_entry(store, entry.id)


def load_entry(store, entry_id: str) -> BoardEntry | None:
    """An entry at its current version (published or not), or None."""
    row = store.board_entry(entry_id or "")
    if row is None:
        return None
    v = store.board_version(entry_id, row["version"])
    if v is None:
        return None
    return entry_from_row({**row, "published_at": v["published_at"], "meta": v["meta"], "scores": v["scores"]})


def load_entries(store, *, include_withdrawn: bool = False, skipped: list | None = None) -> list[BoardEntry]:
    """The entries on the board (published, not hidden), or every entry with `include_withdrawn`. A stored row
    that does not fit the schema (`board_schema`) is skipped, named in the log (and appended to `skipped`):
    one bad row never takes the board down."""
    out = []
    for r in store.board_entries(include_withdrawn=include_withdrawn):
        try:
            out.append(entry_from_row(r, check=True))
        except (SchemaError, ValueError, TypeError, KeyError, RecursionError) as e:
            log.warning("%s", describe_bad_row(r, e))
            if skipped is not None:
                skipped.append((r.get("id"), r.get("version"), str(e)))
    return out
