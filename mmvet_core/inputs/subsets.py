"""Subsets of a benchmark: the official Bard set of MM-Vet v1 (recognised in any v1 source whose ids and questions
match the bundled one) and subsets listed in a file (`read_subset_ids`); `load_subset` applies either.
"""
from __future__ import annotations

import json
import re
from dataclasses import replace
from pathlib import Path

from .benchmark import Benchmark, BenchmarkError, load_bundled_v1


def bundled_bard_for(bench: Benchmark) -> tuple[str, ...] | None:
    """The bundled Bard set when `bench` is MM-Vet v1 content: every Bard id present, with the same question."""
    if bench.version != "v1":
        return None
    bundled = load_bundled_v1()
    for sid in bundled.bard_set or ():
        mine = bench.samples.get(sid)
        if mine is None or " ".join(mine.question.split()) != " ".join(bundled.samples[sid].question.split()):
            return None
    return bundled.bard_set


def with_bard_set(bench: Benchmark) -> Benchmark:
    """`bench` with the bundled Bard set when it has none and is MM-Vet v1 content (`bundled_bard_for`)."""
    if bench.bard_set is None:
        bard = bundled_bard_for(bench)
        if bard is not None:
            return replace(bench, bard_set=bard)
    return bench


def read_subset_ids(path: str | Path) -> list[str]:
    """Ids listed in a subset file: a JSON list of ids (or a JSON object, whose keys are used), or text with one
    id per line (commas and blank lines are ignored, ``#`` starts a comment line). Raises `BenchmarkError`."""
    path = Path(path)
    try:
        text = path.read_text(encoding="utf-8-sig")
    except (OSError, UnicodeDecodeError) as exc:
        raise BenchmarkError(f"subset file {path.name} is not readable ({exc})") from None
    stripped = text.strip()
    if stripped[:1] in ("[", "{"):
        try:
            data = json.loads(stripped)
        except json.JSONDecodeError as exc:
            raise BenchmarkError(f"subset file {path.name} is not valid JSON ({exc})") from None
        items = list(data) if isinstance(data, (list, dict)) else None
        if items is None or not all(isinstance(i, (str, int)) and not isinstance(i, bool) for i in items):
            raise BenchmarkError(f"subset file {path.name} must hold a JSON list of sample ids")
        ids = [str(i).strip() for i in items if str(i).strip()]
    else:
        ids = [tok for line in text.splitlines() if not line.strip().startswith("#")
               for tok in re.split(r"[,\s]+", line.strip()) if tok]
    if not ids:
        raise BenchmarkError(f"subset file {path.name} names no sample ids")
    return ids


def load_subset(benchmark: Benchmark, spec: str | Path | None) -> Benchmark:
    """Restrict `benchmark` to a subset.

    `spec`: None, ``"all"`` or ``""`` -> unchanged; ``"bard"`` -> the official Bard set (MM-Vet v1 only; the
    bundled set is used for other v1 sources whose ids and questions match it); a path -> the ids listed in that
    file (see `read_subset_ids`), named after the file's stem. Raises `BenchmarkError` (unknown ids included).
    """
    if spec is None:
        return benchmark
    if isinstance(spec, str) and spec.strip().lower() in ("", "all"):
        return benchmark
    if isinstance(spec, str) and spec.strip().lower() == "bard":
        if benchmark.version != "v1":
            raise BenchmarkError(f"the Bard set is defined only for MM-Vet v1, not for {benchmark.name} "
                                 f"({benchmark.version})")
        bard = benchmark.bard_set or bundled_bard_for(benchmark)
        if bard is None:
            raise BenchmarkError(f"{benchmark.name} does not contain the official Bard-set questions (its ids or "
                                 "questions differ from MM-Vet v1's), so the Bard set cannot be applied")
        return benchmark.subset(bard, name="bard")
    path = Path(spec).expanduser()
    if not path.is_file():
        raise BenchmarkError(f"unknown subset {str(spec)!r}: use 'all', 'bard', or the path of a file listing "
                             "sample ids (a JSON list or one id per line)")
    return benchmark.subset(read_subset_ids(path), name=path.stem)
