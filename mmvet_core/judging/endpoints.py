"""What a judge endpoint serves, and what follows when a judge is shut down.

A judge is only callable while its provider serves it. OpenAI shut down the official MM-Vet judge ``gpt-4-0613``
(and the ``gpt-4`` alias) on 2026-10-23, and announces shutdown dates for later judges in its model list
(``GET /v1/models``: an optional ``shutdown_date`` per model). This module:

- reads the endpoint's model list through the openai SDK (`list_judge_models`; Azure: its deployments where the
  resource lists them). An endpoint without a model list is not an error: the list is *unknown* and grading falls
  back to what the first answer says (`preflight` probes once when it matters);
- keeps the known shutdowns of the official judges as data (``retired_judges.json``, `load_retirements`), never
  the names of successors (those come from the endpoint);
- decides, before any paid call, whether a run may start (`preflight`): when the chosen judge is the official one
  and the endpoint does not serve it, the run stops with `retired_judge_message` (the official metric can no
  longer be recomputed; recorded official grades stay valid; the judges this endpoint serves). No judge is ever
  substituted for the user's;
- states the shutdown facts in plain words (`retirement_note`, pure) for the start of a run and its card;
- finds a stored judge check of a listed judge (`stored_check_facts`: the one lookup the ``judges`` listing and the
  app's judge field use).

Besides `mmvet_core.judging.judge` this is the only module that talks to the openai SDK (through
`judge.make_sdk_client`, so the endpoint policy and the body cap apply to the model list too).
"""
from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from datetime import date, datetime, timezone
from functools import lru_cache
from pathlib import Path

from ..scores.graded import OFFICIAL_JUDGES
from .judge import BASELINE_NAME, JudgeError, JudgeSettings, make_sdk_client

RETIRED_FILE = Path(__file__).with_name("retired_judges.json")
#: Seconds the model list may take (it is read before a run starts, and shown in the app's judge field).
LIST_TIMEOUT = 15.0
#: Models read from one list at most (a hostile endpoint cannot make us hold an unbounded list).
MAX_MODELS = 2000
MAX_NAME = 200
#: What the one probe sends when the endpoint has no model list (a few tokens; its answer is not a grade).
PROBE_PROMPT = "Reply with the digit 0."
#: Model names that are not chat models (OpenAI's list also holds embeddings, speech, images, moderation ...).
_NOT_CHAT = re.compile(r"embed|whisper|tts|dall-e|davinci|babbage|moderation|transcribe|(^|[-_/])image|sora"
                       r"|(^|[-_/])audio|realtime|(^|[-_/])search|computer-use|rerank", re.IGNORECASE)


# --- records -----------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class JudgeModel:
    """One model of an endpoint's list, with what the endpoint says about it."""

    name: str
    shutdown_date: date | None = None      # announced by the endpoint (``shutdown_date``), else None
    owned_by: str | None = None
    base_model: str | None = None          # Azure: the model behind a deployment

    def to_dict(self) -> dict:
        return {"name": self.name, "shutdown_date": _iso(self.shutdown_date), "owned_by": self.owned_by,
                "base_model": self.base_model}


@dataclass(frozen=True)
class ModelList:
    """What an endpoint serves. ``models`` is None when the endpoint has no readable model list (``reason`` says
    why): nothing is then known, and grading falls back to what the first answer says."""

    models: tuple[JudgeModel, ...] | None
    source: str = ""                        # "GET /v1/models", "Azure deployments"
    reason: str = ""                        # why the list is unknown

    @property
    def known(self) -> bool:
        return self.models is not None

    def get(self, name: str) -> JudgeModel | None:
        return next((m for m in self.models or () if m.name == name), None)

    def serves(self, name: str) -> bool | None:
        """True / False from the list; None when the endpoint has no list."""
        return None if self.models is None else self.get(name) is not None

    def chat_models(self) -> list[JudgeModel]:
        """The models that can be judges (chat models), sorted by name."""
        return sorted((m for m in self.models or () if is_chat_model(m.name)), key=lambda m: m.name)

    def to_dict(self) -> dict:
        return {"known": self.known, "source": self.source, "reason": self.reason,
                "models": None if self.models is None else [m.to_dict() for m in self.models]}


