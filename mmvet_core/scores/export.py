"""The official file formats: per-sample grade JSON and the two score CSVs, written and read back.

Written files are byte-compatible with what ``mm-vet_evaluator.py`` produces (file names, ``json.dump(...,
indent=4)``, the pandas CSV layout with the model name as the index label) with two deliberate differences:

* integration columns use our canonical names in ``Benchmark.integrations`` order (the official script joins a
  Python ``set``, so its names change with the hash seed); capability columns use the paper's order (the official
  script orders them by sample count, which is the same order on the full v1 set);
* ``runs`` is always written as plain numbers (``[36.1, 36.5, 36.3]``); the official script run under numpy 2
  writes ``[np.float64(36.1), ...]``. `read_official_csv` reads both.
"""
from __future__ import annotations

import ast
import csv
import io
import json
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Mapping

from mmvet_core.scores.aggregate import Scores
from mmvet_core.inputs.benchmark import integration_name

#: Keys every per-sample entry of an official grade file has, in the official order.
GRADE_KEYS: tuple[str, ...] = ("model", "content", "score")
#: Spelling of the Bard subset in official CSV names (``load_metadata``: ``sub_set_name = "bardset" + "_"``).
OFFICIAL_SUBSET_PREFIXES: dict[str, str] = {"bard": "bardset_", "bardset": "bardset_", "bard_set": "bardset_"}
#: Columns of the official CSVs that are not capabilities or integrations.
SUMMARY_COLUMNS: tuple[str, ...] = ("total", "std", "runs")


#: First characters that make a spreadsheet read a CSV cell as a formula (OWASP "CSV injection").
FORMULA_PREFIXES: tuple[str, ...] = ("=", "+", "-", "@", "\t", "\r")
_UNSAFE_NAME_CHARS = re.compile(r"[^\w.+=@-]+")


def csv_safe(cell: object) -> str:
    """`cell` as CSV text that no spreadsheet evaluates: a cell starting with ``= + - @``, a tab or a carriage
    return gets a leading ``'`` (OWASP's advice), and line breaks inside a cell become spaces. Our numbers never start with one, so official CSVs written for
    ordinary names are unchanged byte for byte.

    >>> csv_safe("=1+1"), csv_safe("rec"), csv_safe("36.1")
    ("'=1+1", 'rec', '36.1')
    """
    text = "" if cell is None else str(cell)
    quoted = "'" + text if text.startswith(FORMULA_PREFIXES) else text
    return quoted.replace("\r", " ").replace("\n", " ")     # one line per row, whatever reads it


def safe_name_part(name: object, default: str = "model") -> str:
    """`name` usable inside a file name: its last path component, characters other than letters, digits and
    ``. + = @ - _`` replaced by ``_``, leading formula / dot characters removed, at most 100 characters.
    Ordinary names (``llava_llama2_13b_chat``, ``gpt-4-0613``) are unchanged.

    >>> safe_name_part("=cmd|'calc'!A1"), safe_name_part("../org/model-7b")
    ('cmd_calc_A1', 'model-7b')
    """
    base = re.split(r"[/\\]", str(name or ""))[-1]
    cleaned = _UNSAFE_NAME_CHARS.sub("_", base).lstrip("=+-@._").rstrip("._")[:100]
    return cleaned or default


class GradeFileError(ValueError):
    """A grade file is not in the official shape; the message says which entry and what is wrong."""


