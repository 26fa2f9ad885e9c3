"""Parse visitors' files with bounded rows, memory, time and parallelism.

A results file or benchmark is small on disk but can be huge once parsed: a 1.5 MB .xlsx held 11 M rows
(254 s of CPU, 3.4 GB), six 50 MB CSVs at once reached 12 GB. So, for files from visitors:

1. `prescan` counts rows before any parser runs, from the raw bytes: lines of a text file, and for a
   workbook the ``<dimension>`` it declares, the ``<row>`` and ``<c>`` (cell) elements its sheets really hold and
   the uncompressed bytes of its XML parts (streamed from the zip, stopping at the cap). Too many rows, cells or
   bytes is refused at once with a clear message (a 2-row workbook of a million cells, 53 KB, took 170 s and
   2.9 GB to parse before it was refused by a row count).
2. `ParseBox.call` runs the parser (the unchanged readers of `results` / `sources`) in a fresh worker process
   (a new interpreter; not a fork of the multi-threaded server), with an address-space limit (``RLIMIT_AS``: the worker's memory at
   start plus ``memory_bytes``), a CPU-time limit and a wall-clock timeout after which it is killed; at most
   ``max_parallel`` parses run at once, and a parse waits at most ``queue_wait_s`` for its turn.

Errors meant for the user (`ResultsError`, `BenchmarkError`) come back as they were raised; running out of
memory or time becomes one of them, saying what happened.
"""
from __future__ import annotations

import os
import re
import resource
import threading
import zipfile
import zlib
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable

from .benchmark import BenchmarkError
from .results import ResultsError

__all__ = ["ParseLimits", "ParseBox", "ParseRefused", "prescan"]

_PASSED = {"ResultsError": ResultsError, "BenchmarkError": BenchmarkError}
#: Other errors meant for the user that a reader may raise, passed back as they were (module, class name): imported
#: by name, so the worker loads only the modules its reader needs.
_USER_ERRORS = {("mmvet_core.scores.export", "GradeFileError"), ("mmvet_core.scores.compare", "CompareError")}
_DIMENSION = re.compile(rb'<(?:\w+:)?dimension\s+ref="[A-Z]+\d+:([A-Z]+)(\d+)"')
_ROW = re.compile(rb"<(?:\w+:)?row[\s>/]")
_CELL = re.compile(rb"<(?:\w+:)?c[\s>/]")
_CHUNK = 1 << 20
_SECRET_NAME = re.compile(r"KEY|TOKEN|SECRET|PASSWORD|CREDENTIAL", re.IGNORECASE)


class ParseRefused(ResultsError):
    """A file refused before or while parsing because of its size, memory or time (message for the user)."""


@dataclass(frozen=True)
class ParseLimits:
    max_rows: int = 20_000                # table rows (xlsx rows, csv/tsv/jsonl lines); MM-Vet has 218 or 517
    max_lines: int = 500_000              # lines of any text file (JSON with indentation included)
    max_cells: int = 300_000              # cells of a workbook (MM-Vet v2's 517 rows x ~15 columns: ~8,000)
    max_xml_bytes: int = 100_000_000      # uncompressed XML of a workbook, all parts (sheets, shared strings)
    memory_bytes: int = 1_500_000_000     # address space a parse may add to the worker
    cpu_seconds: int = 60                 # CPU time of one parse
    timeout_s: float = 90.0               # wall clock of one parse, waiting for its turn excluded
    max_parallel: int = 2                 # parses at once (the machine's cores)
    queue_wait_s: float = 60.0            # longest wait for a turn before "the server is busy"


def _column_number(letters: bytes) -> int:
    n = 0
    for ch in letters:
        n = n * 26 + (ch - 64)
    return n


def _refuse_declared(path: Path, data: bytes, limits: ParseLimits) -> None:
    dim = _DIMENSION.search(data[:4096])
    if not dim:
        return
    declared, columns = int(dim.group(2)), _column_number(dim.group(1))
    if declared > limits.max_rows + 1:
        raise ParseRefused(f"{path.name}: the workbook declares {declared:,} rows; at most {limits.max_rows:,} are "
                           "accepted (MM-Vet has 218 or 517 samples)")
    if declared * columns > limits.max_cells:
        raise ParseRefused(f"{path.name}: the workbook declares {declared * columns:,} cells; at most "
                           f"{limits.max_cells:,} are accepted (an MM-Vet results table has a few thousand)")


