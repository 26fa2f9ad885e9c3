"""Results files: read every format users have, detect which one it is, and check it against a benchmark.

Supported layouts (detected from the content, not the extension):

- ``official-json``: the official ``{"v1_0": "answer", ...}`` (or ``v2_N``) mapping;
- ``llava-jsonl``: LLaVA's answer file, one ``{"question_id": 0, "text": ..., "model_id": ...}`` per line;
- ``lmms-eval-jsonl``: lmms-eval's ``*_samples_mmvet.jsonl``, one ``{"doc": {"question_id": "v1_0"},
  "filtered_resps": [...]}`` per line; ``lmms-eval-json``: its older ``{"logs": [...]}`` file of the same objects;
- ``vlmevalkit-xlsx`` / ``-tsv`` / ``-csv``: VLMEvalKit's tables with ``index`` and ``prediction`` columns.

Predictions are kept exactly as read (no strip, no normalisation): the judge must see what the model wrote.
Bare numeric ids (LLaVA's ``question_id``, VLMEvalKit's ``index``) are kept as ``"0"``, ``"1"``, ... and only
mapped to ``f"{benchmark.version}_{n}"`` when checked against a benchmark.
"""
from __future__ import annotations

import csv
import io
import json
import re
import zipfile
from dataclasses import asdict, dataclass, field
from pathlib import Path

from .benchmark import Benchmark

FORMAT_LABELS: dict[str, str] = {
    "official-json": "official JSON", "llava-jsonl": "LLaVA answers JSONL",
    "lmms-eval-jsonl": "lmms-eval samples JSONL", "lmms-eval-json": "lmms-eval logs JSON",
    "vlmevalkit-xlsx": "VLMEvalKit XLSX", "vlmevalkit-tsv": "VLMEvalKit TSV", "vlmevalkit-csv": "VLMEvalKit CSV"}
SUPPORTED = ("official JSON {\"v1_0\": \"answer\", ...}, LLaVA answers JSONL (question_id, text), "
             "lmms-eval samples JSONL or {\"logs\": [...]} JSON, VLMEvalKit .xlsx/.tsv/.csv (index, prediction)")
_ID = re.compile(r"v\d+_\d+|\d+", re.ASCII)
_SHOWN = 10


class ResultsError(ValueError):
    """A results file cannot be used; the message says what is wrong and what to do."""


@dataclass
class ResultsFile:
    """The predictions of one results file, as read. `predictions` keeps the first occurrence of each id."""

    path: str
    format: str
    predictions: dict[str, object]
    duplicates: list[str] = field(default_factory=list)
    model_name: str | None = None


def _fail(path: Path, message: str) -> ResultsError:
    return ResultsError(f"{path.name}: {message}")


def _norm_id(value: object) -> str | None:
    """A sample id as text: ints and integral floats become ``"12"``; strings are stripped; others are None."""
    if isinstance(value, float) and value.is_integer():
        value = int(value)
    if isinstance(value, (int, str)) and not isinstance(value, bool):
        return str(value).strip() or None
    return None


def _collect(pairs, path: Path, fmt: str, model_name: str | None) -> ResultsFile:
    """Build a `ResultsFile` from (id, prediction) pairs: first occurrence wins, repeats go to `duplicates`."""
    predictions: dict[str, object] = {}
    duplicates: dict[str, None] = {}
    for sid, pred in pairs:
        if sid in predictions:
            duplicates[sid] = None
        else:
            predictions[sid] = pred
    if not predictions:
        raise _fail(path, f"no predictions found in this {FORMAT_LABELS[fmt]} file")
    return ResultsFile(str(path), fmt, predictions, list(duplicates), model_name or path.stem)


def _loads(text: str, path: Path, line: int | None = None) -> object:
    """`json.loads` whose every failure (syntax, too-deep nesting, huge ints) is a `ResultsError`."""
    where = f"line {line}: " if line is not None else ""
    try:
        return json.loads(text, strict=False, object_pairs_hook=_FirstWins)
    except json.JSONDecodeError as e:
        where = f"line {line if line is not None else e.lineno}, column {e.colno}: "
        raise _fail(path, f"malformed JSON at {where}{e.msg}") from None
    except RecursionError:  # the C decoder is bounded by the recursion limit; say so instead of crashing
        raise _fail(path, f"{where}JSON nested too deeply to be a results file") from None
    except ValueError as e:  # e.g. an integer longer than Python's 4300-digit limit
        raise _fail(path, f"malformed JSON: {where}{e}") from None