def official_file_names(model: str, judge: str, n_runs: int, subset: str | None = None) -> dict[str, str]:
    """The three file names the official evaluator uses for `model` graded by `judge` over `n_runs` runs.

    The grade file name never carries the subset; the CSV names do: the Bard set is spelled ``bardset_``
    (``subset`` may be ``"bard"``, ``"bardset"`` or ``"bard_set"``). Any other subset name is inserted as
    ``f"{subset}_"`` (not an official name; the official script only knows the Bard set).

    >>> official_file_names("llava", "gpt-4-0613", 5, "bard")["cap"]
    'llava_bardset_gpt-4-0613-cap-score-5runs.csv'
    """
    model, judge = safe_name_part(model), safe_name_part(judge, "judge")
    subset_part = "" if not subset else OFFICIAL_SUBSET_PREFIXES.get(subset.lower(),
                                                                     f"{safe_name_part(subset, 'subset')}_")
    return {
        "grade": f"{model}_{judge}-grade-{n_runs}runs.json",
        "cap": f"{model}_{subset_part}{judge}-cap-score-{n_runs}runs.csv",
        "cap_int": f"{model}_{subset_part}{judge}-cap-int-score-{n_runs}runs.csv",
    }


# --------------------------------------------------------------------------------------------------------------
# Grade JSON


def _score_value(value: object) -> float | None:
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise GradeFileError(f"score {value!r} is not a number")
    return float(value)


def _scores_of(sid: object, values, where: str = "") -> list[float | None]:
    """One sample's scores as floats (`_score_value`); a `GradeFileError` names the sample (after `where`)."""
    try:
        return [_score_value(v) for v in values]
    except GradeFileError as exc:
        raise GradeFileError(f"{where}sample {sid!r}: {exc}") from None


def make_grade_json(records: Mapping[str, Mapping[str, Any]]) -> dict[str, dict[str, list]]:
    """Build the official grade mapping ``{"v1_0": {"model": [...], "content": [...], "score": [...]}, ...}``.

    `records` maps sample id -> a mapping with at least ``model``, ``content`` and ``score`` (one element per
    run). Extra per-sample keys (e.g. ``"override"``, ``"flags"``) are kept after the official ones; official
    readers ignore them. Scores become floats (``None`` stays ``None`` for a run not graded).

    Raises `GradeFileError` when an entry lacks a required key, a list's length differs from ``score``'s, or a
    score is not a number.
    """
    out: dict[str, dict[str, list]] = {}
    for sid, record in records.items():
        missing = [k for k in GRADE_KEYS if k not in record]
        if missing:
            raise GradeFileError(f"sample {sid!r}: missing {', '.join(missing)}")
        scores = _scores_of(sid, record["score"])
        for key in ("model", "content"):
            if len(record[key]) != len(scores):
                raise GradeFileError(f"sample {sid!r}: {len(record[key])} {key!r} value(s) for {len(scores)} score(s)")
        entry: dict[str, list] = {"model": list(record["model"]), "content": list(record["content"]), "score": scores}
        for key, value in record.items():
            if key not in entry:
                entry[key] = list(value) if isinstance(value, (list, tuple)) else value
        out[str(sid)] = entry
    return out


def write_grade_json(path: str | Path, grade_json: Mapping[str, Any]) -> None:
    """Write `grade_json` like the official script: ``json.dump(grade_results, f, indent=4)`` (ASCII-escaped)."""
    with open(path, "w", encoding="utf-8") as f:
        json.dump(grade_json, f, indent=4)


@dataclass
class OfficialGrades:
    """A grade file read back: the raw mapping, the scores per sample, the run count and the judge models seen."""

    raw: dict[str, dict[str, Any]]
    scores: dict[str, list[float | None]]
    n_runs: int
    judge_models: set[str] = field(default_factory=set)


