"""MM-Vet Grader core: official-parity MM-Vet grading with an LLM judge (no Gradio in here).

The small public surface the app and scripts use; each name lives in the module named after its concept.
"""
__version__ = "1.1.0"

from .aggregate import Scores, aggregate_scores
from .benchmark import Benchmark, BenchmarkError, Sample, integration_name, load_bundled_v1
from .export import load_official_grades, official_file_names
from .grading import grade_run
from .judge import BaselineJudge, JudgeError, JudgeSettings, OpenAIJudge, make_judge
from .results import ResultsError, read_results, select_predictions, validate_results
from .runs import create_run, export_run, import_official_grades, load_run_view
from .sources import load_benchmark, load_subset
from .store import Store

__all__ = ["Benchmark", "BenchmarkError", "BaselineJudge", "JudgeError", "JudgeSettings", "OpenAIJudge",
           "ResultsError", "Sample", "Scores", "Store", "aggregate_scores", "create_run", "export_run",
           "grade_run", "import_official_grades", "integration_name", "load_benchmark", "load_bundled_v1",
           "load_official_grades", "load_run_view", "load_subset", "make_judge", "official_file_names",
           "read_results", "select_predictions", "validate_results"]
