"""What the service takes and gives: the form's choices (benchmark, judge), the records a page shows (validation,
a run's summary, what the page may offer), the error every refusal is, and the small pure helpers that clean a
visitor's names. No state, no I/O."""
from __future__ import annotations

import re
import time
from dataclasses import dataclass
from urllib.parse import urlsplit

from ..judging.endpoints import ModelList, retirement_note, today_utc

JUDGE_BASELINE = "Offline baseline (not MM-Vet)"
JUDGE_HOST = "Server's judge"
JUDGE_OWN = "My own key / endpoint"
BENCH_BUNDLED = "MM-Vet v1 (bundled, 218 samples)"
BENCH_UPLOAD = "Upload: official zip or metadata JSON"
BENCH_HUB = "Hugging Face hub dataset"
SUBSETS = {"All samples": None, "Bard set (168)": "bard"}
#: Where a visitor's key goes when they leave the base URL empty ("empty = OpenAI"). Explicit, so that the
#: SDK's OPENAI_BASE_URL fallback (the host's endpoint) never receives a visitor's key.
OPENAI_PUBLIC_URL = "https://api.openai.com/v1"
MODE_LIVE = "live"
MODE_BATCH = "batch"
MAX_NAME = 100


class ServiceError(Exception):
    """A visitor's mistake or a refusal: the message says what happened and what to do (shown as a toast)."""


#: What every route answers while the database cannot be reached (issue 33: an outage answered {"error": null}).
STORE_DOWN = ("The store is unreachable; nothing is lost: every stored run and paid grade is kept, and grading "
              "resumes when it answers again. Try again in a moment.")


def store_fault(error: BaseException) -> bool:
    """Whether `error` is the database failing (the store's own `StoreError`, or a driver's or SQLAlchemy's
    exception that reached a handler unwrapped), not a bug of ours or a visitor's mistake."""
    from ..store import StoreError

    return isinstance(error, StoreError) or type(error).__module__.split(".")[0] in ("sqlalchemy", "psycopg",
                                                                                      "psycopg_pool", "sqlite3")


class JudgeUnavailable(ServiceError):
    """The chosen judge is the official one and its endpoint no longer serves it: nothing was started. The message
    says why and lists the judges the endpoint serves (`models`); the page shows it in place. `message_for` words
    it for another caller (an agent's tools name tools, not the page's sections)."""

    def __init__(self, message: str, models: ModelList, render=None):
        super().__init__(message)
        self.models = models
        self._render = render

    def message_for(self, *, check_hint: str, view_hint: str) -> str:
        return self._render(check_hint=check_hint, view_hint=view_hint) if self._render else str(self)


# --- what a visitor asks for ------------------------------------------------------------------------------
@dataclass
class BenchmarkChoice:
    kind: str = BENCH_BUNDLED
    file: str | None = None          # BENCH_UPLOAD: the uploaded zip / metadata JSON
    hub_id: str = ""                 # BENCH_HUB
    subset: str = "All samples"      # a key of SUBSETS


@dataclass
class JudgeChoice:
    kind: str = JUDGE_BASELINE
    base_url: str = ""
    model: str = ""
    api_key: str = ""
    mode: str = MODE_LIVE            # or MODE_BATCH: the Batch API, half price, answers within 24 h
    host_model: str = ""             # JUDGE_HOST: a server judge an agent picked (MMVET_AGENT_JUDGES); "" = default


@dataclass
class Validation:
    report: str
    estimate: str
    model_name: str = ""             # the name the file gives (or its stem): the default of the model name box


@dataclass
class RunSummary:
    """One line of a visitor's "My runs"."""

    id: str
    model: str
    judge: str
    benchmark: str
    n_runs: int
    created_at: float
    status: str
    total: float | None
    complete: bool = True            # False: `total` is over part of the grades (shown "(partial)")

    def row(self) -> list:
        total = "—" if self.total is None else f"{self.total:.1f}" + ("" if self.complete else " (partial)")
        return [self.model, self.judge, self.benchmark, self.n_runs,
                time.strftime("%Y-%m-%d %H:%M", time.gmtime(self.created_at)), self.status, total, self.id]


RUN_LIST_COLUMNS = ["model", "judge", "benchmark", "runs", "date (UTC)", "status", "total", "id"]


@dataclass
class Permissions:
    """What the page may offer for a run (buttons are enabled only when they can act)."""

    owner: bool = False
    running: bool = False
    can_stop: bool = False
    can_resume: bool = False
    can_override: bool = False


def file_safe(name: str) -> str:
    """`name` usable as part of a file name: the last path component, unsafe characters replaced. Model and
    judge names come from uploaded files (lmms-eval ``model_name: "org/model"``, a grade file's judge) or from
    the visitor; unsanitised they fail the export ("org/") or write outside the exports folder ("../")."""
    base = re.split(r"[/\\]", str(name or ""))[-1]
    return re.sub(r"[^\w.+=@-]+", "_", base).strip("._")[:MAX_NAME] or "model"


def clean_model_name(name: str) -> str:
    """A visitor's model name: one line, printable, bounded (shown as text everywhere, never as markup)."""
    text = re.sub(r"[\x00-\x1f\x7f]+", " ", str(name or "")).strip()
    return text[:MAX_NAME]


def shutdown_note(judge: dict) -> str | None:
    """`endpoints.retirement_note` of a stored judge (its recorded shutdown date), as of today."""
    from datetime import date

    try:
        when = date.fromisoformat(judge.get("shutdown_date") or "")
    except ValueError:
        return None
    return retirement_note(judge.get("model", "judge"), when, today_utc())


def endpoint_host(judge: dict) -> str:
    """The host of a run's judge endpoint, for the run card ("api.openai.com"; never a path or a key)."""
    if judge.get("provider") == "baseline":
        return "offline (no endpoint)"
    if judge.get("provider") == "imported":
        return "imported grade file"
    url = judge.get("base_url") or OPENAI_PUBLIC_URL
    return urlsplit(url).hostname or "?"
