"""Judges, one facet of the service: what an endpoint serves (its model list, each judge's shutdown date and
stored check), the preflight before any paid call, the judge check against reference sets with official
GPT-4-0613 grades, the successor board of every judge checked here, and a finished run's official-equivalent
estimate (`equivalence`, from the stored check and the run's scores)."""
from __future__ import annotations

import logging
import re
import threading
import time
from dataclasses import replace
from pathlib import Path

from ..judging.endpoints import LIST_TIMEOUT, JudgeRow, ModelList, judge_facts, judge_rows, list_judge_models, preflight, \
    today_utc
from ..runs.jobs import JobManager, TooManyRuns
from ..judging.judge import JudgeSettings
from ..successors.judgecheck import HOST, VISITOR, check_owner_hash
from ..runs.provenance import run_endpoints as run_endpoints_of
from ..judging.ratelimit import account_key
from ..runs.lifecycle import RunView
from ..store import Store
from .inputs import Inputs
from .limits import HostLimits
from .records import JudgeChoice, JudgeUnavailable, ServiceError, endpoint_host, shutdown_note
from .settings import ServiceSettings

log = logging.getLogger("mmvet_grader")

#: Where the app's retired-judge message points (the app's own sections, not CLI commands).
APP_CHECK_HINT = "“Check this judge first” on the Judges tab"
APP_VIEW_HINT = "“Open a grade file (no judge call)”"
#: How the message of a check that cannot start (the official judge is shut down) says what to do, on the page.
PAGE_CHECK_HINTS = {"check_hint": "pick one in the judge field (Grade tab) and click Check this judge (Judges tab)",
                    "view_hint": "Open a grade file"}
#: Seconds an endpoint's model list is reused (the judge field and every start read it).
MODEL_LIST_TTL = 60.0
#: How many finished runs' estimates are kept.
EQUIVALENCE_CACHE_SIZE = 256
#: Under a visitor's own check: whose it is and what it is not.
VISITOR_CHECK_NOTE = ("This is your check of your own endpoint, made with your key and seen by you only. This "
                      "server cannot verify what an endpoint it does not reach with its own key answers to other "
                      "prompts, so this check is not on the public successor board and makes no "
                      "official-equivalent estimate.")
#: A visitor's judge name as a check takes it: a model id (letters, digits and ``._:/@+-``), so that no name can
#: read as a claim ("gpt-4o (this server's judge)").
MODEL_ID = re.compile(r"[A-Za-z0-9][A-Za-z0-9._:/@+\-]{0,127}")


def model_id_refusal(model: str, host_model: str = "") -> str | None:
    """Why a visitor's judge name cannot be checked (None when it can): a check's judge is a model id, never a
    phrase that could claim to be this server's judge.

    >>> model_id_refusal("gpt-4o-2024-08-06"), model_id_refusal("meta-llama/Llama-3.1-70B-Instruct") is None
    (None, True)
    >>> "not a model id" in model_id_refusal("gpt-4o (this server's judge)")
    True
    """
    if MODEL_ID.fullmatch(model or ""):
        return None
    return (f'The judge name "{(model or "")[:60]}" is not a model id (letters, digits and . _ : / @ + - only): a '
            "check names the model an endpoint serves, and never claims to be this server's judge.")


