"""Results files: read every format users have, detect which one it is, and check it against a benchmark.

Its size (over 600 lines) has a reason: one reader per results format users have (about ten), each short, beside
the detection that chooses among them and the validation report they share; splitting them would scatter the
detection's table.

Supported layouts (detected from the content, not the extension):

- ``official-json``: the official ``{"v1_0": "answer", ...}`` (or ``v2_N``) mapping;
- ``llava-jsonl``: LLaVA's answer file, one ``{"question_id": 0, "text": ..., "model_id": ...}`` per line;
- lmms-eval's per-sample logs, in each layout its writer has had:
  ``lmms-eval-json`` (v0.1–v0.2.3: ``{"args": ..., "logs": [{"doc_id", "doc": {...}, "filtered_resps": [..]}]}``),
  ``lmms-eval-jsonl`` (v0.2.4–v0.3: ``*_samples_mmvet.jsonl``, one record with ``doc`` per line),
  ``lmms-eval-jsonl-v0.4`` (v0.4–v0.6: no ``doc``; ``doc_id``, ``target``, ``filtered_resps`` list, ``doc_hash``,
  ``input`` and the task's ``gpt_eval_score`` dict) and ``lmms-eval-jsonl-v0.7`` (v0.7+: ``filtered_resps`` a
  plain string, ``token_counts``);
- VLMEvalKit's prediction tables ``{model}_MMVet.xlsx/.tsv/.csv`` and ``.json`` (``PRED_FORMAT=json``: a list
  of row objects) with ``index`` and ``prediction`` columns, and its graded tables ``{model}_MMVet_{judge}.*``
  (the same plus ``score`` and ``log``).

Predictions are kept exactly as read (no strip, no normalisation): the judge must see what the model wrote.
Bare numeric ids (LLaVA's ``question_id``, lmms-eval's ``doc_id``, VLMEvalKit's ``index``) are kept as ``"0"``,
``"1"``, ... and only mapped to ``f"{benchmark.version}_{n}"`` when checked against a benchmark; where the file
also carries the question text, every mapped id is checked against the benchmark's question, and a file whose
questions do not match is refused (a misaligned index must never be graded).

Grades that a toolkit already wrote into the file (lmms-eval's ``gpt_eval_score.score`` and ``eval_model``,
VLMEvalKit's ``score`` and ``log`` with the judge named in the file name) are read into `ResultsFile.grades`.
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
    "lmms-eval-json": "lmms-eval logs JSON (v0.1–v0.2.3)",
    "lmms-eval-jsonl": "lmms-eval samples JSONL (v0.2.4–v0.3, with doc)",
    "lmms-eval-jsonl-v0.4": "lmms-eval samples JSONL (v0.4–v0.6)",
    "lmms-eval-jsonl-v0.7": "lmms-eval samples JSONL (v0.7+)",
    "vlmevalkit-xlsx": "VLMEvalKit XLSX", "vlmevalkit-tsv": "VLMEvalKit TSV", "vlmevalkit-csv": "VLMEvalKit CSV",
    "vlmevalkit-json": "VLMEvalKit JSON"}
SUPPORTED = ("official JSON {\"v1_0\": \"answer\", ...}, LLaVA answers JSONL (question_id, text), "
             "lmms-eval sample logs (any version: {\"logs\": [...]} JSON or *_samples_mmvet.jsonl), "
             "VLMEvalKit .xlsx/.tsv/.csv/.json (index, prediction; graded tables with score, log)")
#: Whose judge prompt produced the grades a toolkit writes into its files.
GRADER_PROMPTS: dict[str, str] = {
    "lmms-eval": "lmms-eval's MM-Vet prompt (not byte-identical to the official one; max_tokens 128)",
    "vlmevalkit": "VLMEvalKit's MM-Vet prompt (re-wrapped official text; max_tokens 2048)"}
_ID = re.compile(r"v\d+_\d+|\d+", re.ASCII)
_VLMEVALKIT_NAME = re.compile(r"^(?P<model>.+?)_(?P<dataset>MMVet(?:_Hard)?)(?:_(?P<judge>[^/\\]+))?$")
_SHOWN = 10
_ROLE_MARKER = re.compile(r"(?m)^\s*(?:USER|ASSISTANT|Human|Assistant|SYSTEM)\s*:|<\|im_start\|>|\[/?INST\]|"
                          r"<\|(?:user|assistant|system|eot_id|start_header_id)\|>")


class ResultsError(ValueError):
    """A results file cannot be used; the message says what is wrong and what to do."""


@dataclass
class FileGrade:
    """A judge's grade that a toolkit wrote into a results file: the score, the judge model it names (None when
    unknown) and the judge's raw answer or log when the file keeps one."""

    score: float | None
    judge: str | None = None
    content: str | None = None
    failed: bool = False        # the toolkit's own fallback 0.0 (no parsable answer)


