"""Load grade sets to compare: a run in the store, an official grade JSON, human scores, several pooled as one.

A *spec* names a grade set the way the CLI takes it:

* a path to an official grade JSON (``{"v1_0": {"model": [...], "content": [...], "score": [...]}, ...}``), ours or
  the official evaluator's;
* a path to human scores ``{"v1_0": 1.0, "v1_3": 0.5, ...}`` (or a list of per-run scores per id): a ``human`` set
  on the annotated samples only;
* a run id in the store (``run:ID`` or just ``ID`` when no such file exists);
* ``human:RUN_ID``: the manual scores (overrides) of a run, as human scores;
* ``judge:RUN_ID``: a run's judge grades alone, without its human overrides (``run:ID`` applies them, and its note
  says how many);
* several specs joined by ``+`` (``a.json+b.json``): their runs pooled into one set of the same predictions (e.g. a
  1-run and a 3-run grade file of one model become a 4-run set).
"""
from __future__ import annotations

import csv
import json
from dataclasses import replace
from pathlib import Path

from ..inputs.benchmark import Benchmark, load_bundled_v1
from ..scores.compare import Comparison, CompareError, ScoreSet, version_of_ids
from ..scores.export import GradeFileError, load_official_grades
from ..scores.graded import read_grade_file
from .lifecycle import load_run_view, override_note
from ..store import Store

#: Largest grade file read (a 5-run v2 grade file is about 1 MB).
MAX_FILE_BYTES = 50_000_000


def _name_from_path(path: Path) -> str:
    return path.name.removesuffix(".json")


def set_from_grade_file(path: str | Path, name: str | None = None, benchmark: Benchmark | None = None) -> ScoreSet:
    """A grade file as a `ScoreSet`: an official-shape grade JSON, a human-scores file ``{id: score}``, or any
    graded file `graded.read_grade_file` reads (VLMEvalKit graded tables, graded lmms-eval logs; their ids are
    resolved against `benchmark`, default the bundled v1).

    Raises `GradeFileError` for a file that is none of these, is too large or has ids of mixed MM-Vet versions."""
    p = Path(path)
    if p.stat().st_size > MAX_FILE_BYTES:
        raise GradeFileError(f"{p.name}: larger than {MAX_FILE_BYTES:,} bytes")
    try:
        raw = json.loads(p.read_bytes().decode("utf-8-sig"))
    except (ValueError, UnicodeDecodeError, RecursionError):
        raw = None
    if isinstance(raw, dict) and raw and all(_is_human_value(v) for v in raw.values()):
        return human_set({str(k): v for k, v in raw.items()}, name or _name_from_path(p), source=str(p))
    if not (isinstance(raw, dict) and raw and all(isinstance(v, dict) and "score" in v for v in raw.values())):
        return _from_graded_file(p, name, benchmark or load_bundled_v1())
    grades = load_official_grades(raw, allow_partial=True)
    version = version_of_ids(grades.scores)
    if version is None:
        raise GradeFileError(f"{p.name}: its ids are not all MM-Vet ids of one version (v1_N or v2_N)")
    contents = {sid: list(entry.get("content") or []) for sid, entry in grades.raw.items()}
    judges = sorted(grades.judge_models)
    return ScoreSet(name or _name_from_path(p), "grade-file", version, grades.scores,
                    judge=", ".join(judges) or "unknown", source=str(p), contents=contents,
                    predictions={sid: e["prediction"] for sid, e in grades.raw.items()
                                 if isinstance(e.get("prediction"), str)},
                    note=_file_note(grades.raw))


def _from_graded_file(path: Path, name: str | None, benchmark: Benchmark) -> ScoreSet:
    """A toolkit's graded file (VLMEvalKit table, lmms-eval log) through `graded.read_grade_file`."""
    gs = read_grade_file(path, benchmark)
    return ScoreSet(name or _name_from_path(path), "grade-file", benchmark.version, gs.scores,
                    judge=gs.judge_text(), source=str(path), contents=gs.contents, predictions=gs.predictions,
                    note=gs.metric_note())