def load_official_grades(path_or_obj: str | Path | Mapping[str, Any], *, allow_partial: bool = False) -> OfficialGrades:
    """Read an official grade file (a path or the already-parsed mapping) and validate its shape.

    Every entry must be an object with a ``score`` list of numbers (``null`` is read as "not graded");
    ``model`` and ``content``, when present, must be lists as long as ``score``. All samples must have the same
    number of runs unless `allow_partial` is true (an interrupted official run, which the official script
    resumes): then `n_runs` is the longest and shorter lists are padded with ``None``.

    Raises `GradeFileError` (a `ValueError`) naming the first offending sample, or when the file is not JSON.
    """
    if isinstance(path_or_obj, (str, Path)):
        try:
            raw = json.loads(Path(path_or_obj).read_text(encoding="utf-8"))
        except json.JSONDecodeError as exc:
            raise GradeFileError(f"{path_or_obj}: not valid JSON ({exc})") from None
        where = f"{path_or_obj}: "
    else:
        raw, where = path_or_obj, ""
    if not isinstance(raw, Mapping):
        raise GradeFileError(f"{where}a grade file must be a JSON object of sample id -> grades, "
                             f"got {type(raw).__name__}")
    if not raw:
        raise GradeFileError(f"{where}the grade file has no samples")

    scores: dict[str, list[float | None]] = {}
    judges: set[str] = set()
    for sid, entry in raw.items():
        if not isinstance(entry, Mapping):
            raise GradeFileError(f"{where}sample {sid!r}: expected an object, got {type(entry).__name__}")
        if "score" not in entry:
            raise GradeFileError(f"{where}sample {sid!r}: missing 'score'")
        if not isinstance(entry["score"], list):
            raise GradeFileError(f"{where}sample {sid!r}: 'score' must be a list (one score per run)")
        run_scores = _scores_of(sid, entry["score"], where)
        for key in ("model", "content"):
            if key in entry and (not isinstance(entry[key], list) or len(entry[key]) != len(run_scores)):
                raise GradeFileError(f"{where}sample {sid!r}: '{key}' must be a list of {len(run_scores)} value(s), "
                                     f"like 'score'")
        judges.update(m for m in entry.get("model", []) if isinstance(m, str))
        scores[str(sid)] = run_scores

    lengths = {len(v) for v in scores.values()}
    n_runs = max(lengths)
    if len(lengths) > 1:
        if not allow_partial:
            short = next(sid for sid, v in scores.items() if len(v) != n_runs)
            raise GradeFileError(f"{where}runs of different length: samples have {sorted(lengths)} scores "
                                 f"(e.g. {short!r} has {len(scores[short])}, others {n_runs})")
        scores = {sid: v + [None] * (n_runs - len(v)) for sid, v in scores.items()}
    return OfficialGrades(raw=dict(raw), scores=scores, n_runs=n_runs, judge_models=judges)


def read_grade_json(path_or_obj: str | Path | Mapping[str, Any]) -> dict[str, list[float | None]]:
    """Just the scores of a grade file (sample id -> one score per run); see `load_official_grades`."""
    return load_official_grades(path_or_obj).scores


# --------------------------------------------------------------------------------------------------------------
# Score CSVs


def _format_number(value: float | None) -> str:
    # The official CSV holds np.float64 values written by pandas: repr of the float ("36.1", "0.0"); NaN is empty.
    return "" if value is None else repr(float(value))


def _format_runs(values: list[float | None]) -> str:
    return "[" + ", ".join("None" if v is None else repr(float(v)) for v in values) + "]"


def _csv_text(model: str, columns: list[str], values: list[str]) -> str:
    buffer = io.StringIO()
    writer = csv.writer(buffer, lineterminator="\n")  # pandas.DataFrame.to_csv's quoting (QUOTE_MINIMAL)
    writer.writerow(["", *map(csv_safe, columns)])     # names come from uploads: never let them be formulas
    writer.writerow([csv_safe(model), *map(csv_safe, values)])
    return buffer.getvalue()


def _summary_values(scores: Scores) -> list[str]:
    return [_format_number(scores.total.mean), _format_number(scores.total.std), _format_runs(scores.runs)]


#: The extra last column of a CSV whose numbers are not the official MM-Vet metric (official CSVs never have it).
NOTE_COLUMN = "note"


def make_cap_csv_text(model: str, scores: Scores, note: str | None = None) -> str:
    """The official ``*-cap-score-*runs.csv`` text: capabilities, then ``total,std,runs``; one row `model`.
    A `note` (why the numbers are not the official metric) is added as a last ``note`` column."""
    columns = [c.name for c in scores.capabilities] + list(SUMMARY_COLUMNS)
    values = [_format_number(c.mean) for c in scores.capabilities] + _summary_values(scores)
    return _csv_text(model, columns + [NOTE_COLUMN] * bool(note), values + [note] * bool(note))


