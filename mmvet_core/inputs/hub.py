"""Load an MM-Vet benchmark from any source, and restrict it to a subset.

One loader per place a benchmark comes from, each in its module: the official folder, zip and metadata JSON
(`official`), a Hugging Face hub dataset (`hub`), parquet files and hub rows (`tables`: every loader ends in its
`benchmark_from_table` / `benchmark_from_rows`); subsets and the Bard set are `subsets`. This module reads what a
spec names and bounds what comes from someone else (`LoadLimits`).

`load_benchmark` accepts the bundled v1 metadata, the official folder / zip / metadata JSON (v1 and v2), a
Hugging Face hub dataset (``whyu/mm-vet``, ``lmms-lab/MMVet``, ``whyu/mm-vet-v2`` and look-alikes) and local
parquet files in a hub dataset's layout. Hub rows and local parquet rows go through the same code
(`benchmark_from_table`), which is how the hub path is tested offline.

The hub is often unreachable (offline machines, firewalled Spaces), and `datasets` then retries for about 23 s.
So the hub path looks in the local caches first, then makes one quick HTTPS request, and only then calls
`datasets.load_dataset`; every failure becomes a `BenchmarkError` that says what to do instead.
"""
from __future__ import annotations

import hashlib
import json
import os
import re
import shutil
import tempfile
import threading
import urllib.error
import urllib.request
import uuid
import zipfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Mapping

from .archive import ArchiveError, ArchiveLimits, check_zip, entry_name, safe_extract_zip
from .housekeeping import FolderPolicy, make_room
from .benchmark import Benchmark, BenchmarkError, detect_version, load_bundled_v1, make_samples_from_metadata
from .subsets import with_bard_set
from .tables import (benchmark_from_rows, benchmark_from_table, load_parquet, make_work_dir, prefer_test,
                     with_question_images)

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
METADATA_FILENAMES: tuple[str, ...] = ("mm-vet.json", "mm-vet-v2.json")

# The hub's own rule for a repo id part: letters, digits, '-', '_', '.', no leading/trailing '-'/'.', at most 96.
_HUB_PART = r"[A-Za-z0-9](?:[A-Za-z0-9_.-]{0,94}[A-Za-z0-9_])?"
_REPO_ID = re.compile(rf"^{_HUB_PART}/{_HUB_PART}$")
_TRUE = {"1", "ON", "YES", "TRUE"}
_WHAT_TO_DO = ("Instead, download the official mm-vet.zip from https://github.com/yuweihao/MM-Vet and load it by "
               "its path, or use the bundled 'mmvet-v1'.")
_WHAT_TO_DO_V2 = ("Instead, download the official MM-Vet v2 archive mm-vet-v2.zip "
                  "(https://github.com/yuweihao/MM-Vet/releases/download/v2/mm-vet-v2.zip) and load it by its path "
                  "(command line: --benchmark path/to/mm-vet-v2.zip).")


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
        return _load_folder(path, work_dir=work_dir)
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
        return _load_zip(path, work_dir=work_dir, limits=limits or LoadLimits())
    if suffix == ".parquet" or head == b"PAR1":
        return load_parquet(path, work_dir=work_dir)
    if suffix == ".json" or head.lstrip()[:1] in (b"{", b"[") or head.startswith(b"\xef\xbb\xbf"):
        images = path.parent / "images"
        return load_metadata_json(path, images_dir=images if images.is_dir() else None)
    raise BenchmarkError(f"{path.name}: not a benchmark file (expected a .zip, .json or .parquet file)")


# --------------------------------------------------------------------------------------------------------------
# Official folder, zip and metadata JSON


def _find_metadata(folder: Path) -> Path | None:
    """The official metadata file in `folder` or one level down (as in the official zip: ``mm-vet/mm-vet.json``)."""
    candidates = [folder] + sorted(
        d for d in folder.iterdir() if d.is_dir() and not d.name.startswith((".", "__MACOSX")))
    for directory in candidates:
        for name in METADATA_FILENAMES:
            if (directory / name).is_file():
                return directory / name
    return None


def _load_folder(folder: Path, *, work_dir: Path | None, source: str | None = None) -> Benchmark:
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


