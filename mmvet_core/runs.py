"""A grading run from start to exports: what the CLI and the app share.

A run stores its benchmark's samples (so a share link keeps working after an uploaded benchmark's temp files are
gone), the predictions and the judge settings (never a key). Its scores are the judge's grades with any manual
override applied; overrides stay beside the judge's grade and are marked in the exported grade JSON.
"""
from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass
from pathlib import Path

from .aggregate import Scores, aggregate_scores
from .benchmark import Benchmark, Sample
from .export import (OfficialGrades, make_grade_json, official_file_names, write_grade_json,
                     write_official_files)
from .grading import GRADED
from .judge import JudgeSettings
from .prompt import parse_score
from .store import GradeRow, RunRecord, Store


def benchmark_to_stored(benchmark: Benchmark, spec: str) -> dict:
    """JSON-able benchmark, samples included (enough to rebuild it without its source)."""
    return {**benchmark.describe(), "spec": spec,
            "images_dir": str(benchmark.images_dir) if benchmark.images_dir else None,
            "samples": {s.id: {"question": s.question, "answer": s.answer, "capability": list(s.capabilities),
                               "imagename": s.image, "imagesource": s.image_source}
                        for s in benchmark.samples.values()}}


def benchmark_from_stored(stored: dict) -> Benchmark:
    samples = {sid: Sample(id=sid, question=v["question"], answer=v["answer"],
                           capabilities=tuple(v["capability"]), image=v.get("imagename"),
                           image_source=v.get("imagesource"))
               for sid, v in stored["samples"].items()}
    images = Path(stored["images_dir"]) if stored.get("images_dir") else None
    return Benchmark(name=stored["name"], version=stored["version"], samples=samples, source=stored.get("source", ""),
                     images_dir=images if images and images.is_dir() else None, subset_name=stored.get("subset"))


def run_fingerprint(model_name: str, stored_benchmark: dict, n_runs: int, settings: JudgeSettings,
                    predictions: dict[str, str]) -> str:
    """Identity of a CLI grading job: rerunning the same command resumes the same run."""
    ident = json.dumps([model_name, stored_benchmark["spec"], stored_benchmark.get("subset"),
                        sorted(stored_benchmark["samples"]), n_runs, settings.fingerprint(), predictions],
                       sort_keys=True, ensure_ascii=False)
    return hashlib.sha256(ident.encode("utf-8")).hexdigest()


def create_run(store: Store, *, benchmark: Benchmark, spec: str, predictions: dict[str, str], n_runs: int,
               settings: JudgeSettings, model_name: str, results_format: str = "", owner: str = "",
               reuse: bool = False) -> str:
    """Store a new run (or, with `reuse`, return the id of the latest identical one)."""
    stored = benchmark_to_stored(benchmark, spec)
    fp = run_fingerprint(model_name, stored, n_runs, settings, predictions)
    if reuse:
        existing = store.find_run(fp)
        if existing is not None:
            return existing.id
    return store.create_run(model_name=model_name, benchmark=stored, n_runs=n_runs, judge=settings.to_dict(),
                            predictions=predictions, results_format=results_format, owner=owner, fingerprint=fp)


@dataclass
class RunView:
    """Everything needed to show or export a run: its record, benchmark, grades, overrides and scores."""

    run: RunRecord
    benchmark: Benchmark
    grades: dict[tuple[str, int], GradeRow]
    overrides: dict[str, tuple[float, str]]
    scores: Scores

    @property
    def judge_name(self) -> str:
        return self.run.judge.get("model", "judge")

    @property
    def n_expected(self) -> int:
        return len(self.benchmark) * self.run.n_runs

    @property
    def n_graded(self) -> int:
        return sum(g.status in GRADED for g in self.grades.values())

    def effective_scores(self) -> dict[str, list[float | None]]:
        return effective_scores(self.benchmark, self.run.n_runs, self.grades, self.overrides)

    def flag_counts(self) -> dict[str, int]:
        counts: dict[str, int] = {}
        for sid in self.benchmark.ids:
            flags = sample_flags(self, sid)
            for f in flags:
                key = "steering" if f.startswith("steering:") else f
                counts[key] = counts.get(key, 0) + 1
        return counts


def sample_flags(view: RunView, sample_id: str) -> list[str]:
    """Distinct flags of a sample over its runs, plus ``override`` when a manual score replaces the judge's."""
    flags: list[str] = []
    for r in range(view.run.n_runs):
        g = view.grades.get((sample_id, r))
        for f in (g.flags if g else []):
            if f not in flags:
                flags.append(f)
    if sample_id in view.overrides:
        flags.append("override")
    return flags


