"""Limits of a public host on what visitors' uploads may cost, and the cleaning of the folders they fill.

`HostingLimits` gathers every bound the app applies to visitors' files (docs/hosting.md lists
the environment variables): archive size, the extracted-uploads folder, exports, hub downloads, benchmark size,
and the parse sandbox (`parsebox`). It turns them into the records the core functions take (`LoadLimits`,
`ParseLimits`, `FolderPolicy`). `Housekeeper` prunes the app's own folders (exports, extracted uploads) by age
and size, at most once every ``every_s`` seconds, from whatever request comes by (no background thread).
"""
from __future__ import annotations

import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Mapping

from ..inputs.archive import ArchiveLimits
from ..inputs.housekeeping import FolderPolicy, PruneReport, prune
from ..inputs.parsebox import ParseBox, ParseLimits, prescan
from ..inputs.sources import LoadLimits

__all__ = ["HostingLimits", "Housekeeper", "UploadGate"]

MB = 1024 * 1024


def env_number(env: Mapping[str, str], name: str, default: float) -> float:
    """A non-negative number from the environment mapping `env`, else `default` (missing, unparsable or negative);
    the one reader of every MMVET_* limit."""
    try:
        value = float(env.get(name, default))
    except (TypeError, ValueError):
        return default
    return value if value >= 0 else default


