"""Agents as users: the app's tools for the Model Context Protocol (Gradio's MCP server, docs/agents.md).

Gradio turns every public named API endpoint into an MCP tool (its name from the function's name, its description
from the docstring, its arguments from the type hints). The tools here are a small set written for agents: plain
arguments, a docstring that says what each does, returns and costs, answers trimmed to what an agent reads. They
call `GradingService` exactly like the page and the scripts' endpoints (`mmvet_app/api.py`): the same owner rule, the
same per-visitor budget of the host's key and run slots, the same upload bounds and parsing worker.

Differences from the scripts' API, on purpose:
- A results file is a string (an https URL or a base64 data URI): `mmvet_core.hosting.remote_files` fetches it within the
  upload limit and refuses private destinations on a public host, before the service reads it as an upload.
- Reading a run needs its owner token too (the page's share link is for people; an agent reads its own runs and
  the public leaderboard). A run that is not the caller's and a run that does not exist get the same answer.
- The owner token is issued by `start_grading` (or chosen by the agent: 16 characters at least).

The tools come in groups by what they act on (`file_tools`, `run_tools`, `board_tools`, `judge_tools`), each a
function that defines its tools over the service and returns them; `register_mcp_tools` wires them all.
`hide_other_endpoints` marks every other named endpoint so that Gradio's MCP server does not list it (the
scripts' gradio_client API keeps them all).
"""
from __future__ import annotations

import contextlib
import functools
import inspect
import json
import math
import secrets
import tempfile

import gradio as gr

from mmvet_core.scores.compare import CompareError, compare_sets
from mmvet_core.runs.gradesets import benchmark_for, load_bundled_v1, sets_for_owner
from mmvet_core.successors.judgecheck import call_count
from mmvet_core.hosting.remote_files import FetchSlots, RemoteFileError, SharedFetchSlots, fetch_visitor_file
from mmvet_core.hosting.requestlimit import over_limit_message
from mmvet_core.runs.lifecycle import load_run_view
from mmvet_core.hosting.agent_judges import describe_agent_judges
from mmvet_core.service import (BENCH_BUNDLED, JUDGE_BASELINE, JUDGE_HOST, JUDGE_OWN, MODE_LIVE, BenchmarkChoice,
                                GradingService, JudgeChoice, JudgeUnavailable, ServiceError)
from mmvet_core.scores.stats import score_intervals

from mmvet_app.common import api_errors, visitor
from mmvet_app.common import base_url as page_base_url

#: The tools an agent sees, in this order (each is also a named API endpoint of the same name).
MCP_TOOLS = ("validate_results", "start_grading", "poll_run", "stop_run", "run_scores", "compare_runs",
             "read_leaderboard", "check_judge")
#: What Gradio's MCP server skips: any `_mcp_type` other than "tool", "resource" or "prompt" is listed nowhere.
HIDDEN = "api-only"
JUDGES = {"server": JUDGE_HOST, "own": JUDGE_OWN, "baseline": JUDGE_BASELINE}
SUBSETS = {"all": "All samples", "bard": "Bard set (168)"}
MIN_TOKEN = 16
# The tools are not queued (see `register_mcp_tools`): they run on the server's worker threads. A file tool holds
# one for a download (up to the upload limit in memory) and a parse, so at most `HostingLimits.file_slots` run at
# once and one address holds at most `file_slots_per_visitor` of them; a call that finds no slot within FILE_WAIT
# seconds is told the server is busy (instead of holding a thread).
FILE_WAIT = 10.0
NOT_YOURS = "No run of yours has this id: pass the owner_token that start_grading returned with it."
#: How a message about a judge that cannot grade says what to do, for an agent (the page's words name its buttons)
MCP_HINTS = {"check_hint": 'call the check_judge tool with start=true and that judge: judge "own" with your api_key, '
                           'base_url and judge_model, or judge "server" with judge_model when this server lets '
                           "agents pick its judges",
             "view_hint": "on this server's page, with “Open a grade file”; no tool imports grade files"}


