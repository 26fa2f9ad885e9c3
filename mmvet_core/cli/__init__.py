"""Command line: ``python -m mmvet_core grade|aggregate|validate|compare|combine|prompt|leaderboard ...``.

One module per command group, each beside the core module it drives: `grade` (runs, grading, batch), `aggregate`
(graded, export), `compare` (compare and combine: compare, gradesets), `judges` (judge-check and judges:
judgecheck, endpoints), `leaderboard`, `prompt`, `validate`, `db` (the store), `worker` (grading workers), `app`
(serves the app: ``mmvet-grader app``); `parser` declares the commands as data, `common` holds what several share
(database, benchmark options, judge settings and preflight, score lines). `main` imports only the module of the
command it runs.

Exit codes: 0 success; 1 grading finished incomplete or failed (grades so far are stored, rerun to resume), or
``judges`` found no model list; 2 bad input (file, benchmark, options, missing key, or a judge that cannot be called:
the official judge on an endpoint that no longer serves it, checked before any paid call); 130 interrupted (rerun
to resume).
"""
from __future__ import annotations

import sys
from importlib import import_module
from pathlib import Path

from .parser import Command, Parser, UsageError
from .parser import build_parser as _build_parser

#: The commands, in the order ``--help`` lists them: (name, module, attribute). A command's module is imported
#: only when it runs (or for the whole ``--help``): ``validate`` does not pay for the service layer a worker needs.
_HOMES = (("grade", "grade", "GRADE"), ("aggregate", "aggregate", "AGGREGATE"), ("compare", "compare", "COMPARE"),
          ("combine", "compare", "COMBINE"), ("judge-check", "judges", "JUDGE_CHECK"), ("judges", "judges", "JUDGES"),
          ("leaderboard", "leaderboard", "LEADERBOARD"), ("prompt", "prompt", "PROMPT"),
          ("validate", "validate", "VALIDATE"), ("db", "db", "DB"), ("worker", "worker", "WORKER"),
          ("app", "app", "APP"))

__all__ = ["COMMANDS", "Parser", "UsageError", "build_parser", "main"]


def _load(name: str) -> Command:
    _, module, attribute = next(h for h in _HOMES if h[0] == name)
    return getattr(import_module(f".{module}", __name__), attribute)


def __getattr__(name: str):
    if name == "COMMANDS":              # every command, in --help's order (imports them all)
        return [_load(h[0]) for h in _HOMES]
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def program_name() -> str:
    """How the user called us: ``mmvet-grader`` (the installed command) or ``python -m mmvet_core``."""
    return "mmvet-grader" if Path(sys.argv[0]).name == "mmvet-grader" else "python -m mmvet_core"


def build_parser(argv: list[str] | None = None) -> Parser:
    """The parser of every command; given the arguments, of the one command they start with (the rest are
    not imported: its options, help and errors are the same)."""
    names = [h[0] for h in _HOMES]
    chosen = [argv[0]] if argv and argv[0] in names else names
    return _build_parser([_load(n) for n in chosen], prog=program_name(),
                         description="MM-Vet grading with an LLM judge, identical to the official evaluator when "
                                     "the judge answers the same.")


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else list(argv)
    args = build_parser(argv).parse_args(argv)
    from .common import closing_stores

    try:
        with closing_stores():
            return _load(args.command).run(args)
    except UsageError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("\ninterrupted: every grade so far is stored; rerun the same command to resume", file=sys.stderr)
        return 130