@dataclass
class ResultsFile:
    """The predictions of one results file, as read. `predictions` keeps the first occurrence of each id.

    `questions` holds the question text the file carries for an id (checked against the benchmark);
    `prompts` the model's whole input where only that is kept (lmms-eval v0.4+ without a grade: the question
    must appear in it). `id_source` says where the ids came from. `grades` holds grades already in the file
    and `grader` whose prompt made them (a `GRADER_PROMPTS` key)."""

    path: str
    format: str
    predictions: dict[str, object]
    duplicates: list[str] = field(default_factory=list)
    model_name: str | None = None
    questions: dict[str, str] = field(default_factory=dict)
    prompts: dict[str, str] = field(default_factory=dict)
    id_source: str = ""
    grades: dict[str, FileGrade] = field(default_factory=dict)
    grader: str | None = None
    judge_hint: str | None = None   # the judge named by the file name (VLMEvalKit's {model}_MMVet_{judge})
    model_source: str = ""          # where `model_name` comes from ("lmms-eval's model_args in the file", ...)


@dataclass
class _Row:
    sid: str
    prediction: object
    question: str | None = None
    prompt: str | None = None
    grade: FileGrade | None = None
    id_source: str = ""


def _fail(path: Path, message: str) -> ResultsError:
    return ResultsError(f"{path.name}: {message}")


def _norm_id(value: object) -> str | None:
    """A sample id as text: ints and integral floats become ``"12"``; strings are stripped; others are None."""
    if isinstance(value, float) and value.is_integer():
        value = int(value)
    if isinstance(value, (int, str)) and not isinstance(value, bool):
        return str(value).strip() or None
    return None


def _collect(rows, path: Path, fmt: str, model_name: str | None, *, grader: str | None = None,
             judge_hint: str | None = None, model_source: str = "") -> ResultsFile:
    """Build a `ResultsFile` from `_Row`s: first occurrence wins, repeats go to `duplicates`. Without a
    `model_name` from the content, the model is named after the file (``x.answers.jsonl`` -> ``x``)."""
    if model_name:
        source = model_source or "the file"
    else:
        model_name, source = path.stem.removesuffix(".answers"), "the file name"
    found = ResultsFile(str(path), fmt, {}, [], model_name, grader=grader, judge_hint=judge_hint,
                        model_source=source)
    duplicates: dict[str, None] = {}
    sources: dict[str, int] = {}
    for row in rows:
        if row.sid in found.predictions:
            duplicates[row.sid] = None
            continue
        found.predictions[row.sid] = row.prediction
        if row.question is not None:
            found.questions[row.sid] = row.question
        if row.prompt is not None:
            found.prompts[row.sid] = row.prompt
        if row.grade is not None:
            found.grades[row.sid] = row.grade
        if row.id_source:
            sources[row.id_source] = sources.get(row.id_source, 0) + 1
    if not found.predictions:
        raise _fail(path, f"no predictions found in this {FORMAT_LABELS[fmt]} file")
    found.duplicates = list(duplicates)
    found.id_source = "; ".join(sorted(sources, key=lambda k: -sources[k]))
    return found


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


def _text(value: object) -> str | None:
    return value if isinstance(value, str) else None


def _score(value: object) -> float | None:
    """A grade's score as a float; None for a missing, NaN, boolean or non-numeric value."""
    if isinstance(value, bool):
        return None
    if isinstance(value, str):
        try:
            value = float(value)
        except ValueError:
            return None
    if isinstance(value, (int, float)) and value == value:
        return float(value)
    return None


def _llava_rows(records, path: Path):
    for line, rec in records:
        if "text" not in rec or (sid := _norm_id(rec.get("question_id"))) is None:
            raise _fail(path, f"line {line}: a LLaVA answer needs 'question_id' and 'text'")
        yield _Row(sid, rec["text"], prompt=_text(rec.get("prompt")),
                   id_source="question_id (0-based, as the benchmark's v1_N)")