@dataclass(frozen=True)
class Retirement:
    """A known shutdown of an official judge (``retired_judges.json``)."""

    model: str
    provider: str
    shutdown_date: date
    announced: date | None = None
    source: str = ""


@dataclass(frozen=True)
class CheckFacts:
    """What a stored judge check says about a judge (see `stored_check_facts`)."""

    delta_bar: float                        # Δ̄ to the official grades
    shift: float                            # total shift to the official judge, points
    shift_interval: tuple[float, float] | None = None    # 95 % interval of the shift, when the check has one
    close: bool = False
    created_at: float = 0.0

    def text(self) -> str:
        """``Δ̄ 0.052, total shift +1.3`` (with ``[a, b]`` when the check has an interval)."""
        interval = (f" [{self.shift_interval[0]:+.1f}, {self.shift_interval[1]:+.1f}]"
                    if self.shift_interval else "")
        return f"Δ̄ {self.delta_bar:.3f}, total shift {self.shift:+.1f}{interval}"


@dataclass(frozen=True)
class JudgeRow:
    """One judge of the ``judges`` listing and of the app's judge field: a name and the facts beside it."""

    name: str
    shutdown_date: date | None
    check: CheckFacts | None
    note: str | None                        # `retirement_note`

    def label(self) -> str:
        """``judge-b · shutdown 2026-12-11 · Δ̄ 0.052, total shift +1.3`` (for a dropdown)."""
        parts = [self.name]
        if self.shutdown_date:
            parts.append(f"shutdown {self.shutdown_date.isoformat()}")
        if self.check:
            parts.append(self.check.text())
        return " · ".join(parts)

    def to_dict(self) -> dict:
        return {"name": self.name, "shutdown_date": _iso(self.shutdown_date), "note": self.note,
                "check": None if self.check is None else {"delta_bar": self.check.delta_bar,
                                                          "shift": self.check.shift,
                                                          "shift_interval": self.check.shift_interval}}


# --- pure facts ----------------------------------------------------------------------------------------------
def today_utc() -> date:
    """Today's date in UTC (shutdowns are announced as dates)."""
    return datetime.now(timezone.utc).date()


def _iso(d: date | None) -> str | None:
    return None if d is None else d.isoformat()


def parse_date(value) -> date | None:
    """A ``shutdown_date`` as endpoints write it: ``YYYY-MM-DD`` (or an ISO timestamp, or Unix seconds); anything
    else is None (pure).

    >>> parse_date("2026-12-11"), parse_date("2026-12-11T00:00:00Z"), parse_date(None), parse_date("soon")
    (datetime.date(2026, 12, 11), datetime.date(2026, 12, 11), None, None)
    """
    if isinstance(value, bool):
        return None
    if isinstance(value, (int, float)):
        try:
            return datetime.fromtimestamp(value, timezone.utc).date()
        except (OverflowError, OSError, ValueError):
            return None
    if isinstance(value, str):
        try:
            return date.fromisoformat(value.strip()[:10])
        except ValueError:
            return None
    return None


def is_chat_model(name: str) -> bool:
    """Whether a listed model can be a judge: not an embedding, speech, image, moderation or legacy completion
    model (pure; a local server's names all pass).

    >>> is_chat_model("gpt-4.1"), is_chat_model("text-embedding-3-small"), is_chat_model("Qwen2.5-7B-Instruct")
    (True, False, True)
    """
    return not _NOT_CHAT.search(name)


def is_official_judge(model: str) -> bool:
    """Whether `model` is the official MM-Vet judge (``gpt-4-0613``, or the ``gpt-4`` alias it recorded)."""
    return model in OFFICIAL_JUDGES


