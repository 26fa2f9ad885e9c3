"""`compare` and `combine`: grade sets (files, runs, human scores) compared with paired intervals, or combined into
one (`compare`, `gradesets`)."""
from __future__ import annotations

from pathlib import Path

from ..inputs.benchmark import BenchmarkError, load_bundled_v1
from ..scores.compare import CompareError, combine_sets, compare_sets, format_report, make_combined_grade_json
from ..scores.export import GradeFileError, write_grade_json
from ..runs.gradesets import benchmark_for, load_grade_set, write_comparison
from ..inputs.subsets import load_subset
from ..store import store_exists
from ..scores.terminal import fit
from .common import DEFAULT_DB, default_db, load_benchmark_spec, open_store, say
from .parser import Command, UsageError, option


def _load_sets(specs: list[str], db: str | None, names: list[str] | None = None):
    store = open_store(db or default_db()) if (db or store_exists(default_db())) else None
    sets = []
    for i, spec in enumerate(specs):
        try:
            sets.append(load_grade_set(spec, store, name=(names[i] if names and i < len(names) else None)))
        except (KeyError, GradeFileError, CompareError, OSError) as e:
            msg = e.args[0] if isinstance(e, KeyError) and e.args else str(e)
            raise UsageError(f"{spec}: {msg}") from e
    return sets, store


def cmd_compare(args) -> int:
    if len(args.sets) < 2:
        raise UsageError("compare needs at least two grade sets (the first is the reference)")
    if args.resamples < 100:
        raise UsageError("--resamples must be at least 100")
    sets, store = _load_sets(args.sets, args.db, args.name)
    default = load_bundled_v1() if args.benchmark is None else load_benchmark_spec(args.benchmark)
    benchmark = benchmark_for(sets, store, default) if args.benchmark is None else default
    if args.subset:
        try:
            benchmark = load_subset(benchmark, args.subset)
        except (BenchmarkError, FileNotFoundError, ValueError) as e:
            raise UsageError(f"subset: {e}") from e
    try:
        cmp = compare_sets(benchmark, sets, resamples=args.resamples, seed=args.seed, top=args.top,
                           complete_only=args.complete_only)
    except CompareError as e:
        raise UsageError(str(e)) from e
    print(fit(format_report(cmp)))
    if args.out:
        for path in write_comparison(cmp, args.out).values():
            print(f"wrote {path}")
    return 0


def cmd_combine(args) -> int:
    if len(args.sets) < 2:
        raise UsageError("combine needs at least two grade sets")
    sets, _ = _load_sets(args.sets, args.db)
    try:
        combined = combine_sets(sets)
    except CompareError as e:
        raise UsageError(str(e)) from e
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    write_grade_json(out, make_combined_grade_json(combined, [s.name for s in sets]))
    means = combined.sample_scores()
    say(f"Combined {len(sets)} grade sets on {len(means)} common samples ({combined.n_runs} run(s)): "
          f"mean score {100 * sum(means.values()) / len(means):.1f}. {combined.note}")
    print(f"wrote {out}")
    return 0


COMPARE = Command("compare", "compare grade sets: Δ̄, B − A with 95%% intervals, agreement, noise floor", (
    option("sets", nargs="+", metavar="SET",
           help="grade JSONs, human-score files {id: score}, run ids (run:ID), human:RUN_ID (a run's manual "
                "scores), judge:RUN_ID (a run's judge grades without its overrides); "
                "join files with + to pool their runs. The first is the reference"),
    option("--benchmark", default=None,
           help="benchmark for capabilities (default: the first run's, else mmvet-v1)"),
    option("--subset", default=None, help="'bard' or a file of ids: compare on those samples only"),
    option("--out", default=None, help="folder for comparison.json, comparison.csv, comparison-samples.csv"),
    option("--db", default=None, help=f"SQLite database with the runs (default {DEFAULT_DB})"),
    option("--name", action="append", default=None,
           help="a display name per set, in order (repeat the option)"),
    option("--resamples", type=int, default=10_000, help="bootstrap resamples (default 10000)"),
    option("--seed", type=int, default=0, help="bootstrap seed (default 0)"),
    option("--top", type=int, default=10, help="most different samples listed per pair (default 10)"),
    option("--complete-only", action="store_true",
           help="refuse a grade set lacking grades for some of the benchmark's samples (exit 2); by default "
                "it is reported as partial, with its missing ids, and compared on the common samples"),
), run=cmd_compare)

COMBINE = Command("combine", "a grade set whose per-sample score is the mean of the sets' (paper Table 7)", (
    option("sets", nargs="+", metavar="SET", help="grade sets, as for compare"),
    option("--out", required=True, help="the combined official-format grade JSON to write"),
    option("--db", default=None, help=f"SQLite database with the runs (default {DEFAULT_DB})"),
), run=cmd_combine)