def _lmms_row(rec: object, path: Path, where: str) -> _Row:
    """One lmms-eval sample record of any version. The id comes from ``gpt_eval_score.question_id``, else
    ``doc.question_id``, else ``doc_id`` (its position in the task's dataset, lmms-lab/MMVet: v1_0 ... v1_217)."""
    if not isinstance(rec, dict):
        raise _fail(path, f"{where}: expected an lmms-eval sample object")
    doc = rec.get("doc") if isinstance(rec.get("doc"), dict) else None
    metric = rec.get("gpt_eval_score") if isinstance(rec.get("gpt_eval_score"), dict) else None
    sid = source = None
    if metric is not None and (sid := _norm_id(metric.get("question_id"))) is not None:
        source = "gpt_eval_score.question_id"
    elif doc is not None and (sid := _norm_id(doc.get("question_id"))) is not None:
        source = "doc.question_id"
    elif (sid := _norm_id(rec.get("doc_id"))) is not None and sid.isdigit():
        source = "doc_id (position in lmms-eval's dataset, mapped through the benchmark order)"
    else:
        raise _fail(path, f"{where}: an lmms-eval sample needs doc.question_id (like \"v1_0\"), "
                          "gpt_eval_score.question_id or doc_id")
    pred = _unwrap(rec["filtered_resps"]) if "filtered_resps" in rec else _unwrap(rec.get("resps"))
    if pred is None and metric is not None:
        pred = metric.get("pred_answer")
    question = _text((metric or {}).get("question")) or _text((doc or {}).get("question"))
    grade = None
    if metric is not None and (score := _score(metric.get("score"))) is not None:
        judge = _text(metric.get("eval_model")) or None
        grade = FileGrade(score, judge, None, failed=judge is None and score == 0.0)
    return _Row(sid, pred, question=question, prompt=None if question else _text(rec.get("input")), grade=grade,
                id_source=source)


def _grader(rows: list[_Row], toolkit: str) -> str | None:
    """`toolkit` when some row carries a real grade; otherwise None and the rows' grades are dropped (lmms-eval
    writes ``score: 0.0, eval_model: ""`` for every sample when no judge answered: that file is not graded)."""
    if any(r.grade is not None and not r.grade.failed for r in rows):
        return toolkit
    for r in rows:
        r.grade = None
    return None


def _record_kind(rec: object) -> str | None:
    if not isinstance(rec, dict):
        return None
    if "question_id" in rec and "text" in rec:
        return "llava-jsonl"
    if isinstance(rec.get("doc"), dict):
        return "lmms-eval-jsonl"
    if "doc_id" in rec and ("filtered_resps" in rec or "resps" in rec or "gpt_eval_score" in rec):
        # v0.7 flattened the one-request wrapper: filtered_resps is the answer itself, and token_counts came in
        if isinstance(rec.get("filtered_resps"), str) or "token_counts" in rec:
            return "lmms-eval-jsonl-v0.7"
        return "lmms-eval-jsonl-v0.4"
    return None


#: A folder name that is a digest (Gradio's upload folders are a sha256): never a model's name.
_DIGEST = re.compile(r"[0-9a-fA-F]{32,}")


def _lmms_jsonl_model(path: Path, uploaded: bool) -> tuple[str | None, str]:
    """(model, where from) of lmms-eval's ``<output>/<model>/<date>_samples_<task>.jsonl``: its records name no
    model, but ``<date>_results.json`` beside it does (``model_name``, ``config.model_args``), and the folder is the
    model's sanitised name. An uploaded file has neither (its folder is the server's): (None, "")."""
    if uploaded or "samples_" not in path.stem:
        return None, ""
    if match := re.match(r"(?P<date>.+?)_samples_", path.stem):
        sibling = path.with_name(f"{match['date']}_results.json")
        try:
            if sibling.is_file() and sibling.stat().st_size <= 20_000_000:
                obj = json.loads(sibling.read_text(encoding="utf-8"))
                if isinstance(obj, dict) and (name := _lmms_model(obj)):
                    return name, f"lmms-eval's {sibling.name} beside it"
        except (OSError, ValueError, RecursionError):
            pass
    folder = path.parent.name
    if folder and not _DIGEST.fullmatch(folder):
        return folder, "the folder lmms-eval wrote it in"
    return None, ""


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


def _read_records(records: list[tuple[int, object]], path: Path, uploaded: bool = False) -> ResultsFile:
    kind = _record_kind(records[0][1])
    if kind == "llava-jsonl":
        model = records[0][1].get("model_id")
        return _collect(_llava_rows(records, path), path, kind, model if isinstance(model, str) else None,
                        model_source="LLaVA's model_id in the file")
    if kind and kind.startswith("lmms-eval"):
        model, source = _lmms_jsonl_model(path, uploaded)
        rows = [_lmms_row(rec, path, f"line {line}") for line, rec in records]
        return _collect(rows, path, kind, model, grader=_grader(rows, "lmms-eval"), model_source=source)
    raise _fail(path, f"JSON lines of an unknown layout (keys: {', '.join(map(str, list(records[0][1])[:8]))}); "
                      f"supported formats: {SUPPORTED}")


def _vlmevalkit_names(path: Path) -> tuple[str | None, str | None]:
    """(model, judge) from VLMEvalKit's file names ``{model}_MMVet.xlsx`` / ``{model}_MMVet_{judge}.xlsx``."""
    match = _VLMEVALKIT_NAME.match(path.stem)
    return (match["model"], match["judge"]) if match else (None, None)


