"""`grade`: grade a results file with the judge (live, or through the Batch API), store every grade as it arrives
(`runs`, `grading`, `batch`), print the scores and write the official files. Rerunning the same command resumes."""
from __future__ import annotations

import asyncio
import sys
from pathlib import Path

from ..scores.export import GradeFileError
from ..successors.equivalence import estimate_run, format_capability_items, format_equivalent_line
from ..scores.terminal import fit, pack
from ..scores.graded import read_grade_file
from ..judging.grading import DEFAULT_CONCURRENCY, GRADED, grade_run
from ..judging.judge import DEFAULT_JUDGE_MODEL, make_judge
from ..successors.judgecheck import run_check
from ..inputs.results import ResultsError, read_results, select_predictions, validate_results
from ..runs.lifecycle import ImportRefused, create_run, export_run, import_grades, load_run_view
from .common import (BENCHMARK_OPTIONS, DEFAULT_DB, RETIRED, benchmark_of, checked_judge, default_db, judge_settings,
                     open_store, print_scores, retirement_note_of, say)
from .parser import Command, UsageError, option


def cmd_grade(args) -> int:
    try:
        results = read_results(args.results)
    except ResultsError as e:
        raise UsageError(str(e)) from e
    benchmark = benchmark_of(args)
    report = validate_results(results, benchmark)
    print(fit(report.summary()))
    try:
        predictions = select_predictions(results, benchmark, allow_missing=args.allow_missing,
                                         missing_hint="add --allow-missing to grade them as empty answers")
    except ResultsError as e:
        raise UsageError(str(e)) from e
    if args.runs < 1:
        raise UsageError("--runs must be at least 1")
    settings, key = judge_settings(args)
    if not args.import_grades:       # (grades imported below may leave nothing to call the judge for)
        settings = checked_judge(settings, key)
    model_name = args.model_name or results.model_name or Path(args.results).stem.removesuffix(".answers")
    store = open_store(args.db or default_db())
    run_id = create_run(store, benchmark=benchmark, spec=str(args.benchmark), predictions=predictions,
                        n_runs=args.runs, settings=settings, model_name=model_name,
                        results_format=results.format, reuse=True)
    if args.import_grades:
        try:
            imported = import_grades(store, run_id, read_grade_file(args.import_grades, benchmark))
        except (GradeFileError, ImportRefused, OSError) as e:
            raise UsageError(f"--import-grades: {e}") from e
        for warning in imported.warnings:
            print(f"Warning (--import-grades): {warning}", file=sys.stderr)
        print(f"Imported {imported.imported} grades from {args.import_grades}")
        graded = sum(n for status, n in store.count_grades(run_id).items() if status in GRADED)
        if graded < len(benchmark) * args.runs:
            settings = checked_judge(settings, key)
    total = len(benchmark) * args.runs
    reason = settings.not_official_reason()
    say(f"Run {run_id}: {len(benchmark)} samples x {args.runs} run(s) with judge {settings.model}"
        + (f"\n  [{reason}]" if reason else ""))
    if settings.shutdown_date:
        note = retirement_note_of(settings)
        say(f"Note: {note} (the endpoint announces its shutdown); stored grades stay viewable and exportable.")
    if args.batch:
        if settings.provider != "openai":
            raise UsageError("--batch needs an OpenAI-compatible endpoint with a Batch API (not --azure or --baseline)")
        outcome = asyncio.run(_grade_batch(store, run_id, benchmark, settings, key, args.batch_poll))
    else:
        outcome = asyncio.run(_grade(store, run_id, benchmark, settings, key, args.concurrency, total))
    view = load_run_view(store, run_id)
    stats = outcome.stats
    made = max(stats.requests, stats.calls)     # (a batch's lines are its calls)
    calls = ("No judge calls (the keyword baseline runs offline)" if settings.provider == "baseline" else
             f"Judge calls: {made} made ({stats.calls} answered), {stats.cached} reused from {store.path}")
    say(f"\n{outcome.status}: {outcome.message.rstrip('.')}. {calls}")
    if not view.n_graded:       # an official file with no grade in it would pass for a result
        say(f"No grade was made: no file written to {args.out}. Fix the cause above and run the same command "
              "again (it resumes this run).")
        return 1
    print_scores(view)
    equivalence = estimate_run(view, run_check(store, view.run.judge), store=store)
    say(format_equivalent_line(equivalence))
    if equivalence.available:
        print("\n".join(pack("  per capability (estimates):", format_capability_items(equivalence))))
    paths = export_run(view, args.out, equivalence=equivalence)
    for p in paths.values():
        print(f"wrote {p}")
    return 0 if outcome.status == "done" else 1


