"""Bounded folders: what the app writes for visitors (extracted uploads, exports) is removed by age and size.

A public Space has a small disk that every visitor shares. Every folder the app fills on a visitor's behalf
goes through `prune`: entries older than a maximum age are removed, then the oldest (least recently used by
modification time) until the folder's total fits its cap. `make_room` does the same before something new is
written and says whether it fits. Nothing here follows symbolic links.
"""
from __future__ import annotations

import os
import shutil
import time
from dataclasses import dataclass
from pathlib import Path

__all__ = ["FolderPolicy", "PruneReport", "tree_size", "prune", "make_room"]


@dataclass(frozen=True)
class FolderPolicy:
    """How long entries of a folder may stay and how much the folder may hold (None: unbounded)."""

    max_age_s: float | None = None
    max_bytes: int | None = None
    min_age_s: float = 60.0        # never remove what was touched this recently (a load may be reading it)


@dataclass
class PruneReport:
    removed: list[str]
    freed_bytes: int
    total_bytes: int


def tree_size(path: Path) -> int:
    """Bytes of the regular files under `path` (or of `path` itself); links are not followed."""
    try:
        st = path.lstat()
    except OSError:
        return 0
    if not path.is_dir() or path.is_symlink():
        return st.st_size
    total = 0
    for dirpath, _dirs, files in os.walk(path):
        for name in files:
            try:
                total += os.lstat(os.path.join(dirpath, name)).st_size
            except OSError:
                pass
    return total


def _remove(path: Path) -> None:
    if path.is_dir() and not path.is_symlink():
        shutil.rmtree(path, ignore_errors=True)
    else:
        try:
            path.unlink()
        except OSError:
            pass


def prune(root: Path, policy: FolderPolicy, *, need_bytes: int = 0, now: float | None = None) -> PruneReport:
    """Remove `root`'s entries older than ``policy.max_age_s``, then the oldest ones until the total plus
    `need_bytes` fits ``policy.max_bytes``; entries touched in the last ``policy.min_age_s`` seconds stay."""
    now = time.time() if now is None else now
    root = Path(root)
    if not root.is_dir():
        return PruneReport([], 0, 0)
    entries = []
    for child in root.iterdir():
        try:
            mtime = child.lstat().st_mtime
        except OSError:
            continue
        entries.append((mtime, child, tree_size(child)))
    entries.sort(key=lambda e: e[0])
    total = sum(size for _, _, size in entries)
    removed: list[str] = []
    freed = 0
    for mtime, child, size in entries:
        age = now - mtime
        if age < policy.min_age_s:
            continue
        too_old = policy.max_age_s is not None and age > policy.max_age_s
        too_big = policy.max_bytes is not None and total + need_bytes > policy.max_bytes
        if too_old or too_big:
            _remove(child)
            removed.append(child.name)
            freed += size
            total -= size
    return PruneReport(removed, freed, total)


def make_room(root: Path, policy: FolderPolicy, need_bytes: int) -> bool:
    """Prune `root` so that `need_bytes` more fit under ``policy.max_bytes``; False when they still do not."""
    report = prune(root, policy, need_bytes=need_bytes)
    return policy.max_bytes is None or report.total_bytes + need_bytes <= policy.max_bytes
