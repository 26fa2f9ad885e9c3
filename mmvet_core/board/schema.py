"""The schema of a leaderboard entry version and of a backup row, checked field by field (pure functions).

Every frozen copy that reaches the board passes `check_version` — when a backup is imported (the whole file is
refused at its first bad line, naming the line and the field), and when the board reads its stored rows (a bad
row is skipped and named in the host's log; the board stays up). The checks:

* **types and ranges** of every meta field (`META_FIELDS`: strings bounded, numbers finite and in range, lists
  and mappings of the right shape); unknown fields are refused;
* **scores**: one list of `runs` numbers in [0, 1] per sample of ``sample_ids`` (published entries are complete);
* **totals recomputed from the scores**, the official way (per judge run ``sum / n × 100``, mean over runs):
  the total, every capability and every integration must be what the scores give (to the rounding), and the
  95 % interval must hold the total;
* the **provenance** record's fields (`mmvet_core.runs.provenance`).

`SchemaError` carries the field at fault; its message says what is wrong in words a host can act on.
"""
from __future__ import annotations

import json
import math
import re
from functools import lru_cache
from typing import Any, Callable

import numpy as np

from ..inputs.benchmark import CAPABILITY_CODE, integration_name
from ..runs.provenance import SOURCES, VERIFIERS

KINDS = ("official", "successor", "baseline")
MAX_SAMPLES = 10_000
MAX_RUNS = 100
#: How far a stored total may sit from the one its scores give (the official one-decimal rounding).
TOLERANCE = 0.051
_SAMPLE_ID = re.compile(r"^[\w.:/-]{1,120}$")
_DATE = re.compile(r"^\d{4}-\d{2}-\d{2}$")
_HEX = re.compile(r"^[0-9a-f]{8,64}$")
_HEX_SHORT = re.compile(r"^[0-9a-f]{6,64}$")
_BENCH_KEY = re.compile(r"^[\w.-]{1,60}$")


class SchemaError(ValueError):
    """A field that does not fit the schema: `field` names it (``meta.capabilities.rec``), the message says why."""

    def __init__(self, field: str, message: str):
        super().__init__(f"field {field}: {message}")
        self.field = field
        self.reason = message


# ---- field checkers: (value) -> None, raising ValueError with a reason ------------------------------------------
def _text(limit: int, *, empty: bool = True, pattern: re.Pattern | None = None) -> Callable[[Any], None]:
    def check(v):
        if not isinstance(v, str):
            raise ValueError(f"must be text, not {type(v).__name__}")
        if len(v) > limit:
            raise ValueError(f"at most {limit} characters ({len(v)} given)")
        if not empty and not v:
            raise ValueError("must not be empty")
        if pattern is not None and not pattern.match(v):
            raise ValueError(f"{v[:40]!r} is not of the expected form")
    return check


def _optional(check: Callable[[Any], None]) -> Callable[[Any], None]:
    def inner(v):
        if v is not None:
            check(v)
    return inner


def _number(low: float, high: float) -> Callable[[Any], None]:
    def check(v):
        if isinstance(v, bool) or not isinstance(v, (int, float)):
            raise ValueError(f"must be a number, not {type(v).__name__}" + (f" ({v!r})" if isinstance(v, str) else ""))
        if not math.isfinite(v) or not low <= v <= high:
            raise ValueError(f"{v!r} is outside [{low:g}, {high:g}]")
    return check


def _integer(low: int, high: int) -> Callable[[Any], None]:
    def check(v):
        if isinstance(v, bool) or not isinstance(v, int):
            raise ValueError(f"must be a whole number, not {type(v).__name__}" + (f" ({v!r})" if isinstance(v, str) else ""))
        if not low <= v <= high:
            raise ValueError(f"{v} is outside [{low}, {high}]")
    return check


def _one_of(values) -> Callable[[Any], None]:
    def check(v):
        if v not in values:
            raise ValueError(f"{str(v)[:40]!r} is not one of {', '.join(map(repr, values))}")
    return check


def _percent_map(v):
    if not isinstance(v, dict):
        raise ValueError(f"must be a mapping, not {type(v).__name__}")
    if len(v) > 200:
        raise ValueError("too many columns")