def _table_rows(records: list[dict], path: Path, first_row: int):
    """Rows of a VLMEvalKit table (a DataFrame's records or its JSON dump). ``index`` is the sample number;
    ``question`` (when present) is checked against the benchmark; ``score``/``log`` are VLMEvalKit's grades."""
    _, judge = _vlmevalkit_names(path)
    for row, rec in enumerate(records, first_row):
        if not isinstance(rec, dict):
            raise _fail(path, f"row {row}: expected an object with 'index' and 'prediction'")
        if (sid := _norm_id(rec.get("index"))) is None:
            raise _fail(path, f"row {row}: unusable index {rec.get('index')!r}")
        pred = rec.get("prediction")
        pred = None if isinstance(pred, float) and pred != pred else pred      # NaN -> missing
        grade = None
        if "score" in rec and (score := _score(rec["score"])) is not None:
            log = _text(rec.get("log"))
            grade = FileGrade(score, judge, log, failed=bool(log and "retries failed" in log))
        question = _text(rec.get("question"))
        yield _Row(sid, pred, question=question if question and question.strip() else None, grade=grade,
                   id_source="index (0-based, as the benchmark's v1_N)" if sid.isdigit() else "index")


def _read_vlmevalkit_records(records: list, path: Path, fmt: str) -> ResultsFile:
    model, judge = _vlmevalkit_names(path)
    rows = list(_table_rows(records, path, 2 if fmt != "vlmevalkit-json" else 1))
    grader = _grader(rows, "vlmevalkit")
    return _collect(rows, path, fmt, model if model else None, grader=grader, judge_hint=judge if grader else None,
                    model_source="VLMEvalKit's file name {model}_{dataset}")


def _read_json(text: str, path: Path, uploaded: bool = False) -> ResultsFile:
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
            return _read_records(records, path, uploaded)
    doc = _loads(text, path)
    if _record_kind(doc):
        return _read_records([(1, doc)], path, uploaded)
    if isinstance(doc, dict) and isinstance(doc.get("logs"), list):
        rows = [_lmms_row(rec, path, f"logs entry {n}") for n, rec in enumerate(doc["logs"])]
        return _collect(rows, path, "lmms-eval-json", _lmms_model(doc), grader=_grader(rows, "lmms-eval"),
                        model_source="lmms-eval's model arguments in the file")
    if (isinstance(doc, list) and doc and isinstance(doc[0], dict) and "index" in doc[0]
            and "prediction" in doc[0]):
        return _read_vlmevalkit_records(doc, path, "vlmevalkit-json")
    if isinstance(doc, dict) and any(_ID.fullmatch(k.strip()) for k in doc):
        if all(isinstance(v, dict) for v in doc.values()):
            if all("score" in v for v in doc.values()):
                raise _fail(path, "this is a grade file (per-sample judge scores), not a results file: open it "
                                  "with “Open a grade file (no judge call)” in the app, or `aggregate` on the "
                                  "command line; to grade, choose the model's results file ({\"v1_0\": \"answer\", "
                                  "...})")
            raise _fail(path, "every value is an object, not an answer: this looks like benchmark metadata or "
                              "a grade file; choose the model's results file ({\"v1_0\": \"answer\", ...})")
        found = _collect((_Row(k.strip(), v) for k, v in doc.items()), path, "official-json", None)
        found.duplicates = list(dict.fromkeys(doc.repeated + found.duplicates))
        found.id_source = "keys"
        return found
    if isinstance(doc, dict) and isinstance(doc.get("results"), dict) and ("configs" in doc or "versions" in doc):
        raise _fail(path, "this is lmms-eval's aggregated results file (<date>_results.json): it has no "
                          "per-sample answers. Use the <date>_samples_mmvet.jsonl beside it (lmms-eval writes it "
                          "with --log_samples)")
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
            first = text.split("\n", 1)[0]
            header = next(csv.reader([first]), [])
            comma = "prediction" in header or ("\t" not in first and len(header) > 1)
            fmt, sep = ("vlmevalkit-csv", ",") if comma else ("vlmevalkit-tsv", "\t")
            # dtype=str and no NA parsing: an answer "None" or "NA" stays that text, byte for byte
            df = pd.read_csv(io.StringIO(text), sep=sep, dtype=str, keep_default_na=False)
    except ResultsError:
        raise
    except Exception as e:  # pandas/openpyxl raise many types for a broken file
        raise _fail(path, f"cannot read as a table ({type(e).__name__}: {e}); supported formats: {SUPPORTED}")
    columns = [str(c) for c in df.columns]
    if {"Category", "tot", "acc"} <= set(columns):
        raise _fail(path, "this is VLMEvalKit's score summary ({model}_MMVet_{judge}_score.csv), not per-sample "
                          "answers: use {model}_MMVet.xlsx to grade, or {model}_MMVet_{judge}.xlsx to view its "
                          "grades")
    if "index" not in columns or "prediction" not in columns:
        if text is not None and (len(columns) < 2 or text.lstrip().startswith(("#", "|", "<"))
                                 or path.suffix.lower() in (".md", ".markdown", ".txt", ".html", ".rst")):
            kind = "a Markdown or plain-text document" if not text.lstrip().startswith("<") else "an HTML page"
            raise _fail(path, f"this is {kind}, not a results file (no JSON, no table of predictions); "
                              f"supported formats: {SUPPORTED}")
        raise _fail(path, f"a VLMEvalKit table needs 'index' and 'prediction' columns, found: "
                          f"{', '.join(columns[:12]) or 'none'}; supported formats: {SUPPORTED}")
    df.columns = columns
    keep = [c for c in ("index", "prediction", "question", "score", "log") if c in columns]
    records = df[keep].to_dict("records")
    if fmt == "vlmevalkit-xlsx":  # OOXML stores characters XML cannot hold as _xHHHH_ (a "\r" is _x000D_)
        from openpyxl.utils.escape import unescape

        records = [{k: unescape(v) if isinstance(v, str) and "_x" in v else v for k, v in r.items()}
                   for r in records]
    return _read_vlmevalkit_records(records, path, fmt)