def retirement_note(model: str, shutdown_date: date | None, today: date) -> str | None:
    """The shutdown fact in plain words, or None when no date is known (pure).

    >>> retirement_note("judge-b", date(2026, 12, 11), date(2026, 12, 4))
    'grades by judge-b cannot be re-run after 2026-12-11'
    >>> retirement_note("gpt-4-0613", date(2026, 10, 23), date(2026, 12, 4))
    'gpt-4-0613 was shut down on 2026-10-23: its grades cannot be re-run'
    """
    if shutdown_date is None:
        return None
    if today < shutdown_date:
        return f"grades by {model} cannot be re-run after {shutdown_date.isoformat()}"
    return f"{model} was shut down on {shutdown_date.isoformat()}: its grades cannot be re-run"


def parse_model_list(data, *, azure: bool = False) -> tuple[JudgeModel, ...]:
    """The models of a ``GET /models`` body (``{"data": [{"id", "shutdown_date", "owned_by"}, ...]}``) or of an
    Azure deployments body (``{"data": [{"id": deployment, "model": ...}]}``) (pure). Entries without a usable id
    are skipped; names are bounded. Raises `ValueError` when the body is not a model list.

    >>> parse_model_list({"data": [{"id": "judge-b", "shutdown_date": "2026-12-11"}, {"id": "judge-c"}]})[0]
    JudgeModel(name='judge-b', shutdown_date=datetime.date(2026, 12, 11), owned_by=None, base_model=None)
    """
    if isinstance(data, (bytes, str)):
        try:
            data = json.loads(data)
        except ValueError:
            raise ValueError("the model list is not JSON") from None
    entries = data.get("data") if isinstance(data, dict) else data
    if not isinstance(entries, list):
        raise ValueError("the answer is not a model list")
    out: dict[str, JudgeModel] = {}
    for entry in entries[:MAX_MODELS]:
        if not isinstance(entry, dict):
            continue
        name = entry.get("id")
        if not isinstance(name, str) or not name.strip() or len(name) > MAX_NAME \
                or re.search(r"[\x00-\x1f\x7f]", name):
            continue
        owned = entry.get("owned_by")
        base = entry.get("model") if azure else None
        out.setdefault(name, JudgeModel(name=name.strip(), shutdown_date=parse_date(entry.get("shutdown_date")),
                                        owned_by=owned[:MAX_NAME] if isinstance(owned, str) else None,
                                        base_model=base[:MAX_NAME] if isinstance(base, str) else None))
    return tuple(out.values())


@lru_cache(maxsize=4)
def load_retirements(path: Path = RETIRED_FILE) -> dict[str, Retirement]:
    """The known shutdowns of official judges, by model name (``retired_judges.json``)."""
    data = json.loads(Path(path).read_text(encoding="utf-8"))
    out = {}
    for j in data["judges"]:
        out[j["model"]] = Retirement(model=j["model"], provider=j.get("provider", ""),
                                     shutdown_date=date.fromisoformat(j["shutdown_date"]),
                                     announced=parse_date(j.get("announced")), source=j.get("source", ""))
    return out


def retirement_of(model: str) -> Retirement | None:
    """The known shutdown of `model` (an official judge), or None."""
    return load_retirements().get(model)


def served_text(models: ModelList, limit: int = 30) -> str:
    """The chat models an endpoint serves, with their shutdown dates: ``judge-b (shutdown 2026-12-11), judge-c``
    (pure; at most `limit` names, then how many more)."""
    if not models.known:
        return f"unknown ({models.reason})" if models.reason else "unknown"
    chat = models.chat_models()
    if not chat:
        return "none listed"
    names = [m.name + (f" (shutdown {m.shutdown_date.isoformat()})" if m.shutdown_date else "") for m in chat[:limit]]
    more = f" … and {len(chat) - limit} more" if len(chat) > limit else ""
    return ", ".join(names) + more


