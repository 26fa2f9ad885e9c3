"""The board's backup: every entry and every stored version written to a folder that `datasets.load_dataset` reads
(``board.jsonl`` and a dataset card), and restored from one. An import checks every line field by field before
anything is written (`mmvet_core.board.schema`), never changes an entry already on the board silently, and marks
what it restores unverified unless the host trusts its own backup.
"""
from __future__ import annotations

import json
import time
from pathlib import Path

from ..runs import provenance as prov
from .fields import BoardError, check_link, clean_display_name
from .publishing import check_name_free
from .schema import SchemaError, check_backup_row

EXPORT_FILE = "board.jsonl"

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
    can push to a dataset repository. Each row says its provenance (`provenance.label`). Returns the JSONL
    path. A stored version whose meta is not JSON is exported as stored (its summary columns empty): the
    backup keeps it, an import refuses it."""
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    entries = store.board_entries(include_withdrawn=True)
    lines = []
    for e in entries:
        for v in store.board_versions(e["id"]):
            try:
                meta = json.loads(v["meta"])
                meta = meta if isinstance(meta, dict) else {}
            except (TypeError, ValueError):
                meta = {}
            ci = meta.get("ci") if isinstance(meta.get("ci"), list) and len(meta["ci"]) == 2 else [None, None]
            lines.append(json.dumps({
                "entry_id": e["id"], "version": v["version"], "current": v["version"] == e["version"],
                "run_id": e["run_id"], "owner_hash": e["owner_hash"], "name": e["name"], "link": e["link"],
                "published": bool(e["published"]), "hidden": bool(e["hidden"]), "published_at": v["published_at"],
                "judge": meta.get("judge"), "judge_kind": meta.get("judge_kind"), "benchmark": meta.get("benchmark"),
                "total": meta.get("total"), "ci_low": ci[0], "ci_high": ci[1], "runs": meta.get("runs"),
                "provenance": prov.label(meta.get("provenance") if isinstance(meta.get("provenance"), dict) else None),
                "meta": v["meta"], "scores": v["scores"]}, ensure_ascii=False))
    path = out / EXPORT_FILE
    path.write_text("".join(line + "\n" for line in lines), encoding="utf-8")
    (out / "README.md").write_text(CARD.format(n_entries=len(entries), n_rows=len(lines),
                                               date=time.strftime("%Y-%m-%d")), encoding="utf-8")
    return path


def _check_import_row(row: object, n: int) -> tuple[dict, dict, str, str]:
    """(meta, scores, name, link) of a backup line, or `BoardError` "board.jsonl line N, field F: why"."""
    where = f"{EXPORT_FILE} line {n}"
    try:
        meta, scores = check_backup_row(row)
    except SchemaError as e:
        raise BoardError(f"{where}, {e}") from None
    for field, check in (("name", clean_display_name), ("link", check_link)):
        try:
            value = check(row.get(field, ""))
        except BoardError as e:
            raise BoardError(f"{where}, field {field}: {e}") from None
        if field == "name" and value != row["name"]:
            raise BoardError(f"{where}, field name: not a display name as the board stores one")
    shown = prov.label(meta.get("provenance"))
    if "provenance" in row and row["provenance"] != shown:
        raise BoardError(f"{where}, field provenance: {row['provenance'][:60]!r} differs from the entry's own "
                         f"record ({shown!r})")
    return meta, scores, row["name"], row.get("link", "")


def import_board(store, in_dir: str | Path, *, trust: bool = False, replace: bool = False,
                 report: list[str] | None = None) -> int:
    """Restore the entries of an `export_board` folder (its ``board.jsonl``) into `store`; other entries are kept.
    Every row is checked field by field before anything is written (`board_schema.check_backup_row`: types,
    ranges, totals, capabilities and integrations recomputed from the scores; names and links by the board's
    rules; one current version per entry; no name that looks like another owner's); `BoardError` names the first
    bad line and field and nothing is written.

    An entry already on this board is never changed silently (issue 33: a tampered backup replaced a victim's
    entry, 38.0 -> 0.0): when the backup would change one (a stored version's scores or total, its name, link,
    flags or current version), the import is refused with what would change, and nothing is written, unless
    `replace` is given. `report` (a list) receives one line per entry added or changed (`import_changes`).

    A backup's provenance is its own word: without `trust` every restored version is marked ``restored`` and
    unverified (not ranked until the host verifies it, `verify_entry`); with `trust` (the host's own backup) its
    records are kept as they are. Returns the number of versions imported."""
    path = Path(in_dir) / EXPORT_FILE
    if not path.is_file():
        raise BoardError(f"{in_dir} holds no {EXPORT_FILE} (write one with `leaderboard export`).")
    rows = []
    seen: dict[tuple[str, int], int] = {}
    current: dict[str, int] = {}
    for n, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
        if not line.strip():
            continue
        try:
            row = json.loads(line)
        except json.JSONDecodeError as e:
            raise BoardError(f"{EXPORT_FILE} line {n}: not JSON ({e.msg})") from None
        except RecursionError:
            raise BoardError(f"{EXPORT_FILE} line {n}: JSON nested too deep") from None
        meta, scores, name, link = _check_import_row(row, n)
        key = (row["entry_id"], row["version"])
        if key in seen:
            raise BoardError(f"{EXPORT_FILE} line {n}, field version: entry {key[0]} version {key[1]} is on line "
                             f"{seen[key]} already")
        seen[key] = n
        if row["current"]:
            if row["entry_id"] in current:
                raise BoardError(f"{EXPORT_FILE} line {n}, field current: entry {row['entry_id']} has a current "
                                 f"version on line {current[row['entry_id']]} already")
            current[row["entry_id"]] = n
        if not trust:
            meta = {**meta, "provenance": prov.mark_restored(meta.get("provenance"))}
        rows.append((n, row, meta, scores, name, link))
    for n, row, *_ in rows:
        if row["entry_id"] not in current:
            raise BoardError(f"{EXPORT_FILE} line {n}, field current: entry {row['entry_id']} has no current version")
    # names: none may look like another owner's, in the file or among the entries the import keeps
    heads = [h for h in store.board_heads(include_withdrawn=True) if h["id"] not in current]
    for n, row, _, _, name, _ in rows:
        if row["current"]:
            try:
                check_name_free(heads, name, row["owner_hash"], entry_id=row["entry_id"])
            except BoardError as e:
                raise BoardError(f"{EXPORT_FILE} line {n}, field name: {e}") from None
            heads.append({"id": row["entry_id"], "owner_hash": row["owner_hash"], "name": name})
    rows.sort(key=lambda t: (t[1]["entry_id"], t[1]["version"]))
    added, changed = import_changes(store, rows)
    if changed and not replace:
        shown = "; ".join(changed[:5]) + (f"; and {len(changed) - 5} more" if len(changed) > 5 else "")
        raise BoardError(f"the backup would change {len(changed)} entr{'y' if len(changed) == 1 else 'ies'} already "
                         f"on this board ({shown}); nothing was imported. Pass --replace to replace them.")
    if report is not None:
        report.extend(added + changed)
    for _, row, meta, scores, name, link in rows:
        store.add_board_version(row["entry_id"], run_id=str(row.get("run_id", "")), owner_hash=row["owner_hash"],
                                name=name, link=link, meta=meta, scores=scores, published_at=row["published_at"],
                                version=row["version"], published=row["published"], hidden=row["hidden"])
    for _, row, _, _, name, link in rows:        # flags and the current version as exported
        if row["current"]:
            store.set_board_current(row["entry_id"], row["version"], published=row["published"],
                                    hidden=row["hidden"], name=name, link=link)
    return len(rows)


def import_changes(store, rows: list[tuple]) -> tuple[list[str], list[str]]:
    """(entries the import adds, entries already stored it changes), one line each in words: what the backup's
    checked `rows` ((line, row, meta, scores, name, link), as `import_board` holds them) would do to `store`."""
    added, changed = [], []
    by_entry: dict[str, list[tuple]] = {}
    for item in rows:
        by_entry.setdefault(item[1]["entry_id"], []).append(item)
    for entry_id, items in by_entry.items():
        head = store.board_entry(entry_id)
        current = next(i for i in items if i[1]["current"])
        total = current[2].get("total")
        if head is None:
            added.append(f"added {entry_id} “{current[4]}” (total {_fmt(total)}, {len(items)} version(s))")
            continue
        stored = {v["version"]: v for v in store.board_versions(entry_id)}
        what = []
        for _, row, meta, scores, _, _ in items:
            old = stored.get(row["version"])
            if old is None:
                what.append(f"version {row['version']} added")
                continue
            old_meta, old_scores = json.loads(old["meta"]), json.loads(old["scores"])
            if old_scores != scores or _fmt(old_meta.get("total")) != _fmt(meta.get("total")):
                what.append(f"version {row['version']} replaced: total {_fmt(old_meta.get('total'))} → "
                            f"{_fmt(meta.get('total'))}")
        row = current[1]
        if head["version"] != row["version"]:
            what.append(f"current version {head['version']} → {row['version']}")
        if head["name"] != current[4]:
            what.append(f"name “{head['name']}” → “{current[4]}”")
        if (head.get("link") or "") != (current[5] or ""):
            what.append("link changed")
        for flag in ("published", "hidden"):
            if bool(head[flag]) != bool(row[flag]):
                what.append(f"{flag} {bool(head[flag])} → {bool(row[flag])}")
        if what:
            changed.append(f"{entry_id} “{head['name']}”: " + ", ".join(what))
    return added, changed


def _fmt(total) -> str:
    return "?" if not isinstance(total, (int, float)) else f"{float(total):.1f}"
