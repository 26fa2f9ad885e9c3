"""A grading run from start to exports: what the CLI and the app share.

A run stores its benchmark's samples (so a share link keeps working after an uploaded benchmark's temp files are
gone), the predictions and the judge settings (never a key). Its scores are the judge's grades with any manual
override applied; overrides stay beside the judge's grade and are marked in the exported grade JSON.
"""
from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass, field
from pathlib import Path

from ..scores.aggregate import Scores, aggregate_scores
from ..inputs.benchmark import Benchmark, Sample
from ..scores.export import OfficialGrades, make_grade_json, official_file_names, write_grade_json, write_official_files
from ..scores.graded import GradeSet, is_official_judge, judges_compatible, missing_ids, missing_text, read_grade_file
from ..judging.grading import GRADED
from ..judging.judge import JudgeSettings
from ..judging.prompt import parse_score
from ..scores.stats import make_intervals_csv_text, score_intervals
from ..store import GradeRow, RunRecord, Store


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
               reuse: bool = False, judge_info: dict | None = None) -> str:
    """Store a new run (or, with `reuse`, return the id of the latest identical one). `judge_info` is stored
    beside the judge settings (an imported grade file's provenance: see `create_grade_view`)."""
    stored = benchmark_to_stored(benchmark, spec)
    fp = run_fingerprint(model_name, stored, n_runs, settings, predictions)
    if reuse:
        existing = store.find_run(fp)
        if existing is not None:
            return existing.id
    return store.create_run(model_name=model_name, benchmark=stored, n_runs=n_runs,
                            judge={**settings.to_dict(), **(judge_info or {})}, predictions=predictions,
                            results_format=results_format, owner=owner, fingerprint=fp)


def metric_note(judge: dict) -> str | None:
    """Why a run's numbers are not the official MM-Vet metric (shown wherever its score is), or None when they
    are: the official prompt (always ours) with the official judge gpt-4-0613."""
    if judge.get("provider") == "baseline":
        return "offline keyword baseline, NOT the MM-Vet metric"
    examples = judge.get("prompt_examples")
    if examples is not None:                # paper Table 8's ablation: not the official prompt
        shown = "".join(f"({i})" for i in examples) or "none"
        return f"prompt with in-context examples {shown} only: NOT the official MM-Vet prompt"
    if "official_metric" in judge:          # an imported grade file knows its own prompt and judges
        return None if judge["official_metric"] else judge.get("metric_note") or "NOT the official MM-Vet metric"
    model = judge.get("model", "")
    if is_official_judge(model):
        return None
    return f"judge {model}: NOT the official MM-Vet metric (the official judge is gpt-4-0613)"


def override_note(n_overrides: int, judge_only_total: float | None) -> str | None:
    """What a total with human overrides is, wherever it is shown (None without overrides): the run owner's
    corrected score, not the official metric, with the count and the judge's own total beside it.

    >>> override_note(2, 41.8)
    "owner's corrected score with 2 human overrides: NOT the official MM-Vet metric (judge only: 41.8)"
    >>> override_note(0, 41.8) is None
    True
    """
    if not n_overrides:
        return None
    judge = "—" if judge_only_total is None else f"{judge_only_total:.1f}"
    plural = "override" if n_overrides == 1 else "overrides"
    return (f"owner's corrected score with {n_overrides} human {plural}: NOT the official MM-Vet metric "
            f"(judge only: {judge})")


def judge_text(judge: dict) -> str:
    """The judge as shown: the model, or for an imported file every judge it names with its grade count."""
    return judge.get("judge_text") or judge.get("model", "judge")


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
        """The judge in file names; a prompt with other in-context examples adds ``-ex15`` (examples (1), (5)), so
        its files never take the name of the official prompt's."""
        name = self.run.judge.get("model", "judge")
        examples = self.run.judge.get("prompt_examples")
        return name if examples is None else f"{name}-ex{''.join(str(i) for i in examples) or '0'}"

    @property
    def judge_metric_note(self) -> str | None:
        """Why the judge's own grades are not the official metric (judge, prompt, baseline), or None."""
        return metric_note(self.run.judge)

    @property
    def n_overrides(self) -> int:
        """How many samples have a human score in place of the judge's."""
        return self.scores.n_overrides

    @property
    def metric_note(self) -> str | None:
        """Everything that keeps the shown total from being the official MM-Vet metric: the judge's note and the
        overrides' (count and judge-only total), or None for the official metric."""
        parts = [metric_note(self.run.judge), override_note(self.scores.n_overrides, self.scores.judge_only_total)]
        return "; ".join(p for p in parts if p) or None

    @property
    def metric_label(self) -> str:
        """The metric label shown next to a total: `metric_note`, else "official MM-Vet metric"."""
        return self.metric_note or "official MM-Vet metric"

    @property
    def judge_text(self) -> str:
        return judge_text(self.run.judge)

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
    set_judge_only(scores, benchmark, run.n_runs, grades, overrides)
    return RunView(run, benchmark, grades, overrides, scores)