CLI_CHECK_HINT = "python -m mmvet_core judge-check --judge-model NAME"
CLI_VIEW_HINT = "python -m mmvet_core aggregate GRADE_FILE, or grade --import-grades GRADE_FILE"


def retired_judge_message(model: str, retirement: Retirement | None, models: ModelList, *,
                          check_hint: str = CLI_CHECK_HINT, view_hint: str = CLI_VIEW_HINT) -> str:
    """Why a run with the official judge `model` cannot start on this endpoint, and what the user can do (pure).
    `check_hint` / `view_hint`: how to check a judge and view a grade file where the message is shown (the CLI's
    commands, or the app's sections)."""
    if retirement is not None:
        announced = f", announced {retirement.announced.isoformat()}" if retirement.announced else ""
        gone = (f"The official MM-Vet judge {model} was shut down by {retirement.provider or 'its provider'} on "
                f"{retirement.shutdown_date.isoformat()}{announced}, and this endpoint does not serve it: ")
    else:
        gone = f"This endpoint does not serve the official MM-Vet judge {model}: "
    return (gone + "the official MM-Vet metric can no longer be recomputed here. Recorded official grades stay "
            f"valid and can still be imported, viewed, compared and exported ({view_hint}). "
            + (f"Judges this endpoint serves: {served_text(models)}. " if models.known else
               f"This endpoint does not list its models ({models.reason or 'no model list'}): ask its provider "
               "which judges it serves. ")
            + "No other judge is the official one and none is picked for you: check a candidate against the "
            f"official grades first ({check_hint}), then grade with it knowing its shift. Nothing was graded.")


# --- the stored judge checks -------------------------------------------------------------------------------
def stored_check_facts(store, settings: JudgeSettings) -> CheckFacts | None:
    """The latest stored judge check of the judge `settings` describe (same endpoint, model and token limit),
    or None. The one place that reads a stored check for the listing and the judge field."""
    from .judge import check_settings

    if store is None or settings.provider == "baseline":
        return None
    stored = store.latest_judge_check(check_settings(settings).fingerprint())
    if not stored or not stored.get("columns"):
        return None
    total = stored["columns"][0]
    interval = total.get("shift_interval") or total.get("shift_ci")
    return CheckFacts(delta_bar=float(total["delta_bar"]), shift=float(total["shift"]),
                      shift_interval=(float(interval[0]), float(interval[1])) if interval else None,
                      close=bool(stored.get("close")), created_at=float(stored.get("created_at") or 0.0))


def judge_rows(models: ModelList, settings: JudgeSettings, today: date, store=None) -> list[JudgeRow]:
    """The chat models of `models`, each with its shutdown date, note and stored check (for `settings`' endpoint).
    """
    from dataclasses import replace

    rows = []
    for m in models.chat_models():
        facts = stored_check_facts(store, replace(settings, model=m.name, prompt_examples=None))
        rows.append(JudgeRow(m.name, m.shutdown_date, facts, retirement_note(m.name, m.shutdown_date, today)))
    return rows


def format_judges(rows: list[JudgeRow], models: ModelList, where: str, today: date) -> str:
    """The plain-text table of ``python -m mmvet_core judges`` (pure)."""
    if not models.known:
        return (f"{where} has no readable model list ({models.reason or 'unknown reason'}). Grading still works: "
                "it falls back to what the endpoint's first answer says.")
    lines = [f"Chat models served by {where} ({models.source}; {len(rows)} chat model(s); today {today.isoformat()}):",
             ""]
    width = max([len(r.name) for r in rows] + [5])
    lines.append(f"  {'model':<{width}}  {'shutdown':<10}  judge check (Δ̄ to the official grades, total shift)")
    for r in rows:
        shutdown = r.shutdown_date.isoformat() if r.shutdown_date else "—"
        check = r.check.text() if r.check else "not checked"
        note = f"  ({r.note})" if r.note else ""
        lines.append(f"  {r.name:<{width}}  {shutdown:<10}  {check}{note}")
    official = [name for name in OFFICIAL_JUDGES if models.serves(name)]
    lines.append("")
    if official:
        lines.append(f"This endpoint still serves the official judge ({', '.join(official)}): the official metric can "
                     "be computed here.")
    else:
        gone = [retirement_of(n) for n in OFFICIAL_JUDGES if retirement_of(n)]
        when = f" (shut down by {gone[0].provider} on {gone[0].shutdown_date.isoformat()})" if gone else ""
        lines.append(f"The official judge {OFFICIAL_JUDGES[0]}{when} is not among them: no score from these judges "
                     "is the official MM-Vet metric.")
    lines.append("Check a judge against the official grades: python -m mmvet_core judge-check --judge-model NAME "
                 "(same --base-url).")
    return "\n".join(lines)