class _FirstWins(dict):
    """A JSON object keeping the first value of a repeated key (json keeps the last) and remembering repeats."""

    def __init__(self, pairs):
        super().__init__()
        self.repeated: list[str] = []
        for key, value in pairs:
            if key in self:
                self.repeated.append(key)
            else:
                self[key] = value


def _unwrap(value: object) -> object:
    """lmms-eval responses: ``"text"``, ``["text"]`` or ``[["text"]]`` -> ``"text"``; empty -> None."""
    while isinstance(value, list):
        value = value[0] if value else None
    return value


def _llava_pairs(records, path: Path):
    for line, rec in records:
        if "text" not in rec or (sid := _norm_id(rec.get("question_id"))) is None:
            raise _fail(path, f"line {line}: a LLaVA answer needs 'question_id' and 'text'")
        yield sid, rec["text"]


def _lmms_pairs(records, path: Path, where: str = "line"):
    for line, rec in records:
        doc = rec.get("doc") if isinstance(rec, dict) else None
        if (sid := _norm_id(doc.get("question_id", rec.get("doc_id")) if isinstance(doc, dict) else None)) is None:
            raise _fail(path, f"{where} {line}: an lmms-eval sample needs doc.question_id (like \"v1_0\")")
        yield sid, _unwrap(rec.get("filtered_resps", rec.get("resps")))


def _record_kind(rec: object) -> str | None:
    if isinstance(rec, dict) and "question_id" in rec and "text" in rec:
        return "llava-jsonl"
    if isinstance(rec, dict) and isinstance(rec.get("doc"), dict):
        return "lmms-eval-jsonl"
    return None


def _lmms_model(obj: dict) -> str | None:
    """lmms-eval's model name from a logs file: ``model_name``, else ``pretrained=`` of its model args, else
    the model class name, looked up at the top level and in ``config`` / ``args`` / ``model_configs``."""
    subs = [d for d in (obj, *(obj.get(k) for k in ("config", "args", "model_configs"))) if isinstance(d, dict)]
    for sub in subs:
        for key in ("model_name", "pretrained"):
            if isinstance(sub.get(key), str) and sub[key]:
                return sub[key]
        if match := re.search(r"pretrained=([^,]+)", str(sub.get("model_args", ""))):
            return match.group(1)
    return next((d["model"] for d in subs if isinstance(d.get("model"), str) and d["model"]), None)


def _read_records(records: list[tuple[int, object]], path: Path) -> ResultsFile:
    kind = _record_kind(records[0][1])
    if kind == "llava-jsonl":
        model = records[0][1].get("model_id")
        return _collect(_llava_pairs(records, path), path, kind, model if isinstance(model, str) else None)
    if kind == "lmms-eval-jsonl":
        # lmms-eval writes <output>/<model>/<date>_samples_mmvet.jsonl: the folder is the best model hint
        model = path.parent.name if "samples_" in path.stem and path.parent.name else None
        return _collect(_lmms_pairs(records, path), path, kind, model)
    raise _fail(path, f"JSON lines of an unknown layout (keys: {', '.join(map(str, list(records[0][1])[:8]))}); "
                      f"supported formats: {SUPPORTED}")


def _read_json(text: str, path: Path) -> ResultsFile:
    lines = [(n, s) for n, s in enumerate(text.split("\n"), 1) if s.strip()]  # not splitlines: keeps U+2028
    if len(lines) > 1 and lines[0][1].lstrip().startswith("{"):
        try:
            first = json.loads(lines[0][1], strict=False)
        except (ValueError, RecursionError):
            first = None
        if isinstance(first, dict):  # a complete object on line 1 of several: JSON lines
            records = [(n, _loads(s, path, n)) for n, s in lines]
            bad = next((n for n, r in records if not isinstance(r, dict)), None)
            if bad is not None:
                raise _fail(path, f"line {bad}: expected a JSON object per line")
            return _read_records(records, path)
    doc = _loads(text, path)
    if _record_kind(doc):
        return _read_records([(1, doc)], path)
    if isinstance(doc, dict) and isinstance(doc.get("logs"), list):
        pairs = _lmms_pairs(enumerate(doc["logs"]), path, where="logs entry")
        return _collect(pairs, path, "lmms-eval-json", _lmms_model(doc))
    if isinstance(doc, dict) and any(_ID.fullmatch(k.strip()) for k in doc):
        if all(isinstance(v, dict) for v in doc.values()):
            raise _fail(path, "every value is an object, not an answer: this looks like benchmark metadata or "
                              "a grade file; choose the model's results file ({\"v1_0\": \"answer\", ...})")
        found = _collect(((k.strip(), v) for k, v in doc.items()), path, "official-json", None)
        found.duplicates = list(dict.fromkeys(doc.repeated + found.duplicates))
        return found
    raise _fail(path, f"unknown JSON layout; supported formats: {SUPPORTED}")