def _judge(judge: str, base_url_: str = "", judge_model: str = "", api_key: str = "") -> JudgeChoice:
    """The tools' judge arguments as the service's record: with "server", `judge_model` is a server judge the host
    lets agents pick (`mmvet_core.hosting.agent_judges`), with "own" the model of the agent's endpoint."""
    kind = JUDGES.get((judge or "server").strip().lower())
    if kind is None:
        raise ServiceError("judge must be one of: server, own, baseline.")
    if kind == JUDGE_HOST:
        return JudgeChoice(kind, "", "", "", MODE_LIVE, host_model=(judge_model or "").strip())
    return JudgeChoice(kind, base_url_ or "", judge_model or "", api_key or "", MODE_LIVE)


def _bench(subset: str) -> BenchmarkChoice:
    label = SUBSETS.get((subset or "all").strip().lower())
    if label is None:
        raise ServiceError("subset must be all or bard.")
    return BenchmarkChoice(BENCH_BUNDLED, None, "", label)


def _token(owner_token: str, *, issue: bool = False) -> str:
    tok = (owner_token or "").strip()
    if not tok and issue:
        return secrets.token_urlsafe(18)
    if len(tok) < MIN_TOKEN or len(tok) > 200:
        raise ServiceError(f"owner_token must be the token start_grading returned (or {MIN_TOKEN} to 200 "
                           "characters of your own).")
    return tok


def _own(svc: GradingService, run_id: str, owner_token: str):
    """The caller's run, or the same refusal whether it is someone else's or does not exist."""
    tok = _token(owner_token)
    run = svc.store.get_run((run_id or "").strip()) if run_id else None
    if run is None or run.owner != tok:
        raise ServiceError(NOT_YOURS)
    return run


def _fetched(svc: GradingService, results_file: str, file_name: str, work: str) -> str:
    """The agent's file on disk (in `work`), fetched within the upload limit and the host's deadline."""
    try:
        return str(fetch_visitor_file(results_file, work, max_bytes=svc.settings.max_upload_mb * 1024 * 1024,
                                      block_private=not svc.settings.allow_private_endpoints, file_name=file_name,
                                      deadline=svc.settings.hosting.fetch_deadline_s))
    except RemoteFileError as e:
        raise ServiceError(f"results_file: {e}.") from None


def _within_limit(request: gr.Request | None) -> None:
    """Refuse a tool call the request limit refused (`mmvet_core.hosting.requestlimit`: the middleware marks an MCP tool
    call over its client's limit, so that the refusal is a tool error the agent reads, not a broken session)."""
    # Gradio hands a tool called over MCP the message's Starlette request itself (a page's call: a gr.Request)
    inner = getattr(request, "request", None) or request
    scope = getattr(inner, "scope", None) if inner is not None else None
    message = over_limit_message(scope.get("state") or {}) if isinstance(scope, dict) else None
    if message:
        raise ServiceError(message)


def limited_tool(fn):
    """A tool that answers the request limit's refusal (`_within_limit`) before it does anything. The tool takes
    ``request: gr.Request`` (Gradio then hands it the MCP message's request)."""
    signature = inspect.signature(fn)

    @functools.wraps(fn)
    def wrapper(*args, **kwargs):
        _within_limit(signature.bind_partial(*args, **kwargs).arguments.get("request"))
        return fn(*args, **kwargs)
    return wrapper