def set_judge_only(scores: Scores, benchmark: Benchmark, n_runs: int, grades: dict[tuple[str, int], GradeRow],
                   overrides: dict[str, tuple[float, str]]) -> Scores:
    """Record on `scores` (aggregated with `overrides`) how many overrides it holds and the judge-only total and
    std (the same grades without any override). Returns `scores`."""
    n = sum(sid in overrides for sid in benchmark.ids)
    scores.n_overrides = n
    if n:
        judge = aggregate_scores(benchmark, effective_scores(benchmark, n_runs, grades, {}), n_runs)
        scores.judge_only_total = judge.total.mean
        scores.judge_only_std = judge.total.std if judge.complete else None
    return scores


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
        if isinstance(view.run.predictions.get(sid), str):
            rec["prediction"] = view.run.predictions[sid]     # what was graded: lets an import check it
        if note := view.metric_note:
            rec["metric_note"] = note
        records[sid] = rec
    return make_grade_json(records)


def intervals_file_name(model: str, judge: str, n_runs: int, subset: str | None = None) -> str:
    """``{model}_{subset_}{judge}-ci-95-{N}runs.csv``: the bootstrap intervals, a file of its own so that the two
    official CSVs stay byte-compatible."""
    cap = official_file_names(model, judge, n_runs, subset)["cap"]
    return cap.replace("-cap-score-", "-ci-95-")


def write_intervals_csv(out_dir: str | Path, benchmark: Benchmark, scores: dict, model: str, judge: str,
                        n_runs: int, subset: str | None = None) -> Path:
    """Write the 95% bootstrap intervals over samples of every column (see `stats.score_intervals`)."""
    path = Path(out_dir) / intervals_file_name(model, judge, n_runs, subset)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(make_intervals_csv_text(score_intervals(benchmark, scores)), encoding="utf-8")
    return path


def equivalent_file_name(model: str, judge: str, n_runs: int, subset: str | None = None) -> str:
    """``{model}_{judge}-official-equivalent-estimate-{N}runs.csv`` (subset as for the official CSVs)."""
    cap = official_file_names(model, judge, n_runs, subset)["cap"]
    return cap.replace("-cap-score-", "-official-equivalent-estimate-")


def note_file_name(model: str, judge: str, n_runs: int, subset: str | None = None) -> str:
    """``{model}_{subset_}{judge}-note-{N}runs.txt``: what the exported numbers are when they are not the official
    metric of a complete run (overrides, partial grades, another judge): a file of its own, so the official CSVs
    keep the official format."""
    cap = official_file_names(model, judge, n_runs, subset)["cap"]
    return cap.replace("-cap-score-", "-note-").removesuffix(".csv") + ".txt"


