"""Command line: ``python -m mmvet_core grade|aggregate|validate|compare|combine|prompt|leaderboard ...``.

Exit codes: 0 success; 1 grading finished incomplete or failed (grades so far are stored, rerun to resume), or
``judges`` found no model list; 2 bad input (file, benchmark, options, missing key, or a judge that cannot be called:
the official judge on an endpoint that no longer serves it, checked before any paid call); 130 interrupted (rerun
to resume).
"""
from __future__ import annotations

import argparse
import asyncio
import json
import os
import sys
import time
from dataclasses import replace
from pathlib import Path

from .benchmark import BenchmarkError, load_bundled_v1
from .compare import CompareError, combine_sets, compare_sets, format_report, make_combined_grade_json
from .export import GradeFileError, make_cap_csv_text, make_cap_int_csv_text, make_grade_json, \
    official_file_names, write_grade_json
from .gradesets import benchmark_for, load_grade_set, write_comparison
from .aggregate import aggregate_scores
from .graded import OFFICIAL_GRADE_NAME, missing_ids, missing_text, read_grade_file, source_label
from .grading import DEFAULT_CONCURRENCY, GRADED, grade_run
from .endpoints import format_judges, judge_rows, list_judge_models, preflight, retirement_of, today_utc
from .judge import BASELINE_NAME, DEFAULT_JUDGE_MODEL, JudgeSettings, make_judge
from .results import ResultsError, read_results, select_predictions, validate_results
from .equivalence import format_capability_line, format_equivalent_line
from .judgecheck import (call_count, distinct_prompts, format_check, load_manifest, load_references, run_judge_check,
                         stored_check)
from .prompt import examples_label, parse_examples, prompt_template, render_prompt
from .runs import (ImportRefused, create_run, export_run, import_grades, load_run_view, note_file_name,
                   run_equivalence,
                   write_intervals_csv)
from .stats import format_interval, score_intervals
from .sources import load_benchmark, load_subset
from .store import Store

DEFAULT_DB = Path("data") / "mmvet-grader.db"


def _retired_text(model: str) -> str:
    r = retirement_of(model)
    return f"shut down by {r.provider} on {r.shutdown_date.isoformat()}" if r else "see `judges`"


_RETIRED = _retired_text(DEFAULT_JUDGE_MODEL)


class UsageError(Exception):
    """Bad input the user must fix (exit code 2)."""


class Parser(argparse.ArgumentParser):
    """argparse without prefix matching (``--run 2`` is not silently ``--runs 2``; every subparser inherits it)
    and with "did you mean" for a mistyped option, looked up in the subcommand that was given."""

    def __init__(self, *args, **kwargs):
        kwargs["allow_abbrev"] = False
        super().__init__(*args, **kwargs)

    def parse_args(self, args=None, namespace=None):
        parsed, extras = self.parse_known_args(args, namespace)
        if extras:
            command = self._subparser(getattr(parsed, "command", None))
            hints = [hint for arg in extras if (hint := suggest_option(arg, command or self))]
            (command or self).error(f"unrecognized arguments: {' '.join(extras)}"
                                    + (f" ({'; '.join(hints)})" if hints else ""))
        return parsed

    def _subparser(self, name: str | None) -> argparse.ArgumentParser | None:
        for action in self._actions:
            if isinstance(action, argparse._SubParsersAction) and name in action.choices:
                return action.choices[name]
        return None


def suggest_option(arg: str, parser: argparse.ArgumentParser) -> str | None:
    """``--run: did you mean --runs?`` for an option `parser` does not know but nearly does (difflib), else None.

    >>> p = Parser(prog="x"); _ = p.add_argument("--runs"); _ = p.add_argument("--judge-model")
    >>> suggest_option("--run", p), suggest_option("--judge_model=x", p), suggest_option("--zzz", p)
    ('--run: did you mean --runs?', '--judge_model: did you mean --judge-model?', None)
    """
    import difflib

    if not arg.startswith("-"):
        return None
    flag = arg.split("=", 1)[0]
    options = [o for action in parser._actions for o in action.option_strings if o.startswith("--")]
    close = difflib.get_close_matches(flag, options, n=1, cutoff=0.6)
    return f"{flag}: did you mean {close[0]}?" if close else None