def read_results(path: str | Path, *, max_bytes: int = 50_000_000, original_name: str | None = None) -> ResultsFile:
    """Read a results file of any supported format, detected from its content.

    `original_name` is the name an uploaded file had on the visitor's machine (the server keeps it under a
    temporary path): messages and the model name use it, and the file's folder (the server's) is never read or
    used as a name. The model is named from the content where the format records it (LLaVA's ``model_id``,
    lmms-eval's model arguments, or for a samples file the ``_results.json`` beside it or its folder), else
    VLMEvalKit's ``{model}_{dataset}`` file name, else the file name (`ResultsFile.model_source` says which).

    Raises `ResultsError` for a missing, empty or too-large file (over `max_bytes`), text that is neither UTF-8
    nor an .xlsx workbook, malformed JSON (with its line number), JSON nested too deeply, and unknown layouts.
    """
    path = Path(path)
    if not path.is_file():
        raise ResultsError(f"no such results file: {path}")
    found = _read_results(path, max_bytes, original_name)
    found.path = str(path)
    return found


def _read_results(path: Path, max_bytes: int, original_name: str | None) -> ResultsFile:
    uploaded = original_name is not None
    real = path
    if uploaded:       # every name and message says the visitor's file name, never the server's temp path
        shown = re.split(r"[/\\]", original_name)[-1].strip().replace("\x00", "")
        path = path.with_name(shown if shown not in ("", ".", "..") else path.name)
    size = real.stat().st_size
    if size > max_bytes:
        raise _fail(path, f"file is {size:,} bytes, over the limit of {max_bytes:,} bytes; "
                          "is it really a results file?")
    with real.open("rb") as f:
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
        return _read_json(text, path, uploaded)
    return _read_table(data, text, path, max_bytes)


# --------------------------------------------------------------------------------------------------------------
# Checking a results file against a benchmark


def _norm_text(text: str) -> str:
    """Question text for comparison: whitespace runs collapsed, ends stripped, case kept."""
    return " ".join(text.split())


def _ranges(ids: list[str], order: list[str]) -> str:
    """``v1_0–v1_83, v1_112–v1_217``: ids (all in `order`) as runs of consecutive benchmark positions."""
    pos = {sid: n for n, sid in enumerate(order)}
    nums = sorted(pos[i] for i in ids)
    parts, start = [], None
    for k, n in enumerate(nums):
        if start is None:
            start = n
        if k + 1 == len(nums) or nums[k + 1] != n + 1:
            parts.append(order[start] if start == n else f"{order[start]}–{order[n]}")
            start = None
    return ", ".join(parts)