def effective_scores(benchmark: Benchmark, n_runs: int, grades: dict[tuple[str, int], GradeRow],
                     overrides: dict[str, tuple[float, str]]) -> dict[str, list[float | None]]:
    """Sample id -> per-run scores: the override when set, else the judge's score (None when not graded)."""
    out: dict[str, list[float | None]] = {}
    for sid in benchmark.ids:
        if sid in overrides:
            out[sid] = [overrides[sid][0]] * n_runs
            continue
        row = []
        for r in range(n_runs):
            g = grades.get((sid, r))
            row.append(g.score if g is not None and g.status in GRADED else None)
        out[sid] = row
    return out


def load_run_view(store: Store, run_id: str, *, evidence_for: str | None = None) -> RunView | None:
    """A run with its grades and scores, or None when there is no such run. Judge attempts (the raw evidence)
    are loaded only for the sample `evidence_for` names (``"*"``: all samples)."""
    run = store.get_run(run_id)
    if run is None:
        return None
    benchmark = benchmark_from_stored(run.benchmark)
    grades = {(g.sample_id, g.run_index): g for g in store.grades(run_id, evidence_for=evidence_for)}
    overrides = store.overrides(run_id)
    scores = aggregate_scores(benchmark, effective_scores(benchmark, run.n_runs, grades, overrides), run.n_runs)
    return RunView(run, benchmark, grades, overrides, scores)


def make_run_grade_json(view: RunView) -> dict:
    """The official grade JSON of a run (graded samples only). Overrides keep the judge's score beside them:
    ``score`` holds the effective score, ``judge_score`` the judge's and ``override`` the manual one with its
    reason; ``flags`` lists fallback / steering / error marks. Official readers ignore the extra keys."""
    records = {}
    for sid in view.benchmark.ids:
        # the official format has one list element per run, in order: keep the graded prefix of the runs
        done = []
        for r in range(view.run.n_runs):
            g = view.grades.get((sid, r))
            if g is None or g.status not in GRADED:
                break
            done.append(g)
        if not done:
            continue
        rec = {"model": [g.judge_model for g in done], "content": [g.content for g in done],
               "score": [g.score for g in done]}
        flags = sample_flags(view, sid)
        if sid in view.overrides:
            score, reason = view.overrides[sid]
            rec["judge_score"] = rec["score"]
            rec["score"] = [score] * len(done)
            rec["override"] = {"score": score, "reason": reason}
        if flags:
            rec["flags"] = flags
        records[sid] = rec
    return make_grade_json(records)


def export_run(view: RunView, out_dir: str | Path) -> dict[str, Path]:
    """Write the official grade JSON and, when every grade is in, both official CSVs. Returns the paths."""
    subset = "bardset" if view.benchmark.subset_name == "bard" else view.benchmark.subset_name
    grade_json = make_run_grade_json(view)
    if view.scores.complete:
        return write_official_files(out_dir, view.run.model_name, view.judge_name, view.scores, grade_json,
                                    subset=subset)
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    path = out / official_file_names(view.run.model_name, view.judge_name, view.run.n_runs, subset)["grade"]
    write_grade_json(path, grade_json)
    return {"grade": path}


def imported_status(content: str | None, score: float) -> str:
    """How an official grade came about, read back from its content: ``ok`` when the content parses to a
    score, ``bad_request_zero`` for v2's 400 marker, else ``fallback`` (the official 0.0 after retries).

    >>> imported_status("0.5", 0.5), imported_status("Sorry", 0.0), imported_status("BadRequestError", 0.0)
    ('ok', 'fallback', 'bad_request_zero')
    """
    if content == "BadRequestError" and score == 0.0:
        return "bad_request_zero"
    return "ok" if content is None or parse_score(content) is not None or score != 0.0 else "fallback"


def import_official_grades(store: Store, run_id: str, grades: OfficialGrades) -> int:
    """Store the grades of an official grade file in a run (they cost nothing again). Returns how many.

    Only samples of the run's benchmark and at most its number of runs are taken."""
    run = store.get_run(run_id)
    if run is None:
        raise KeyError(f"no run {run_id!r}")
    wanted = set(run.benchmark.get("samples", {}))
    n = 0
    for sid, rec in grades.raw.items():
        if sid not in wanted:
            continue
        contents, models = rec.get("content") or [], rec.get("model") or []
        for r, score in enumerate(rec.get("score", [])[: run.n_runs]):
            if score is None:
                continue
            content = contents[r] if r < len(contents) else None
            model = models[r] if r < len(models) else None
            status = imported_status(content, float(score))
            flags = [] if status == "ok" else [status]
            store.put_grade(GradeRow(run_id, sid, r, status, float(score), content, model,
                                     [{"imported": True, "content": content, "model": model}], None, flags, 0.0))
            n += 1
    return n