def _load_zip(path: Path, *, work_dir: Path | None, limits: LoadLimits) -> Benchmark:
    """Load the official zip: only its metadata file and the images that metadata names are ever written.

    The result lives in ``<work_dir>/zip-<sha256 of the archive>`` (one folder per distinct upload, reused when
    the same archive comes again, so a re-validation extracts nothing); a failed load leaves nothing behind.
    Every other entry (HTML, SVG, scripts, padding) is never extracted; images are kept only when PIL reads
    their header as an image, and are never served from that folder as they are (the app re-encodes them).
    """
    try:
        infos = check_zip(path, limits.archive)
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
    if limits.folder is not None:
        need = names[meta].file_size + sum(i.file_size for n, i in names.items() if n.startswith(image_dir))
        if not make_room(root, limits.folder, need):
            raise BenchmarkError("the server's space for uploaded benchmarks is full right now; try again later, or "
                                 "use the bundled MM-Vet v1")
    tmp = root / f".partial-{final.name[4:20]}-{uuid.uuid4().hex[:8]}"
    try:
        safe_extract_zip(path, tmp, limits.archive, only={meta: meta_name})
        bench = load_metadata_json(tmp / meta_name, source=str(path))
        wanted = {image_dir + s.image: f"images/{s.image}" for s in bench.samples.values()
                  if s.image and image_dir + s.image in names}
        if wanted:
            safe_extract_zip(path, tmp, limits.archive, only=wanted)
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



# --------------------------------------------------------------------------------------------------------------
# Hugging Face hub


def _env_offline() -> bool:
    return any(os.environ.get(var, "").strip().upper() in _TRUE for var in ("HF_HUB_OFFLINE", "HF_DATASETS_OFFLINE"))


def _hub_endpoint() -> str:
    return (os.environ.get("HF_ENDPOINT") or "https://huggingface.co").rstrip("/")


def _probe_hub(timeout: float, repo_id: str | None = None) -> str | None:
    """None when the hub answers an HTTP request within `timeout` seconds, else the reason it did not.

    A real HTTPS request rather than a TCP connect: some networks accept every connection and fail later. Any
    answer below 500 counts (a 401/404 means the hub is there). Proxies from the environment are honoured.
    """
    url = f"{_hub_endpoint()}/api/datasets/{repo_id}" if repo_id else _hub_endpoint()
    outcome: list[str | None] = []

    def probe() -> None:
        try:
            request = urllib.request.Request(url, method="HEAD", headers={"User-Agent": "mmvet-grader"})
            with urllib.request.build_opener().open(request, timeout=timeout):
                outcome.append(None)
        except urllib.error.HTTPError as exc:
            outcome.append(None if exc.code < 500 else f"HTTP {exc.code}")
        except Exception as exc:  # URLError, TLS errors, timeouts, bad endpoint URLs ...
            outcome.append(str(getattr(exc, "reason", exc)) or type(exc).__name__)

    thread = threading.Thread(target=probe, name="hf-hub-probe", daemon=True)
    thread.start()
    thread.join(timeout + 0.5)          # DNS lookups ignore the socket timeout; don't wait for them
    return outcome[0] if outcome else f"no answer within {timeout:g} s"


def hub_reachable(timeout: float = 3.0) -> bool:
    """Whether the Hugging Face hub (``HF_ENDPOINT``) answers within `timeout` seconds, DNS included."""
    return _probe_hub(timeout) is None


def _cache_dirs() -> tuple[Path, Path]:
    """(datasets' cache, the hub file cache), read from the environment at call time."""
    hf_home = Path(os.environ.get("HF_HOME") or Path(os.environ.get("XDG_CACHE_HOME", "~/.cache")) / "huggingface")
    datasets_cache = Path(os.environ.get("HF_DATASETS_CACHE") or hf_home / "datasets").expanduser()
    hub_cache = Path(os.environ.get("HF_HUB_CACHE") or os.environ.get("HUGGINGFACE_HUB_CACHE")
                     or hf_home / "hub").expanduser()
    return datasets_cache, hub_cache