def _add_benchmark_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("--benchmark", default="mmvet-v1",
                   help="mmvet-v1 (bundled), mmvet-v2 (hub), a folder / mm-vet.zip / metadata JSON, or hf:OWNER/NAME")
    p.add_argument("--subset", default=None, help="'bard' for the official Bard set, or a file of ids")
    p.add_argument("--out", default="results", help="folder for the official output files (default: results)")
    p.add_argument("--model-name", default=None, help="model name in file names (default: the file's stem)")


def build_parser() -> argparse.ArgumentParser:
    parser = Parser(prog="python -m mmvet_core",
                                     description="MM-Vet grading with an LLM judge, identical to the official "
                                                 "evaluator when the judge answers the same.")
    sub = parser.add_subparsers(dest="command", required=True)

    g = sub.add_parser("grade", help="grade a results file with the judge and write the official files")
    g.add_argument("results", help="results file: official JSON, LLaVA JSONL, lmms-eval logs, VLMEvalKit table")
    _add_benchmark_args(g)
    g.add_argument("--runs", type=int, default=1, help="independent judge runs (the paper uses 5)")
    g.add_argument("--judge-model", default=None,
                   help=f"judge model (default {DEFAULT_JUDGE_MODEL}, the official judge: {_RETIRED}; `judges` "
                        "lists what your endpoint serves)")
    g.add_argument("--base-url", default=None, help="OpenAI-compatible base URL (vLLM, Ollama, ...); "
                                                    "default OPENAI_BASE_URL or OpenAI")
    g.add_argument("--azure", action="store_true", help="use Azure OpenAI (AZURE_OPENAI_ENDPOINT, "
                                                        "AZURE_OPENAI_API_KEY, OPENAI_API_VERSION)")
    g.add_argument("--baseline", action="store_true",
                   help="offline keyword-matching judge (no key; NOT the MM-Vet metric)")
    g.add_argument("--max-tokens", type=int, default=3, help="judge answer limit (official: 3)")
    g.add_argument("--timeout", type=float, default=60.0, help="seconds per attempt (in total) before a retry")
    g.add_argument("--deadline", type=float, default=120.0,
                   help="seconds a judge call may spend in attempts and backoff, retries included (rate-limit "
                        "waits not counted)")
    g.add_argument("--concurrency", type=int, default=DEFAULT_CONCURRENCY,
                   help=f"ceiling of judge calls in flight (default {DEFAULT_CONCURRENCY}); the calls in flight "
                        "adapt to what the endpoint sustains and to its rate limits below that")
    g.add_argument("--rate-limit-wait", type=float, default=1800.0,
                   help="seconds of rate limiting (429s with no answer in between) waited out before calls "
                        "give up (default 1800); 429s never count as failures before that")
    g.add_argument("--batch", action="store_true",
                   help="grade through the OpenAI Batch API: half the price, answers within 24 h; rerun the same "
                        "command to resume (submitted batches are never submitted again)")
    g.add_argument("--batch-poll", type=float, default=30.0, help="seconds between two polls of a batch (default 30)")
    g.add_argument("--db", default=None, help=f"SQLite database (default {DEFAULT_DB}, or $MMVET_DATA_DIR)")
    g.add_argument("--allow-missing", action="store_true", help="grade missing predictions as empty answers")
    g.add_argument("--import-grades", default=None,
                   help="an official grade JSON of the same results whose grades are reused (continue it without "
                        "paying again); refused for another judge, prompt or benchmark")
    g.add_argument("--prompt-examples", default=None,
                   help="grade with only these in-context examples of the official prompt, numbered 1-7 in order "
                        "(e.g. 1,2,3,5; 'none'); default all seven = the official prompt. Any other choice is "
                        "NOT the MM-Vet metric (paper Table 8)")

    a = sub.add_parser("aggregate", help="scores and official CSVs from a grade file, without any judge call: an "
                                         "official grade JSON, a VLMEvalKit graded table ({model}_MMVet_{judge}"
                                         ".xlsx/.tsv/.csv/.json) or a graded lmms-eval sample log")
    a.add_argument("grade_json", metavar="GRADE_FILE")
    _add_benchmark_args(a)
    a.add_argument("--judge-name", default=None, help="judge name in file names (default: from the file)")
    a.add_argument("--samples", action="store_true", help="also print every sample's score and judge")
    a.add_argument("--complete-only", action="store_true",
                   help="refuse a grade file that lacks a grade for some sample (exit 2); by default its total is "
                        "shown labelled partial, with the missing ids, and no official CSV is written")

    c = sub.add_parser("compare", help="compare grade sets: Δ̄, B − A with 95%% intervals, agreement, noise floor")
    c.add_argument("sets", nargs="+", metavar="SET",
                   help="grade JSONs, human-score files {id: score}, run ids (run:ID), human:RUN_ID (a run's manual "
                        "scores), judge:RUN_ID (a run's judge grades without its overrides); "
                        "join files with + to pool their runs. The first is the reference")
    c.add_argument("--benchmark", default=None,
                   help="benchmark for capabilities (default: the first run's, else mmvet-v1)")
    c.add_argument("--subset", default=None, help="'bard' or a file of ids: compare on those samples only")
    c.add_argument("--out", default=None, help="folder for comparison.json, comparison.csv, comparison-samples.csv")
    c.add_argument("--db", default=None, help=f"SQLite database with the runs (default {DEFAULT_DB})")
    c.add_argument("--name", action="append", default=None,
                   help="a display name per set, in order (repeat the option)")
    c.add_argument("--resamples", type=int, default=10_000, help="bootstrap resamples (default 10000)")
    c.add_argument("--seed", type=int, default=0, help="bootstrap seed (default 0)")
    c.add_argument("--top", type=int, default=10, help="most different samples listed per pair (default 10)")
    c.add_argument("--complete-only", action="store_true",
                   help="refuse a grade set lacking grades for some of the benchmark's samples (exit 2); by default "
                        "it is reported as partial, with its missing ids, and compared on the common samples")

    m = sub.add_parser("combine", help="a grade set whose per-sample score is the mean of the sets' (paper Table 7)")
    m.add_argument("sets", nargs="+", metavar="SET", help="grade sets, as for compare")
    m.add_argument("--out", required=True, help="the combined official-format grade JSON to write")
    m.add_argument("--db", default=None, help=f"SQLite database with the runs (default {DEFAULT_DB})")

    j = sub.add_parser("judge-check", help="grade the bundled reference sets (model outputs with real official "
                                           "GPT-4-0613 grades) with a candidate judge and report how far it is, "
                                           "with 95%% intervals")
    j.add_argument("--judge-model", default=None,
                   help=f"candidate judge model (default {DEFAULT_JUDGE_MODEL}: {_RETIRED}; `judges` lists what your "
                        "endpoint serves)")
    j.add_argument("--base-url", default=None, help="its OpenAI-compatible base URL (vLLM, Ollama, ...)")
    j.add_argument("--azure", action="store_true", help="use Azure OpenAI (as for grade)")
    j.add_argument("--baseline", action="store_true", help="check the offline keyword baseline itself")
    j.add_argument("--max-tokens", type=int, default=3, help="judge answer limit (official: 3)")
    j.add_argument("--timeout", type=float, default=60.0, help="seconds per judge call before a retry")
    j.add_argument("--concurrency", type=int, default=DEFAULT_CONCURRENCY, help="ceiling of judge calls in flight")
    j.add_argument("--rate-limit-wait", type=float, default=1800.0, help="as for grade")
    j.add_argument("--db", default=None, help=f"SQLite database (default {DEFAULT_DB}, or $MMVET_DATA_DIR)")
    j.add_argument("--references", default="default",
                   help="reference sets to grade: 'default' (those marked default in assets/reference/"
                        "references.json), 'all', or names joined by commas; each set costs up to 218 judge calls")
    j.add_argument("--resamples", type=int, default=10_000, help="bootstrap resamples of the intervals (default 10000)")
    j.add_argument("--seed", type=int, default=0, help="bootstrap seed (default 0)")
    j.add_argument("--out", default=None, help="folder for judge-check.json (the full result)")

    js = sub.add_parser("judges", help="the chat models your endpoint serves, each with its shutdown date and, "
                                       "when checked, its Δ̄ and total shift to the official judge")
    js.add_argument("--base-url", default=None, help="OpenAI-compatible base URL (default OPENAI_BASE_URL or OpenAI)")
    js.add_argument("--azure", action="store_true", help="Azure OpenAI: its deployments, where the resource lists them")
    js.add_argument("--db", default=None, help=f"SQLite database with stored judge checks (default {DEFAULT_DB})")
    js.add_argument("--timeout", type=float, default=15.0, help="seconds the model list may take (default 15)")
    js.set_defaults(judge_model=DEFAULT_JUDGE_MODEL, baseline=False, max_tokens=3, rate_limit_wait=1800.0)
    lb = sub.add_parser("leaderboard", help="the server's leaderboard: publish a run, show, hide, export, import")
    lsub = lb.add_subparsers(dest="board_command", required=True)
    lp = lsub.add_parser("publish", help="publish a finished run (a frozen copy of its scores) under a display name")
    lp.add_argument("run", metavar="RUN", help="the run id (printed by grade: 'Run <id>: ...')")
    lp.add_argument("--name", required=True, help="display name (plain text, at most 80 characters)")
    lp.add_argument("--link", default="", help="optional https link (paper, model card)")
    lp.add_argument("--republish", action="store_true",
                    help="the run is on the board already: store its current scores as a new version")
    ls = lsub.add_parser("show", help="the board with ranks (paired bootstrap within each judge and benchmark)")
    ls.add_argument("--json", action="store_true", help="print JSON: each entry with name, total, ci [lo, hi], "
                                                         "rank [best, worst], judge, benchmark, runs, ...")
    ls.add_argument("--judge", default="", help="only this judge (a name, or official / successor / baseline)")
    ls.add_argument("--benchmark", default="", help="only this benchmark (v1, v1-bard, v2, ...)")
    ls.add_argument("--query", default="", help="only names containing this text")
    ls.add_argument("--references", action="store_true", help="include the paper's models (unranked)")
    lh = lsub.add_parser("hide", help="hide an entry from the board (host); --show shows it again")
    lh.add_argument("entry", metavar="ENTRY")
    lh.add_argument("--show", action="store_true", help="show a hidden entry again")
    le = lsub.add_parser("export", help="write the board (every entry and version) to a folder that "
                                        "datasets.load_dataset reads (board.jsonl + README.md card)")
    le.add_argument("dir", metavar="DIR")
    li = lsub.add_parser("import", help="restore entries from an export folder")
    li.add_argument("dir", metavar="DIR")
    for p_ in (lp, ls, lh, le, li):
        p_.add_argument("--db", default=None, help=f"SQLite database (default {DEFAULT_DB}, or $MMVET_DATA_DIR)")

    pr = sub.add_parser("prompt", help="print the judge prompt that will be sent")
    pr.add_argument("--benchmark", default="mmvet-v1", help="mmvet-v1, mmvet-v2 or a benchmark as for grade")
    pr.add_argument("--prompt-examples", default=None, help="as for grade (default: all seven, official)")
    pr.add_argument("--sample", default=None, help="fill the prompt for this sample id (default: the header only)")
    pr.add_argument("--prediction", default="<the model's answer>", help="the prediction to fill in with --sample")

    v = sub.add_parser("validate", help="check a results file against the benchmark (no judge call)")
    v.add_argument("results")
    v.add_argument("--benchmark", default="mmvet-v1")
    v.add_argument("--subset", default=None)
    return parser


