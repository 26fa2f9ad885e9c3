"""Grade files from anywhere, read for viewing without a single judge call.

Three kinds of files already hold a judge's per-sample scores:

* official grade JSONs ``{model}_{judge}-grade-{N}runs.json`` (the official evaluator's, and ours);
* VLMEvalKit's graded tables ``{model}_MMVet_{judge}.xlsx`` (also ``.tsv``, ``.csv``, ``.json``): its prediction
  table plus ``score`` (0–1) and ``log`` columns, the judge named only by the file name;
* lmms-eval sample logs whose records carry ``gpt_eval_score`` with ``score`` and ``eval_model`` (every layout,
  v0.1 to v0.7+).

`read_grade_file` turns any of them into a `GradeSet` keyed by the benchmark's ids, with the judge of every grade
and whether the numbers are **the official MM-Vet metric**: only the official prompt (the official evaluator's,
or ours, which is byte-identical) with the official judge ``gpt-4-0613`` is. ``gpt-4`` counts as that judge: it is
what the official evaluator recorded when it called the ``gpt-4`` alias, which pointed at ``gpt-4-0613`` from
June 2023 (LLaVA-1.5's published grade files say ``gpt-4``). lmms-eval's prompt and VLMEvalKit's prompt differ from
the official one (and both default to other judges), so their grades are never labelled official.
"""
from __future__ import annotations

import json
import re
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

from ..inputs.benchmark import Benchmark
from .export import GradeFileError, load_official_grades
from ..inputs.results import (FORMAT_LABELS, GRADER_PROMPTS, ResultsError, check_questions, read_results,
                              resolve_mapping, validate_results)

#: Judge models whose grades, with the official prompt, are the official MM-Vet metric.
OFFICIAL_JUDGES: tuple[str, ...] = ("gpt-4-0613", "gpt-4")
#: The official grade file name: ``{model}_{judge}-grade-{N}runs.json`` (the judge name has no underscore).
OFFICIAL_GRADE_NAME = re.compile(r"^(?P<model>.+)_(?P<judge>[^_]+)-grade-(?P<runs>\d+)runs\.json$")
SOURCE_LABELS: dict[str, str] = {"official-grade-json": "official grade JSON"}
PROMPT_LABELS: dict[str, str] = {"official": "the official MM-Vet prompt", **GRADER_PROMPTS}


def is_official_judge(model: str | None) -> bool:
    return model in OFFICIAL_JUDGES


def judges_compatible(reported: str, wanted: str) -> bool:
    """True when a grade by `reported` may stand for a grade by `wanted`: the same model, a dated version of
    it (``gpt-4o`` -> ``gpt-4o-2024-08-06``), or both official (``gpt-4`` and ``gpt-4-0613``)."""
    return reported == wanted or reported.startswith(wanted + "-") or (
        is_official_judge(reported) and is_official_judge(wanted))


def source_label(source: str) -> str:
    return SOURCE_LABELS.get(source) or FORMAT_LABELS.get(source, source)


@dataclass
class GradeSet:
    """Per-sample grades of one file, keyed by benchmark id, with their judges and their provenance.

    `scores[id]` has one score per run (``None`` where a run is not graded); `judges` and `contents` run alongside
    (``None`` when unknown). `failed` marks the toolkit's own 0.0 fallback (no parsable judge answer).
    `predictions` holds the answers the grades were made for, where the file records them. `prompt` is a
    `PROMPT_LABELS` key."""

    path: str
    source: str
    n_runs: int
    scores: dict[str, list[float | None]]
    judges: dict[str, list[str | None]]
    contents: dict[str, list[str | None]]
    failed: dict[str, list[bool]]
    prompt: str
    model_name: str
    judge_name: str
    predictions: dict[str, str] = field(default_factory=dict)
    id_source: str = ""
    notes: list[str] = field(default_factory=list)

    def judge_counts(self) -> dict[str, int]:
        """Graded (sample, run) pairs per judge model, most used first (``"unknown"`` when not recorded)."""
        counts = Counter(j or "unknown" for sid, row in self.judges.items()
                         for j, s in zip(row, self.scores[sid]) if s is not None)
        return dict(counts.most_common())

    @property
    def mixed(self) -> bool:
        return len(self.judge_counts()) > 1

    @property
    def official_metric(self) -> bool:
        counts = self.judge_counts()
        return self.prompt == "official" and bool(counts) and all(is_official_judge(j) for j in counts)

    def judge_text(self) -> str:
        """``gpt-4-0613``, or ``mixed judges: 113 grades by gpt-4-0613, 105 by gpt-4-turbo-2024-04-09``."""
        counts = self.judge_counts()
        if len(counts) <= 1:
            return next(iter(counts), "unknown")
        parts = [f"{n} grades by {j}" if k == 0 else f"{n} by {j}" for k, (j, n) in enumerate(counts.items())]
        return "mixed judges: " + ", ".join(parts)

    def metric_note(self) -> str | None:
        """None for the official MM-Vet metric; otherwise why these numbers are not it (shown with every score)."""
        if self.official_metric:
            return None
        why = []
        if self.prompt != "official":
            why.append(f"graded with {PROMPT_LABELS.get(self.prompt, self.prompt)}")
        if self.mixed:
            why.append(self.judge_text())
        elif not all(is_official_judge(j) for j in self.judge_counts()):
            why.append(f"judge {self.judge_text()}")
        return "NOT the official MM-Vet metric (" + "; ".join(why) + "; the official metric is gpt-4-0613 with " \
            "the official prompt)"

    def judge_info(self) -> dict:
        """What a run built from this file stores beside its judge settings (see `runs.create_grade_view`)."""
        return {"imported_from": source_label(self.source), "prompt": self.prompt,
                "judge_counts": self.judge_counts(), "judge_text": self.judge_text(),
                "official_metric": self.official_metric, "metric_note": self.metric_note()}