def make_note_text(view: RunView) -> str | None:
    """The exports' note (see `note_file_name`) for a run with human overrides or missing grades; None otherwise
    (another judge or prompt is already said in the CSVs' ``note`` column and every grade JSON entry)."""
    s = view.scores
    if s.complete and not s.n_overrides:
        return None
    lines = []
    if not s.complete:
        lines.append(f"PARTIAL: {view.n_graded} of {view.n_expected} grades are in; any total of these grades is "
                     "partial, not a final score. The official score CSVs are written once every grade is in.")
    if s.n_overrides:
        judge = "—" if s.judge_only_total is None else f"{s.judge_only_total:.1f}"
        if s.judge_only_std is not None and view.run.n_runs > 1:
            judge += f" ± {s.judge_only_std:.1f}"
        lines.append(f"HUMAN OVERRIDES: {s.n_overrides} sample(s) carry the run owner's score instead of the "
                     "judge's. The totals in the score CSVs and the grade JSON's 'score' are the owner's corrected "
                     "score, NOT the official MM-Vet metric.")
        lines.append(f"Judge-only total (the judge's own grades, no override; 'judge_score' in the grade JSON): "
                     f"{judge}")
        for sid in view.benchmark.ids:
            if sid in view.overrides:
                score, reason = view.overrides[sid]
                lines.append(f"  {sid}: {score:g} ({' '.join(str(reason).split())})")
    if note := view.judge_metric_note:
        lines.append(f"Metric: {note}")
    head = f"{view.run.model_name} graded by {view.judge_text} on {view.benchmark.name}"
    return "\n".join([head, *lines]) + "\n"


def export_run(view: RunView, out_dir: str | Path, *, equivalence=None) -> dict[str, Path]:
    """Write the official grade JSON and, when every grade is in, both official CSVs (official format: their
    only extra is a ``note`` column when the judge or prompt is not the official one), the intervals CSV and, when
    `equivalence` (`equivalence.estimate_run`) has an estimate, that estimate in a file of its own (never in the official
    files). Overrides and partial grades are said in a note file beside them (`make_note_text`). Returns the
    paths."""
    subset = "bardset" if view.benchmark.subset_name == "bard" else view.benchmark.subset_name
    grade_json = make_run_grade_json(view)
    out = Path(out_dir)
    if view.scores.complete:
        paths = write_official_files(out_dir, view.run.model_name, view.judge_name, view.scores, grade_json,
                                     subset=subset, note=view.judge_metric_note)
        paths["ci"] = write_intervals_csv(out_dir, view.benchmark, view.effective_scores(), view.run.model_name,
                                          view.judge_name, view.run.n_runs, subset)
        if equivalence is not None and equivalence.available:
            path = out / equivalent_file_name(view.run.model_name, view.judge_name, view.run.n_runs, subset)
            path.write_text(equivalence.csv_text(), encoding="utf-8")
            paths["equivalent"] = path
    else:
        out.mkdir(parents=True, exist_ok=True)
        path = out / official_file_names(view.run.model_name, view.judge_name, view.run.n_runs, subset)["grade"]
        write_grade_json(path, grade_json)
        paths = {"grade": path}
    if text := make_note_text(view):
        paths["note"] = out / note_file_name(view.run.model_name, view.judge_name, view.run.n_runs, subset)
        paths["note"].write_text(text, encoding="utf-8")
    return paths


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


def create_grade_view(store: Store, grades: GradeSet, *, benchmark: Benchmark, spec: str, owner: str = "",
                      model_name: str | None = None, judge_info: dict | None = None) -> str:
    """A finished run holding a grade file's grades (no judge call): totals, capabilities, integrations, radars
    and every sample then show like any run, with the file's judges and metric note recorded (and `judge_info`
    beside them). Returns its id."""
    settings = JudgeSettings(model=grades.judge_name or "judge", provider="imported")
    run_id = create_run(store, benchmark=benchmark, spec=spec, predictions=dict(grades.predictions),
                        n_runs=grades.n_runs, settings=settings, model_name=model_name or grades.model_name,
                        results_format=grades.source, owner=owner,
                        judge_info={**grades.judge_info(), **(judge_info or {})})
    for sid, row in grades.scores.items():
        for r, score in enumerate(row):
            if score is None:
                continue
            content, judge = grades.contents[sid][r], grades.judges[sid][r]
            if grades.failed[sid][r]:                    # the toolkit's own 0.0 after no parsable answer
                status = "fallback"
            elif grades.source == "official-grade-json":   # the official content is the judge's raw answer
                status = imported_status(content, score)
            else:                                          # a toolkit's log is not a raw answer
                status = "ok"
            flags = [] if status == "ok" else [status]
            store.put_grade(GradeRow(run_id, sid, r, status, float(score), content, judge,
                                     [{"imported": True, "content": content, "model": judge,
                                       "source": grades.source}], None, flags, 0.0))
    source = grades.judge_info()["imported_from"]
    article = "an" if source[:1].lower() in "aeiou" else "a"
    message = f"imported from {article} {source} (no judge call)"
    if missing := missing_ids(grades.scores, benchmark, grades.n_runs):
        message += f"; partial: {missing_text(missing, benchmark)}"
    store.set_status(run_id, "done", message)
    return run_id


