"""MM-Vet Grader core: official-parity MM-Vet grading with an LLM judge (no Gradio in here).

The small public surface the app and scripts use (docs/python.md shows it at work); each name lives in the module
named after its concept, and these names stay importable from ``mmvet_core`` wherever that module moves.

Importing the package imports nothing else: each name is imported from its module when it is first used
(``from mmvet_core import X`` included), so ``python -m mmvet_core --help`` and a script that needs one name do
not pay for the store, the judge's SDK and the statistics.
"""
from importlib import import_module

__version__ = "1.1.0"

#: module -> the names it gives the package
_HOMES = {
    ".scores.aggregate": ("Scores", "aggregate_scores"),
    ".inputs.benchmark": ("ASSETS_DIR", "Benchmark", "BenchmarkError", "Sample", "integration_name", "load_bundled_v1"),
    ".scores.compare": ("compare_sets", "format_report"),
    ".successors.equivalence": ("estimate_run", "format_equivalent_line"),
    ".scores.export": ("load_official_grades", "official_file_names"),
    ".scores.graded": ("read_grade_file",),
    ".runs.gradesets": ("human_set", "set_from_grade_file", "set_from_run"),
    ".judging.grading": ("grade_run",),
    ".judging.judge": ("BaselineJudge", "JudgeError", "JudgeSettings", "OpenAIJudge", "make_judge"),
    ".successors.judgecheck": ("format_check", "run_check", "run_judge_check"),
    ".inputs.results": ("ResultsError", "read_results", "select_predictions", "validate_results"),
    ".runs.lifecycle": ("create_run", "export_run", "import_official_grades", "load_run_view"),
    ".inputs.sources": ("load_benchmark",),
    ".inputs.subsets": ("load_subset",),
    ".scores.stats": ("format_interval", "score_intervals"),
    ".store": ("Store",),
}
_HOME_OF = {name: module for module, names in _HOMES.items() for name in names}

__all__ = ["ASSETS_DIR", "Benchmark", "BenchmarkError", "BaselineJudge", "JudgeError", "JudgeSettings",
           "OpenAIJudge", "ResultsError", "Sample", "Scores", "Store", "aggregate_scores", "compare_sets",
           "create_run", "estimate_run", "export_run", "format_check", "format_equivalent_line", "format_interval",
           "format_report", "grade_run", "human_set", "import_official_grades", "integration_name",
           "load_benchmark", "load_bundled_v1", "load_official_grades", "load_run_view", "load_subset",
           "make_judge", "official_file_names", "read_grade_file", "read_results", "run_check",
           "run_judge_check", "score_intervals", "select_predictions", "set_from_grade_file", "set_from_run",
           "validate_results"]


def __getattr__(name: str):
    module = _HOME_OF.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(import_module(module, __name__), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(__all__))
