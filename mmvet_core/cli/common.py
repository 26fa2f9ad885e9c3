"""What several commands share: the database's default place, the benchmark option group, the judge settings from
the options and the environment with the check before any paid call, and the score lines printed after grading or
aggregating."""
from __future__ import annotations

import asyncio
import os
import sys
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import replace
from datetime import date
from pathlib import Path

from ..inputs.benchmark import BenchmarkError
from ..judging.endpoints import preflight, retirement_note, retirement_of, today_utc
from ..judging.judge import BASELINE_NAME, DEFAULT_JUDGE_MODEL, JudgeSettings, make_judge
from ..judging.prompt import parse_examples
from ..inputs.sources import load_benchmark
from ..inputs.subsets import load_subset
from ..scores.stats import format_interval, score_intervals
from ..store import DATABASE_URL_VAR
from ..scores.terminal import fit, pack
from .parser import UsageError, option

DEFAULT_DB = Path("data") / "mmvet-grader.db"


#: The stores the running command opened with `open_store` (a list per `main` call, so that commands run side by
#: side in threads of one process close only their own); `main` closes them when the command ends, whatever its
#: outcome, so that a command called from a process that goes on (a script, a notebook, a test) leaves no
#: connection behind and SQLite's write-ahead log is folded into the database file, as when a process exits.
_OPENED: ContextVar[list | None] = ContextVar("mmvet_cli_stores", default=None)


def open_store(location):
    """`Store(location)`, closed by `main` when the command ends."""
    from ..store import Store

    store = Store(location)
    opened = _OPENED.get()
    if opened is not None:
        opened.append(store)
    return store


@contextmanager
def closing_stores():
    """Close, when the block ends, every store `open_store` opened in it."""
    opened: list = []
    token = _OPENED.set(opened)
    try:
        yield
    finally:
        _OPENED.reset(token)
        while opened:
            opened.pop().close()


def say(text: str) -> None:
    """Print a report's prose wrapped at the report width (`terminal.fit`: at most 100 columns)."""
    print(fit(text))


def _retired_text(model: str) -> str:
    r = retirement_of(model)
    return f"shut down by {r.provider} on {r.shutdown_date.isoformat()}" if r else "see `judges`"


#: What the options' help says of the official judge (its shutdown, from retired_judges.json).
RETIRED = _retired_text(DEFAULT_JUDGE_MODEL)

#: The benchmark, subset and output options of `grade` and `aggregate`.
BENCHMARK_OPTIONS = (
    option("--benchmark", default="mmvet-v1",
           help="mmvet-v1 (bundled), mmvet-v2 (hub), a folder / mm-vet.zip / metadata JSON, or hf:OWNER/NAME"),
    option("--subset", default=None, help="'bard' for the official Bard set, or a file of ids"),
    option("--out", default="results", help="folder for the official output files (default: results)"),
    option("--model-name", default=None, help="model name in file names (default: the file's stem)"),
)


def benchmark_of(args) -> object:
    """The benchmark (and subset) the options name; a `UsageError` when it cannot be loaded."""
    try:
        return load_subset(load_benchmark(args.benchmark), args.subset)
    except (BenchmarkError, FileNotFoundError, ValueError) as e:
        raise UsageError(f"benchmark: {e}") from e


def load_benchmark_spec(spec: str):
    try:
        return load_benchmark(spec)
    except (BenchmarkError, FileNotFoundError, ValueError) as e:
        raise UsageError(f"benchmark: {e}") from e


def default_db() -> Path | str:
    """The CLI's database: ``$MMVET_DATABASE_URL`` when set, else the data folder's SQLite file."""
    data_dir = os.environ.get("MMVET_DATA_DIR")
    return (os.environ.get(DATABASE_URL_VAR, "").strip()
            or (Path(data_dir) / "mmvet-grader.db" if data_dir else DEFAULT_DB))


def examples_of(args) -> tuple[int, ...] | None:
    try:
        return parse_examples(getattr(args, "prompt_examples", None))
    except ValueError as e:
        raise UsageError(str(e)) from e


def judge_settings(args) -> tuple[JudgeSettings, str | None]:
    examples = examples_of(args)
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


def retirement_note_of(settings: JudgeSettings) -> str | None:
    return retirement_note(settings.model, date.fromisoformat(settings.shutdown_date), today_utc()) \
        if settings.shutdown_date else None


def checked_judge(settings: JudgeSettings, key: str | None) -> JudgeSettings:
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


def print_scores(view) -> None:
    partial = None if view.scores.complete else (view.n_graded, view.n_expected)
    print_score_lines(view.benchmark, view.scores, view.effective_scores(), partial=partial,
                       note=view.metric_note)


def total_line(s, partial: tuple[int, int] | None = None, note: str | None = None) -> str:
    """The CLI's total line. A partial total says so on the same line, with how many grades it holds:
    ``Total: 39.1 (partial, 74 of 218 grades: not a final score)``."""
    total = "n/a" if s.total.mean is None else f"{s.total.mean:.1f}"
    tail = f"\n  [{note}]" if note else ""
    if partial is not None:
        return f"Total: {total} (partial, {partial[0]} of {partial[1]} grades: not a final score){tail}"
    spread = "" if s.total.std is None else f" ± {s.total.std:.1f}"
    return f"Total: {total}{spread}  (runs: {', '.join(f'{x:.1f}' for x in s.runs if x is not None)}){tail}"


def print_score_lines(benchmark, s, per_run_scores, *, partial: tuple[int, int] | None = None,
                       note: str | None = None) -> None:
    """Total, capabilities and integrations, each with its 95% bootstrap interval over samples beside the
    official std over runs; a `partial` grade set (graded, expected) is labelled partial and has no interval."""
    if partial is not None:
        say(f"\n{total_line(s, partial, note)}")
        ci = {}
    else:
        ci = {(r.kind, r.name): format_interval(r.low, r.high) for r in score_intervals(benchmark, per_run_scores)}
        say(f"\n{total_line(s, None, note)}\n  95% interval over samples {ci.get(('total', 'total'), 'n/a')}")
        say("  (± is the official std over judge runs; the interval is the sampling error over the questions, "
            "bootstrap, seed 0)")

    def items(cols, kind):
        return [f"{c.name} {c.mean:.1f} {ci.get((kind, c.name), '')}".rstrip() if c.mean is not None
                else f"{c.name} n/a" for c in cols]
    label = " (partial)" if partial is not None else ""
    print("\n".join(pack(f"Capabilities{label}:", items(s.capabilities, 'capability'))))
    print("\n".join(pack(f"Integrations{label}:", items(s.integrations, 'integration'))))