class ImportRefused(ValueError):
    """Grades that must not be reused in this run (another judge, prompt, benchmark or model's answers)."""


@dataclass
class ImportReport:
    imported: int
    skipped_changed: list[str] = field(default_factory=list)   # ids whose graded prediction differs from ours
    warnings: list[str] = field(default_factory=list)


def import_grades(store: Store, run_id: str, grades: GradeSet) -> ImportReport:
    """Reuse a grade file's grades in a run, only where they are this run's grades.

    Refused (`ImportRefused`): grades made with another prompt than the official one; grades by a judge model
    that is not the run's; a file with no sample of the run's benchmark. Grades of samples whose recorded
    prediction differs from the run's are not imported (they are graded again); when the file does not record
    predictions (official grade JSONs do not), the report warns, naming both models when the names differ.
    """
    run = store.get_run(run_id)
    if run is None:
        raise KeyError(f"no run {run_id!r}")
    name = Path(grades.path).name
    if grades.prompt != "official":
        raise ImportRefused(f"{name}: its grades were made with {grades.prompt}'s prompt, not the official one; "
                            "they cannot stand for this run's grades (view them with `aggregate` instead)")
    wanted_judge = run.judge.get("model", "")
    other = sorted({j for j in grades.judge_counts() if not judges_compatible(j, wanted_judge)})
    if other:
        raise ImportRefused(f"{name}: graded by {', '.join(other)}, but this run's judge is {wanted_judge}; "
                            f"pass --judge-model {other[0]} to continue that judge's grades")
    wanted = run.benchmark.get("samples", {})
    common = [sid for sid in grades.scores if sid in wanted]
    if not common:
        raise ImportRefused(f"{name}: none of its samples belong to this run's benchmark")
    report = ImportReport(0)
    if grades.predictions:
        report.skipped_changed = [sid for sid in common if sid in grades.predictions
                                  and grades.predictions[sid] != run.predictions.get(sid)]
        unknown = [sid for sid in common if sid not in grades.predictions]
        if report.skipped_changed:
            report.warnings.append(
                f"{len(report.skipped_changed)} of {len(common)} grades were made for a different prediction than "
                f"this run's (e.g. {report.skipped_changed[0]}): not imported, they will be graded again"
                + (" — is the grade file another model's?" if len(report.skipped_changed) > len(common) / 2 else ""))
        if unknown:
            report.warnings.append(f"{len(unknown)} grades do not record their prediction: imported unchecked")
    else:
        file_model = grades.model_name
        differs = file_model and file_model != run.model_name
        report.warnings.append(
            f"{name} does not record the predictions it graded (official grade files do not), so nothing proves "
            f"these grades are for this run's answers"
            + (f": the file is named for model '{file_model}' but this run is '{run.model_name}' — if those are "
               f"different models, these grades are wrong for this run" if differs else "")
            + "; use --import-grades only with the grade file of the same results file")
    skip = set(report.skipped_changed)
    for sid in common:
        if sid in skip:
            continue
        for r, score in enumerate(grades.scores[sid][: run.n_runs]):
            if score is None:
                continue
            content, model = grades.contents[sid][r], grades.judges[sid][r]
            status = imported_status(content, float(score))
            store.put_grade(GradeRow(run_id, sid, r, status, float(score), content, model,
                                     [{"imported": True, "content": content, "model": model}], None,
                                     [] if status == "ok" else [status], 0.0))
            report.imported += 1
    return report


def open_grade_file(store: Store, path: str | Path, *, benchmark: Benchmark, spec: str, owner: str = "",
                    max_bytes: int = 50_000_000) -> str:
    """Read any grade file (official grade JSON, VLMEvalKit graded table, graded lmms-eval log) against
    `benchmark` and store it as a finished run (no judge call). Returns the run id; raises `GradeFileError`
    with a message for the user (no grades, another benchmark, ids mapped to the wrong questions)."""
    grades = read_grade_file(path, benchmark, max_bytes=max_bytes)
    return create_grade_view(store, grades, benchmark=benchmark, spec=spec, owner=owner)