def _benchmark(args) -> object:
    try:
        return load_subset(load_benchmark(args.benchmark), args.subset)
    except (BenchmarkError, FileNotFoundError, ValueError) as e:
        raise UsageError(f"benchmark: {e}") from e


def _default_db() -> Path:
    data_dir = os.environ.get("MMVET_DATA_DIR")
    return Path(data_dir) / "mmvet-grader.db" if data_dir else DEFAULT_DB


def _examples(args) -> tuple[int, ...] | None:
    try:
        return parse_examples(getattr(args, "prompt_examples", None))
    except ValueError as e:
        raise UsageError(str(e)) from e


def _judge_settings(args) -> tuple[JudgeSettings, str | None]:
    examples = _examples(args)
    if args.baseline:
        return JudgeSettings(model=BASELINE_NAME, provider="baseline", prompt_examples=examples), None
    model = args.judge_model or DEFAULT_JUDGE_MODEL
    common = dict(model=model, max_tokens=args.max_tokens, timeout=args.timeout, rate_limit_wait=args.rate_limit_wait,
                  prompt_examples=examples, deadline=getattr(args, "deadline", 120.0))   # judge-check has no --deadline
    if args.azure:
        endpoint = args.base_url or os.environ.get("AZURE_OPENAI_ENDPOINT")
        key = os.environ.get("AZURE_OPENAI_API_KEY")
        version = os.environ.get("OPENAI_API_VERSION")
        if not (endpoint and key and version):
            raise UsageError("Azure needs AZURE_OPENAI_ENDPOINT (or --base-url), AZURE_OPENAI_API_KEY and "
                             "OPENAI_API_VERSION in the environment")
        return JudgeSettings(provider="azure", base_url=endpoint, api_version=version, **common), key
    base_url = args.base_url or os.environ.get("OPENAI_BASE_URL") or None
    key = os.environ.get("OPENAI_API_KEY")
    if not key and not base_url:
        raise UsageError("no judge key: set OPENAI_API_KEY (or pass --base-url for a local server, "
                         "or --baseline for the offline keyword baseline, which is not the MM-Vet metric)")
    return JudgeSettings(base_url=base_url, **common), key