def _read_table(data: bytes, text: str | None, path: Path, max_bytes: int) -> ResultsFile:
    import pandas as pd  # heavy; only tables need it

    try:
        if text is None:
            sizes = sum(i.file_size for i in zipfile.ZipFile(io.BytesIO(data)).infolist())
            if sizes > 10 * max_bytes:  # bound what a small compressed workbook may expand to
                raise _fail(path, f"workbook expands to {sizes:,} bytes, over the {10 * max_bytes:,}-byte limit")
            fmt = "vlmevalkit-xlsx"
            df = pd.read_excel(io.BytesIO(data), dtype=object, keep_default_na=False)
        else:
            header = next(csv.reader([text.split("\n", 1)[0]]), [])
            fmt, sep = ("vlmevalkit-csv", ",") if "prediction" in header else ("vlmevalkit-tsv", "\t")
            # dtype=str and no NA parsing: an answer "None" or "NA" stays that text, byte for byte
            df = pd.read_csv(io.StringIO(text), sep=sep, dtype=str, keep_default_na=False)
    except ResultsError:
        raise
    except Exception as e:  # pandas/openpyxl raise many types for a broken file
        raise _fail(path, f"cannot read as a table ({type(e).__name__}: {e}); supported formats: {SUPPORTED}")
    columns = [str(c) for c in df.columns]
    if "index" not in columns or "prediction" not in columns:
        raise _fail(path, f"a VLMEvalKit table needs 'index' and 'prediction' columns, found: "
                          f"{', '.join(columns[:12]) or 'none'}; supported formats: {SUPPORTED}")
    pairs = []
    for row, (raw, pred) in enumerate(zip(df["index"].tolist(), df["prediction"].tolist()), 2):
        if (sid := _norm_id(raw)) is None:
            raise _fail(path, f"row {row}: unusable index {raw!r}")
        pairs.append((sid, None if isinstance(pred, float) and pred != pred else pred))  # NaN -> missing
    return _collect(pairs, path, fmt, None)


def read_results(path: str | Path, *, max_bytes: int = 50_000_000) -> ResultsFile:
    """Read a results file of any supported format, detected from its content.

    Raises `ResultsError` for a missing, empty or too-large file (over `max_bytes`), text that is neither UTF-8
    nor an .xlsx workbook, malformed JSON (with its line number), JSON nested too deeply, and unknown layouts.
    """
    path = Path(path)
    if not path.is_file():
        raise ResultsError(f"no such results file: {path}")
    size = path.stat().st_size
    if size > max_bytes:
        raise _fail(path, f"file is {size:,} bytes, over the limit of {max_bytes:,} bytes; "
                          "is it really a results file?")
    with path.open("rb") as f:
        data = f.read(max_bytes + 1)
    if len(data) > max_bytes:  # grew since stat()
        raise _fail(path, f"file is over the limit of {max_bytes:,} bytes")
    if data.startswith(b"PK\x03\x04"):  # a zip: an .xlsx workbook whatever its name
        return _read_table(data, None, path, max_bytes)
    try:
        text = data.decode("utf-8-sig")  # bytes, not read_text: no newline translation inside predictions
    except UnicodeDecodeError as e:
        raise _fail(path, f"not UTF-8 text (byte {e.start}) nor an .xlsx workbook; "
                          f"supported formats: {SUPPORTED}") from None
    if not text.strip():
        raise _fail(path, "file is empty")
    if text.lstrip()[0] in "{[":
        return _read_json(text, path)
    return _read_table(data, text, path, max_bytes)


