"""Command line: ``python -m mmvet_core grade|aggregate|validate|compare|combine|prompt|leaderboard ...``.

One module per command group, each beside the core module it drives: `grade` (runs, grading, batch), `aggregate`
(graded, export), `compare` (compare and combine: compare, gradesets), `judges` (judge-check and judges:
judgecheck, endpoints), `leaderboard`, `prompt`, `validate`, `db` (the store), `worker` (grading workers), `app` (serves the app: ``mmvet-grader app``); `parser` declares the commands as data, `common`
holds what several share (database, benchmark options, judge settings and preflight, score lines).

Exit codes: 0 success; 1 grading finished incomplete or failed (grades so far are stored, rerun to resume), or
``judges`` found no model list; 2 bad input (file, benchmark, options, missing key, or a judge that cannot be called:
the official judge on an endpoint that no longer serves it, checked before any paid call); 130 interrupted (rerun
to resume).
"""
from __future__ import annotations

import sys
from pathlib import Path

from .aggregate import AGGREGATE
from .app import APP
from .compare import COMBINE, COMPARE
from .db import DB
from .worker import WORKER
from .grade import GRADE
from .judges import JUDGE_CHECK, JUDGES
from .leaderboard import LEADERBOARD
from .parser import Parser, UsageError
from .parser import build_parser as _build_parser
from .prompt import PROMPT
from .validate import VALIDATE

#: The commands, in the order ``--help`` lists them.
COMMANDS = [GRADE, AGGREGATE, COMPARE, COMBINE, JUDGE_CHECK, JUDGES, LEADERBOARD, PROMPT, VALIDATE, DB, WORKER, APP]

__all__ = ["COMMANDS", "Parser", "UsageError", "build_parser", "main"]


def program_name() -> str:
    """How the user called us: ``mmvet-grader`` (the installed command) or ``python -m mmvet_core``."""
    return "mmvet-grader" if Path(sys.argv[0]).name == "mmvet-grader" else "python -m mmvet_core"


def build_parser() -> Parser:
    return _build_parser(COMMANDS, prog=program_name(),
                         description="MM-Vet grading with an LLM judge, identical to the official evaluator when "
                                     "the judge answers the same.")


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        return {c.name: c.run for c in COMMANDS}[args.command](args)
    except UsageError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("\ninterrupted: every grade so far is stored; rerun the same command to resume", file=sys.stderr)
        return 130