def _print_scores(view) -> None:
    partial = None if view.scores.complete else (view.n_graded, view.n_expected)
    _print_score_lines(view.benchmark, view.scores, view.effective_scores(), partial=partial,
                       note=view.metric_note)


def total_line(s, partial: tuple[int, int] | None = None, note: str | None = None) -> str:
    """The CLI's total line. A partial total says so on the same line, with how many grades it holds:
    ``Total: 39.1 (partial, 74 of 218 grades: not a final score)``."""
    total = "n/a" if s.total.mean is None else f"{s.total.mean:.1f}"
    tail = f"  [{note}]" if note else ""
    if partial is not None:
        return f"Total: {total} (partial, {partial[0]} of {partial[1]} grades: not a final score){tail}"
    spread = "" if s.total.std is None else f" ± {s.total.std:.1f}"
    return f"Total: {total}{spread}  (runs: {', '.join(f'{x:.1f}' for x in s.runs if x is not None)}){tail}"


def _print_score_lines(benchmark, s, per_run_scores, *, partial: tuple[int, int] | None = None,
                       note: str | None = None) -> None:
    """Total, capabilities and integrations, each with its 95% bootstrap interval over samples beside the
    official std over runs; a `partial` grade set (graded, expected) is labelled partial and has no interval."""
    if partial is not None:
        print(f"\n{total_line(s, partial, note)}")
        ci = {}
    else:
        ci = {(r.kind, r.name): format_interval(r.low, r.high) for r in score_intervals(benchmark, per_run_scores)}
        print(f"\n{total_line(s, None, note)}  95% interval over samples {ci.get(('total', 'total'), 'n/a')}")
        print("  (± is the official std over judge runs; the interval is the sampling error over the questions, "
              "bootstrap, seed 0)")
    def line(cols, kind):
        return "  ".join(f"{c.name} {c.mean:.1f} {ci.get((kind, c.name), '')}".rstrip() if c.mean is not None
                         else f"{c.name} n/a" for c in cols)
    label = " (partial)" if partial is not None else ""
    print(f"Capabilities{label}: {line(s.capabilities, 'capability')}")
    print(f"Integrations{label}: {line(s.integrations, 'integration')}")