def _file_note(raw: dict) -> str | None:
    notes = {e.get("metric_note") for e in raw.values() if isinstance(e, dict) and e.get("metric_note")}
    combined = any(isinstance(e, dict) and "combined_from" in e for e in raw.values())
    if combined:
        return "combined judges (mean of several grade sets; paper Table 7): not the official MM-Vet metric"
    return next(iter(notes)) if len(notes) == 1 else None


def _is_human_value(v) -> bool:
    if isinstance(v, bool):
        return False
    if isinstance(v, (int, float)):
        return True
    return isinstance(v, list) and bool(v) and all(isinstance(x, (int, float)) and not isinstance(x, bool) for x in v)


def human_set(scores: dict, name: str = "human", source: str = "") -> ScoreSet:
    """Human scores ``{id: score}`` (or ``{id: [score, ...]}``) as a ``human`` set. Scores must be in [0, 1].

    >>> human_set({"v1_0": 1, "v1_2": 0.5}).sample_scores()
    {'v1_0': 1.0, 'v1_2': 0.5}
    """
    out: dict[str, list[float | None]] = {}
    for sid, v in scores.items():
        values = v if isinstance(v, list) else [v]
        for x in values:
            if not 0.0 <= float(x) <= 1.0:
                raise GradeFileError(f"{name}: score {x!r} of {sid} is not in [0, 1]")
        out[str(sid)] = [float(x) for x in values]
    if not out:
        raise GradeFileError(f"{name}: no human score")
    version = version_of_ids(out)
    if version is None:
        raise GradeFileError(f"{name}: its ids are not all MM-Vet ids of one version (v1_N or v2_N)")
    return ScoreSet(name, "human", version, out, judge="human", source=source,
                    contents={sid: ["human"] * len(v) for sid, v in out.items()})


def _run_note(judge: dict) -> str | None:
    if judge.get("provider") == "baseline":
        return "offline keyword baseline: NOT the MM-Vet metric"
    examples = judge.get("prompt_examples")
    if examples is not None and list(examples) != list(range(1, 8)):
        shown = " ".join(f"({i})" for i in examples) or "none"
        return f"prompt with in-context examples {shown} only: not the official MM-Vet prompt"
    return None


def set_from_run(store: Store, run_id: str, name: str | None = None, *, judge_only: bool = False) -> ScoreSet:
    """A stored run as a `ScoreSet`: its effective scores (human overrides applied, said in its `note` with their
    count), or with `judge_only` the judge's grades alone. `KeyError` when there is no run."""
    view = load_run_view(store, run_id, evidence_for=None)
    if view is None:
        raise KeyError(f"no run {run_id!r} in {store.path}")
    notes = [_run_note(view.run.judge)]
    if judge_only:
        view = replace(view, overrides={})
    elif view.n_overrides:
        notes.append(override_note(view.n_overrides, view.scores.judge_only_total)
                     + f"; judge:{run_id} compares the judge's grades alone")
    bench = view.benchmark
    contents: dict[str, list[str | None]] = {}
    for sid in bench.ids:
        contents[sid] = [(g.content if g is not None else None)
                         for g in (view.grades.get((sid, r)) for r in range(view.run.n_runs))]
    judge = view.run.judge.get("model", "judge")
    label = f"{view.run.model_name} · {judge}" + (" (judge only)" if judge_only else "")
    return ScoreSet(name or label, "run", bench.version, view.effective_scores(),
                    judge=judge, source=f"run:{run_id}", contents=contents, predictions=dict(view.run.predictions),
                    questions={sid: (s.question, s.answer) for sid, s in bench.samples.items()},
                    note="; ".join(n for n in notes if n) or None)


