"""`aggregate`: scores and the official files from a grade file (official grade JSON, VLMEvalKit graded table,
graded lmms-eval log), without any judge call (`graded`, `aggregate`, `export`)."""
from __future__ import annotations

from pathlib import Path

from ..scores.aggregate import aggregate_scores
from ..scores.export import GradeFileError, make_cap_csv_text, make_cap_int_csv_text, make_grade_json, official_file_names, \
    write_grade_json
from ..scores.graded import OFFICIAL_GRADE_NAME, missing_ids, missing_text, read_grade_file, source_label
from ..runs.lifecycle import note_file_name, write_intervals_csv
from ..scores.terminal import fit, pack
from .common import BENCHMARK_OPTIONS, benchmark_of, print_score_lines, say
from .parser import Command, UsageError, option


def aggregate_names(path: str | Path, file_model: str, file_judge: str, model_name: str | None = None,
                    judge_name: str | None = None) -> tuple[str, str]:
    """(model, judge) for the output names of `aggregate`: the official ``{model}_{judge}-grade-{N}runs.json``
    pattern when the file name has it, else what the file says (VLMEvalKit's ``{model}_MMVet_{judge}``, lmms-eval's
    model) or the file's stem; `model_name` / `judge_name` always win."""
    match = OFFICIAL_GRADE_NAME.match(Path(path).name)
    model = model_name or (match["model"] if match else file_model) or Path(path).stem
    judge = judge_name or (match["judge"] if match else file_judge) or "judge"
    return model, judge


def cmd_aggregate(args) -> int:
    benchmark = benchmark_of(args)
    try:
        grades = read_grade_file(args.grade_json, benchmark)
    except (GradeFileError, OSError) as e:
        raise UsageError(str(e)) from e
    missing = missing_ids(grades.scores, benchmark, grades.n_runs)
    if missing and args.complete_only:
        raise UsageError(f"the grade file has {missing_text(missing, benchmark)}; --complete-only refuses an "
                         f"incomplete grade file (without it the total is shown as partial)")
    model, judge = aggregate_names(args.grade_json, grades.model_name, grades.judge_name, args.model_name,
                                   args.judge_name)
    scores = aggregate_scores(benchmark, grades.scores, grades.n_runs)
    note = grades.metric_note()
    say(f"Grade file: {source_label(grades.source)} · {len(grades.scores)} samples × {grades.n_runs} run(s)"
          + (f" · ids from {grades.id_source}" if grades.id_source not in ("", "keys") else ""))
    say(f"Judge: {grades.judge_text()}")
    say(f"Metric: {note or 'the official MM-Vet metric (gpt-4-0613, official prompt)'}")
    for line in grades.notes:
        say(f"Note: {line}")
    if note:                      # not the official metric: an estimate where a check of the file's judge is here
        print(file_estimate_line(args, benchmark, grades))
    graded = sum(s is not None for sid in benchmark.ids for s in (grades.scores.get(sid) or [])[:grades.n_runs])
    partial = (graded, len(benchmark) * grades.n_runs) if missing else None
    if missing:
        say(f"PARTIAL: the file has {missing_text(missing, benchmark)}. The scores below are over the graded "
              "samples only; no official CSV is written (they need every sample). Pass --complete-only to "
              "refuse incomplete files.")
    subset = "bardset" if benchmark.subset_name == "bard" else benchmark.subset_name
    names = official_file_names(model, judge, grades.n_runs, subset)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    if not missing:
        for key, text in (("cap", make_cap_csv_text(model, scores, note)),
                          ("cap_int", make_cap_int_csv_text(model, scores, note))):
            (out / names[key]).write_text(text, encoding="utf-8")
            say(f"wrote {out / names[key]}")
    if grades.source != "official-grade-json":   # every sample in the official grade format too
        records = {sid: {"model": grades.judges[sid], "content": grades.contents[sid], "score": grades.scores[sid],
                         **({"prediction": grades.predictions[sid]} if sid in grades.predictions else {}),
                         **({"metric_note": note} if note else {})} for sid in benchmark.ids if sid in grades.scores}
        write_grade_json(out / names["grade"], make_grade_json(records))
        say(f"wrote {out / names['grade']}")
    if missing:
        note_path = out / note_file_name(model, judge, grades.n_runs, subset)
        note_path.write_text(f"{model} graded by {grades.judge_text()} ({Path(args.grade_json).name})\n"
                             f"PARTIAL: {graded} of {len(benchmark) * grades.n_runs} grades; "
                             f"{missing_text(missing, benchmark)}. Any total of this file is partial, not a final "
                             "score.\n" + (f"Metric: {note}\n" if note else ""), encoding="utf-8")
        say(f"wrote {note_path}")
    else:
        ci_path = write_intervals_csv(out, benchmark, grades.scores, model, judge, grades.n_runs, subset)
        say(f"wrote {ci_path}")
    print_score_lines(benchmark, scores, grades.scores, partial=partial, note=note)
    if args.samples:
        for sid in benchmark.ids:
            runs = " / ".join("—" if x is None else f"{x:.1f}" for x in grades.scores.get(sid, [None]))
            judges = ", ".join(dict.fromkeys(j or "unknown" for j in grades.judges.get(sid, [])))
            print(f"{sid}\t{','.join(benchmark.samples[sid].capabilities)}\t{runs}\t{judges or 'no grade'}")
    return 0


def file_estimate_line(args, benchmark, grades) -> str:
    """The official-equivalent estimate of the file's grades from the check here of the judge it records
    (`equivalence.recorded_equivalence`), or why there is none; the database is only read (none: no check)."""
    from ..successors.equivalence import format_capability_items, format_equivalent_line, recorded_equivalence
    from ..store import Store, store_exists
    from .common import default_db

    db = args.db or default_db()
    if not store_exists(db):
        from ..successors.equivalence import Equivalence
        eq = Equivalence(False, f"no database with judge checks at {db}", grades.judge_text())
    else:
        store = Store(db)
        try:
            eq = recorded_equivalence(store, benchmark, grades.scores, judge_counts=grades.judge_counts(),
                                      prompt=grades.prompt, predictions=grades.predictions)
        finally:
            store.close()
    caps = format_capability_items(eq) if eq.available else []
    return "\n".join([fit(format_equivalent_line(eq)), *(pack("  per capability (estimates):", caps) if caps else [])])


AGGREGATE = Command("aggregate", "scores and official CSVs from a grade file, without any judge call: an "
                                 "official grade JSON, a VLMEvalKit graded table ({model}_MMVet_{judge}"
                                 ".xlsx/.tsv/.csv/.json) or a graded lmms-eval sample log", (
    option("grade_json", metavar="GRADE_FILE"),
    *BENCHMARK_OPTIONS,
    option("--judge-name", default=None, help="judge name in file names (default: from the file)"),
    option("--db", default=None, help="database whose judge checks give the file's estimate (default: the usual "
                                      "one; only read)"),
    option("--samples", action="store_true", help="also print every sample's score and judge"),
    option("--complete-only", action="store_true",
           help="refuse a grade file that lacks a grade for some sample (exit 2); by default its total is "
                "shown labelled partial, with the missing ids, and no official CSV is written"),
), run=cmd_aggregate)