def cmd_grade(args) -> int:
    try:
        results = read_results(args.results)
    except ResultsError as e:
        raise UsageError(str(e)) from e
    benchmark = _benchmark(args)
    report = validate_results(results, benchmark)
    print(report.summary())
    try:
        predictions = select_predictions(results, benchmark, allow_missing=args.allow_missing,
                                         missing_hint="add --allow-missing to grade them as empty answers")
    except ResultsError as e:
        raise UsageError(str(e)) from e
    if args.runs < 1:
        raise UsageError("--runs must be at least 1")
    settings, key = _judge_settings(args)
    if not args.import_grades:       # (grades imported below may leave nothing to call the judge for)
        settings = _checked_judge(settings, key)
    model_name = args.model_name or results.model_name or Path(args.results).stem.removesuffix(".answers")
    store = Store(args.db or _default_db())
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
            settings = _checked_judge(settings, key)
    total = len(benchmark) * args.runs
    reason = settings.not_official_reason()
    print(f"Run {run_id}: {len(benchmark)} samples x {args.runs} run(s) with judge {settings.model}"
          + (f"  [{reason}]" if reason else ""))
    if settings.shutdown_date:
        note = retirement_note_of(settings)
        print(f"Note: {note} (the endpoint announces its shutdown); stored grades stay viewable and exportable.")
    if args.batch:
        if settings.provider != "openai":
            raise UsageError("--batch needs an OpenAI-compatible endpoint with a Batch API (not --azure or --baseline)")
        outcome = asyncio.run(_grade_batch(store, run_id, benchmark, settings, key, args.batch_poll))
    else:
        outcome = asyncio.run(_grade(store, run_id, benchmark, settings, key, args.concurrency, total))
    view = load_run_view(store, run_id)
    stats = outcome.stats
    made = max(stats.requests, stats.calls)     # (a batch's lines are its calls)
    print(f"\n{outcome.status}: {outcome.message.rstrip('.')}. Judge calls: {made} made "
          f"({stats.calls} answered), {stats.cached} reused from {store.path}")
    if not view.n_graded:       # an official file with no grade in it would pass for a result
        print(f"No grade was made: no file written to {args.out}. Fix the cause above and run the same command "
              "again (it resumes this run).")
        return 1
    _print_scores(view)
    equivalence = run_equivalence(store, view)
    print(format_equivalent_line(equivalence))
    if equivalence.available:
        print(f"  per capability (estimates): {format_capability_line(equivalence)}")
    paths = export_run(view, args.out, equivalence=equivalence)
    for p in paths.values():
        print(f"wrote {p}")
    return 0 if outcome.status == "done" else 1


