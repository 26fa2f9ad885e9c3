"""The official MM-Vet files: the folder (``mm-vet.json`` or ``mm-vet-v2.json`` next to ``images/``, or one level
down), the official zip (only its metadata and the images it names are ever extracted, once per distinct archive)
and a metadata JSON file (v1, v2, or a list of records).
"""
from __future__ import annotations

import hashlib
import json
import os
import shutil
import tempfile
import uuid
from pathlib import Path
from typing import Mapping

from .archive import ArchiveError, ArchiveLimits, check_zip, entry_name, safe_extract_zip
from .benchmark import Benchmark, BenchmarkError, detect_version, make_samples_from_metadata
from .housekeeping import FolderPolicy, make_room
from .subsets import with_bard_set
from .tables import benchmark_from_rows, load_parquet, make_work_dir, with_question_images

METADATA_FILENAMES: tuple[str, ...] = ("mm-vet.json", "mm-vet-v2.json")


def _find_metadata(folder: Path) -> Path | None:
    """The official metadata file in `folder` or one level down (as in the official zip: ``mm-vet/mm-vet.json``)."""
    candidates = [folder] + sorted(
        d for d in folder.iterdir() if d.is_dir() and not d.name.startswith((".", "__MACOSX")))
    for directory in candidates:
        for name in METADATA_FILENAMES:
            if (directory / name).is_file():
                return directory / name
    return None


def load_folder(folder: Path, *, work_dir: Path | None, source: str | None = None) -> Benchmark:
    metadata = _find_metadata(folder)
    if metadata is not None:
        images = metadata.parent / "images"
        return load_metadata_json(metadata, images_dir=images if images.is_dir() else None,
                                  source=source or str(folder))
    if any(folder.rglob("*.parquet")):
        return load_parquet(folder, work_dir=work_dir)
    raise BenchmarkError(f"{folder.name}: no {' or '.join(METADATA_FILENAMES)} found in this folder or one level "
                         "down, and no .parquet files")


def _zip_metadata_entry(names: set[str]) -> str | None:
    """The archive entry holding the official metadata, at the root or one folder down (``mm-vet/mm-vet.json``)."""
    tops = sorted({n.split("/", 1)[0] for n in names if "/" in n and not n.startswith((".", "__MACOSX"))})
    for prefix in [""] + [f"{t}/" for t in tops]:
        for name in METADATA_FILENAMES:
            if prefix + name in names:
                return prefix + name
    return None