def make_cap_int_csv_text(model: str, scores: Scores, note: str | None = None) -> str:
    """The official ``*-cap-int-score-*runs.csv`` text: integrations (canonical names), then ``total,std,runs``
    (and `note` as in `make_cap_csv_text`)."""
    columns = [c.name for c in scores.integrations] + list(SUMMARY_COLUMNS)
    values = [_format_number(c.mean) for c in scores.integrations] + _summary_values(scores)
    return _csv_text(model, columns + [NOTE_COLUMN] * bool(note), values + [note] * bool(note))


def write_official_files(out_dir: str | Path, model: str, judge: str, scores: Scores,
                         grade_json: Mapping[str, Any], subset: str | None = None,
                         note: str | None = None) -> dict[str, Path]:
    """Write the grade JSON and both CSVs under `out_dir` (created if needed) with the official file names.

    Returns ``{"grade": path, "cap": path, "cap_int": path}``. The run count in the names is ``scores.n_runs``.
    `note` (numbers that are not the official MM-Vet metric) becomes the CSVs' last ``note`` column.
    """
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    names = official_file_names(model, judge, scores.n_runs, subset)
    paths = {key: out / name for key, name in names.items()}
    write_grade_json(paths["grade"], grade_json)
    paths["cap"].write_text(make_cap_csv_text(model, scores, note), encoding="utf-8")
    paths["cap_int"].write_text(make_cap_int_csv_text(model, scores, note), encoding="utf-8")
    return paths


_NP_FLOAT = re.compile(r"np\.float(?:32|64)\(([^()]*)\)")


def _parse_runs(text: str) -> list[float | None]:
    cleaned = _NP_FLOAT.sub(r"\1", text.strip())  # numpy 2 writes [np.float64(36.1), ...]
    cleaned = re.sub(r"\bnan\b", "None", cleaned)
    try:
        values = ast.literal_eval(cleaned)
    except (ValueError, SyntaxError):
        raise ValueError(f"cannot read runs {text!r}") from None
    if not isinstance(values, (list, tuple)):
        values = [values]
    return [None if v is None else float(v) for v in values]


def _parse_cell(column: str, text: str) -> float | list[float | None] | str | None:
    if column == "runs":
        return _parse_runs(text)
    if column == NOTE_COLUMN:
        return text
    if text.strip() == "" or text.strip().lower() == "nan":
        return None
    try:
        return float(text)
    except ValueError:
        return text


def _unquote(cell: str) -> str:
    """Undo `csv_safe` (a ``'`` in front of a formula character)."""
    return cell[1:] if cell.startswith("'") and cell[1:].startswith(FORMULA_PREFIXES) else cell


def read_official_csv(path: str | Path) -> dict[str, dict[str, Any]]:
    """Read an official (or our) score CSV: row label -> column -> value.

    Numbers become floats, empty cells ``None``, ``runs`` a list of floats. Capability / integration column
    names are normalised to canonical names (``gen_rec_know`` -> ``rec_know_gen``) so files from different hash
    seeds compare equal. Raises `ValueError` for a file without a header row.
    """
    text = Path(path).read_text(encoding="utf-8")
    rows = list(csv.reader(io.StringIO(text)))
    if not rows or len(rows[0]) < 2:
        raise ValueError(f"{path}: not a score CSV (no header row)")
    header = [_unquote(c) for c in rows[0][1:]]
    header = [c if c in SUMMARY_COLUMNS or c == NOTE_COLUMN else integration_name(c.split("_")) for c in header]
    table: dict[str, dict[str, Any]] = {}
    for row in rows[1:]:
        if not row:
            continue
        label, cells = _unquote(row[0]), row[1:]
        table[label] = {col: _parse_cell(col, cell) for col, cell in zip(header, cells)}
    return table
