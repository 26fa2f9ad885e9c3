"""MM-Vet Grader core: official-parity MM-Vet grading with an LLM judge (no Gradio in here).

The small public surface the app and scripts use (docs/python.md shows it at work); each name lives in the module
named after its concept, and these names stay importable from ``mmvet_core`` wherever that module moves.
"""
__version__ = "1.1.0"

from .scores.aggregate import Scores, aggregate_scores
from .inputs.benchmark import ASSETS_DIR, Benchmark, BenchmarkError, Sample, integration_name, load_bundled_v1
from .scores.compare import compare_sets, format_report
from .successors.equivalence import estimate_run, format_equivalent_line
from .scores.export import load_official_grades, official_file_names
from .scores.graded import read_grade_file
from .runs.gradesets import human_set, set_from_grade_file, set_from_run
from .judging.grading import grade_run
from .judging.judge import BaselineJudge, JudgeError, JudgeSettings, OpenAIJudge, make_judge
from .successors.judgecheck import format_check, run_check, run_judge_check
from .inputs.results import ResultsError, read_results, select_predictions, validate_results
from .runs.lifecycle import create_run, export_run, import_official_grades, load_run_view
from .inputs.sources import load_benchmark
from .inputs.subsets import load_subset
from .scores.stats import format_interval, score_intervals
from .store import Store

__all__ = ["ASSETS_DIR", "Benchmark", "BenchmarkError", "BaselineJudge", "JudgeError", "JudgeSettings",
           "OpenAIJudge", "ResultsError", "Sample", "Scores", "Store", "aggregate_scores", "compare_sets",
           "create_run", "estimate_run", "export_run", "format_check", "format_equivalent_line", "format_interval",
           "format_report", "grade_run", "human_set", "import_official_grades", "integration_name",
           "load_benchmark", "load_bundled_v1", "load_official_grades", "load_run_view", "load_subset",
           "make_judge", "official_file_names", "read_grade_file", "read_results", "run_check",
           "run_judge_check", "score_intervals", "select_predictions", "set_from_grade_file", "set_from_run",
           "validate_results"]