def set_from_overrides(store: Store, run_id: str, name: str | None = None) -> ScoreSet:
    """The manual scores (overrides) of a run as human scores on the annotated samples."""
    run = store.get_run(run_id)
    if run is None:
        raise KeyError(f"no run {run_id!r} in {store.path}")
    overrides = store.overrides(run_id)
    if not overrides:
        raise CompareError(f"run {run_id} has no manual score to use as human scores")
    hs = human_set({sid: score for sid, (score, _) in overrides.items()}, name or f"human ({run.model_name})",
                   source=f"human:{run_id}")
    hs.predictions = {sid: run.predictions.get(sid, "") for sid in overrides}
    hs.contents = {sid: [f"human: {reason}" if reason else "human"] for sid, (_, reason) in overrides.items()}
    return hs


def pool_sets(sets: list[ScoreSet], name: str | None = None) -> ScoreSet:
    """Several grade sets of the same predictions as one set with all their runs (sample by sample, in order).

    Raises `CompareError` for sets of different MM-Vet versions."""
    if len(sets) == 1:
        return sets[0]
    versions = {s.version for s in sets}
    if len(versions) > 1:
        raise CompareError("cannot pool grade sets of different MM-Vet versions")
    ids = list(dict.fromkeys(sid for s in sets for sid in s.scores))
    scores, contents = {}, {}
    for sid in ids:
        scores[sid] = [v for s in sets for v in (s.scores.get(sid) or [None] * s.n_runs)]
        contents[sid] = [c for s in sets for c in (s.contents.get(sid) or [None] * s.n_runs)]
    first = sets[0]
    judges = sorted({s.judge for s in sets if s.judge})
    return ScoreSet(name or "+".join(s.name for s in sets), first.kind, first.version, scores,
                    judge=", ".join(judges), source="+".join(s.source for s in sets), contents=contents,
                    predictions={k: v for s in sets for k, v in s.predictions.items()},
                    questions={k: v for s in sets for k, v in s.questions.items()},
                    note=next((s.note for s in sets if s.note), None))


def load_grade_set(spec: str, store: Store | None = None, name: str | None = None,
                   benchmark: Benchmark | None = None) -> ScoreSet:
    """The grade set a CLI argument names (see the module docstring). Raises `GradeFileError`, `CompareError`
    or `KeyError` (no such file or run) with a message for the user."""
    spec = spec.strip()
    if Path(spec).is_file():
        return set_from_grade_file(spec, name, benchmark)
    if "+" in spec and not spec.startswith(("run:", "human:", "judge:")):
        return pool_sets([load_grade_set(part, store, benchmark=benchmark) for part in spec.split("+") if part],
                         name)
    if spec.startswith("human:"):
        if store is None:
            raise KeyError("human:RUN_ID needs the database (--db)")
        return set_from_overrides(store, spec.removeprefix("human:"), name)
    if spec.startswith("judge:"):
        if store is None:
            raise KeyError("judge:RUN_ID needs the database (--db)")
        run_id = spec.removeprefix("judge:")
        return set_from_run(store, run_id, name or None, judge_only=True)
    run_id = spec.removeprefix("run:")
    if store is not None and store.get_run(run_id) is not None:
        return set_from_run(store, run_id, name)
    raise KeyError(f"{spec!r} is neither a grade file nor a run id"
                   + (f" in {store.path}" if store is not None else " (pass --db to read runs)"))


def benchmark_for(sets: list[ScoreSet], store: Store | None, default: Benchmark) -> Benchmark:
    """The benchmark to compare on: the first run's stored benchmark when a set is a run, else `default`."""
    if store is not None:
        for s in sets:
            if s.source.startswith("run:"):
                view = load_run_view(store, s.source.removeprefix("run:"), evidence_for=None)
                if view is not None:
                    return view.benchmark
    return default


def _csv_cell(value):
    """Text cells that a spreadsheet would run as a formula get a leading apostrophe (set names come from file
    names and visitors); numbers are written as numbers."""
    if isinstance(value, str) and value[:1] in ("=", "+", "-", "@", "\t", "\r"):
        return "'" + value
    return value