def _snake_case(name: str) -> str:
    """datasets' cache folder spelling of a dataset name (``MMVet`` -> ``mm_vet``)."""
    name = re.sub(r"([A-Z]+)([A-Z][a-z])", r"\1_\2", name)
    return re.sub(r"([a-z\d])([A-Z])", r"\1_\2", name).lower()



def _read_hub_cache(repo_id: str) -> Any | None:
    """The dataset's rows from a local cache as a pyarrow Table, or None when it is not cached.

    Looks at datasets' Arrow cache (``<owner>___<name>/<config>/<version>/<hash>/*.arrow``, written by an earlier
    ``load_dataset``) and at the hub file cache (``datasets--<owner>--<name>/snapshots/*/**/*.parquet``, written by
    ``huggingface-cli download``). Reads files directly, so it never touches the network.
    """
    import pyarrow as pa
    import pyarrow.parquet as pq

    owner, name = repo_id.split("/", 1)
    datasets_cache, hub_cache = _cache_dirs()
    try:
        root = datasets_cache / f"{owner}___{_snake_case(name)}"
        builds = [d for d in root.glob("*/*/*")
                  if d.is_dir() and any(not f.name.startswith("cache-") for f in d.glob("*.arrow"))]
        if builds:
            newest = max(builds, key=lambda d: d.stat().st_mtime)
            tables = []
            for f in prefer_test(sorted(f for f in newest.glob("*.arrow") if not f.name.startswith("cache-"))):
                with pa.OSFile(str(f)) as source:
                    tables.append(pa.ipc.open_stream(source).read_all())
            return pa.concat_tables(tables, promote_options="default")
        snapshots = [d for d in (hub_cache / f"datasets--{owner}--{name}" / "snapshots").glob("*")
                     if d.is_dir() and any(d.rglob("*.parquet"))]
        if snapshots:
            newest = max(snapshots, key=lambda d: d.stat().st_mtime)
            files = prefer_test(sorted(newest.rglob("*.parquet")))
            return pa.concat_tables([pq.read_table(f) for f in files], promote_options="default")
    except (OSError, ValueError, pa.ArrowException):
        return None                       # a broken cache is treated as no cache
    return None


def _hub_error(repo_id: str, why: str) -> BenchmarkError:
    todo = _WHAT_TO_DO_V2 if "v2" in repo_id.lower() else _WHAT_TO_DO   # v2's own zip, never v1's mm-vet.zip
    return BenchmarkError(f"Could not load the Hugging Face dataset '{repo_id}': {why}. {todo}")


def _download_hub_table(repo_id: str) -> Any:
    try:
        import datasets

        loaded = datasets.load_dataset(repo_id)
        split = "test" if "test" in loaded else next(iter(loaded))
        # Arrow format: image columns stay undecoded {bytes, path} structs.
        return loaded[split].with_format("arrow")[:]
    except ConnectionError as exc:
        raise _hub_error(repo_id, f"the hub could not be reached ({exc})") from exc
    except Exception as exc:  # datasets raises many types (not found, gated, auth, parsing ...)
        raise _hub_error(repo_id, f"{type(exc).__name__}: {exc}") from exc


def check_hub_id(repo_id: str) -> str:
    """`repo_id` stripped, when it is a hub dataset id (``OWNER/NAME``) and nothing else; `BenchmarkError` for
    malformed ids and for anything that names a file or folder on this machine (``datasets.load_dataset`` would
    load a local folder such as ``assets/examples`` or ``data/uploads`` given as an "id")."""
    text = (repo_id or "").strip()
    if not _REPO_ID.match(text) or ".." in text or "--" in text:
        raise BenchmarkError(f"not a Hugging Face dataset id: {text[:120]!r} (expected hf:OWNER/NAME, e.g. "
                             "whyu/mm-vet)")
    if os.path.lexists(text) or os.path.lexists(text.split("/", 1)[0]):
        raise BenchmarkError(f"{text!r} names a folder on this server, not a Hugging Face dataset; only hub "
                             "dataset ids (OWNER/NAME) are accepted here")
    return text


