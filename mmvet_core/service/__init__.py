"""The app's rules, without the UI: who owns a run, what a start, stop, resume or override may do, which key goes
to which endpoint, when the host's budget applies. The `ui/` view modules map each event to one call of a facet
of `GradingService` and show a `ServiceError` as a toast (its message is for the user; the UI escapes it).

Everything a visitor gives (files, URLs, keys, names, scores) is checked here before it touches the store or a
judge. The named API endpoints of the app call the same methods, so a script gets the same rules as the page.

One module per facet, this file the front door:

- `settings`        `ServiceSettings`, read once from the environment;
- `records`         the form's choices, the records pages show, `ServiceError`, name cleaning;
- `limits`          `HostLimits`: visitor ids, upload bounds and parsing, endpoint addresses, budget, storage;
- `inputs`          `Inputs`: the chosen benchmark and judge, the results file, `validate`;
- `judges`          `Judges`: model lists, preflight, judge checks, the successor board, the estimate;
- `reading`         `RunReading`: a run's view, status, card, downloads; a visitor's runs;
- `runs`            `Runs`: start, stop, resume, override, rename, delete, grade files, compare;
- `board`           `Board`: the leaderboard;
- `grading_service` `GradingService`, which composes them (the object the app, the API and MCP receive).
"""
from .board import Board
from .grading_service import MOVED, GradingService
from .inputs import Inputs
from .judges import Judges
from .limits import HostLimits
from .reading import RunReading
from .records import (BENCH_BUNDLED, BENCH_HUB, BENCH_UPLOAD, JUDGE_BASELINE, JUDGE_HOST, JUDGE_OWN, MODE_BATCH,
                      MODE_LIVE, OPENAI_PUBLIC_URL, RUN_LIST_COLUMNS, SUBSETS, BenchmarkChoice, JudgeChoice,
                      JudgeUnavailable, Permissions, RunSummary, ServiceError, STORE_DOWN, Validation,
                      clean_model_name, endpoint_host, file_safe, store_fault)
from .runs import Runs
from .settings import ServiceSettings

__all__ = ["BENCH_BUNDLED", "BENCH_HUB", "BENCH_UPLOAD", "JUDGE_BASELINE", "JUDGE_HOST", "JUDGE_OWN", "MODE_BATCH",
           "MODE_LIVE", "MOVED", "OPENAI_PUBLIC_URL", "RUN_LIST_COLUMNS", "SUBSETS", "Board", "BenchmarkChoice",
           "GradingService", "HostLimits", "Inputs", "JudgeChoice", "JudgeUnavailable", "Judges", "Permissions",
           "RunReading", "RunSummary", "Runs", "STORE_DOWN", "ServiceError", "ServiceSettings", "Validation",
           "clean_model_name", "endpoint_host", "file_safe", "store_fault"]