@dataclass
class ValidationReport:
    """How a results file covers a benchmark. `ok` means every sample has a usable prediction."""

    format: str
    n_expected: int
    matched: int
    missing: list[str]
    extra: list[str]
    duplicated: list[str]
    non_string: list[str]
    benchmark: str = ""
    n_ids: int = 0           # distinct ids in the file (after mapping bare numbers)
    unusable: list[str] = field(default_factory=list)   # non-string predictions that are lists/objects

    @property
    def wrong_benchmark(self) -> bool:
        """True when the file has ids but none of them is a sample of the benchmark."""
        return self.n_ids > 0 and len(self.extra) == self.n_ids

    @property
    def ok(self) -> bool:
        return not self.missing and not self.unusable

    def summary(self) -> str:
        """Several human lines: format and coverage first, then each problem class with up to 10 ids."""
        label = FORMAT_LABELS.get(self.format, self.format)
        lines = [f"Format: {label} · {self.matched} of {self.n_expected} samples matched"
                 + (" · ready to grade" if self.ok else " · NOT ready to grade")]
        if self.wrong_benchmark:
            lines.append(f"None of the {self.n_ids} ids match {self.benchmark or 'the benchmark'}"
                         " — wrong benchmark?")
        for title, ids in (("Missing predictions", self.missing), ("Ids not in the benchmark", self.extra),
                           ("Duplicated ids (first occurrence used)", self.duplicated),
                           ("Unusable predictions (lists/objects)", self.unusable),
                           ("Non-string predictions (numbers converted with str())",
                            [i for i in self.non_string if i not in self.unusable])):
            if ids:
                more = f" … and {len(ids) - _SHOWN} more" if len(ids) > _SHOWN else ""
                lines.append(f"{title} ({len(ids)}): {', '.join(ids[:_SHOWN])}{more}")
        return "\n".join(lines)

    def to_dict(self) -> dict:
        return {**asdict(self), "ok": self.ok, "wrong_benchmark": self.wrong_benchmark}


def _resolve(results: ResultsFile, benchmark: Benchmark) -> tuple[dict[str, object], list[str]]:
    """Predictions keyed by benchmark-style ids (``"12"`` -> ``"v1_12"``), and ids duplicated by the mapping."""
    resolved: dict[str, object] = {}
    duplicated = list(results.duplicates)
    for sid, pred in results.predictions.items():
        key = f"{benchmark.version}_{int(sid)}" if sid.isascii() and sid.isdigit() else sid
        if key in resolved:
            duplicated.append(key)
        else:
            resolved[key] = pred
    return resolved, list(dict.fromkeys(duplicated))


def validate_results(results: ResultsFile, benchmark: Benchmark) -> ValidationReport:
    """Compare a results file with a benchmark (or subset). Never raises; the report says what is wrong."""
    resolved, duplicated = _resolve(results, benchmark)
    present = [i for i in benchmark.ids if resolved.get(i) is not None]
    non_string = [i for i in present if not isinstance(resolved[i], str)]
    return ValidationReport(
        format=results.format, n_expected=len(benchmark), matched=len(present),
        missing=[i for i in benchmark.ids if resolved.get(i) is None],
        extra=[i for i in resolved if i not in benchmark.samples], duplicated=duplicated,
        non_string=non_string, benchmark=benchmark.name, n_ids=len(resolved),
        unusable=[i for i in non_string if not isinstance(resolved[i], (int, float))])  # bool is an int


def select_predictions(results: ResultsFile, benchmark: Benchmark, *,
                       allow_missing: bool = False) -> dict[str, str]:
    """Prediction text for every benchmark sample, in benchmark order, ready for the judge.

    Strings are passed through byte-exact; numbers and bools become ``str(value)``. Raises `ResultsError` when no
    id matches the benchmark at all, when predictions are missing (unless `allow_missing`, which grades them as
    ``""``), and when any prediction is a list or object.
    """
    report = validate_results(results, benchmark)
    if report.wrong_benchmark:
        raise ResultsError(f"{Path(results.path).name}: none of its {report.n_ids} ids match {benchmark.name} "
                           f"(e.g. {', '.join(report.extra[:3])}) — wrong benchmark?")
    if report.missing and not allow_missing:
        shown = ", ".join(report.missing[:_SHOWN]) + (" …" if len(report.missing) > _SHOWN else "")
        raise ResultsError(f"{Path(results.path).name}: {len(report.missing)} of {len(benchmark)} samples have no "
                           f"prediction ({shown}); use the allow-missing option to grade them as empty answers")
    if report.unusable:
        raise ResultsError(f"{Path(results.path).name}: predictions must be text, but these are lists or objects: "
                           f"{', '.join(report.unusable[:_SHOWN])}")
    resolved, _ = _resolve(results, benchmark)
    texts = {i: resolved.get(i) for i in benchmark.ids}
    return {i: "" if p is None else p if isinstance(p, str) else str(p) for i, p in texts.items()}