def _ci(v):
    if not isinstance(v, list) or len(v) != 2:
        raise ValueError("must be a list [low, high]")
    for x in v:
        _optional(_number(0.0, 100.0))(x)
    if None not in v and v[0] > v[1]:
        raise ValueError(f"low {v[0]} is above high {v[1]}")


def _sample_ids(v):
    if not isinstance(v, list) or not 1 <= len(v) <= MAX_SAMPLES:
        raise ValueError(f"must be a list of 1 to {MAX_SAMPLES} sample ids")
    if all(type(sid) is str for sid in v) and _known_ids(tuple(v)):
        return
    for sid in v:
        if not isinstance(sid, str) or not _SAMPLE_ID.match(sid):
            raise ValueError(f"{str(sid)[:40]!r} is not a sample id")
    if len(set(v)) != len(v):
        raise ValueError("holds a sample id twice")


@lru_cache(maxsize=32)
def _known_ids(ids: tuple[str, ...]) -> bool:
    """Whether these ids (one benchmark's, shared by its entries) are well-formed and distinct: checked once."""
    return all(_SAMPLE_ID.match(sid) for sid in ids) and len(set(ids)) == len(ids)


@lru_cache(maxsize=32)
def _known_caps(texts: frozenset[str]) -> bool:
    """Whether every capability text is a comma-separated list of capability codes: checked once per benchmark."""
    return all(CAPABILITY_CODE.match(c) for t in texts for c in t.split(","))


def _prediction_hashes(v):
    """sample id -> `judgecheck.prediction_hash` (10 hex digits)."""
    if not isinstance(v, dict):
        raise ValueError(f"must be a mapping, not {type(v).__name__}")
    if len(v) > MAX_SAMPLES:
        raise ValueError(f"at most {MAX_SAMPLES} samples ({len(v)} given)")
    for sid, h in v.items():
        if not isinstance(sid, str) or not _SAMPLE_ID.match(sid):
            raise ValueError(f"{str(sid)[:40]!r} is not a sample id")
        if not isinstance(h, str) or not _HEX_SHORT.match(h):
            raise ValueError(f"sample {sid}: {str(h)[:40]!r} is not a prediction hash")


def _answer_traits(v):
    """sample id -> [1 if a refusal or empty else 0, answer length in characters] (`judgecheck.answer_traits`)."""
    if not isinstance(v, dict):
        raise ValueError(f"must be a mapping, not {type(v).__name__}")
    if len(v) > MAX_SAMPLES:
        raise ValueError(f"at most {MAX_SAMPLES} samples ({len(v)} given)")
    for sid, t in v.items():
        if not isinstance(sid, str) or not _SAMPLE_ID.match(sid):
            raise ValueError(f"{str(sid)[:40]!r} is not a sample id")
        if (not isinstance(t, list) or len(t) != 2 or any(type(x) is not int for x in t) or t[0] not in (0, 1)
                or not 0 <= t[1] <= 10_000_000):
            raise ValueError(f"sample {sid}: {str(t)[:40]!r} is not [refused 0/1, length]")


def _sample_caps(v):
    if not isinstance(v, dict):
        raise ValueError(f"must be a mapping, not {type(v).__name__}")
    values = tuple(v.values())
    if all(type(c) is str for c in values) and _known_caps(frozenset(values)):
        return
    seen: set[str] = set()
    for sid, caps in v.items():
        if isinstance(caps, str) and caps in seen:
            continue
        if not isinstance(caps, str) or not all(CAPABILITY_CODE.match(c) for c in caps.split(",")):
            raise ValueError(f"sample {str(sid)[:40]}: {str(caps)[:40]!r} is not a list of capability codes")
        seen.add(caps)


PROVENANCE_FIELDS: dict[str, Callable[[Any], None]] = {
    "source": _one_of(SOURCES),
    "judge": _text(300),
    "endpoints": lambda v: _list_of(v, _text(300), 20),
    "served_by": lambda v: _list_of(v, _text(200), 20),
    "imported_from": _text(200),
    "imported_grades": _integer(0, MAX_SAMPLES * MAX_RUNS),
    "verified_by": _one_of(VERIFIERS),
    "verified_at": _optional(_number(0.0, 1e11)),
    "restored": lambda v: _bool(v),
}