def _official_names(path: Path) -> tuple[str | None, str | None]:
    match = OFFICIAL_GRADE_NAME.match(path.name)
    return (match["model"], match["judge"]) if match else (None, None)


def _looks_like_grade_json(path: Path, max_bytes: int) -> dict | None:
    """The parsed object when `path` is an official grade JSON (an object of objects with ``score``)."""
    if path.stat().st_size > max_bytes:
        raise GradeFileError(f"{path.name}: file is over the limit of {max_bytes:,} bytes")
    head = path.open("rb").read(1)
    if head not in (b"{", b" ", b"\n", b"\r", b"\t", b"\xef"):
        return None
    try:
        obj = json.loads(path.read_bytes().decode("utf-8-sig"))
    except (ValueError, RecursionError, UnicodeDecodeError):
        return None
    if isinstance(obj, dict) and obj and all(isinstance(v, dict) and "score" in v for v in obj.values()):
        return obj
    return None


def _from_official(path: Path, obj: dict, benchmark: Benchmark) -> GradeSet:
    grades = load_official_grades(obj, allow_partial=True)
    known = [sid for sid in benchmark.ids if sid in grades.scores]
    if not known:
        versions = sorted({s.split("_", 1)[0] for s in grades.scores if "_" in s})
        hint = f" (its ids are {', '.join(versions)} ids: use --benchmark mmvet-v2 or the v2 benchmark)" \
            if versions == ["v2"] and benchmark.version != "v2" else ""
        raise GradeFileError(f"{path.name}: none of its {len(grades.scores)} ids belong to {benchmark.name}{hint}")
    scores, judges, contents, failed, preds = {}, {}, {}, {}, {}
    for sid in known:
        entry = grades.raw[sid]
        n = grades.n_runs
        models = list(entry.get("model") or [])
        texts = list(entry.get("content") or [])
        scores[sid] = grades.scores[sid]
        judges[sid] = [m if isinstance(m, str) else None for m in models] + [None] * (n - len(models))
        contents[sid] = [t if isinstance(t, str) else None for t in texts] + [None] * (n - len(texts))
        failed[sid] = [False] * n
        if isinstance(entry.get("prediction"), str):      # our own exports record what was graded
            preds[sid] = entry["prediction"]
    model, judge = _official_names(path)
    gs = GradeSet(str(path), "official-grade-json", grades.n_runs, scores, judges, contents, failed, "official",
                  model or path.stem, judge or "", preds, "keys")
    if not judge:
        gs.judge_name = _file_judge(gs)
    ignored = len(grades.scores) - len(known)
    if ignored:
        gs.notes.append(f"{ignored} ids of the file are not in {benchmark.name} and are ignored")
    return gs


def _file_judge(gs: GradeSet) -> str:
    counts = gs.judge_counts()
    return "mixed-judges" if len(counts) > 1 else next(iter(counts), "judge")


def _from_results(path: Path, benchmark: Benchmark, max_bytes: int) -> GradeSet:
    try:
        results = read_results(path, max_bytes=max_bytes)
    except ResultsError as e:
        raise GradeFileError(str(e)) from None
    if not results.grades:
        raise GradeFileError(f"{path.name}: a {FORMAT_LABELS.get(results.format, results.format)} file without "
                             "grades (no judge scores in it): grade it instead of viewing it")
    report = validate_results(results, benchmark)
    if report.wrong_benchmark:
        raise GradeFileError(f"{path.name}: none of its {report.n_ids} ids match {benchmark.name} — "
                             f"{report.wrong_benchmark_hint()}")
    try:
        check_questions(results, benchmark, report)
    except ResultsError as e:
        raise GradeFileError(str(e)) from None
    grades = resolve_mapping(results, benchmark, results.grades)
    preds = resolve_mapping(results, benchmark, results.predictions)
    scores, judges, contents, failed, predictions = {}, {}, {}, {}, {}
    for sid in benchmark.ids:
        g = grades.get(sid)
        if g is None:
            continue
        scores[sid] = [g.score]
        judges[sid] = [g.judge or results.judge_hint]
        contents[sid] = [g.content]
        failed[sid] = [g.failed]
        if isinstance(preds.get(sid), str):
            predictions[sid] = preds[sid]
    if not scores:
        raise GradeFileError(f"{path.name}: none of its graded ids belong to {benchmark.name}")
    gs = GradeSet(str(path), results.format, 1, scores, judges, contents, failed, results.grader or "unknown",
                  results.model_name or path.stem, results.judge_hint or "", predictions, results.id_source)
    if not gs.judge_name:
        gs.judge_name = _file_judge(gs)
    if results.format.startswith("vlmevalkit") and not results.judge_hint:
        gs.notes.append("the judge is not named: VLMEvalKit names it only in the file name {model}_MMVet_{judge}")
    return gs