def echo_warnings(predictions: dict[str, object], questions: dict[str, str], *, min_prefix: int = 20) -> list[str]:
    """Warnings for predictions that are not just the model's answer: most of them starting with the same long
    text (a chat template such as ``USER: ... ASSISTANT:`` echoed before the answer), or repeating the question.
    `questions` maps the same ids to the benchmark's question. Pure; an empty list when nothing looks wrong."""
    texts = {sid: p for sid, p in predictions.items() if isinstance(p, str) and p.strip()}
    n = len(texts)
    if n < 5:
        return []
    warnings = []
    heads: dict[str, list[str]] = {}
    for sid, text in texts.items():
        heads.setdefault(text[:min_prefix], []).append(sid)
    head, ids = max(heads.items(), key=lambda kv: len(kv[1]))
    if len(head) >= min_prefix and len(ids) > n / 2:
        prefix = texts[ids[0]]
        for sid in ids[1:]:
            text = texts[sid]
            k = 0
            while k < len(prefix) and k < len(text) and prefix[k] == text[k]:
                k += 1
            prefix = prefix[:k]
        shown = prefix if len(prefix) <= 80 else prefix[:77] + "..."
        warnings.append(f"{len(ids)} of {n} predictions start with the same {len(prefix)} characters "
                        f"{shown!r}: a chat template or prompt echoed before the answer? The judge sees it as "
                        "part of the answer; remove it from the file if it is not the model's answer.")
    marked = [sid for sid, text in texts.items() if _ROLE_MARKER.search(text)]
    if len(marked) > n / 2 and not warnings:
        example = _ROLE_MARKER.search(texts[marked[0]]).group(0)
        warnings.append(f"{len(marked)} of {n} predictions contain chat-template role markup (e.g. {example!r} in "
                        f"{marked[0]}): the prompt echoed into the output? Keep only the model's answer.")
    echoed = [sid for sid, text in texts.items() if sid in questions and len(_norm_text(questions[sid])) >= 10
              and _norm_text(questions[sid]) in _norm_text(text)[: len(_norm_text(questions[sid])) + 200]]
    if len(echoed) > n / 2:
        warnings.append(f"{len(echoed)} of {n} predictions repeat the question (e.g. {echoed[0]}): the model's "
                        "input echoed into its output? Keep only the answer if so.")
    return warnings


@dataclass
class ValidationReport:
    """How a results file covers a benchmark. `ok` means every sample has a usable prediction and no question
    text in the file contradicts the benchmark."""

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
    id_source: str = ""                                 # where the file's ids come from
    questions_checked: int = 0                          # ids whose question text in the file was compared
    question_mismatches: list[str] = field(default_factory=list)
    mismatch_example: str = ""
    warnings: list[str] = field(default_factory=list)   # do not block grading (chat-template echo, ...)
    present: list[str] = field(default_factory=list)    # benchmark ids with a prediction, in benchmark order
    benchmark_ids: list[str] = field(default_factory=list, repr=False)
    benchmark_version: str = ""
    n_graded: int = 0                                   # samples that carry a toolkit's grade
    outside_subset: list[str] = field(default_factory=list)   # ids of the full benchmark, not of the subset
    subset: str | None = None
    model_name: str = ""                                # the model the file names (see `read_results`)
    model_source: str = ""                              # where that name comes from

    @property
    def wrong_benchmark(self) -> bool:
        """True when the file has ids but none of them is a sample of the benchmark."""
        return self.n_ids > 0 and len(self.extra) == self.n_ids

    @property
    def ok(self) -> bool:
        return not self.missing and not self.unusable and not self.question_mismatches

    def wrong_benchmark_hint(self) -> str:
        """What to do when no id matches: name the other MM-Vet version's benchmark when the ids are its ids."""
        versions = {i.split("_", 1)[0] for i in self.extra if re.fullmatch(r"v\d+_\d+", i)}
        if len(versions) == 1 and (other := versions.pop()) != self.benchmark_version:
            if other == "v2":
                return ("wrong benchmark: these are MM-Vet v2 ids; grade against MM-Vet v2 (command line: --benchmark mmvet-v2, or "
                        "the official mm-vet-v2.zip; app: the hub dataset whyu/mm-vet-v2 or that zip)")
            if other == "v1":
                return ("wrong benchmark: these are MM-Vet v1 ids; grade against MM-Vet v1 (command line: --benchmark mmvet-v1; "
                        "app: the bundled MM-Vet v1)")
        return "wrong benchmark?"

    def coverage_line(self) -> str:
        """For an incomplete file: ``holds 28 ids (v1_84–v1_111); 190 missing``, plus the chunk hint when the
        ids it holds are one contiguous slice (a chunk of a multi-GPU run, like LLaVA's ``8_3.jsonl``)."""
        if not self.missing or not self.present:
            return ""
        order = self.benchmark_ids or self.present + self.missing
        line = f"Holds {len(self.present)} ids ({_ranges(self.present, order)}); {len(self.missing)} missing"
        pos = [order.index(i) for i in (self.present[0], self.present[-1])]
        if pos[1] - pos[0] + 1 == len(self.present) and len(self.present) <= 0.75 * len(order):
            line += (" — one chunk of a split run? Concatenate all the chunks into one file first (e.g. "
                     "`cat answers/8_*.jsonl > merged.jsonl` for LLaVA's multi-GPU chunks) and check that one")
        return line

    def summary(self) -> str:
        """Several human lines: format and coverage first, then each problem class with up to 10 ids."""
        label = FORMAT_LABELS.get(self.format, self.format)
        lines = [f"Format: {label} · {self.matched} of {self.n_expected} samples matched"
                 + (" · ready to grade" if self.ok else " · NOT ready to grade")]
        if self.model_name:
            lines.append(f"Model: {self.model_name}" + (f" (from {self.model_source})" if self.model_source else ""))
        if self.id_source and self.id_source != "keys":
            lines.append(f"Ids from: {self.id_source}")
        if self.questions_checked and not self.question_mismatches:
            lines.append(f"Question text checked: all {self.questions_checked} match the benchmark")
        if self.question_mismatches:
            lines.append(f"Questions do NOT match the benchmark for {len(self.question_mismatches)} of "
                         f"{self.questions_checked} checked ids ({', '.join(self.question_mismatches[:_SHOWN])}"
                         f"{' …' if len(self.question_mismatches) > _SHOWN else ''}): the ids are mapped to the "
                         f"wrong samples (a misaligned index?) or the file is for another benchmark; refused. "
                         f"{self.mismatch_example}")
        if self.wrong_benchmark:
            lines.append(f"None of the {self.n_ids} ids match {self.benchmark or 'the benchmark'}"
                         f" — {self.wrong_benchmark_hint()}")
        elif coverage := self.coverage_line():
            lines.append(coverage)
        if self.outside_subset:
            lines.append(f"{len(self.outside_subset)} ids are samples of the full benchmark outside the "
                         f"{str(self.subset).capitalize()} set: not graded here (pick all samples to grade them)")
        if self.n_graded:
            lines.append(f"Already graded: {self.n_graded} samples carry the toolkit's judge score (view them "
                         "without any judge call: 'view a grade file' in the app, or `aggregate` on the command line)")
        for title, ids in (("Missing predictions", self.missing), ("Ids not in the benchmark", self.extra),
                           ("Duplicated ids (first occurrence used)", self.duplicated),
                           ("Unusable predictions (lists/objects)", self.unusable),
                           ("Non-string predictions (numbers converted with str())",
                            [i for i in self.non_string if i not in self.unusable])):
            if not ids:
                continue
            if title == "Missing predictions" and self.benchmark_ids and len(ids) > _SHOWN:
                lines.append(f"{title} ({len(ids)}): {_ranges(ids, self.benchmark_ids)}")
                continue
            more = f" … and {len(ids) - _SHOWN} more" if len(ids) > _SHOWN else ""
            lines.append(f"{title} ({len(ids)}): {', '.join(ids[:_SHOWN])}{more}")
        lines.extend(f"Warning: {w}" for w in self.warnings)
        return "\n".join(lines)

    def to_dict(self) -> dict:
        data = asdict(self)
        data.pop("benchmark_ids")
        return {**data, "ok": self.ok, "wrong_benchmark": self.wrong_benchmark}