def retirement_note_of(settings: JudgeSettings) -> str | None:
    from datetime import date

    from .endpoints import retirement_note
    return retirement_note(settings.model, date.fromisoformat(settings.shutdown_date), today_utc()) \
        if settings.shutdown_date else None


def _checked_judge(settings: JudgeSettings, key: str | None) -> JudgeSettings:
    """Before any paid call: read the endpoint's model list (at most one probe when it has none and the judge is
    the official one). The official judge the endpoint no longer serves is a `UsageError` (exit 2) that says why
    and lists the judges it serves; no other judge is picked. Returns `settings` with the endpoint's announced
    shutdown date recorded."""
    if settings.provider == "baseline":
        return settings
    pre = asyncio.run(_preflight(settings, key))
    for warning in pre.warnings:
        print(f"Warning: {warning}", file=sys.stderr)
    if pre.stop:
        raise UsageError(pre.message())
    if pre.shutdown_date is not None:
        return replace(settings, shutdown_date=pre.shutdown_date.isoformat())
    return settings


async def _preflight(settings: JudgeSettings, key: str | None):
    judge = make_judge(settings, key)
    try:
        return await preflight(settings, key, today=today_utc(), judge=judge)
    finally:
        await judge.aclose()


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
    from .batch import grade_run_batch

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
    benchmark = _benchmark(args)
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
    print(f"Grade file: {source_label(grades.source)} · {len(grades.scores)} samples × {grades.n_runs} run(s)"
          + (f" · ids from {grades.id_source}" if grades.id_source not in ("", "keys") else ""))
    print(f"Judge: {grades.judge_text()}")
    print(f"Metric: {note or 'the official MM-Vet metric (gpt-4-0613, official prompt)'}")
    for line in grades.notes:
        print(f"Note: {line}")
    graded = sum(s is not None for sid in benchmark.ids for s in (grades.scores.get(sid) or [])[:grades.n_runs])
    partial = (graded, len(benchmark) * grades.n_runs) if missing else None
    if missing:
        print(f"PARTIAL: the file has {missing_text(missing, benchmark)}. The scores below are over the graded "
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
            print(f"wrote {out / names[key]}")
    if grades.source != "official-grade-json":   # every sample in the official grade format too
        records = {sid: {"model": grades.judges[sid], "content": grades.contents[sid], "score": grades.scores[sid],
                         **({"prediction": grades.predictions[sid]} if sid in grades.predictions else {}),
                         **({"metric_note": note} if note else {})} for sid in benchmark.ids if sid in grades.scores}
        write_grade_json(out / names["grade"], make_grade_json(records))
        print(f"wrote {out / names['grade']}")
    if missing:
        note_path = out / note_file_name(model, judge, grades.n_runs, subset)
        note_path.write_text(f"{model} graded by {grades.judge_text()} ({Path(args.grade_json).name})\n"
                             f"PARTIAL: {graded} of {len(benchmark) * grades.n_runs} grades; "
                             f"{missing_text(missing, benchmark)}. Any total of this file is partial, not a final "
                             "score.\n" + (f"Metric: {note}\n" if note else ""), encoding="utf-8")
        print(f"wrote {note_path}")
    else:
        ci_path = write_intervals_csv(out, benchmark, grades.scores, model, judge, grades.n_runs, subset)
        print(f"wrote {ci_path}")
    _print_score_lines(benchmark, scores, grades.scores, partial=partial, note=note)
    if args.samples:
        for sid in benchmark.ids:
            runs = " / ".join("—" if x is None else f"{x:.1f}" for x in grades.scores.get(sid, [None]))
            judges = ", ".join(dict.fromkeys(j or "unknown" for j in grades.judges.get(sid, [])))
            print(f"{sid}\t{','.join(benchmark.samples[sid].capabilities)}\t{runs}\t{judges or 'no grade'}")
    return 0


def _load_sets(specs: list[str], db: str | None, names: list[str] | None = None):
    store = Store(db or _default_db()) if (db or _default_db().exists()) else None
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
    default = load_bundled_v1() if args.benchmark is None else _load_benchmark_spec(args.benchmark)
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
    print(format_report(cmp))
    if args.out:
        for path in write_comparison(cmp, args.out).values():
            print(f"wrote {path}")
    return 0


def _load_benchmark_spec(spec: str):
    try:
        return load_benchmark(spec)
    except (BenchmarkError, FileNotFoundError, ValueError) as e:
        raise UsageError(f"benchmark: {e}") from e


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
    print(f"Combined {len(sets)} grade sets on {len(means)} common samples ({combined.n_runs} run(s)): "
          f"mean score {100 * sum(means.values()) / len(means):.1f}. {combined.note}")
    print(f"wrote {out}")
    return 0


def cmd_judge_check(args) -> int:
    settings, key = _judge_settings(args)
    store = Store(args.db or _default_db())
    try:
        refs = load_references(which=args.references)
    except ValueError as e:
        raise UsageError(str(e)) from e
    if args.resamples < 100:
        raise UsageError("--resamples must be at least 100")
    others = [s.model for s in load_manifest() if s.model not in {r.model for r in refs}]
    n, distinct = call_count(refs=refs), distinct_prompts(refs=refs)
    print(f"Judge check: {settings.model} grades {len(refs)} reference sets ({', '.join(r.model for r in refs)}) "
          f"with the official prompt: {n} judge calls at 1 run ({distinct} distinct prompts are asked, identical "
          f"ones once; more calls if it answers something unparsable: the official re-asks). Answers already "
          f"stored in {store.path} are reused for free."
          + (" (The keyword baseline runs offline: no paid call.)" if settings.provider == "baseline" else "")
          + (f" Not included (--references all adds up to {218 * len(others)} calls): {', '.join(others)}."
             if others else ""))
    settings = _checked_judge(settings, key)        # never spend on a judge the endpoint no longer serves
    note = retirement_note_of(settings)
    if note:
        print(f"Warning: {note}; its check and its grades stay stored and viewable after that date.")
    held = [m for m in (getattr(stored_check(store, settings), "models", None) or []) if m not in
            {r.model for r in refs}]
    if held:
        print(f"This judge's check already holds {', '.join(held)}: they stay in it (a check grows; their answers "
              "are stored, no call).")
    result = asyncio.run(_judge_check(store, settings, key, args.concurrency, n, refs, args.resamples, args.seed))
    print(f"\nJudge calls: {result.calls} made, {result.cached} reused (grades already stored, or answered from "
          "the store).")
    when = time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime(result.created_at))
    print(f"Check {result.check_id} of {when}" + (": unchanged (same reference sets, same grades), kept as it was."
                                                   if result.unchanged else "."))
    print(format_check(result))
    if args.out:
        out = Path(args.out)
        out.mkdir(parents=True, exist_ok=True)
        (out / "judge-check.json").write_text(json.dumps(result.to_dict(), indent=2), encoding="utf-8")
        print(f"wrote {out / 'judge-check.json'}")
    return 0 if result.n_graded == result.n_expected else 1