@dataclass(frozen=True)
class HostingLimits:
    upload_mb: int = 50                   # MMVET_MAX_UPLOAD_MB: any one upload
    archive_factor: float = 4.0           # MMVET_ARCHIVE_FACTOR: an archive may expand to this x upload_mb
    uploads_max_mb: int = 2000            # MMVET_UPLOADS_MAX_MB: all extracted benchmark archives together
    uploads_max_age_h: float = 24.0       # MMVET_UPLOADS_MAX_AGE_H: unused extracted archives are removed after
    exports_max_mb: int = 500             # MMVET_EXPORTS_MAX_MB: all download files together
    exports_max_age_h: float = 24.0       # MMVET_EXPORTS_MAX_AGE_H: download files are rebuilt on demand after
    gradio_cache_max_age_h: float = 2.0   # MMVET_GRADIO_CACHE_MAX_AGE_H: Gradio's upload/output cache
    gradio_cache_max_mb: int = 2000       # MMVET_GRADIO_CACHE_MAX_MB: ... and its size (oldest uploads go first)
    hub_max_mb: int = 500                 # MMVET_HUB_MAX_MB: largest hub dataset (size asked before download)
    max_samples: int = 2000               # MMVET_MAX_SAMPLES: largest benchmark (v1: 218, v2: 517)
    max_rows: int = 20_000                # MMVET_MAX_ROWS: rows/lines of a results table
    parse_memory_mb: int = 1500           # MMVET_PARSE_MEMORY_MB: memory one parse may add
    parse_timeout_s: float = 90.0         # MMVET_PARSE_TIMEOUT_S: wall clock of one parse (CPU: 2/3 of it)
    max_parses: int = 2                   # MMVET_MAX_PARSES: parses at once
    file_slots: int = 4                   # MMVET_FILE_SLOTS: agents' files (URL / data URI) read at once
    file_slots_per_visitor: int = 1       # MMVET_FILE_SLOTS_PER_VISITOR: ... of which one address may hold
    file_downloads: int = 16              # MMVET_FILE_DOWNLOADS: agents' file URLs downloading at once (a slow
                                          # one waits on the network, not in a file slot; one per address)
    fetch_deadline_s: float = 30.0        # MMVET_FETCH_DEADLINE_S: a whole download of an agent's file URL

    @classmethod
    def from_env(cls, env: Mapping[str, str]) -> "HostingLimits":
        d = cls()
        return cls(
            upload_mb=int(env_number(env, "MMVET_MAX_UPLOAD_MB", d.upload_mb)),
            archive_factor=env_number(env, "MMVET_ARCHIVE_FACTOR", d.archive_factor),
            uploads_max_mb=int(env_number(env, "MMVET_UPLOADS_MAX_MB", d.uploads_max_mb)),
            uploads_max_age_h=env_number(env, "MMVET_UPLOADS_MAX_AGE_H", d.uploads_max_age_h),
            exports_max_mb=int(env_number(env, "MMVET_EXPORTS_MAX_MB", d.exports_max_mb)),
            exports_max_age_h=env_number(env, "MMVET_EXPORTS_MAX_AGE_H", d.exports_max_age_h),
            gradio_cache_max_age_h=env_number(env, "MMVET_GRADIO_CACHE_MAX_AGE_H", d.gradio_cache_max_age_h),
            gradio_cache_max_mb=int(env_number(env, "MMVET_GRADIO_CACHE_MAX_MB", d.gradio_cache_max_mb)),
            hub_max_mb=int(env_number(env, "MMVET_HUB_MAX_MB", d.hub_max_mb)),
            max_samples=int(env_number(env, "MMVET_MAX_SAMPLES", d.max_samples)),
            max_rows=int(env_number(env, "MMVET_MAX_ROWS", d.max_rows)),
            parse_memory_mb=int(env_number(env, "MMVET_PARSE_MEMORY_MB", d.parse_memory_mb)),
            parse_timeout_s=env_number(env, "MMVET_PARSE_TIMEOUT_S", d.parse_timeout_s),
            max_parses=max(1, int(env_number(env, "MMVET_MAX_PARSES", d.max_parses))),
            file_slots=max(1, int(env_number(env, "MMVET_FILE_SLOTS", d.file_slots))),
            file_slots_per_visitor=max(1, int(env_number(env, "MMVET_FILE_SLOTS_PER_VISITOR",
                                                         d.file_slots_per_visitor))),
            file_downloads=max(1, int(env_number(env, "MMVET_FILE_DOWNLOADS", d.file_downloads))),
            fetch_deadline_s=env_number(env, "MMVET_FETCH_DEADLINE_S", d.fetch_deadline_s) or d.fetch_deadline_s,
        )

    @property
    def uploads_policy(self) -> FolderPolicy:
        return FolderPolicy(max_age_s=self.uploads_max_age_h * 3600, max_bytes=self.uploads_max_mb * MB)

    @property
    def exports_policy(self) -> FolderPolicy:
        return FolderPolicy(max_age_s=self.exports_max_age_h * 3600, max_bytes=self.exports_max_mb * MB)

    @property
    def gradio_cache_policy(self) -> FolderPolicy:
        """Gradio's upload cache by size (its age is `gradio_delete_cache`'s); an upload is kept at least ten
        minutes, the longest a handler may still be reading it."""
        return FolderPolicy(max_bytes=self.gradio_cache_max_mb * MB, min_age_s=600.0)

    def load_limits(self) -> LoadLimits:
        """Bounds for a visitor's benchmark (archive, extraction folder, hub size, sample count)."""
        return LoadLimits(archive=ArchiveLimits(max_total_uncompressed=int(self.archive_factor * self.upload_mb * MB)),
                          folder=self.uploads_policy, hub_max_bytes=self.hub_max_mb * MB,
                          max_samples=self.max_samples)

    def parse_limits(self) -> ParseLimits:
        return ParseLimits(max_rows=self.max_rows, memory_bytes=self.parse_memory_mb * MB,
                           cpu_seconds=max(1, int(self.parse_timeout_s * 2 / 3)), timeout_s=self.parse_timeout_s,
                           max_parallel=self.max_parses)

    def gradio_delete_cache(self) -> tuple[int, int]:
        """``gr.Blocks(delete_cache=(every, older_than))``: Gradio's cache is swept every quarter of the age."""
        age = max(60, int(self.gradio_cache_max_age_h * 3600))
        return (max(60, age // 4), age)


class Housekeeper:
    """Prunes folders by their policies, at most once every `every_s` seconds (call `maybe_run` often)."""

    def __init__(self, folders: Mapping[Path, FolderPolicy], every_s: float = 300.0):
        self.folders = dict(folders)
        self.every_s = every_s
        self._last = float("-inf")
        self._lock = threading.Lock()

    def run(self) -> dict[str, PruneReport]:
        with self._lock:
            self._last = time.monotonic()
            return {str(folder): prune(folder, policy) for folder, policy in self.folders.items()}

    def maybe_run(self) -> dict[str, PruneReport] | None:
        if time.monotonic() - self._last < self.every_s or self._lock.locked():
            return None
        return self.run()


class UploadGate:
    """Where a visitor's files are read: results files and benchmarks, within `HostingLimits`.

    Results files and grade files (opened as runs or uploaded to Compare) are row- and cell-counted
    (`parsebox.prescan`) and parsed in the bounded worker; an uploaded benchmark
    is loaded in the worker too, extracted under ``uploads_dir`` (`sources.LoadLimits`: archive cap, folder cap,
    once per content); a hub id is checked (hub ids only, size asked first) and loaded in this process (the
    ``datasets`` library does not run under an address-space limit). Every call gives the housekeeper a chance
    to prune the folders."""

    def __init__(self, limits: HostingLimits, uploads_dir: Path, exports_dir: Path,
                 gradio_cache: Path | None = None):
        self.limits = limits
        self.uploads_dir = Path(uploads_dir)
        self.box = ParseBox(limits.parse_limits())
        folders = {self.uploads_dir: limits.uploads_policy, Path(exports_dir): limits.exports_policy}
        if gradio_cache is not None:           # where Gradio keeps every visitor's upload (GRADIO_TEMP_DIR)
            folders[Path(gradio_cache)] = limits.gradio_cache_policy
        self.housekeeper = Housekeeper(folders, every_s=60.0)

    def read_results(self, path: str | Path, *, max_bytes: int, original_name: str | None = None):
        """`results.read_results`, bounded; `ResultsError` (with the reason) when refused. `original_name`: the
        upload's name on the visitor's machine (see `read_results`)."""
        from ..inputs.results import read_results

        self.housekeeper.maybe_run()
        prescan(path, self.box.limits)
        return self.box.call(read_results, str(path), max_bytes=max_bytes, original_name=original_name,
                             what="the results file")

    def check_rows(self, path: str | Path) -> None:
        """`parsebox.prescan` with this host's limits."""
        self.housekeeper.maybe_run()
        prescan(path, self.box.limits)

    def read_grade_file(self, path: str | Path, benchmark, *, max_bytes: int):
        """`graded.read_grade_file` (a grade file to open as a run), row- and cell-counted, then parsed in the
        bounded worker; `GradeFileError` / `ResultsError` with the reason when refused."""
        from ..scores.export import GradeFileError
        from ..scores.graded import read_grade_file

        self.check_rows(path)
        return self.box.call(read_grade_file, str(path), benchmark, max_bytes=max_bytes, error=GradeFileError,
                             what="the grade file")

    def read_grade_set(self, path: str | Path, name: str | None = None):
        """`gradesets.set_from_grade_file` (a grade file uploaded to Compare), bounded as `read_grade_file`."""
        from ..scores.export import GradeFileError
        from ..runs.gradesets import set_from_grade_file

        self.check_rows(path)
        return self.box.call(set_from_grade_file, str(path), name, error=GradeFileError, what="the grade file")

    def load_upload(self, path: str | Path):
        """An uploaded benchmark file (zip or metadata JSON), bounded; `BenchmarkError` when refused."""
        from ..inputs.benchmark import BenchmarkError
        from ..inputs.sources import load_benchmark

        self.housekeeper.maybe_run()
        self.uploads_dir.mkdir(parents=True, exist_ok=True)
        return self.box.call(load_benchmark, Path(path), work_dir=self.uploads_dir, limits=self.limits.load_limits(),
                             error=BenchmarkError, what="the benchmark")

    def load_hub(self, repo_id: str):
        """A hub dataset by id (never a local path), its size checked before any download."""
        from ..inputs.hub import check_hub_id
        from ..inputs.sources import load_benchmark

        self.uploads_dir.mkdir(parents=True, exist_ok=True)
        repo = check_hub_id(repo_id)
        hub_dir = self.uploads_dir / ("hub-" + repo.replace("/", "--"))
        return load_benchmark(f"hf:{repo}", work_dir=hub_dir, limits=self.limits.load_limits())