def _key(sid: str, benchmark: Benchmark) -> str:
    return f"{benchmark.version}_{int(sid)}" if sid.isascii() and sid.isdigit() else sid


def _resolve(results: ResultsFile, benchmark: Benchmark) -> tuple[dict[str, object], list[str]]:
    """Predictions keyed by benchmark-style ids (``"12"`` -> ``"v1_12"``), and ids duplicated by the mapping."""
    resolved: dict[str, object] = {}
    duplicated = list(results.duplicates)
    for sid, pred in results.predictions.items():
        key = _key(sid, benchmark)
        if key in resolved:
            duplicated.append(key)
        else:
            resolved[key] = pred
    return resolved, list(dict.fromkeys(duplicated))


def resolve_mapping(results: ResultsFile, benchmark: Benchmark, mapping: dict[str, object]) -> dict[str, object]:
    """Any per-id mapping of `results` (questions, grades) keyed like `_resolve` does (first occurrence wins)."""
    out: dict[str, object] = {}
    for sid, value in mapping.items():
        out.setdefault(_key(sid, benchmark), value)
    return out


def _question_check(results: ResultsFile, benchmark: Benchmark) -> tuple[int, list[str], str]:
    """(ids checked, ids whose question contradicts the benchmark, one example) for ids in the benchmark."""
    checked, bad, example = 0, [], ""
    questions = resolve_mapping(results, benchmark, results.questions)
    prompts = resolve_mapping(results, benchmark, results.prompts)
    for sid in benchmark.ids:
        expected = _norm_text(benchmark.samples[sid].question)
        if sid in questions:
            got, ok = str(questions[sid]), _norm_text(str(questions[sid])) == expected
        elif sid in prompts and results.format.startswith("lmms-eval"):
            got, ok = _norm_text(str(prompts[sid])), expected in _norm_text(str(prompts[sid]))
            got = got if len(got) <= 90 else "..." + got[-87:]     # the question ends the model's input
        else:
            continue
        checked += 1
        if not ok:
            bad.append(sid)
            if not example:
                shorten = lambda t: t if len(t) <= 90 else t[:87] + "..."  # noqa: E731
                example = f"E.g. {sid}: the file has {shorten(got)!r}, the benchmark {shorten(expected)!r}."
    return checked, bad, example