async def _judge_check(store, settings, key, concurrency, total, refs, resamples, seed):
    from tqdm import tqdm

    bar = tqdm(total=total, unit="grade", desc="Checking", file=sys.stderr)
    try:
        def on_grade(row):
            bar.update(1)
            if row.status == "error":
                bar.write(f"{row.sample_id}: {row.error}")
        return await run_judge_check(store, settings, key, concurrency=concurrency, on_grade=on_grade, refs=refs,
                                     resamples=resamples, seed=seed)
    finally:
        bar.close()


def cmd_judges(args) -> int:
    settings, key = _judge_settings(args)
    settings = replace(settings, timeout=args.timeout)
    where = settings.base_url or "https://api.openai.com/v1"
    models = asyncio.run(list_judge_models(settings, key, timeout=args.timeout))
    db = Path(args.db) if args.db else _default_db()
    store = Store(db) if db.exists() else None
    today = today_utc()
    rows = judge_rows(models, settings, today, store) if models.known else []
    print(format_judges(rows, models, where, today))
    return 0 if models.known else 1


def cmd_prompt(args) -> int:
    examples = _examples(args)
    spec = str(args.benchmark)
    if spec in ("mmvet-v1", "mmvet-v2", "v1", "v2") and args.sample is None:
        version = "v2" if spec.endswith("v2") else "v1"
        text = prompt_template(version, examples)
    else:
        benchmark = load_bundled_v1() if spec in ("mmvet-v1", "v1") else _load_benchmark_spec(spec)
        version = benchmark.version
        if args.sample is None:
            text = prompt_template(version, examples)
        else:
            if args.sample not in benchmark.samples:
                raise UsageError(f"no sample {args.sample!r} in {benchmark.name}")
            sample = benchmark.samples[args.sample]
            text = render_prompt(version, sample.question, sample.answer, args.prediction, examples=examples)
    label = examples_label(examples)
    official = "" if examples is None else "  [NOT the official MM-Vet prompt]"
    print(f"# MM-Vet {version} judge prompt, in-context examples: {label}{official}", file=sys.stderr)
    sys.stdout.write(text)
    if not text.endswith("\n"):
        sys.stdout.write("\n")
    return 0