def _bool(v):
    if not isinstance(v, bool):
        raise ValueError(f"must be true or false, not {type(v).__name__}")


def _list_of(v, check, limit: int):
    if not isinstance(v, list) or len(v) > limit:
        raise ValueError(f"must be a list of at most {limit} items")
    for x in v:
        check(x)


def _provenance(v):
    if not isinstance(v, dict):
        raise ValueError(f"must be a mapping, not {type(v).__name__}")


META_FIELDS: dict[str, tuple[bool, Callable[[Any], None]]] = {     # name: (required, check)
    "model": (False, _text(300)),
    "judge": (True, _text(200, empty=False)),
    "judge_text": (False, _text(1000)),
    "judge_kind": (True, _one_of(KINDS)),
    "judge_key": (True, _text(200, empty=False)),
    "metric_note": (False, _optional(_text(2000))),
    "benchmark": (True, _text(60, pattern=_BENCH_KEY)),
    "benchmark_label": (True, _text(200, empty=False)),
    "benchmark_name": (False, _text(300)),
    "version": (False, _text(40)),
    "subset": (False, _optional(_text(100))),
    "samples_sha": (True, _text(64, pattern=_HEX)),
    "sample_ids": (True, _sample_ids),
    "sample_caps": (False, _sample_caps),
    "runs": (True, _integer(1, MAX_RUNS)),
    "total": (True, _number(0.0, 100.0)),
    "total_std": (False, _optional(_number(0.0, 100.0))),
    "ci": (True, _ci),
    "capabilities": (True, _percent_map),
    "integrations": (True, _percent_map),
    "overrides": (False, _integer(0, MAX_SAMPLES)),
    "date": (True, _text(10, pattern=_DATE)),
    "tool_version": (False, _text(40)),
    "provenance": (False, _provenance),
    "grades_sha": (False, _text(64, pattern=_HEX)),
    "judge_check_fingerprint": (False, _text(64, pattern=_HEX)),    # the estimate's check (`equivalence.estimate_keys`)
    "prediction_hashes": (False, _prediction_hashes),                 # the estimate's in-sample test
    "answer_traits": (False, _answer_traits),                         # the estimate's unlike-the-references test
}


def _field(name: str, check: Callable[[Any], None], value) -> None:
    try:
        check(value)
    except SchemaError:
        raise
    except (ValueError, TypeError) as e:
        raise SchemaError(name, str(e)) from None


# ---- recomputation ---------------------------------------------------------------------------------------------
def _column(matrix: np.ndarray, rows: np.ndarray) -> float:
    """The official column value of the samples `rows` (bool mask over the samples) of an n × runs matrix:
    per run ``sum / count × 100``, mean over runs (unrounded)."""
    count = int(rows.sum())
    return float((matrix[rows].sum(axis=0) / count * 100.0).mean())


@lru_cache(maxsize=32)
def _columns_of(sample_caps: tuple[str, ...]) -> tuple[dict[str, dict[str, int]], np.ndarray]:
    """For the samples' capability texts (in sample order): the row of each capability and integration column
    in a membership matrix (columns × samples, 0/1); one matrix product then gives every column of a version.
    Entries of one benchmark share it."""
    per_sample = [text.split(",") for text in sample_caps]
    integ = {text: integration_name(text.split(",")) for text in set(sample_caps)}
    caps = sorted({c for cs in per_sample for c in cs})
    ints = sorted(set(integ.values()))
    rows = [[c in cs for cs in per_sample] for c in caps]
    rows += [[integ[text] == name for text in sample_caps] for name in ints]
    names = {"capabilities": {c: i for i, c in enumerate(caps)},
             "integrations": {n: len(caps) + i for i, n in enumerate(ints)}}
    return names, np.array(rows, dtype=np.float64).reshape(len(rows), len(sample_caps))