async def _grade(store, run_id, benchmark, settings, key, concurrency, total):
    from tqdm import tqdm

    judge = make_judge(settings, key)
    already = sum(n for s, n in store.count_grades(run_id).items() if s != "error")
    bar = tqdm(total=total, initial=already, unit="grade", desc="Grading", file=sys.stderr)
    ticker = asyncio.create_task(_show_rate_limit(bar, judge))
    errors: dict[str, list[str]] = {}       # error text -> the grades it hit (each cause printed once, at the end)
    try:
        def on_grade(row):
            bar.update(1)
            if row.status == "error":
                errors.setdefault(row.error or "error", []).append(f"{row.sample_id} run {row.run_index + 1}")
                bar.set_postfix(errored=sum(map(len, errors.values())))
        outcome = await grade_run(store, run_id, benchmark, judge, concurrency=concurrency, on_grade=on_grade)
    finally:
        ticker.cancel()
        bar.close()
        await judge.aclose()
    for text, hit in errors.items():
        if text in outcome.message:         # the cause that stopped the run: said once, in the outcome line
            continue
        shown = ", ".join(hit[:5]) + (" …" if len(hit) > 5 else "")
        print(f"{len(hit)} grade(s) errored ({shown}): {text}", file=sys.stderr)
    return outcome


async def _grade_batch(store, run_id, benchmark, settings, key, poll):
    from ..judging.batch import grade_run_batch

    judge = make_judge(settings, key)

    def on_grade(row):
        if row.status == "error":
            print(f"{row.sample_id} run {row.run_index + 1}: {row.error}", flush=True)
    try:
        return await grade_run_batch(store, run_id, benchmark, judge, poll=poll, on_grade=on_grade,
                                     on_event=lambda message: print(message, flush=True))
    finally:
        await judge.aclose()


async def _show_rate_limit(bar, judge) -> None:
    """Keep the progress bar's note current: "waiting for the rate limit until HH:MM:SS" while 429s are
    waited out."""
    import time

    shown = ""
    waiting_until = getattr(judge, "waiting_until", None)
    while waiting_until is not None:
        until = waiting_until()
        note = (f"waiting for the rate limit until {time.strftime('%H:%M:%S', time.localtime(until))}"
                if until is not None else "")
        if note != shown:
            bar.set_postfix_str(note, refresh=True)
            shown = note
        await asyncio.sleep(0.25)


GRADE = Command("grade", "grade a results file with the judge and write the official files", (
    option("results", help="results file: official JSON, LLaVA JSONL, lmms-eval logs, VLMEvalKit table"),
    *BENCHMARK_OPTIONS,
    option("--runs", type=int, default=1, help="independent judge runs (the paper uses 5)"),
    option("--judge-model", default=None,
           help=f"judge model (default {DEFAULT_JUDGE_MODEL}, the official judge: {RETIRED}; `judges` "
                "lists what your endpoint serves)"),
    option("--base-url", default=None, help="OpenAI-compatible base URL (vLLM, Ollama, ...); "
                                            "default OPENAI_BASE_URL or OpenAI"),
    option("--azure", action="store_true", help="use Azure OpenAI (AZURE_OPENAI_ENDPOINT, "
                                                "AZURE_OPENAI_API_KEY, OPENAI_API_VERSION)"),
    option("--baseline", action="store_true",
           help="offline keyword-matching judge (no key; NOT the MM-Vet metric)"),
    option("--max-tokens", type=int, default=3, help="judge answer limit (official: 3)"),
    option("--timeout", type=float, default=60.0, help="seconds per attempt (in total) before a retry"),
    option("--deadline", type=float, default=120.0,
           help="seconds a judge call may spend in attempts and backoff, retries included (rate-limit "
                "waits not counted)"),
    option("--concurrency", type=int, default=DEFAULT_CONCURRENCY,
           help=f"ceiling of judge calls in flight (default {DEFAULT_CONCURRENCY}); the calls in flight "
                "adapt to what the endpoint sustains and to its rate limits below that"),
    option("--rate-limit-wait", type=float, default=1800.0,
           help="seconds of rate limiting (429s with no answer in between) waited out before calls "
                "give up (default 1800); 429s never count as failures before that"),
    option("--batch", action="store_true",
           help="grade through the OpenAI Batch API: half the price, answers within 24 h; rerun the same "
                "command to resume (submitted batches are never submitted again)"),
    option("--batch-poll", type=float, default=30.0, help="seconds between two polls of a batch (default 30)"),
    option("--db", default=None, help=f"SQLite database (default {DEFAULT_DB}, or $MMVET_DATA_DIR)"),
    option("--allow-missing", action="store_true", help="grade missing predictions as empty answers"),
    option("--import-grades", default=None,
           help="an official grade JSON of the same results whose grades are reused (continue it without "
                "paying again); refused for another judge, prompt or benchmark"),
    option("--prompt-examples", default=None,
           help="grade with only these in-context examples of the official prompt, numbered 1-7 in order "
                "(e.g. 1,2,3,5; 'none'); default all seven = the official prompt. Any other choice is "
                "NOT the MM-Vet metric (paper Table 8)"),
), run=cmd_grade)
