"""`validate`: check a results file against the benchmark, with no judge call (`results`)."""
from __future__ import annotations

from ..inputs.results import ResultsError, read_results, validate_results
from ..scores.terminal import fit
from .common import benchmark_of
from .parser import Command, UsageError, option


def cmd_validate(args) -> int:
    try:
        results = read_results(args.results)
    except ResultsError as e:
        raise UsageError(str(e)) from e
    report = validate_results(results, benchmark_of(args))
    print(fit(report.summary()))
    return 0 if report.ok else 1


VALIDATE = Command("validate", "check a results file against the benchmark (no judge call)", (
    option("results"),
    option("--benchmark", default="mmvet-v1"),
    option("--subset", default=None),
), run=cmd_validate)