def _near(stored, computed: float) -> bool:
    return stored is not None and abs(float(stored) - computed) <= TOLERANCE


def check_version(meta: object, scores: object) -> tuple[dict, dict]:
    """(meta, scores) when a frozen entry version fits the schema (module docstring), else `SchemaError` naming
    the first field at fault."""
    if not isinstance(meta, dict):
        raise SchemaError("meta", f"must be a JSON object, not {type(meta).__name__}")
    if not isinstance(scores, dict):
        raise SchemaError("scores", f"must be a JSON object, not {type(scores).__name__}")
    for key in meta:
        if key not in META_FIELDS:
            raise SchemaError(f"meta.{str(key)[:40]}", "is not a field of an entry")
    for name, (required, check) in META_FIELDS.items():
        if name not in meta:
            if required:
                raise SchemaError(f"meta.{name}", "is missing")
            continue
        _field(f"meta.{name}", check, meta[name])
    prov = meta.get("provenance")
    if prov is not None:
        for key in prov:
            if key not in PROVENANCE_FIELDS:
                raise SchemaError(f"meta.provenance.{str(key)[:40]}", "is not a field of a provenance record")
        if "source" not in prov:
            raise SchemaError("meta.provenance.source", "is missing")
        for key, check in PROVENANCE_FIELDS.items():
            if key in prov:
                _field(f"meta.provenance.{key}", check, prov[key])

    ids, runs = meta["sample_ids"], meta["runs"]
    if set(scores) != set(ids):
        extra = sorted(set(scores) - set(ids))[:1] or sorted(set(ids) - set(scores))[:1]
        raise SchemaError("scores", f"must hold exactly the samples of meta.sample_ids (sample {extra[0][:40]!r} "
                                    f"differs)")
    rows = [scores[sid] for sid in ids]
    if any(type(row) is not list or len(row) != runs for row in rows):
        sid = next(sid for sid, row in zip(ids, rows) if type(row) is not list or len(row) != runs)
        raise SchemaError(f"scores.{sid}", f"must be a list of {runs} scores (one per judge run)")
    kinds = {type(v) for row in rows for v in row}
    matrix = np.array(rows, dtype=np.float64) if kinds <= {int, float} else None      # n × runs
    if matrix is None or not ((matrix >= 0.0) & (matrix <= 1.0)).all():
        for sid, row in zip(ids, rows):                  # name the first bad score
            for v in row:
                if type(v) not in (int, float) or not (0.0 <= v <= 1.0):
                    raise SchemaError(f"scores.{sid}", f"{repr(v)[:20]} is not a score in [0, 1]")

    total = _column(matrix, np.ones(len(ids), dtype=bool))
    if not _near(meta["total"], total):
        raise SchemaError("meta.total", f"{meta['total']} is not what the scores give ({total:.2f})")
    low, high = meta["ci"]
    if (low is not None and low > meta["total"] + TOLERANCE) or (high is not None and high < meta["total"] - TOLERANCE):
        raise SchemaError("meta.ci", f"[{low}, {high}] does not hold the total {meta['total']}")

    caps = meta.get("sample_caps")
    if caps is None:
        if meta["capabilities"] or meta["integrations"]:
            raise SchemaError("meta.sample_caps", "is missing: capabilities cannot be checked without it")
        return meta, scores
    if set(caps) != set(ids):
        raise SchemaError("meta.sample_caps", "must name the capabilities of every sample of meta.sample_ids")
    names, members = _columns_of(tuple(caps[sid] for sid in ids))
    values = (members @ matrix / members.sum(axis=1, keepdims=True) * 100.0).mean(axis=1)
    for field in ("capabilities", "integrations"):
        columns = names[field]
        stored = meta[field]
        if set(stored) != set(columns):
            odd = sorted(set(stored) ^ set(columns))[0]
            raise SchemaError(f"meta.{field}", f"column {str(odd)[:40]!r} does not match the samples' capabilities")
        for name, i in columns.items():
            _field(f"meta.{field}.{name}", _number(0.0, 100.0), stored[name])
            if not _near(stored[name], float(values[i])):
                raise SchemaError(f"meta.{field}.{name}",
                                  f"{stored[name]} is not what the scores give ({float(values[i]):.2f})")
    return meta, scores