def _scan_workbook(path: Path, limits: ParseLimits) -> None:
    try:
        zf = zipfile.ZipFile(path)
    except (zipfile.BadZipFile, OSError) as exc:
        raise ParseRefused(f"{path.name}: not a readable .xlsx workbook ({exc})") from None
    with zf:
        parts = [i for i in zf.infolist() if i.filename.endswith((".xml", ".rels")) or
                 re.fullmatch(r"xl/worksheets/[^/]+\.xml", i.filename)]
        declared_bytes = sum(i.file_size for i in parts)
        if declared_bytes > limits.max_xml_bytes:
            raise ParseRefused(f"{path.name}: the workbook declares {declared_bytes:,} bytes of XML; at most "
                               f"{limits.max_xml_bytes:,} are accepted")
        rows = cells = xml_bytes = 0
        for info in parts:
            sheet = re.fullmatch(r"xl/worksheets/[^/]+\.xml", info.filename) is not None
            tail = b""
            try:
                with zf.open(info) as fh:
                    first = True
                    while chunk := fh.read(_CHUNK):
                        xml_bytes += len(chunk)       # counted as inflated: declared sizes can lie
                        if xml_bytes > limits.max_xml_bytes:
                            raise ParseRefused(f"{path.name}: the workbook holds more than "
                                               f"{limits.max_xml_bytes:,} bytes of XML once uncompressed")
                        if not sheet:
                            continue
                        data = tail + chunk
                        if first:
                            first = False
                            _refuse_declared(path, data, limits)
                        body = data[:len(data) - 8] if len(data) > 8 else b""
                        rows += len(_ROW.findall(body))
                        cells += len(_CELL.findall(body))
                        tail = data[len(data) - 8:] if len(data) > 8 else data
                        if rows > limits.max_rows + 1:
                            raise ParseRefused(f"{path.name}: the workbook holds more than {limits.max_rows:,} "
                                               "rows; MM-Vet has 218 or 517 samples")
                        if cells > limits.max_cells:
                            raise ParseRefused(f"{path.name}: the workbook holds more than {limits.max_cells:,} "
                                               "cells; an MM-Vet results table has a few thousand")
                if sheet:
                    rows += len(_ROW.findall(tail))
                    cells += len(_CELL.findall(tail))
            except (zipfile.BadZipFile, zlib.error, EOFError, OSError, NotImplementedError, RuntimeError) as exc:
                raise ParseRefused(f"{path.name}: the workbook is corrupt ({exc})") from None
        if rows > limits.max_rows + 1:
            raise ParseRefused(f"{path.name}: the workbook holds {rows:,} rows; at most {limits.max_rows:,} are "
                               "accepted")
        if cells > limits.max_cells:
            raise ParseRefused(f"{path.name}: the workbook holds {cells:,} cells; at most {limits.max_cells:,} are "
                               "accepted")


def prescan(path: str | Path, limits: ParseLimits = ParseLimits()) -> None:
    """Refuse `path` (`ParseRefused`) when it holds more rows than `limits` allow, before any parser runs:
    a workbook (any zip) by its declared dimension, its sheets' ``<row>`` and ``<c>`` elements and its XML parts'
    uncompressed bytes, streamed; a text file by its lines (``max_lines``; ``max_rows`` for tables and JSON
    Lines)."""
    path = Path(path)
    try:
        with path.open("rb") as fh:
            head = fh.read(4)
            if head == b"PK\x03\x04":
                fh.close()
                _scan_workbook(path, limits)
                return
            fh.seek(0)
            lines = 0
            first = b""
            while chunk := fh.read(_CHUNK):
                if not first:
                    first = chunk[:4096].lstrip(b"\xef\xbb\xbf \t\r\n")
                lines += chunk.count(b"\n")
                if lines > limits.max_lines:
                    break
    except OSError as exc:
        raise ParseRefused(f"{path.name}: cannot be read ({exc})") from None
    is_json_document = first[:1] == b"[" or (first[:1] == b"{" and not _looks_like_jsonl(first))
    cap = limits.max_lines if is_json_document else limits.max_rows
    if lines > cap + 1:
        what = "lines" if is_json_document else "rows (lines)"
        raise ParseRefused(f"{path.name}: more than {cap:,} {what}; MM-Vet has 218 or 517 samples, so this is not "
                           "a results file for it")


def _looks_like_jsonl(head: bytes) -> bool:
    """JSON Lines: the first line is a whole object and the next line starts another."""
    first, _, rest = head.partition(b"\n")
    return first.rstrip().endswith(b"}") and rest.lstrip()[:1] == b"{"


# --------------------------------------------------------------------------------------------------------------
# The worker


def _vm_bytes() -> int:
    try:
        with open("/proc/self/statm") as fh:
            return int(fh.read().split()[0]) * resource.getpagesize()
    except (OSError, ValueError, IndexError):
        return 0