def _get_json(url: str, timeout: float) -> tuple[Any, str | None]:
    """(parsed JSON, None) from a GET of `url` within `timeout` seconds (DNS included), or (None, why not)."""
    outcome: list[tuple[Any, str | None]] = []

    def fetch() -> None:
        try:
            request = urllib.request.Request(url, headers={"User-Agent": "mmvet-grader",
                                                           "Accept": "application/json"})
            with urllib.request.build_opener().open(request, timeout=timeout) as response:
                body = response.read(5_000_001)
            if len(body) > 5_000_000:
                outcome.append((None, "the hub's answer is too large"))
            else:
                outcome.append((json.loads(body), None))
        except urllib.error.HTTPError as exc:
            outcome.append((None, f"HTTP {exc.code}"))
        except json.JSONDecodeError:
            outcome.append((None, "the hub's answer is not JSON"))
        except Exception as exc:  # URLError, TLS errors, timeouts, bad endpoint URLs ...
            outcome.append((None, str(getattr(exc, "reason", exc)) or type(exc).__name__))

    thread = threading.Thread(target=fetch, name="hf-hub-info", daemon=True)
    thread.start()
    thread.join(timeout + 0.5)
    return outcome[0] if outcome else (None, f"no answer within {timeout:g} s")


def hub_dataset_size(repo_id: str, *, timeout: float = 3.0) -> int:
    """Total bytes of the dataset's files, as the hub API reports them (``/api/datasets/ID?blobs=true``), asked
    before anything is downloaded. Fails closed: `BenchmarkError` when the hub cannot be asked or does not say."""
    repo_id = check_hub_id(repo_id)
    info, why = _get_json(f"{_hub_endpoint()}/api/datasets/{repo_id}?blobs=true", timeout)
    if why is not None:
        if why.startswith("HTTP 4"):
            raise _hub_error(repo_id, f"the hub does not know this dataset or refuses it ({why})")
        raise _hub_error(repo_id, f"the hub could not be reached to check the dataset's size before downloading it "
                                  f"({_hub_endpoint()}: {why})")
    siblings = info.get("siblings") if isinstance(info, dict) else None
    sizes = [f.get("size") for f in siblings or [] if isinstance(f, dict)]
    if not sizes or not all(isinstance(n, int) and n >= 0 for n in sizes):
        raise _hub_error(repo_id, "the hub did not report the dataset's size, so it is not downloaded")
    return sum(sizes)


def load_hub(repo_id: str, *, work_dir: Path | None = None, offline: bool | None = None,
             name: str | None = None, source: str | None = None, probe_timeout: float = 3.0,
             max_bytes: int | None = 5_000_000_000) -> Benchmark:
    """Load the hub dataset `repo_id` (``OWNER/NAME``), from a local cache when possible.

    Order: the id is checked (`check_hub_id`: hub ids only, never a local folder); local caches (no network);
    then, unless offline (`offline`, else ``HF_HUB_OFFLINE`` / ``HF_DATASETS_OFFLINE``), one HTTPS request to
    the hub API bounded by `probe_timeout` seconds for the dataset's size (`hub_dataset_size`): larger than
    `max_bytes` (None: any size) is refused, and no answer means no download; only then
    ``datasets.load_dataset`` (its ``test`` split, else its first). Images are written to ``work_dir/images``.
    Raises `BenchmarkError`, saying why and what to load instead, within about `probe_timeout` + 0.5 s when the
    hub is down.
    """
    repo_id = check_hub_id(repo_id)
    offline = _env_offline() if offline is None else offline
    table = _read_hub_cache(repo_id)
    if table is None:
        if offline:
            raise _hub_error(repo_id, "offline mode is on (HF_HUB_OFFLINE) and the dataset is not in the local "
                                      "cache, so the hub could not be reached")
        size = hub_dataset_size(repo_id, timeout=probe_timeout)
        if max_bytes is not None and size > max_bytes:
            raise _hub_error(repo_id, f"it holds {size / 1e6:,.0f} MB, more than the {max_bytes / 1e6:,.0f} MB "
                                      "accepted here; nothing was downloaded")
        table = _download_hub_table(repo_id)
    return benchmark_from_table(table, name=name or repo_id, source=source or f"hf:{repo_id}",
                                work_dir=work_dir, version_hint="v2" if "v2" in repo_id.lower() else None)
