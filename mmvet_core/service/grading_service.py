"""`GradingService`: the one object the app, the API and MCP receive. It opens the store and the job manager and
composes the facets over them; it holds no rule of its own (each facet's module does)."""
from __future__ import annotations

import logging
import warnings

from ..runs.workers import make_jobs
from ..store import Store
from .board import Board
from .inputs import Inputs
from .judges import Judges
from .limits import HostLimits
from .reading import RunReading
from .runs import Runs
from .settings import ServiceSettings

log = logging.getLogger("mmvet_grader")

#: Where each method of the service before its split (one class) lives now: ``svc.start(...)`` is
#: ``svc.runs.start(...)``. The old names still answer through this table, with a `DeprecationWarning` that names
#: the new spelling, for scripts written before the split; the project's own code names the facet, so a reader
#: sees which one it uses. One name did not survive: ``svc.judges`` is now the judges facet, and its old method
#: ``judges(choice)`` is ``judges.offered``.
MOVED = {
    **dict.fromkeys(("start", "owned", "permissions", "stop", "resume", "override", "clear_override", "rename",
                     "delete", "open_grade_file", "compare"), "runs"),
    **dict.fromkeys(("view", "runs_of", "card", "status", "run_version", "with_failure", "sample", "downloads",
                     "form_of", "share_url"), "reading"),
    **dict.fromkeys(("model_list", "judge_field", "check_judge_served", "judge_note", "check_cost",
                     "check_judge", "judge_check_text", "judge_board", "judge_board_csv", "check_report",
                     "equivalence"), "judges"),
    **dict.fromkeys(("publish", "rename_entry", "unpublish", "restore_entry", "hide_entry", "verify_entry",
                     "board_rows", "leaderboard", "board_filter", "leaderboard_json", "board_entry",
                     "entry_of_run"), "board"),
    **dict.fromkeys(("resolve_benchmark", "judge_for", "validate"), "inputs"),
    **dict.fromkeys(("visitor", "make_judge", "check_size", "check_visitor_url", "gate", "budget", "salt",
                     "keeper"), "limits"),
}


class GradingService:
    """The app's long-lived objects (no module-level mutable state), as facets:

    - `limits` (`HostLimits`): visitor ids, upload bounds and parsing, endpoint addresses, budget, storage;
    - `inputs` (`Inputs`): the form's benchmark and judge, the results file, `validate`;
    - `judges` (`Judges`): model lists, preflight, judge checks, the successor board, the estimate;
    - `reading` (`RunReading`): a run's view, status, card, downloads, a visitor's runs;
    - `runs` (`Runs`): start, stop, resume, override, rename, delete, grade files, compare;
    - `board` (`Board`): the leaderboard.
    """

    def __init__(self, settings: ServiceSettings):
        settings.data_dir.mkdir(parents=True, exist_ok=True)
        self.settings = settings
        self.store = Store(settings.database_url or settings.data_dir / "mmvet-grader.db")
        for warning in self.store.warnings:
            log.warning("%s", warning)
        self.store.mark_interrupted()
        self.work_dir = settings.data_dir / "uploads"
        self.work_dir.mkdir(exist_ok=True)
        self.exports_dir = settings.data_dir / "exports"
        self.jobs = make_jobs(self.store, workers=settings.workers, lease=settings.lease_seconds,
                              max_active=settings.max_active_runs, per_visitor=settings.max_runs_per_visitor)
        # an expired run's files and kept answers go with it (`reading` exists by the time anything expires)
        self.limits = HostLimits(settings, self.store, self.jobs, self.work_dir, self.exports_dir,
                                 on_expire=lambda run_id: self.reading.forget_files(run_id))
        self.inputs = Inputs(settings, self.limits)
        self.judges = Judges(settings, self.store, self.jobs, self.inputs, self.limits, self.exports_dir)
        self.inputs.model_list = self.judges.model_list         # the agents' judges: what the endpoint serves
        self.reading = RunReading(settings, self.store, self.jobs, self.limits, self.judges, self.exports_dir)
        self.runs = Runs(settings, self.store, self.jobs, self.inputs, self.limits, self.judges, self.reading)
        self.board = Board(settings, self.store, self.jobs, self.runs)
        self.limits.keeper.expire(self.limits.running_ids())

    def __getattr__(self, name: str):
        """An old (pre-split) method name, answered by its facet (`MOVED`) with a `DeprecationWarning`."""
        facet = MOVED.get(name)
        if facet is None or facet not in self.__dict__:
            raise AttributeError(f"{type(self).__name__!s} has no attribute {name!r}")
        warnings.warn(f"GradingService.{name} is deprecated: use svc.{facet}.{name}", DeprecationWarning,
                      stacklevel=2)
        return getattr(self.__dict__[facet], name)
