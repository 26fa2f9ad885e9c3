"""Load an MM-Vet benchmark from any source, and restrict it to a subset.

One loader per place a benchmark comes from, each in its module: the official folder, zip and metadata JSON
(`official`), a Hugging Face hub dataset (`hub`), parquet files and hub rows (`tables`: every loader ends in its
`benchmark_from_table` / `benchmark_from_rows`); subsets and the Bard set are `subsets`. This module reads what a
spec names and bounds what comes from someone else (`LoadLimits`).

`load_benchmark` accepts the bundled v1 metadata, the official folder / zip / metadata JSON (v1 and v2), a
Hugging Face hub dataset (``whyu/mm-vet``, ``lmms-lab/MMVet``, ``whyu/mm-vet-v2`` and look-alikes) and local
parquet files in a hub dataset's layout. Hub rows and local parquet rows go through the same code
(`benchmark_from_table`), which is how the hub path is tested offline.
"""
from __future__ import annotations

import os
import zipfile
from dataclasses import dataclass, field
from pathlib import Path

from .archive import ArchiveLimits
from .benchmark import Benchmark, BenchmarkError, load_bundled_v1
from .housekeeping import FolderPolicy
from .hub import load_hub
from .official import load_folder, load_metadata_json, load_zip
from .tables import load_parquet

#: What `load_benchmark` accepts, for error messages and the UI.
ACCEPTED_SPECS: tuple[str, ...] = (
    "'mmvet-v1' or 'bundled' (the bundled MM-Vet v1 metadata, 218 questions)",
    "'mmvet-v2' (the Hugging Face dataset whyu/mm-vet-v2)",
    "'hf:OWNER/NAME' (a Hugging Face dataset, e.g. hf:whyu/mm-vet or hf:lmms-lab/MMVet)",
    "the official folder (mm-vet.json or mm-vet-v2.json next to images/, or one level down)",
    "the official mm-vet.zip",
    "a metadata JSON file in the mm-vet.json / mm-vet-v2.json format",
    "a .parquet file, or a folder of .parquet files, in a hub dataset's layout",
)
HUB_ALIASES: dict[str, str] = {"mmvet-v2": "whyu/mm-vet-v2"}


# --------------------------------------------------------------------------------------------------------------
# Entry point


@dataclass(frozen=True)
class LoadLimits:
    """Bounds for benchmarks that come from someone else (the app's visitors); the CLI's defaults are loose.

    `archive`: what a zip may declare and expand to; `folder`: the policy of the folder extracted zips go to
    (its total is kept under ``folder.max_bytes`` by removing the least recently used ones); `hub_max_bytes`:
    the largest hub dataset (by the sizes the hub API reports, checked before any download) that may be
    downloaded; `max_samples`: the largest benchmark accepted.
    """

    archive: ArchiveLimits = field(default_factory=ArchiveLimits)
    folder: FolderPolicy | None = None
    hub_max_bytes: int | None = 5_000_000_000
    max_samples: int | None = None


def load_benchmark(spec: str | Path, *, work_dir: Path | None = None, hf_offline: bool | None = None,
                   limits: LoadLimits | None = None) -> Benchmark:
    """Load a benchmark from `spec` (one of `ACCEPTED_SPECS`).

    `work_dir` receives what has to be written (an extracted zip, images decoded from a hub dataset or parquet);
    by default a fresh temporary directory is used when needed. `hf_offline` forces (True) or forbids (False) the
    hub's offline mode; None follows ``HF_HUB_OFFLINE`` / ``HF_DATASETS_OFFLINE``. `limits` bounds archives, the
    extraction folder, hub downloads and the benchmark's size (`LoadLimits`). Raises `BenchmarkError` with a
    message for the user on any failure, including an unreachable hub and an unsafe archive.
    """
    limits = limits or LoadLimits()
    bench = _load_any(spec, work_dir=work_dir, hf_offline=hf_offline, limits=limits)
    if limits.max_samples is not None and len(bench) > limits.max_samples:
        raise BenchmarkError(f"{bench.name} has {len(bench):,} samples; at most {limits.max_samples:,} are accepted "
                             "here (MM-Vet v1 has 218, v2 has 517)")
    return bench


def _load_any(spec: str | Path, *, work_dir: Path | None, hf_offline: bool | None, limits: LoadLimits) -> Benchmark:
    if isinstance(spec, str):
        text = spec.strip()
        key = text.lower()
        if key in ("mmvet-v1", "bundled"):         # "bundled" is what `Benchmark.describe()` records as source
            return load_bundled_v1()
        if key in HUB_ALIASES:
            return load_hub(HUB_ALIASES[key], work_dir=work_dir, offline=hf_offline, name=key, source=key,
                            max_bytes=limits.hub_max_bytes)
        if key.startswith("hf:"):
            return load_hub(text[3:].strip(), work_dir=work_dir, offline=hf_offline, max_bytes=limits.hub_max_bytes)
        if not text:
            raise _unknown_spec(spec)
    path = Path(spec).expanduser()
    if path.is_dir():
        return load_folder(path, work_dir=work_dir)
    if path.is_file():
        return _load_file(path, work_dir=work_dir, limits=limits)
    if isinstance(spec, Path) or os.sep in str(spec) or "/" in str(spec) or path.suffix.lower() in (
            ".zip", ".json", ".parquet"):
        raise BenchmarkError(f"benchmark file or folder not found: {spec}")
    raise _unknown_spec(spec)


def _unknown_spec(spec: object) -> BenchmarkError:
    forms = "\n".join(f"  - {form}" for form in ACCEPTED_SPECS)
    return BenchmarkError(f"unknown benchmark {str(spec)!r}; accepted forms:\n{forms}")


def _load_file(path: Path, *, work_dir: Path | None, limits: LoadLimits | None = None) -> Benchmark:
    suffix = path.suffix.lower()
    with path.open("rb") as fh:
        head = fh.read(4)
    if suffix == ".zip" or zipfile.is_zipfile(path):
        limits = limits or LoadLimits()
        return load_zip(path, work_dir=work_dir, archive=limits.archive, folder=limits.folder)
    if suffix == ".parquet" or head == b"PAR1":
        return load_parquet(path, work_dir=work_dir)
    if suffix == ".json" or head.lstrip()[:1] in (b"{", b"[") or head.startswith(b"\xef\xbb\xbf"):
        images = path.parent / "images"
        return load_metadata_json(path, images_dir=images if images.is_dir() else None)
    raise BenchmarkError(f"{path.name}: not a benchmark file (expected a .zip, .json or .parquet file)")
