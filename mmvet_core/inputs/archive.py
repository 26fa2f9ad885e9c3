"""Safe extraction of uploaded zip archives.

The app is a public website, so an uploaded ``mm-vet.zip`` is untrusted. `check_zip` inspects the central
directory before anything is written (entry count, declared sizes, compression ratio, path traversal, symlinks,
encryption); `safe_extract_zip` then extracts while counting the bytes really written, because declared sizes
can lie, and removes everything it wrote when it has to stop.
"""
from __future__ import annotations

import re
import shutil
import stat
import zipfile
import zlib
from dataclasses import dataclass
from pathlib import Path

__all__ = ["ArchiveError", "ArchiveLimits", "check_zip", "entry_name", "safe_extract_zip"]

_CHUNK = 1 << 20
_FLAG_ENCRYPTED = 0x1
_DRIVE_LETTER = re.compile(r"^[A-Za-z]:")


class ArchiveError(ValueError):
    """An archive was refused or could not be extracted; the message is meant for the user."""


@dataclass(frozen=True)
class ArchiveLimits:
    """Bounds an archive must respect before and during extraction."""

    max_total_uncompressed: int = 2_000_000_000
    max_entries: int = 20_000
    max_ratio: float = 200.0            # per-entry uncompressed/compressed size, zip-bomb detection ...
    ratio_min_size: int = 1_000_000     # ... checked only for entries larger than this (small files vary a lot)


def _human(n: float) -> str:
    """``1234`` -> ``'1.2 KB'`` (decimal units, as users read sizes)."""
    if n < 1000:
        return f"{n:,.0f} bytes"
    for unit in ("KB", "MB", "GB"):
        n /= 1000
        if n < 1000 or unit == "GB":
            break
    return f"{n:,.1f} {unit}"


def _normalised_name(name: str) -> str:
    """Entry name with Windows separators turned into ``/`` (we check and extract this form)."""
    return name.replace("\\", "/")


def _name_problem(name: str) -> str | None:
    """Why an entry name is unsafe to extract, or None when it is fine."""
    norm = _normalised_name(name)
    if "\x00" in norm:
        return "contains a NUL character"
    if norm.startswith("/"):
        return "is an absolute path"
    if _DRIVE_LETTER.match(norm):
        return "starts with a drive letter"
    if ".." in norm.split("/"):
        return "contains '..' (path traversal)"
    return None


def _open_zip(path: Path) -> zipfile.ZipFile:
    try:
        return zipfile.ZipFile(path)
    except FileNotFoundError:
        raise ArchiveError(f"archive not found: {path.name}") from None
    except (zipfile.BadZipFile, zipfile.LargeZipFile, OSError, EOFError, ValueError) as exc:
        raise ArchiveError(f"{path.name} is not a valid zip archive ({exc})") from None


def check_zip(path: str | Path, limits: ArchiveLimits = ArchiveLimits()) -> list[zipfile.ZipInfo]:
    """Inspect a zip archive without extracting it and return its entries.

    Raises `ArchiveError` when the file is not a zip, has more than ``limits.max_entries`` entries, declares more
    than ``limits.max_total_uncompressed`` bytes in total, has an entry (larger than ``limits.ratio_min_size``)
    compressed more than ``limits.max_ratio`` times, or has an entry that is absolute, contains ``..``, starts
    with a drive letter, is a symbolic link, is encrypted or is a duplicate.
    """
    path = Path(path)
    with _open_zip(path) as zf:
        infos = zf.infolist()
    if len(infos) > limits.max_entries:
        raise ArchiveError(f"{path.name} has {len(infos):,} entries; at most {limits.max_entries:,} are allowed")
    seen: set[str] = set()
    for info in infos:
        name = info.filename
        problem = _name_problem(name)
        if problem:
            raise ArchiveError(f"{path.name}: entry {name!r} {problem}; refusing to extract anything outside "
                               "the destination folder")
        if stat.S_ISLNK(info.external_attr >> 16):
            raise ArchiveError(f"{path.name}: entry {name!r} is a symbolic link; links are not allowed")
        if info.flag_bits & _FLAG_ENCRYPTED:
            raise ArchiveError(f"{path.name}: entry {name!r} is encrypted; upload an unencrypted zip")
        key = _normalised_name(name).rstrip("/")
        if key in seen and not info.is_dir():
            raise ArchiveError(f"{path.name}: entry {name!r} appears more than once")
        seen.add(key)
    total = sum(info.file_size for info in infos)
    if total > limits.max_total_uncompressed:
        raise ArchiveError(f"{path.name} declares {_human(total)} of content, more than the allowed "
                           f"{_human(limits.max_total_uncompressed)}; refusing to extract it")
    for info in infos:
        if info.file_size > limits.ratio_min_size:
            ratio = info.file_size / max(info.compress_size, 1)
            if ratio > limits.max_ratio:
                raise ArchiveError(
                    f"{path.name}: entry {info.filename!r} expands {ratio:,.0f} times ({_human(info.file_size)} "
                    f"from {_human(info.compress_size)}), more than the allowed {limits.max_ratio:,.0f}: this "
                    "looks like a zip bomb")
    return infos