def _finite(obj):
    if isinstance(obj, float) and not math.isfinite(obj):
        return None
    if isinstance(obj, dict):
        return {k: _finite(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [_finite(v) for v in obj]
    return obj


def _answer(obj) -> str:
    """A tool's answer: JSON text (Gradio's MCP server would send a dict as Python's repr); NaN becomes null."""
    return json.dumps(_finite(obj), ensure_ascii=False, allow_nan=False)


def _r(x, digits: int = 2):
    return None if x is None else round(float(x), digits)


def _official_equivalent(card: dict) -> dict | None:
    """The run card's official-equivalent estimate (a successor judge checked against the official one), when the
    service gives one (issue 17); None otherwise."""
    fields = {k: v for k, v in card.items() if k.startswith("official_equivalent")}
    return fields or None


@contextlib.contextmanager
def agent_file(svc: GradingService, slots: FetchSlots, request: gr.Request | None, results_file: str,
               file_name: str):
    """The agent's file on disk, in a private folder removed after, read in a file slot (`FetchSlots`: a share per
    address) held while the block runs. A URL is downloaded first in a download slot of its own (one per
    address), so that slow URLs wait on the network without holding the file slots every agent needs."""
    who = visitor(svc, request)
    remote = (results_file or "").strip().lower().startswith(("http://", "https://"))
    with contextlib.ExitStack() as stack:
        work = stack.enter_context(tempfile.TemporaryDirectory(prefix="agent-", dir=svc.work_dir))
        try:
            if remote:
                with slots.download(who):
                    path = _fetched(svc, results_file, file_name, work)
                stack.enter_context(slots.slot(who))
            else:
                stack.enter_context(slots.slot(who))
                path = _fetched(svc, results_file, file_name, work)
        except RemoteFileError as e:
            raise ServiceError(str(e)) from None
        yield path


def scores_of(svc: GradingService, run, integrations: bool) -> dict:
    """`run_scores`' answer for `run` (the caller's): total and capabilities (and the integrations when
    asked), each with its interval, official number and spread over judge runs; the run card's estimate."""
    view = svc.reading.with_failure(load_run_view(svc.store, run.id))
    eff = view.effective_scores()
    spread = {("total", "total"): view.scores.total.std,
              **{("capability", c.name): c.std for c in view.scores.capabilities},
              **{("integration", c.name): c.std for c in view.scores.integrations}}
    cols: dict[str, dict] = {"capability": {}, "integration": {}}
    total = None
    for row in score_intervals(view.benchmark, eff):
        if row.kind == "integration" and not integrations:
            continue
        cell = {"score": _r(row.score), "ci": [_r(row.low), _r(row.high)], "official": row.official,
                "std": spread.get((row.kind, row.name)) if view.scores.complete else None, "n": row.n}
        if row.kind == "total":
            total = cell
        else:
            cols[row.kind][row.name] = cell
    card = svc.reading.card(view)
    out = {"run_id": run.id, "model": run.model_name, "judge": view.judge_text, "status": card["status"],
           "complete": view.scores.complete, "total": total, "capabilities": cols["capability"],
           "metric_note": view.metric_note, "official_equivalent": _official_equivalent(card)}
    if integrations:
        out["integrations"] = cols["integration"]
    return out


def comparison_of(svc: GradingService, tok: str, run_a: str, run_b: str) -> dict:
    """`compare_runs`' answer: the paired difference B - A of two runs of the owner `tok` (refused alike when
    either is not theirs)."""
    try:
        sets = sets_for_owner(svc.store, tok, [(run_a or "").strip(), (run_b or "").strip()], [])
        cmp = compare_sets(benchmark_for(sets, svc.store, load_bundled_v1()), sets)
    except CompareError as e:
        msg = NOT_YOURS if "not one of your runs" in str(e) else f"Compare: {e}."
        raise ServiceError(msg) from None
    pair = cmp.pairs[0]
    keep = [j for j, c in enumerate(cmp.columns) if c.kind in ("total", "capability")]
    sides = {}
    for key, s in zip(("a", "b"), cmp.sets):
        t = s.columns[0]
        sides[key] = {"name": s.name, "judge": s.judge, "total": _r(t.score), "ci": [_r(t.low), _r(t.high)]}
    diff = {cmp.columns[j].name: {"diff": _r(pair.columns[j].diff), "ci": [_r(pair.columns[j].low),
                                                                           _r(pair.columns[j].high)]}
            for j in keep}
    low, high = pair.columns[0].low, pair.columns[0].high
    verdict = ("" if low is None or high is None else
               "B is higher than A beyond sampling noise." if low > 0 else
               "B is lower than A beyond sampling noise." if high < 0 else
               "The difference is within sampling noise (the interval contains 0).")
    return {"n_common": cmp.n_common, **sides, "difference": diff, "delta_bar": _r(pair.delta_bar, 4),
            "verdict": verdict}


# ---- the tools, by what they act on: each group returns its tools, `register_mcp_tools` wires them ----
def file_tools(svc: GradingService, agent_judges_note: str) -> tuple:
    """`validate_results` and `start_grading`: the tools that read an agent's file, each in a slot of the
    server's (`FILE_WAIT`) and a private folder (`agent_file`)."""
    hosting = svc.settings.hosting
    bounds = (hosting.file_slots, hosting.file_slots_per_visitor, FILE_WAIT, hosting.file_downloads)
    # replicas on one database share the slots (issue 33)
    slots = SharedFetchSlots(svc.store, *bounds) if svc.settings.database_url else FetchSlots(*bounds)

    @api_errors
    @limited_tool
    def validate_results(results_file: str, file_name: str = "", judge: str = "server", judge_runs: int = 1,
                         subset: str = "all", judge_model: str = "", request: gr.Request = None) -> str:
        """Check an MM-Vet results file (a model's answers) against the bundled MM-Vet v1 benchmark and say what
        grading it would cost. Free: no judge call. Formats: official MM-Vet JSON {id: answer}, lmms-eval logs,
        VLMEvalKit tables (.xlsx/.tsv/.csv/.json), LLaVA-style .jsonl. The file must fit this server's upload limit.

        Args:
            results_file: The results file as an https:// URL, or as a base64 data URI (data:application/json;base64,...). URLs to private or loopback addresses are refused on a public server.
            file_name: Optional file name (e.g. llava-13b.json); it hints at the format and the model name.
            judge: Who would grade: "server" (this server's judge and key, within a daily budget per visitor), "own" (your key and endpoint) or "baseline" (offline keyword baseline, not the MM-Vet metric, free).
            judge_runs: How many times each answer would be graded (1 to 5; the official protocol reports the mean over runs).
            subset: "all" (218 samples) or "bard" (the 168-sample Bard set).
            judge_model: With judge "own": the judge model the estimate is priced for (default gpt-4-0613). {agent_judges}

        Returns:
            A JSON object: report: what the file holds against the benchmark (matched, missing, extra samples, format); estimate: judge calls, tokens and dollars grading would cost; model_name: the name taken from the file.
        """
        with agent_file(svc, slots, request, results_file, file_name) as path:
            v = svc.inputs.validate(path, _bench(subset), int(judge_runs), _judge(judge, judge_model=judge_model))
        return _answer({"report": v.report, "estimate": v.estimate, "model_name": v.model_name})

    @api_errors
    @limited_tool
    def start_grading(results_file: str, file_name: str = "", judge: str = "server", judge_runs: int = 1,
                      subset: str = "all", model_name: str = "", owner_token: str = "", base_url: str = "",
                      judge_model: str = "", api_key: str = "", request: gr.Request = None) -> str:
        """Start grading an MM-Vet results file in the background and return at once; then call poll_run until it
        ends and run_scores for the scores. COSTS: with judge "server" every answer is one call to this server's
        LLM judge per judge run (218 calls per run for MM-Vet v1; the host pays, so each visitor has a daily
        budget of calls and tokens, and a few runs at once; a run stops when the budget is spent, keeping what it
        graded). With judge "own" the calls go to your endpoint and are billed to your key. "baseline" is free.
        Answers already graded are never paid twice. OWNERSHIP: the run belongs to the owner_token. Leave
        owner_token empty the first time: a new token is returned; keep it (it is the only proof that the run is
        yours) and pass it to poll_run, stop_run, run_scores, compare_runs and to later start_grading calls.
        Starting the same job again while it runs returns the running run (started: false).

        Args:
            results_file: The results file as an https:// URL, or as a base64 data URI (data:application/json;base64,...). URLs to private or loopback addresses are refused on a public server.
            file_name: Optional file name (e.g. llava-13b.json); it hints at the format and the model name.
            judge: "server" (this server's judge and key, budgeted per visitor), "own" (your api_key, and base_url for a non-OpenAI endpoint) or "baseline" (offline keyword baseline: free, NOT the MM-Vet metric).
            judge_runs: How many times each answer is graded (1 to 5; cost is multiplied accordingly).
            subset: "all" (218 samples) or "bard" (the 168-sample Bard set).
            model_name: The name of the graded model (default: taken from the file).
            owner_token: Your owner token from an earlier start_grading; empty to get a new one.
            base_url: With judge "own": an OpenAI-compatible base URL (empty: api.openai.com).
            judge_model: With judge "own": the judge model (default gpt-4-0613). {agent_judges} The same daily budget applies whichever server judge grades.
            api_key: With judge "own": your API key (used for this run's calls only, never shown or stored in the run).

        Returns:
            A JSON object: run_id; owner_token (keep it); started (false when the same job was already running); share_url (a read-only page of the run for people).
        """
        tok = _token(owner_token, issue=True)
        with agent_file(svc, slots, request, results_file, file_name) as path:
            try:
                run_id, started = svc.runs.start(path, _bench(subset), int(judge_runs),
                                                 _judge(judge, base_url, judge_model, api_key), owner=tok,
                                                 visitor=visitor(svc, request), model_name=model_name)
            except JudgeUnavailable as e:      # words for an agent: tools, not the page's buttons
                raise ServiceError(e.message_for(**MCP_HINTS) + " " + agent_judges_note) from None
        return _answer({"run_id": run_id, "owner_token": tok, "started": started,
                        "share_url": svc.reading.share_url(run_id, page_base_url(request))})

    for fn in (validate_results, start_grading):
        fn.__doc__ = fn.__doc__.replace("{agent_judges}", agent_judges_note)
    return validate_results, start_grading


def run_tools(svc: GradingService) -> tuple:
    """`poll_run`, `stop_run`, `run_scores`, `compare_runs`: the caller's runs (its owner token), free."""

    @api_errors
    @limited_tool
    def poll_run(run_id: str, owner_token: str, request: gr.Request = None) -> str:
        """Progress of one of your runs (poll every few seconds until status is no longer "running"). Free.

        Args:
            run_id: The run_id start_grading returned.
            owner_token: The owner token the run was started with.

        Returns:
            A JSON object: status (running, done, stopped, failed); done, errored and total samples; message (why a run stopped, e.g. a spent budget); total_score so far (percent); complete (every sample graded in every judge run); waiting_until (a rate-limit pause, epoch seconds, or null).
        """
        run = _own(svc, run_id, owner_token)
        st = svc.reading.status(run.id)
        return _answer({k: st.get(k) for k in ("run_id", "status", "message", "done", "errored", "total",
                                               "total_score", "complete", "waiting_until")})

    @api_errors
    @limited_tool
    def stop_run(run_id: str, owner_token: str, request: gr.Request = None) -> str:
        """Stop one of your running runs. Calls in flight finish and are stored; nothing graded is lost (a stopped
        run can be resumed on the page or with the scripts' API). Free.

        Args:
            run_id: The run to stop.
            owner_token: The owner token the run was started with.

        Returns:
            What happened (plain text).
        """
        run = _own(svc, run_id, owner_token)
        return svc.runs.stop(run.id, run.owner)

    @api_errors
    @limited_tool
    def run_scores(run_id: str, owner_token: str, integrations: bool = False, request: gr.Request = None) -> str:
        """The MM-Vet scores of one of your runs, each with its 95% bootstrap interval over samples (how much the
        score would move with another draw of questions). Free. Scores are percent; "official" is the number the
        official evaluator prints (mean over judge runs), "std" the spread over judge runs.

        Args:
            run_id: The run to read.
            owner_token: The owner token the run was started with.
            integrations: Also return the 16 capability integrations (default: total and the six capabilities).

        Returns:
            A JSON object: model, judge, status, complete; total {score, ci [low, high], official, std, n}; capabilities {name: same}; integrations when asked; metric_note (why the metric is not the official one, e.g. the baseline judge); official_equivalent (for a successor judge checked against the official one, its official-equivalent estimate, when this server computes one: the labelled line, official_equivalent_label "in-sample" (the run's answers are one of the check's references, left out of the correction) or "extrapolated" (outside the references' range, interval widened), with ", unlike the references" when its answers differ in kind from every reference's (refusals, length, grades of exactly 0 or 1; the reasons in official_equivalent_unlike, interval widened), or "", official_equivalent_check (the check it rests on: id, date, reference models and their range), official_equivalent_estimate (every column with its interval); else null).
        """
        return _answer(scores_of(svc, _own(svc, run_id, owner_token), integrations))

    @api_errors
    @limited_tool
    def compare_runs(run_a: str, run_b: str, owner_token: str, request: gr.Request = None) -> str:
        """Compare two of your runs on the samples they share: the paired difference B - A of their scores with a
        95% paired bootstrap interval (the same questions in both, so question difficulty cancels out), for the
        total and each capability, and the verdict whether the difference is beyond sampling noise. Free (no judge
        call; a few seconds of computation).

        Args:
            run_a: The reference run (A).
            run_b: The other run (B).
            owner_token: The owner token both runs were started with.

        Returns:
            A JSON object: n_common samples; a and b {name, judge, total, ci}; difference {column: {diff, ci [low, high]}} for the total and the six capabilities; delta_bar (mean absolute per-sample difference); verdict.
        """
        return _answer(comparison_of(svc, _token(owner_token), run_a, run_b))

    return poll_run, stop_run, run_scores, compare_runs


def board_tools(svc: GradingService) -> tuple:
    """`read_leaderboard`: the server's public leaderboard."""

    @api_errors
    @limited_tool
    def read_leaderboard(judge: str = "", benchmark: str = "", query: str = "", sort: str = "rank",
                         descending: bool = False, references: bool = True, limit: int = 50, offset: int = 0,
                         request: gr.Request = None) -> str:
        """Read this server's MM-Vet leaderboard: published runs with their total, 95% interval and honest rank
        (entries whose difference is not significant in a paired test share a rank range), plus the paper's
        reference rows. Entries judged by different judges are never ranked against each other; only entries
        whose judge is verified (graded on this server, or vouched for by its host) are ranked: imported grades
        say "imported, judge not verified" in provenance and have no rank. Free.

        Args:
            judge: Only rows of this judge (its name, or a kind: official, successor, baseline); empty for all.
            benchmark: Only rows of this benchmark (e.g. v1, v2, v1-bard); empty for all.
            query: Only rows whose name contains this text.
            sort: The column to sort by: rank (default), name, judge, kind, benchmark, runs, total, ci_low, ci_high, date, or a capability (rec, ocr, know, gen, spat, math).
            descending: Sort in descending order.
            references: Include the paper's reference rows.
            limit: At most this many rows (1 to 500).
            offset: Skip this many rows first (0: the top); pass the answer's next_offset to read the next page.

        Returns:
            A JSON object: filter (as applied); rank_note (how to read the ranks); count (rows matching); next_offset (the offset of the next page, null after the last); entries, each {entry, name, link, judge, judge_kind, provenance, verified, rank_note, benchmark, runs, total, ci [low, high], rank [best, worst] or null, capabilities, date, reference, official_equivalent ([estimate, low, high] for a successor judge with a check on this server, else null), official_equivalent_label (in-sample, extrapolated, "unlike the references: <reasons>"), official_equivalent_check}.
        """
        board = svc.board.leaderboard_json({"judge": judge or "", "benchmark": benchmark or "", "query": query or "",
                                           "sort": sort or "rank", "descending": bool(descending),
                                           "references": bool(references)}, offset=offset, limit=limit or 50)
        board["entries"] = [{k: v for k, v in row.items() if k != "integrations"} for row in board["entries"]]
        return _answer(board)

    return (read_leaderboard,)


def judge_tools(svc: GradingService, agent_judges_note: str) -> tuple:
    """`check_judge`: a judge's check against the official one, read or started."""

    @api_errors
    @limited_tool
    def check_judge(judge: str = "server", start: bool = False, owner_token: str = "", base_url: str = "",
                    judge_model: str = "", api_key: str = "", request: gr.Request = None) -> str:
        """Is a judge close to the official GPT-4-0613 judge of MM-Vet? Reads the stored check of the judge (free)
        or, with start=true, starts one in the background. COSTS of a check: the judge grades reference models'
        answers whose official grades are known ({check_calls} judge calls, a few more when an answer must be
        asked again; answers already stored are reused for free). With judge "server" the calls are charged to this server's per-visitor daily budget (a check that
        would exceed it stops where the budget ends); with "own" they are billed to your key. Call again without
        start to follow it (running: true while it runs).

        Args:
            judge: "server" (this server's judge; judge_model picks another when the server allows it) or "own" (your api_key, base_url, judge_model).
            start: Start a check now (costs judge calls, see above); false only reads the stored report.
            owner_token: Your owner token (from start_grading; empty: a new one is returned); a check in progress is followed with the token that started it.
            base_url: With judge "own": an OpenAI-compatible base URL (empty: api.openai.com).
            judge_model: With judge "own": the judge model (default gpt-4-0613). {agent_judges}
            api_key: With judge "own": your API key (used for the check's calls only, never shown).

        Returns:
            A JSON object: report (how far the judge's grades are from the official ones, beside GPT-4's own run-to-run spread; empty when never checked); running; message (what starting did, or why the report is empty); owner_token.
        """
        tok = _token(owner_token, issue=True)
        choice = _judge(judge, base_url, judge_model, api_key)
        if choice.kind == JUDGE_BASELINE:
            raise ServiceError("The offline baseline is what a check compares a judge against: check the server's "
                               "judge or your own.")
        model = svc.inputs.judge_for(choice)[0].model     # a missing key, a refused URL, a judge agents may not pick
        message = svc.judges.check_judge(choice, tok, visitor(svc, request), hints=MCP_HINTS) if start else ""
        report, running = svc.judges.judge_check_text(choice, tok)
        if not report and not running and not message:
            message = (f"No check of {model} is stored on this server yet: call check_judge again with start=true "
                       f"to run one ({call_count()} judge calls at most; see this tool's COSTS).")
        return _answer({"report": report, "running": running, "message": message, "owner_token": tok})

    # the description gives this server's cost of a check (the reference sets are data) and its agent judges
    check_judge.__doc__ = check_judge.__doc__.replace("{check_calls}", str(call_count())).replace(
        "{agent_judges}", agent_judges_note)
    return (check_judge,)


def register_mcp_tools(svc: GradingService) -> None:
    """Register the agents' tools (`MCP_TOOLS`) as named API endpoints in the Blocks being built. They are not
    queued: Gradio's MCP server then calls them in the MCP request itself, so the visitor (budget, run slots) is
    the agent's own address, not the server's loopback."""
    note = describe_agent_judges(svc.settings.agent_judges, svc.settings.judge_model)
    tools = (*file_tools(svc, note), *run_tools(svc), *board_tools(svc), *judge_tools(svc, note))
    assert tuple(fn.__name__ for fn in tools) == MCP_TOOLS      # the tool's name is the function's, in this order
    for fn in tools:
        gr.api(fn, api_name=fn.__name__, queue=False)


def hide_other_endpoints(demo: gr.Blocks) -> list[str]:
    """Mark every named API endpoint that is not one of `MCP_TOOLS` so that Gradio's MCP server lists it nowhere
    (tools, resources, prompts); the scripts' API keeps it. Call after the Blocks are built. Returns the names of
    the hidden endpoints."""
    hidden = []
    for block_fn in demo.fns.values():
        fn = block_fn.fn
        if fn is None or block_fn.api_visibility == "private" or not block_fn.api_name:
            continue
        if block_fn.api_name in MCP_TOOLS and getattr(fn, "__name__", "") == block_fn.api_name:
            continue
        fn._mcp_type = HIDDEN
        hidden.append(block_fn.api_name)
    return hidden