def validate_results(results: ResultsFile, benchmark: Benchmark, full: Benchmark | None = None) -> ValidationReport:
    """Compare a results file with a benchmark (or subset). With `full`, the benchmark a subset comes from, ids of
    the full benchmark outside the subset are reported as such (not as ids "not in the benchmark"). Never raises;
    the report says what is wrong."""
    resolved, duplicated = _resolve(results, benchmark)
    outside: list[str] = []
    if full is not None and benchmark.subset_name:
        outside = [i for i in resolved if i not in benchmark.samples and i in full.samples]
    present = [i for i in benchmark.ids if resolved.get(i) is not None]
    non_string = [i for i in present if not isinstance(resolved[i], str)]
    checked, mismatches, example = _question_check(results, benchmark)
    warnings = echo_warnings({i: resolved[i] for i in present},
                             {i: benchmark.samples[i].question for i in present})
    graded = resolve_mapping(results, benchmark, results.grades)
    return ValidationReport(
        format=results.format, n_expected=len(benchmark), matched=len(present),
        missing=[i for i in benchmark.ids if resolved.get(i) is None],
        extra=[i for i in resolved if i not in benchmark.samples and i not in outside], duplicated=duplicated,
        non_string=non_string, benchmark=benchmark.name, n_ids=len(resolved),
        unusable=[i for i in non_string if not isinstance(resolved[i], (int, float))],  # bool is an int
        id_source=results.id_source, questions_checked=checked, question_mismatches=mismatches,
        mismatch_example=example, warnings=warnings, present=present, benchmark_ids=benchmark.ids,
        benchmark_version=benchmark.version, n_graded=sum(i in graded for i in benchmark.ids),
        outside_subset=outside, subset=benchmark.subset_name, model_name=results.model_name or "",
        model_source=results.model_source)


def check_questions(results: ResultsFile, benchmark: Benchmark, report: ValidationReport | None = None) -> None:
    """Raise `ResultsError` when the file's question texts contradict the benchmark (a wrong id mapping)."""
    report = report or validate_results(results, benchmark)
    if report.question_mismatches:
        raise ResultsError(
            f"{Path(results.path).name}: the questions in the file do not match {benchmark.name} for "
            f"{len(report.question_mismatches)} of {report.questions_checked} ids "
            f"({', '.join(report.question_mismatches[:_SHOWN])}"
            f"{' …' if len(report.question_mismatches) > _SHOWN else ''}); ids from {report.id_source or 'the file'} "
            f"would put answers on the wrong samples, so nothing is graded. {report.mismatch_example}")


#: How to grade a file with missing predictions anyway, said where they are refused (the CLI names its flag).
MISSING_HINT = "the command line grades them as empty answers with --allow-missing"


def select_predictions(results: ResultsFile, benchmark: Benchmark, *, allow_missing: bool = False,
                       missing_hint: str = MISSING_HINT) -> dict[str, str]:
    """Prediction text for every benchmark sample, in benchmark order, ready for the judge.

    Strings are passed through byte-exact; numbers and bools become ``str(value)``. Raises `ResultsError` when no
    id matches the benchmark at all, when the file's question texts contradict the benchmark, when predictions
    are missing (unless `allow_missing`, which grades them as ``""``), and when any prediction is a list or
    object.
    """
    report = validate_results(results, benchmark)
    if report.wrong_benchmark:
        raise ResultsError(f"{Path(results.path).name}: none of its {report.n_ids} ids match {benchmark.name} "
                           f"(e.g. {', '.join(report.extra[:3])}) — {report.wrong_benchmark_hint()}")
    check_questions(results, benchmark, report)
    if report.missing and not allow_missing:
        raise ResultsError(f"{Path(results.path).name}: {len(report.missing)} of {len(benchmark)} samples have no "
                           f"prediction ({_ranges(report.missing, benchmark.ids)}); "
                           + (f"{report.coverage_line()[0].lower()}{report.coverage_line()[1:]}; "
                              if report.coverage_line() else "")
                           + missing_hint)
    if report.unusable:
        raise ResultsError(f"{Path(results.path).name}: predictions must be text, but these are lists or objects: "
                           f"{', '.join(report.unusable[:_SHOWN])}")
    resolved, _ = _resolve(results, benchmark)
    texts = {i: resolved.get(i) for i in benchmark.ids}
    return {i: "" if p is None else p if isinstance(p, str) else str(p) for i, p in texts.items()}