def cmd_validate(args) -> int:
    try:
        results = read_results(args.results)
    except ResultsError as e:
        raise UsageError(str(e)) from e
    report = validate_results(results, _benchmark(args))
    print(report.summary())
    return 0 if report.ok else 1


def cmd_leaderboard(args) -> int:
    """The host's leaderboard commands (whoever runs the CLI on the database is the host)."""
    from . import __version__
    from . import leaderboard as lb

    store = Store(args.db or _default_db())
    try:
        if args.board_command == "publish":
            view = load_run_view(store, args.run)
            if view is None:
                raise UsageError(f"no run {args.run!r} in {store.path}")
            entry = lb.publish_view(store, view, name=args.name, link=args.link, owner=view.run.owner,
                                    republish=args.republish, tool_version=__version__)
            print(f"Published {entry.name} as entry {entry.id} (version {entry.version}): total "
                  f"{entry.meta['total']:.1f}, judge {entry.meta['judge']} ({entry.meta['judge_kind']}), "
                  f"{entry.meta['benchmark_label']}")
        elif args.board_command == "show":
            entries = lb.load_entries(store)
            rows = lb.board_rows(entries, lb.rank_groups(entries)) + (lb.paper_rows() if args.references else [])
            f = lb.BoardFilter(judge=args.judge, benchmark=args.benchmark, query=args.query,
                               references=args.references)
            rows = lb.filter_rows(rows, f)
            if args.json:
                print(lb.rows_json(rows, f))
            else:
                print(lb.describe_entries(rows))
                print(f"\n{lb.RANK_NOTE}")
        elif args.board_command == "hide":
            if lb.load_entry(store, args.entry) is None:
                raise UsageError(f"no leaderboard entry {args.entry!r}")
            store.update_board_entry(args.entry, hidden=0 if args.show else 1)
            print(f"Entry {args.entry} is {'shown' if args.show else 'hidden'}.")
        elif args.board_command == "export":
            path = lb.export_board(store, args.dir)
            print(f"wrote {path} and {Path(args.dir) / 'README.md'} (load with datasets.load_dataset({args.dir!r}))")
        elif args.board_command == "import":
            n = lb.import_board(store, args.dir)
            print(f"imported {n} entry versions from {args.dir}")
    except lb.BoardError as e:
        raise UsageError(str(e)) from e
    finally:
        store.close()
    return 0


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        return {"grade": cmd_grade, "aggregate": cmd_aggregate, "validate": cmd_validate, "compare": cmd_compare,
                "combine": cmd_combine, "prompt": cmd_prompt, "judge-check": cmd_judge_check,
                "judges": cmd_judges, "leaderboard": cmd_leaderboard}[args.command](args)
    except UsageError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("\ninterrupted: every grade so far is stored; rerun the same command to resume", file=sys.stderr)
        return 130