def judge_facts(model: str, models: ModelList, rows: list[JudgeRow]) -> str:
    """What to say beside the chosen judge `model` (pure): its shutdown date and stored check when the endpoint
    lists it; in one line, that the official judge is shut down and what the endpoint serves (Grade then shows
    `retired_judge_message`); that the list misses it; or that the endpoint has no list. '' when there is nothing
    worth saying."""
    if not models.known:
        if is_official_judge(model):
            gone = retirement_of(model)
            when = f" (shut down by {gone.provider} on {gone.shutdown_date.isoformat()})" if gone else ""
            return (f"This endpoint does not list its models ({models.reason}): before grading, one probe call asks "
                    f"whether it still serves the official judge {model}{when}.")
        return f"This endpoint does not list its models ({models.reason}): grading goes by what it answers."
    row = next((r for r in rows if r.name == model), None)
    if row is not None:
        return " — ".join(x for x in (row.label(), row.note) if x) if (row.shutdown_date or row.check) else ""
    if is_official_judge(model) and not models.serves(model):      # short: Grade says the rest (`preflight`)
        gone = retirement_of(model)
        when = f" was shut down by {gone.provider} on {gone.shutdown_date.isoformat()} and" if gone else ""
        return (f"The official judge {model}{when} is not served by this endpoint: Grade stops before any call. "
                f"It serves: {served_text(models)}.")
    if models.serves(model):
        return ""
    return f"{model} is not in this endpoint's model list (it serves: {served_text(models)}); grading tries it anyway."


# --- reading the endpoint ------------------------------------------------------------------------------------
async def list_judge_models(settings: JudgeSettings, api_key: str | None, *, policy=None,
                            timeout: float = LIST_TIMEOUT) -> ModelList:
    """The endpoint's model list (``GET /models``; Azure: ``GET /openai/deployments``), or an unknown list with the
    reason when the endpoint has none, refuses it or cannot be reached. Never raises for what the endpoint does;
    `policy` (a `transport.EndpointPolicy`) applies as for grading. The reason never holds the endpoint's own
    words (they may echo a key or an internal page)."""
    import httpx2
    import openai as o

    from .transport import CAPPED, BlockedDestination

    if settings.provider == "baseline":
        return ModelList(None, reason=f"{BASELINE_NAME}: no endpoint")
    azure = settings.provider == "azure"
    path, source = ("/deployments", "Azure deployments") if azure else ("/models", "GET /v1/models")
    client = make_sdk_client(settings, api_key, policy, timeout=min(timeout, settings.timeout))
    try:
        response = await client.get(path, cast_to=httpx2.Response)
    except o.NotFoundError:
        return ModelList(None, reason="the endpoint has no model list (HTTP 404)")
    except o.AuthenticationError:
        return ModelList(None, reason="the key was refused (HTTP 401)")
    except o.PermissionDeniedError:
        return ModelList(None, reason="the key may not read the model list (HTTP 403)")
    except o.APIStatusError as e:
        return ModelList(None, reason=f"the model list answered HTTP {e.status_code}")
    except o.APITimeoutError:
        return ModelList(None, reason="the model list did not answer in time")
    except o.APIConnectionError as e:
        cause, blocked = e, None
        for _ in range(6):
            if cause is None or isinstance(cause, BlockedDestination):
                blocked = cause
                break
            cause = cause.__cause__ or cause.__context__
        return ModelList(None, reason=f"this server does not call that address ({blocked})" if blocked
                         else "the endpoint could not be reached")
    except BlockedDestination as e:
        return ModelList(None, reason=f"this server does not call that address ({e})")
    finally:
        await client.close()
    if response.extensions.get(CAPPED):
        return ModelList(None, reason="the model list was too large")
    try:
        return ModelList(parse_model_list(response.content, azure=azure), source=source)
    except ValueError as e:
        return ModelList(None, reason=str(e))