def _file_digest(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as fh:
        while chunk := fh.read(1 << 20):
            digest.update(chunk)
    return digest.hexdigest()


def _keep_images_only(images: Path) -> None:
    """Remove what is not a decodable image header (PIL), whatever its name says."""
    from PIL import Image, UnidentifiedImageError

    for f in images.iterdir():
        try:
            with Image.open(f) as im:
                ok = im.format in ("PNG", "JPEG", "GIF", "BMP", "WEBP")
        except (UnidentifiedImageError, OSError, ValueError, Image.DecompressionBombError):
            ok = False
        if not ok:
            f.unlink()


def load_zip(path: Path, *, work_dir: Path | None, archive: ArchiveLimits,
             folder: FolderPolicy | None = None) -> Benchmark:
    """Load the official zip: only its metadata file and the images that metadata names are ever written.

    The result lives in ``<work_dir>/zip-<sha256 of the archive>`` (one folder per distinct upload, reused when
    the same archive comes again, so a re-validation extracts nothing); a failed load leaves nothing behind.
    `archive` bounds what the zip may declare and expand to; `folder` (None: unbounded) is the policy of the folder
    extracted zips go to. Every other entry (HTML, SVG, scripts, padding) is never extracted; images are kept only
    when PIL reads their header as an image, and are never served from that folder as they are (the app re-encodes
    them).
    """
    try:
        infos = check_zip(path, archive)
    except ArchiveError as exc:
        raise BenchmarkError(str(exc)) from None
    names = {entry_name(i): i for i in infos if not i.is_dir()}
    meta = _zip_metadata_entry(set(names))
    if meta is None:
        raise BenchmarkError(f"{path.name}: no {' or '.join(METADATA_FILENAMES)} found in the archive (at its root "
                             "or one folder down)")
    root = make_work_dir(work_dir if work_dir is not None else Path(tempfile.gettempdir()) / "mmvet-grader-zips")
    final = root / f"zip-{_file_digest(path)[:40]}"
    meta_name = meta.rsplit("/", 1)[-1]
    if (final / ".complete").is_file():
        os.utime(final)                                   # recently used: the last to be cleaned up
        return _load_extracted(final, meta_name, path)
    image_dir = meta.rsplit("/", 1)[0] + "/images/" if "/" in meta else "images/"
    if folder is not None:
        need = names[meta].file_size + sum(i.file_size for n, i in names.items() if n.startswith(image_dir))
        if not make_room(root, folder, need):
            raise BenchmarkError("the server's space for uploaded benchmarks is full right now; try again later, or "
                                 "use the bundled MM-Vet v1")
    tmp = root / f".partial-{final.name[4:20]}-{uuid.uuid4().hex[:8]}"
    try:
        safe_extract_zip(path, tmp, archive, only={meta: meta_name})
        bench = load_metadata_json(tmp / meta_name, source=str(path))
        wanted = {image_dir + s.image: f"images/{s.image}" for s in bench.samples.values()
                  if s.image and image_dir + s.image in names}
        if wanted:
            safe_extract_zip(path, tmp, archive, only=wanted)
            _keep_images_only(tmp / "images")
        (tmp / ".complete").write_text("")
        try:
            tmp.rename(final)
        except OSError:                                   # the same archive finished loading meanwhile
            shutil.rmtree(tmp, ignore_errors=True)
    except (ArchiveError, BenchmarkError) as exc:
        shutil.rmtree(tmp, ignore_errors=True)
        message = str(exc) if isinstance(exc, ArchiveError) else f"{path.name}: {exc}"
        raise BenchmarkError(message) from exc
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    return _load_extracted(final, meta_name, path)


def _load_extracted(folder: Path, meta_name: str, archive: Path) -> Benchmark:
    images = folder / "images"
    try:
        return load_metadata_json(folder / meta_name, images_dir=images if images.is_dir() else None,
                                  source=str(archive))
    except BenchmarkError as exc:
        raise BenchmarkError(f"{archive.name}: {exc}") from None


def load_metadata_json(path: str | Path, *, images_dir: Path | None = None, source: str | None = None) -> Benchmark:
    """Load an official metadata file (``mm-vet.json``: v1, ``mm-vet-v2.json``: v2) or a JSON list of records.

    v2 questions keep their ``<IMG>`` segments exactly; a v2 sample's `image` is the first image file named in its
    question. Raises `BenchmarkError` on unreadable or malformed JSON.
    """
    path = Path(path)
    try:
        data = json.loads(path.read_text(encoding="utf-8-sig"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise BenchmarkError(f"{path.name}: not readable JSON ({exc})") from None
    source = source or str(path)
    if isinstance(data, list):
        # A list of records ({"id", "question", "answer", "capability", ...}): same mapping as hub rows.
        if not data or not all(isinstance(r, Mapping) for r in data):
            raise BenchmarkError(f"{path.name}: expected an object of id -> sample or a list of sample records")
        return benchmark_from_rows([dict(r) for r in data], name=path.stem, source=source)
    try:
        samples = with_question_images(make_samples_from_metadata(data))
    except BenchmarkError as exc:
        raise BenchmarkError(f"{path.name} is not MM-Vet benchmark metadata: {exc}") from None
    version = detect_version(samples)
    name = f"mmvet-{version}" if path.name in METADATA_FILENAMES else path.stem
    bench = Benchmark(name=name, version=version, samples=samples, source=source, images_dir=images_dir)
    return with_bard_set(bench)