def _write_csv(path: Path, header: list[str], rows: list[list]) -> None:
    with open(path, "w", encoding="utf-8", newline="") as f:
        writer = csv.writer(f, lineterminator="\n")
        writer.writerow(header)
        writer.writerows([[_csv_cell(v) for v in row] for row in rows])


def write_comparison(cmp: Comparison, out_dir: str | Path) -> dict[str, Path]:
    """Write ``comparison.json`` (everything), ``comparison.csv`` (one row per set and column) and
    ``comparison-samples.csv`` (per-sample scores of every set) under `out_dir`. Returns the paths."""
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    paths = {"json": out / "comparison.json", "csv": out / "comparison.csv",
             "samples": out / "comparison-samples.csv"}
    paths["json"].write_text(json.dumps(cmp.to_dict(), indent=2, ensure_ascii=False), encoding="utf-8")
    _write_csv(paths["csv"], cmp.CSV_HEADER, cmp.rows())
    header, rows = cmp.sample_rows()
    _write_csv(paths["samples"], header, rows)
    return paths


#: The app compares at most this many sets at once (each adds a bootstrap column block and a radar trace).
MAX_APP_SETS = 6


def sets_for_owner(store: Store, owner: str, run_ids: list[str], files: list[str],
                   max_sets: int = MAX_APP_SETS, read_file=None) -> list[ScoreSet]:
    """The grade sets a visitor picked in the app: their own runs (in the order given) then uploaded grade files,
    each read by ``read_file(path, name)`` (default `set_from_grade_file`; the app passes its bounded worker's,
    `hosting.UploadGate.read_grade_set`, as a visitor's file is never parsed in the server process).

    Raises `CompareError` for a run that is not theirs (or does not exist: the same message, so ids cannot be
    probed), for fewer than two or more than `max_sets` sets, and `GradeFileError` for an unreadable file."""
    picked = [r for r in dict.fromkeys(run_ids) if r]
    if len(picked) + len(files) < 2:
        raise CompareError("pick at least two grade sets (runs or grade files) to compare")
    if len(picked) + len(files) > max_sets:
        raise CompareError(f"compare at most {max_sets} grade sets at once")
    sets = []
    for run_id in picked:
        run = store.get_run(run_id)
        if run is None or not owner or run.owner != owner:
            raise CompareError("one of the picked runs is not one of your runs")
        sets.append(set_from_run(store, run_id, name=f"{run.model_name} · {run.judge.get('model', 'judge')} "
                                                      f"({run_id[:6]})"))
    read = read_file or set_from_grade_file
    for path in files:
        sets.append(read(path, Path(path).name.removesuffix(".json")))
    return sets


def run_choices(store: Store, owner: str, limit: int = 50) -> list[tuple[str, str]]:
    """(label, run id) of a visitor's own runs, newest first, for the app's Compare picker."""
    if not owner:
        return []
    return [(f"{r['model_name']} · {r['judge_model'] or 'judge'} · {r['status']} ({r['id'][:6]})", r["id"])
            for r in store.run_summaries(owner, limit)]       # one light query: no run's samples decoded


def compare_for_app(store: Store, owner: str, run_ids: list[str], files: list[str], out_dir: str | Path, *,
                    resamples: int = 10_000, read_file=None) -> tuple[Comparison, dict[str, Path]]:
    """The app's Compare: the visitor's runs and uploaded grade files (read by `read_file`, see `sets_for_owner`)
    compared on the bundled benchmark of the first run (else MM-Vet v1), exported under `out_dir`. Raises
    `CompareError` / `GradeFileError` (`ResultsError` when the bounded reader refuses a file)."""
    from ..scores.compare import compare_sets

    sets = sets_for_owner(store, owner, run_ids, files, read_file=read_file)
    benchmark = benchmark_for(sets, store, load_bundled_v1())
    cmp = compare_sets(benchmark, sets, resamples=resamples)
    return cmp, write_comparison(cmp, out_dir)