def _make_dirs(directory: Path, root: Path, created: list[Path]) -> None:
    """Create `directory` (inside `root`) component by component, remembering what was created."""
    missing = []
    current = directory
    while current != root and not current.exists():
        missing.append(current)
        current = current.parent
    for d in reversed(missing):
        d.mkdir()
        created.append(d)


def _inside(root: Path, target: Path) -> Path:
    """`target` resolved (following any existing links); `ArchiveError` unless strictly inside `root`."""
    resolved = target.resolve()
    if resolved == root or not resolved.is_relative_to(root):
        raise ArchiveError(f"entry {target.name!r} would be written outside the destination folder")
    return resolved


def _clean_up(created: list[Path], root: Path, remove_root: bool) -> None:
    if remove_root:
        shutil.rmtree(root, ignore_errors=True)
        return
    for p in reversed(created):
        try:
            p.rmdir() if p.is_dir() and not p.is_symlink() else p.unlink()
        except OSError:
            pass


def entry_name(info: zipfile.ZipInfo) -> str:
    """An entry's name as `safe_extract_zip`'s `only` mapping expects it (``/`` separators, no trailing ``/``)."""
    return _normalised_name(info.filename).rstrip("/")


def safe_extract_zip(path: str | Path, dest_dir: str | Path, limits: ArchiveLimits = ArchiveLimits(), *,
                     only: dict[str, str] | None = None) -> Path:
    """Extract the zip at `path` into `dest_dir` (created if needed) and return the resolved destination.

    Runs `check_zip` first, then streams every entry while counting the bytes actually written; every written
    path must resolve inside `dest_dir`, and existing files are never overwritten. With `only` (entry name, as
    `entry_name` spells it -> relative path in `dest_dir`), only those entries are written, under those names;
    everything else in the archive is never extracted. On any failure everything this call wrote is removed (the
    destination too, if this call created it) and `ArchiveError` is raised.
    """
    path = Path(path)
    infos = check_zip(path, limits)
    if only is not None:
        infos = [i for i in infos if not i.is_dir() and entry_name(i) in only]
    dest = Path(dest_dir)
    dest_existed = dest.exists()
    dest.mkdir(parents=True, exist_ok=True)
    root = dest.resolve()
    created: list[Path] = []
    written = 0
    try:
        with _open_zip(path) as zf:
            for info in infos:
                name = only[entry_name(info)] if only is not None else _normalised_name(info.filename)
                parts = [p for p in name.split("/") if p not in ("", ".")]
                if not parts:
                    continue
                target = _inside(root, root.joinpath(*parts))
                if info.is_dir():
                    _make_dirs(target, root, created)
                    continue
                _make_dirs(target.parent, root, created)
                with zf.open(info) as src, open(target, "xb") as out:
                    created.append(target)
                    while chunk := src.read(_CHUNK):
                        written += len(chunk)
                        if written > limits.max_total_uncompressed:
                            raise ArchiveError(
                                f"{path.name} expands to more than {_human(limits.max_total_uncompressed)} "
                                "(its declared sizes are wrong); extraction stopped")
                        out.write(chunk)
    except ArchiveError:
        _clean_up(created, root, remove_root=not dest_existed)
        raise
    except FileExistsError as exc:
        _clean_up(created, root, remove_root=not dest_existed)
        raise ArchiveError(f"{path.name}: {Path(exc.filename or '').name!r} already exists in the destination; "
                           "refusing to overwrite it") from None
    except (zipfile.BadZipFile, zlib.error, EOFError, NotImplementedError, RuntimeError) as exc:
        _clean_up(created, root, remove_root=not dest_existed)
        raise ArchiveError(f"{path.name} is corrupt or unsupported and could not be extracted ({exc})") from None
    except BaseException:
        _clean_up(created, root, remove_root=not dest_existed)
        raise
    return root
