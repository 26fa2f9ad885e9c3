"""A Hugging Face hub dataset as a benchmark (``whyu/mm-vet``, ``lmms-lab/MMVet``, ``whyu/mm-vet-v2`` and look-alikes).

The hub is often unreachable (offline machines, firewalled Spaces), and `datasets` then retries for about 23 s.
So `load_hub` looks in the local caches first, then makes one quick HTTPS request (the dataset's size, refused
past a bound), and only then calls `datasets.load_dataset`; every failure becomes a `BenchmarkError` that says
what to load instead. Only hub ids are accepted (`check_hub_id`), never a folder of this machine.
"""
from __future__ import annotations

import json
import os
import re
import threading
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any

from .benchmark import Benchmark, BenchmarkError
from .tables import benchmark_from_table, prefer_test

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