class Judges:
    """The judges a visitor may pick, their checks and the successor board; every refusal a `ServiceError`."""

    def __init__(self, settings: ServiceSettings, store: Store, jobs: JobManager, inputs: Inputs,
                 limits: HostLimits, exports_dir: Path):
        self.settings, self.store, self.jobs, self.inputs, self.limits = settings, store, jobs, inputs, limits
        self.exports_dir = exports_dir
        self._checks: dict[str, dict] = {}       # judge-check task -> {"done", "total"}
        self._check_started: dict[str, float] = {}   # owner -> when they last started a check (time.monotonic())
        self._model_lists: dict[str, tuple[float, ModelList]] = {}   # account -> (when read, list)
        self._equivalence_cache: dict[str, tuple[tuple, object]] = {}   # run id -> (stamp, Equivalence)
        self._checks_version: tuple[float, tuple] | None = None       # (when read, judge_checks_stamp)

    # ---- what the endpoint serves ----
    def model_list(self, jset: JudgeSettings, key: str | None, host: bool) -> ModelList:
        """The model list of the judge's endpoint (reused for `MODEL_LIST_TTL` seconds per account; a visitor's
        endpoint under the same address policy as their grading)."""
        if jset.provider == "baseline":
            return ModelList(None, reason="offline baseline")
        account = account_key(jset.provider, jset.base_url, jset.api_version, key)
        hit = self._model_lists.get(account)
        now = time.monotonic()
        if hit is not None and now - hit[0] < MODEL_LIST_TTL:
            return hit[1]
        models = self.jobs.call(list_judge_models(jset, key, policy=self.limits.endpoint_policy(host)),
                                timeout=LIST_TIMEOUT + 5)
        for old in [a for a, (t, _) in self._model_lists.items() if now - t >= MODEL_LIST_TTL]:
            self._model_lists.pop(old, None)
        self._model_lists[account] = (now, models)
        return models

    def offered(self, choice: JudgeChoice) -> tuple[ModelList, list[JudgeRow]]:
        """The chat models the chosen endpoint (the host's, or the visitor's own) serves, each with its shutdown
        date and stored judge check: what the judge field offers. The baseline has none."""
        jset, key, host = self.inputs.judge_for(choice)
        models = self.model_list(jset, key, host)
        return models, (judge_rows(models, jset, today_utc(), self.store) if models.known else [])

    def judge_field(self, choice: JudgeChoice) -> tuple[list[JudgeRow], str, str]:
        """What the judge field shows: (the endpoint's chat models with their facts, the judge that will grade,
        what to say beside it: its shutdown date and check, or why it cannot grade here). `ServiceError` for
        incomplete own-key fields or a refused base URL."""
        jset, key, host = self.inputs.judge_for(choice)
        if jset.provider == "baseline":
            return [], jset.model, ""
        models, rows = self.offered(choice)
        return rows, jset.model, judge_facts(jset.model, models, rows)

    def check_judge_served(self, jset: JudgeSettings, key: str | None, host: bool) -> JudgeSettings:
        """Before any paid call (at most one probe): `JudgeUnavailable` when the official judge is not served by
        the endpoint; else `jset` with the shutdown date the endpoint announces (recorded with the run)."""
        if jset.provider == "baseline":
            return jset
        models = self.model_list(jset, key, host)

        async def go():
            judge = self.limits.make_judge(jset, key, host)
            try:
                return await preflight(jset, key, today=today_utc(), judge=judge, models=models)
            finally:
                await judge.aclose()
        pre = self.jobs.call(go(), timeout=LIST_TIMEOUT + self.settings.call_deadline + 5)
        if pre.stop:
            raise JudgeUnavailable(pre.message(check_hint=APP_CHECK_HINT, view_hint=APP_VIEW_HINT), pre.models,
                                   render=pre.message)
        for warning in pre.warnings:
            log.info("%s", warning)
        return replace(jset, shutdown_date=pre.shutdown_date.isoformat()) if pre.shutdown_date else jset

    def judge_note(self, run_id: str) -> str | None:
        """The shutdown flag of a run's judge ("grades by judge-b cannot be re-run after 2026-12-11"), from the
        date recorded with the run; None when none is known."""
        run = self.store.get_run(run_id or "") if run_id else None
        return shutdown_note(run.judge) if run is not None else None

    # ---- judge check ----
    def _check_key(self, jset: JudgeSettings, owner: str, scope) -> str:
        from ..successors.judgecheck import check_fingerprint
        return f"judge-check:{owner}:{check_fingerprint(jset, scope)}"

    @staticmethod
    def _scope(key: str | None, host: bool, owner: str):
        """Who makes a check of this judge: the server (its own key) or this visitor (their own key: a check of
        their own, `judgecheck.visitor_scope`)."""
        from ..judging.judge import answer_scope
        from ..successors.judgecheck import HOST_SCOPE, visitor_scope
        return HOST_SCOPE if host else visitor_scope(owner, answer_scope(key))

    def check_cost(self, references: str | None = None) -> str:
        """What a check costs, said before it starts: the reference sets and the judge calls."""
        from ..successors.judgecheck import call_count, distinct_prompts, load_manifest

        refs = self._check_refs(references)
        left_out = [s.model for s in load_manifest() if s.model not in {r.model for r in refs}]
        return (f"A check grades {len(refs)} reference sets ({', '.join(r.model for r in refs)}) with real official "
                f"GPT-4-0613 grades: {call_count(refs=refs)} judge calls at most ({distinct_prompts(refs=refs)} "
                "distinct prompts; answers already stored are reused for free)."
                + (f" Not in the default check: {', '.join(left_out)}." if left_out else ""))

    @staticmethod
    def _check_refs(references: str | None):
        from ..successors.judgecheck import load_references
        try:
            return load_references(which=references or "default")
        except ValueError as e:
            raise ServiceError(str(e)) from None

    def check_judge(self, choice: JudgeChoice, owner: str, visitor: str, references: str | None = None,
                    hints: dict | None = None) -> str:
        """Start checking the chosen judge against the reference sets with official GPT-4-0613 grades (the default
        ones: 1308 calls at most, fewer when answers are stored; the judge's check grows). With the host's key every
        call is charged to the visitor's and the day's budgets, as grading is. Returns what to tell the user.
        `hints`: how the message of a check that cannot run (the endpoint no longer serves the official judge) says
        what to do instead (`PAGE_CHECK_HINTS` by default; an agent's tools name tools)."""
        from ..successors.judgecheck import call_count, check_settings, run_judge_check

        if not owner:
            raise ServiceError("Your session has no id yet; reload the page.")
        jset, key, host = self.inputs.judge_for(choice)
        if jset.provider == "baseline":
            raise ServiceError("The offline baseline is what the check compares a judge against: pick the server's "
                               "judge or your own to check it.")
        jset = check_settings(jset)
        if not host:
            refusal = model_id_refusal(jset.model, self.settings.judge_model)
            if refusal:
                raise ServiceError(refusal)
        refs = self._check_refs(references)
        scope = self._scope(key, host, owner)
        task = self._check_key(jset, owner, scope)
        if self.jobs.is_running(task):
            return "This judge is being checked already."
        progress = self._checks[task] = {"done": 0, "total": call_count(refs=refs)}

        def counted(row) -> None:
            progress["done"] += 1

        budget = self.limits.budget.hook(visitor) if host else None
        judge = self.limits.make_judge(jset, key, host)
        policy = self.limits.endpoint_policy(host)

        async def check(stop):
            # never spend on a judge the endpoint no longer serves; record the shutdown date it announces
            pre = await preflight(jset, key, policy=policy, judge=judge)
            if pre.stop:
                await judge.aclose()
                raise RuntimeError(pre.message(**(hints or PAGE_CHECK_HINTS)))
            checked = replace(jset, shutdown_date=pre.shutdown_date.isoformat()) if pre.shutdown_date else jset
            try:
                return await run_judge_check(self.store, checked, key, judge=judge,
                                             concurrency=self.settings.run_concurrency, on_grade=counted,
                                             stop=stop, budget=budget, refs=refs, scope=scope)
            finally:
                self._checks_version = None        # a card read next sees the check this stored
        self._check_started[owner] = time.monotonic()
        try:
            self.jobs.start_task(task, check, visitor=visitor)
        except TooManyRuns as e:
            raise ServiceError(str(e)) from None
        return (f"Checking {jset.model}: it grades {progress['total']} reference answers whose official GPT-4-0613 "
                "grades are known (answers already stored are reused for free)."
                + ("" if host else " With your own key this is your check, seen by you only: it is not this "
                   "server's check of the judge and makes no estimate."))

    def _shown_check(self, result, visitor_check: bool):
        """A check as a visitor may see it: the endpoint by its kind, never its address (the server's own gateway
        as "this server's endpoint", a visitor's as "a visitor's endpoint (private host)" or the like)."""
        from ..successors.table import endpoint_label

        label = endpoint_label(result.judge, self.settings.host_base_url or "", visitor=visitor_check)
        result.judge = {**result.judge, "base_url": "this server's endpoint" if label == "this server's judge"
                        else label}
        if visitor_check:           # said where the report's first lines are read
            result.message = VISITOR_CHECK_NOTE + (f" {result.message}" if result.message else "")
        return result

    def judge_check_text(self, choice: JudgeChoice, owner: str) -> tuple[str, bool]:
        """(what the check of the chosen judge says now, whether it is still running)."""
        from ..successors.judgecheck import format_check

        state, running, result = self.judge_check_state(choice, owner)
        return (format_check(result) if result is not None else state), running

    def check_started_since(self, owner: str, since: float) -> bool:
        """Whether `owner` started a check (of any judge) at or after `since` (``time.monotonic()``): a view's answer
        made meanwhile may say what was true before the check began."""
        started = self._check_started.get(owner)
        return started is not None and started >= since

    def judge_check_state(self, choice: JudgeChoice, owner: str):
        """(a state line — progress, why it stopped, or "" —, whether the check is running, the stored check of
        the chosen judge as a visitor may see it (`judgecheck.JudgeCheckResult`) or None): what the app's report
        is drawn from."""
        from ..successors.judgecheck import check_settings, stored_check

        try:
            jset, key, host = self.inputs.judge_for(choice)
        except ServiceError:
            return "", False, None
        if jset.provider == "baseline":
            return "", False, None
        jset = check_settings(jset)
        scope = self._scope(key, host, owner)
        task = self._check_key(jset, owner, scope)
        if self.jobs.is_running(task):
            p = self._checks.get(task, {"done": 0, "total": 0})
            return f"checking: {p['done']} / {p['total']} reference grades", True, None
        failure = self.jobs.failure(task)
        if failure:
            return f"The check stopped: {failure}", False, None
        result = stored_check(self.store, jset, scope=scope)
        if result is None:
            return "", False, None
        return "", False, self._shown_check(result, not host)

    def server_judge_choices(self) -> list[tuple[str, str]]:
        """The server's judges a visitor may pick on the page (its default, then ``MMVET_SERVER_JUDGES``), each as
        (label, model): the label says its announced shutdown and its check on this server ("judge-b · checked:
        drifts, estimates available", "not checked yet"). Empty when the host offers no choice."""
        from ..judging.endpoints import load_retirements

        names = list(dict.fromkeys([self.settings.judge_model, *self.settings.server_judges]))
        if len(names) < 2 or not self.settings.host_key:
            return []
        retired = load_retirements()
        checks = {r.judge: r for r in self.judge_board("checked") if r.endpoint == "this server's judge"}
        out = []
        for name in names:
            parts = [name]
            r = retired.get(name)
            if r is not None:
                parts.append(f"shut down {r.shutdown_date.isoformat()}")
            row = checks.get(name)
            parts.append(f"checked: {row.verdict}, estimates {'available' if row.estimates else 'not available'}"
                         if row is not None else "not checked yet")
            out.append((" · ".join(parts), name))
        return out

    # ---- checks that travel (`checkshare`) ----
    def export_check(self, choice: JudgeChoice) -> str:
        """The chosen judge's check here as a zip of its dataset folder (`checkshare.export_check`: no key, no
        private host name), written to the exports folder; returns its path. `ServiceError` when there is no
        complete check of it."""
        import shutil
        import tempfile

        from ..successors.checkshare import CheckShareError, export_check

        jset, _, _ = self.inputs.judge_for(choice)
        if jset.provider == "baseline":
            raise ServiceError("The offline baseline has no judge check to export.")
        out = self.exports_dir / "checks"
        out.mkdir(parents=True, exist_ok=True)
        host = endpoint_host({"base_url": self.settings.public_url}) if self.settings.public_url else ""
        with tempfile.TemporaryDirectory(dir=out) as tmp:
            try:
                export_check(self.store, jset, Path(tmp) / "check", host_name=host)
            except CheckShareError as e:
                raise ServiceError(str(e)) from None
            safe = "".join(c if c.isalnum() or c in "-._" else "-" for c in jset.model)[:80]
            made = shutil.make_archive(str(out / f".{safe}-check.{threading.get_ident()}"), "zip", Path(tmp) / "check")
            final = out / f"mmvet-judge-check-{safe}.zip"
            Path(made).replace(final)
        return str(final)

    def import_check(self, choice: JudgeChoice, path: str, owner: str, visitor: str, *,
                     seed: int | None = None) -> str:
        """Import an exported check (its ``check.jsonl``, or its folder zipped) as the chosen judge's check at its
        endpoint, VERIFIED first: a seeded 5 % of its prompts (at least 60) graded again with that judge, charged
        like grading with the host's key (`checkshare.import_check`). The page never stores an unverified check.
        Returns what to tell the user; `ServiceError` for a refused file or a failed verification. `seed`: the
        pick of prompts (None: drawn anew, so an exporter cannot know which rows are re-graded)."""
        import tempfile

        from ..inputs.archive import ArchiveError, safe_extract_zip
        from ..successors.checkshare import EXPORT_FILE, CheckShareError, import_check
        from ..judging.judge import answer_scope
        from ..successors.judgecheck import visitor_scope

        if not owner:
            raise ServiceError("Your session has no id yet; reload the page.")
        jset, key, host = self.inputs.judge_for(choice)
        if jset.provider == "baseline":
            raise ServiceError("Pick the judge the check is of (the server's or your own) to import it.")
        src = Path(path or "")
        if not src.is_file() or src.stat().st_size > 50_000_000:
            raise ServiceError("Upload the exported check: its check.jsonl, or its folder zipped (at most 50 MB).")
        self.exports_dir.mkdir(parents=True, exist_ok=True)
        with tempfile.TemporaryDirectory(dir=self.exports_dir) as tmp:
            folder = Path(tmp) / "check"
            try:
                if src.suffix.lower() == ".zip":
                    safe_extract_zip(src, folder, only={EXPORT_FILE: EXPORT_FILE})
                else:
                    folder.mkdir()
                    (folder / EXPORT_FILE).write_bytes(src.read_bytes())
            except (ArchiveError, OSError) as e:
                raise ServiceError(f"The zip cannot be read: {e}") from None
            budget = self.limits.budget.hook(visitor) if host else None
            judge = self.limits.make_judge(jset, key, host)
            try:
                # a check imported from the page is the visitor's own: visible to them alone, never the server's
                # check nor an estimate for anybody (issue 33: no visitor action reaches the server's check)
                scope = visitor_scope(owner, answer_scope(key) if not host else "host-judge")
                outcome = self.jobs.call(import_check(self.store, jset, key, folder, judge=judge,
                                                      concurrency=self.settings.run_concurrency, budget=budget,
                                                      scope=scope, seed=seed),
                                         timeout=600)
            except CheckShareError as e:
                raise ServiceError(str(e)) from None
        v = outcome.verification
        return (f"Imported the check of {jset.model} from {outcome.facts.get('host')} as check "
                f"{outcome.result.check_id[:8]}: {v.text() if v else 'unverified'}. It is yours: you alone see its "
                "report; estimates on this server rest only on checks the host made or imported itself.")

    # ---- the successor board ----
    def judge_board(self, sort: str = "delta_bar", owner: str = "") -> list:
        """The successor board (`successors.BoardRow`): every judge this server checked with its own key, sorted
        by `sort` (a value of `successors.SORT_KEYS`) and ranked; then, for `owner` alone, the checks they made
        with their own key, unranked and marked "your endpoint, unverified". Checks stored before checks recorded
        who made them are not shown (the host runs them again, at no cost)."""
        from ..judging.endpoints import load_retirements
        from ..successors.table import board_rows, sort_rows

        shutdowns = {name: r.shutdown_date for name, r in load_retirements().items()}
        checks = self.store.judge_checks()
        host_url = self.settings.host_base_url or ""
        rows = sort_rows(board_rows([c for c in checks if c.get("scope") == HOST], host_base_url=host_url,
                                    shutdowns=shutdowns), sort)
        if owner:
            mine = check_owner_hash(owner)
            rows += sort_rows(board_rows([c for c in checks if c.get("scope") == VISITOR
                                          and c.get("owner_hash") == mine], host_base_url=host_url,
                                         shutdowns=shutdowns, visitor=True), sort)
        return rows

    def judge_board_csv(self, sort: str = "delta_bar", base: str | None = None) -> str:
        """Write the board (this server's checks only: the file is shared) as CSV in the exports folder and
        return its path."""
        from ..successors.table import SORT_KEYS, make_board_csv_text

        out = self.exports_dir / "board"
        out.mkdir(parents=True, exist_ok=True)
        sort = sort if sort in SORT_KEYS.values() else "delta_bar"
        path = out / f"mmvet-judge-successor-board-by-{sort}.csv"
        root = self.settings.public_url or base or ""
        tmp = path.with_name(f".{path.name}.{threading.get_ident()}.tmp")     # visitors export at once
        tmp.write_text(make_board_csv_text(self.judge_board(sort), root), encoding="utf-8")
        tmp.replace(path)
        return str(path)

    def check_report(self, check_id: str, owner: str = "") -> str:
        """The full report of one stored check (a board row's link), the endpoint by its kind only; "" when there
        is no such check for this visitor (a visitor's own check is its owner's alone; a check stored before
        checks recorded who made them is nobody's)."""
        from ..successors.judgecheck import format_check

        result = self.check_result(check_id, owner)
        return "" if result is None else format_check(result)

    def check_result(self, check_id: str, owner: str = ""):
        """One stored check (`judgecheck.JudgeCheckResult`, a board row's link) as this visitor may see it (the
        endpoint by its kind only), or None: no such check, a check stored before checks recorded who made them,
        or another visitor's own check."""
        from ..successors.judgecheck import JudgeCheckResult

        entry = next((c for c in self.store.judge_checks() if c["id"] == (check_id or "")), None)
        if entry is None or entry.get("scope") not in (HOST, VISITOR):
            return None
        visitor_check = entry.get("scope") == VISITOR
        if visitor_check and (not owner or entry.get("owner_hash") != check_owner_hash(owner)):
            return None
        result = self._shown_check(JudgeCheckResult.from_dict(entry["result"]), visitor_check)
        if not result.check_id:
            result.check_id = entry["id"]
        return result

    # ---- official-equivalent estimate ----
    def visitor_key_at_server(self, run_judge: dict) -> bool:
        """Whether a run was graded (partly) with a visitor's own key at this server's own endpoint: the server's
        check of its judge does not stand behind those answers."""
        from ..runs.provenance import VISITOR_CREDENTIAL, endpoint_netloc
        return run_judge.get("credential") == VISITOR_CREDENTIAL and run_judge.get("provider") != "baseline" \
            and endpoint_netloc(self.settings.host_base_url) in run_endpoints_of(run_judge)

    def checks_version(self, max_age: float = 0.5) -> tuple:
        """`Store.judge_checks_stamp`, read at most every `max_age` seconds (every status poll asks it)."""
        now = time.monotonic()
        hit = self._checks_version
        if hit is None or now - hit[0] >= max_age:
            hit = self._checks_version = (now, self.store.judge_checks_stamp())
        return hit[1]

    def equivalence(self, view: RunView):
        """The run's official-equivalent estimate (`equivalence.Equivalence`), or why there is none; for finished
        runs only (a running run's scores move). The one stored estimate of its grades under the server's current
        check of its judge (`equivalence.stored_equivalent`): the card, ``/status``, MCP and the leaderboard read
        the same one."""
        from ..successors.equivalence import VISITOR_KEY_AT_SERVER, Equivalence, estimate_run
        from ..successors.judgecheck import run_check

        if not view.scores.complete:
            return Equivalence(False, "the run is not complete yet", str(view.run.judge.get("model", "?")))
        key = (view.run.id, view.run.updated_at, view.n_graded, len(view.overrides), self.store.judge_checks_stamp())
        hit = self._equivalence_cache.get(view.run.id)
        if hit is not None and hit[0] == key:
            return hit[1]
        judge = view.run.judge
        if self.visitor_key_at_server(judge):
            eq = Equivalence(False, VISITOR_KEY_AT_SERVER, str(judge.get("model", "?")))
        elif judge.get("provider") == "imported":        # a grade file: the server's check of the judge it records
            from ..successors.equivalence import recorded_equivalence
            eq = recorded_equivalence(self.store, view.benchmark, view.effective_scores(),
                                      judge_counts=judge.get("judge_counts") or {}, prompt=judge.get("prompt", ""),
                                      predictions=view.run.predictions)
        else:
            eq = estimate_run(view, run_check(self.store, judge), store=self.store)
        if len(self._equivalence_cache) >= EQUIVALENCE_CACHE_SIZE:
            self._equivalence_cache.pop(next(iter(self._equivalence_cache)))
        self._equivalence_cache[view.run.id] = (key, eq)
        return eq