def _worker_main() -> None:
    """The worker process (`_BOOTSTRAP`): read (module, function, args, kwargs, memory, cpu) pickled on stdin, set
    this process's limits, call, and write the outcome pickled on stdout."""
    import importlib
    import pickle
    import sys

    module, name, args, kwargs, memory_bytes, cpu_seconds = pickle.load(sys.stdin.buffer)
    out = sys.stdout.buffer
    sys.stdout = sys.stderr                      # nothing a reader prints may corrupt the answer
    fn = getattr(importlib.import_module(module), name)
    if memory_bytes:
        limit = _vm_bytes() + memory_bytes
        resource.setrlimit(resource.RLIMIT_AS, (limit, limit))
    if cpu_seconds:
        resource.setrlimit(resource.RLIMIT_CPU, (cpu_seconds, cpu_seconds + 5))
    try:
        result = ("ok", fn(*args, **kwargs))
    except MemoryError:
        result = ("memory", None)
    except (ResultsError, BenchmarkError) as exc:
        result = ("ResultsError" if isinstance(exc, ResultsError) else "BenchmarkError", str(exc))
    except Exception as exc:  # a reader's unexpected failure: reported, never crashes the app
        user = next(((c.__module__, c.__name__) for c in type(exc).__mro__
                     if (c.__module__, c.__name__) in _USER_ERRORS), None)
        result = ("user", (user, str(exc))) if user else ("error", f"{type(exc).__name__}: {exc}"[:500])
    try:
        data = pickle.dumps(result, protocol=pickle.HIGHEST_PROTOCOL)
    except MemoryError:
        data = pickle.dumps(("memory", None))
    out.write(data)
    out.flush()


#: The folder of the package `mmvet_core` (the worker imports this module from it), wherever this module sits in it
#: (``mmvet_core/inputs/parsebox.py`` or a subpackage's, after the folders of issue 32).
PACKAGE_DIR = Path(__file__).resolve().parents[__name__.count(".") - 1]
#: The worker's entry: the package is registered without running its ``__init__`` (which imports every module,
#: half a second), so a worker loads only the reader it runs.
_BOOTSTRAP = ("import sys, types; pkg = types.ModuleType('mmvet_core'); pkg.__path__ = [sys.argv[1]]; "
              "sys.modules['mmvet_core'] = pkg; from mmvet_core.inputs.parsebox import _worker_main; _worker_main()")


class ParseBox:
    """Runs parsers in bounded worker processes, at most ``limits.max_parallel`` at once (one per app)."""

    def __init__(self, limits: ParseLimits = ParseLimits()):
        self.limits = limits
        self._turns = threading.BoundedSemaphore(max(1, limits.max_parallel))

    def call(self, fn: Callable, *args: Any, error: type[ValueError] = ResultsError, what: str = "the file",
             **kwargs: Any) -> Any:
        """``fn(*args, **kwargs)`` in a bounded worker process. `fn` must be a module-level function and its
        arguments and result picklable. Raises what `fn` raised for the user (`ResultsError`, `BenchmarkError`),
        or `error` when the worker ran out of memory or time, or the server is too busy."""
        lim = self.limits
        if not self._turns.acquire(timeout=lim.queue_wait_s):
            raise error(f"The server is busy reading other visitors' files; try {what} again in a minute.")
        try:
            return self._run(fn, args, kwargs, error, what)
        finally:
            self._turns.release()

    def _run(self, fn, args, kwargs, error, what):
        import pickle
        import subprocess
        import sys

        lim = self.limits
        payload = pickle.dumps((fn.__module__, fn.__qualname__, args, kwargs, lim.memory_bytes, lim.cpu_seconds))
        # the worker reads hostile bytes: it gets no secrets (the host's judge key, tokens) in its environment
        env = {k: v for k, v in os.environ.items() if not _SECRET_NAME.search(k)}
        env = {**env, "OMP_NUM_THREADS": "1", "OPENBLAS_NUM_THREADS": "1", "MKL_NUM_THREADS": "1"}
        proc = subprocess.Popen([sys.executable, "-c", _BOOTSTRAP, str(PACKAGE_DIR)],
                                stdin=subprocess.PIPE,
                                stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, env=env)
        try:
            out, _ = proc.communicate(payload, timeout=lim.timeout_s)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.communicate()
            raise error(f"Reading {what} took more than {lim.timeout_s:g} s and was stopped; it is far larger than "
                        "an MM-Vet results file should be.") from None
        try:
            kind, value = pickle.loads(out) if out else ("died", None)
        except Exception:
            kind, value = "died", None
        if kind == "ok":
            return value
        if kind in _PASSED:
            raise _PASSED[kind](value)
        if kind == "user" and tuple(value[0]) in _USER_ERRORS:
            import importlib
            (module, name), message = value
            raise getattr(importlib.import_module(module), name)(message)
        if kind == "memory" or (kind == "died" and proc.returncode == 1):
            raise error(f"Reading {what} needed more than {lim.memory_bytes / 1e9:.1f} GB of memory and was "
                        "stopped; it is far larger than an MM-Vet results file should be.")
        if kind == "died":
            cpu = proc.returncode in (-24, -9)        # SIGXCPU (CPU limit), SIGKILL
            raise error(f"Reading {what} was stopped ({'CPU time limit' if cpu else f'exit code {proc.returncode}'}); "
                        "it is far larger or more complex than an MM-Vet results file should be.")
        raise error(f"Reading {what} failed ({value}).")