def recompute_totals(meta: dict, scores: dict) -> dict:
    """`meta` with its total, capabilities and integrations recomputed from `scores` the way `check_version`
    checks them (rounded to one decimal), and its interval cleared: for benches and tests that build entries by
    hand (a published entry's come from `aggregate`)."""
    ids = meta["sample_ids"]
    matrix = np.array([scores[sid] for sid in ids], dtype=np.float64)
    names, members = _columns_of(tuple(meta["sample_caps"][sid] for sid in ids))
    values = (members @ matrix / members.sum(axis=1, keepdims=True) * 100.0).mean(axis=1)
    return {**meta, "total": round(_column(matrix, np.ones(len(ids), dtype=bool)), 1), "ci": [None, None],
            "capabilities": {c: round(float(values[i]), 1) for c, i in names["capabilities"].items()},
            "integrations": {c: round(float(values[i]), 1) for c, i in names["integrations"].items()}}


# ---- a backup row ----------------------------------------------------------------------------------------------
#: A backup row's own fields (`backup.EXPORT_COLUMNS`); the summary columns must repeat the meta's.
ROW_FIELDS: dict[str, tuple[bool, Callable[[Any], None]]] = {
    "entry_id": (True, _text(40, empty=False, pattern=re.compile(r"^[\w-]{1,40}$"))),
    "version": (True, _integer(1, 1_000_000)),
    "current": (True, _bool),
    "run_id": (False, _text(64)),
    "owner_hash": (True, _text(64, pattern=re.compile(r"^[0-9a-f]{64}$"))),
    "name": (True, _text(1000)),
    "link": (False, _text(1000)),
    "published": (True, _bool),
    "hidden": (True, _bool),
    "published_at": (True, _number(0.0, 1e11)),
    "judge": (False, _text(200)), "judge_kind": (False, _text(40)), "benchmark": (False, _text(60)),
    "total": (False, _optional(_number(0.0, 100.0))), "ci_low": (False, _optional(_number(0.0, 100.0))),
    "ci_high": (False, _optional(_number(0.0, 100.0))), "runs": (False, _integer(1, MAX_RUNS)),
    "provenance": (False, _text(300)),
    "meta": (True, _text(5_000_000)),
    "scores": (True, _text(5_000_000)),
}
_SUMMARY = {"judge": "judge", "judge_kind": "judge_kind", "benchmark": "benchmark", "total": "total",
            "runs": "runs"}


def _json_field(field: str, text: str):
    try:
        return json.loads(text)
    except json.JSONDecodeError as e:
        raise SchemaError(field, f"is not JSON ({e.msg})") from None
    except RecursionError:
        raise SchemaError(field, "is JSON nested too deep") from None


def check_backup_row(row: object) -> tuple[dict, dict]:
    """(meta, scores) of one backup row (a line of ``board.jsonl``) when every field fits, else `SchemaError`.
    Names and links are the caller's (`backup` checks them with the board's own rules)."""
    if not isinstance(row, dict):
        raise SchemaError("(line)", "must be a JSON object")
    for key in row:
        if key not in ROW_FIELDS:
            raise SchemaError(str(key)[:40], "is not a field of a backup row")
    for name, (required, check) in ROW_FIELDS.items():
        if name not in row:
            if required:
                raise SchemaError(name, "is missing")
            continue
        _field(name, check, row[name])
    meta, scores = _json_field("meta", row["meta"]), _json_field("scores", row["scores"])
    meta, scores = check_version(meta, scores)
    for column, key in _SUMMARY.items():
        if column in row and row[column] != meta.get(key):
            raise SchemaError(column, f"{str(row[column])[:40]!r} differs from the entry's own ({meta.get(key)!r})")
    ci = meta["ci"]
    for column, value in (("ci_low", ci[0]), ("ci_high", ci[1])):
        if column in row and row[column] != value:
            raise SchemaError(column, f"{row[column]!r} differs from the entry's own ({value!r})")
    return meta, scores