# --- before a run ---------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class Preflight:
    """What is known before a run's first paid call: whether the chosen judge is served, its shutdown date, and
    what to tell the user. `stop` means: do not start (the official judge is not served here)."""

    model: str
    models: ModelList
    served: bool | None                     # from the model list or the probe; None: unknown
    shutdown_date: date | None              # the endpoint's announced date (or the known shutdown when not served)
    today: date
    retirement: Retirement | None = None
    probe: str | None = None                # what the one probe found, when one was sent
    warnings: tuple[str, ...] = field(default_factory=tuple)

    @property
    def official(self) -> bool:
        return is_official_judge(self.model)

    @property
    def stop(self) -> bool:
        return self.official and self.served is False

    @property
    def note(self) -> str | None:
        """The shutdown flag for the start of the run and its card (None when no date is known)."""
        return None if self.stop else retirement_note(self.model, self.shutdown_date, self.today)

    def message(self, **hints: str) -> str | None:
        """The stop message (`retired_judge_message`, with its `check_hint` / `view_hint`), or None when the run
        may start."""
        if not self.stop:
            return None
        return retired_judge_message(self.model, self.retirement, self.models, **hints)


async def preflight(settings: JudgeSettings, api_key: str | None, *, today: date | None = None, policy=None,
                    judge=None, models: ModelList | None = None) -> Preflight:
    """Read the endpoint's model list and decide whether a run with `settings` may start (at most one probe).

    - The official judge listed, or another judge: the run starts (a listed shutdown date becomes its note).
    - The official judge missing from a known list: `Preflight.stop`, no call made.
    - The official judge on an endpoint without a model list: one probe through `judge` (a few tokens); a 404
      stops, any other answer lets the run start (its own errors then speak).
    A judge that is not the official one is never stopped here (an endpoint's list may omit aliases it serves);
    when the list misses it a warning says so. `models`: the endpoint's list when already read."""
    today = today or today_utc()
    if settings.provider == "baseline":
        return Preflight(settings.model, ModelList(None, reason="offline"), None, None, today)
    if models is None:
        models = await list_judge_models(settings, api_key, policy=policy)
    listed = models.get(settings.model)
    served = models.serves(settings.model)
    retirement = retirement_of(settings.model) if is_official_judge(settings.model) else None
    probe, warnings = None, []
    if is_official_judge(settings.model) and served is None and judge is not None:
        try:
            await judge.complete(PROBE_PROMPT, 0.0)
            served, probe = True, "answered"
        except JudgeError as e:
            probe = e.kind
            if e.kind == "not_found":
                served = False
    if served is False and not is_official_judge(settings.model):
        warnings.append(f"{settings.model} is not in this endpoint's model list (it serves: {served_text(models)}); "
                        "grading tries it anyway")
    if served and retirement is not None and (listed is None or listed.shutdown_date is None):
        warnings.append(f"{retirement.provider} shut down {settings.model} on {retirement.shutdown_date.isoformat()};"
                        " this endpoint still serves it")
    shutdown = listed.shutdown_date if listed is not None else None
    if served is False and retirement is not None:
        shutdown = retirement.shutdown_date
    return Preflight(settings.model, models, served, shutdown, today, retirement, probe, tuple(warnings))