def read_grade_file(path: str | Path, benchmark: Benchmark, *, max_bytes: int = 50_000_000) -> GradeSet:
    """Read grades from an official grade JSON, a VLMEvalKit graded table or a graded lmms-eval log.

    Ids are checked against `benchmark` (numeric ids through its order, with the question text cross-checked
    where the file has it). Raises `GradeFileError` (a `ValueError`) with a message for the user when the file
    has no grades, does not belong to the benchmark, or maps ids to the wrong questions.
    """
    path = Path(path)
    if not path.is_file():
        raise GradeFileError(f"no such grade file: {path}")
    if path.suffix.lower() == ".zip":
        return _from_zip(path, benchmark, max_bytes)
    obj = _looks_like_grade_json(path, max_bytes)
    if obj is not None:
        try:
            return _from_official(path, obj, benchmark)
        except GradeFileError as e:
            raise GradeFileError(str(e) if str(e).startswith(path.name) else f"{path.name}: {e}") from None
    return _from_results(path, benchmark, max_bytes)


def _from_zip(path: Path, benchmark: Benchmark, max_bytes: int) -> GradeSet:
    """The official grade JSON inside a zip as the MM-Vet Space (and the official evaluator's users) hand it out:
    the one entry named ``{model}_{judge}-grade-{N}runs.json`` (in any folder of the zip; the CSVs beside it are
    recomputed, not read), extracted safely (`archive`) and read as it comes."""
    import tempfile

    from ..inputs.archive import ArchiveError, check_zip, entry_name, safe_extract_zip

    try:
        infos = check_zip(path)
    except ArchiveError as e:
        raise GradeFileError(f"{path.name}: {e}") from None
    grades = [i for i in infos if not i.is_dir() and OFFICIAL_GRADE_NAME.match(entry_name(i).rsplit("/", 1)[-1])]
    if len(grades) != 1:
        raise GradeFileError(f"{path.name}: a zip of grades holds exactly one official grade file "
                             f"{{model}}_{{judge}}-grade-{{N}}runs.json; this one holds {len(grades)}")
    name = entry_name(grades[0]).rsplit("/", 1)[-1]
    with tempfile.TemporaryDirectory(prefix="grade-zip-") as tmp:
        try:
            safe_extract_zip(path, tmp, only={entry_name(grades[0]): name})
        except ArchiveError as e:
            raise GradeFileError(f"{path.name}: {e}") from None
        inner = Path(tmp) / name
        obj = _looks_like_grade_json(inner, max_bytes)
        if obj is None:
            raise GradeFileError(f"{path.name}: {name} is not an official grade file")
        gs = _from_official(inner, obj, benchmark)
    gs.path = str(path)
    gs.notes.append(f"read from {name} inside {path.name}")
    return gs


def missing_ids(scores: dict[str, list[float | None]], benchmark: Benchmark, n_runs: int | None = None) -> list[str]:
    """The benchmark's ids (in its order) that lack a grade in at least one of `n_runs` runs (default: the longest
    score list): absent from `scores`, or ``None`` in some run.

    >>> from mmvet_core.inputs.benchmark import load_bundled_v1
    >>> b = load_bundled_v1()
    >>> missing_ids({sid: [1.0] for sid in b.ids if sid != "v1_145"}, b)
    ['v1_145']
    """
    n = max((len(v) for v in scores.values()), default=0) if n_runs is None else n_runs
    return [sid for sid in benchmark.ids
            if len(scores.get(sid) or ()) < n or any(s is None for s in (scores.get(sid) or ())[:n])]


def missing_text(missing: list[str], benchmark: Benchmark) -> str:
    """``no grade for 1 of 218 samples of MM-Vet v1 (v1_145)``; long lists as ranges of benchmark positions."""
    from ..inputs.results import _ranges

    shown = ", ".join(missing) if len(missing) <= 10 else _ranges(missing, benchmark.ids)
    return f"no grade for {len(missing)} of {len(benchmark)} samples of {benchmark.name} ({shown})"
