"""The grading engine: the only place that awaits the judge.

`grade_sample` applies the official MM-Vet policy to one sample and one run: a call at temperature 0; when the
answer is unparsable, the same prompt plus the official suffix at temperatures 0.0, 0.5, 1.0, 1.5 and 2.0 in
turn; the answer of that last call is never read and the score becomes 0.0 (flagged ``fallback``). With MM-Vet
v2 a 400 Bad Request scores 0.0 as the official v2 script does (flagged ``bad_request_zero``).

`grade_run` grades every missing (sample, run) of a stored run with a bounded number of concurrent calls. Each
judge answer goes through the store's cache first and is committed as soon as it arrives; a `JudgeError` that
survived the SDK's retries leaves that sample ``error`` (visible, retried on resume) and never a silent 0.
Errors that will fail every call (bad key, unknown model, unreachable endpoint) stop the run with a message.
"""
from __future__ import annotations

import asyncio
import hashlib
import heapq
import itertools
import time
from collections import deque
from dataclasses import dataclass, field
from typing import Callable

from ..inputs.benchmark import Benchmark, Sample
from .judge import Judge, JudgeError, JudgeReply, answer_fingerprint, describe_judge_error
from .prompt import RETRY_TEMPERATURES, parse_score, render_prompt
from .steering import detect_steering
from ..store import GradeRow, Store, StoreError

#: Statuses of a stored grade that count as graded (everything else is retried on resume).
GRADED = frozenset({"ok", "fallback", "bad_request_zero"})
#: Default ceiling of one run's calls in flight; the account's limiter (`mmvet_core.judging.ratelimit`) starts lower and
#: adapts to what the endpoint sustains.
DEFAULT_CONCURRENCY = 256
#: Judge failures that would fail every other call too: the run stops instead of erroring each sample.
FATAL_KINDS = frozenset({"auth", "permission", "not_found", "connection", "quota", "unresponsive", "blocked",
                         "redirect", "too_large"})


class BudgetExceeded(Exception):
    """Raised by a budget hook when no more judge calls are allowed (the run stops, nothing is lost)."""


@dataclass
class CallStats:
    calls: int = 0          # judge calls answered (paid)
    cached: int = 0         # answers reused from the store
    requests: int = 0       # HTTP requests sent to the judge, failed ones included


@dataclass
class RunOutcome:
    status: str             # done, incomplete, stopped, failed
    message: str
    graded: int
    errored: int
    stats: CallStats = field(default_factory=CallStats)


def prompt_sha(prompt: str) -> str:
    return hashlib.sha256(prompt.encode("utf-8")).hexdigest()


async def off_loop(store: Store, fn: Callable, *args, **kwargs):
    """``fn(*args, **kwargs)``, a blocking call to `store` (or to a budget kept in it): in a thread when the store
    is a database server's (each call is a round trip or three: on the loop they would hold every call in flight
    of the process, and one grading worker's loop carries a whole account's pace), on the loop for the embedded
    SQLite file (microseconds)."""
    if getattr(store, "backend", "sqlite") == "sqlite":
        return fn(*args, **kwargs)
    return await asyncio.to_thread(fn, *args, **kwargs)


class CachedCaller:
    """Calls the judge through the store's answer cache; counts calls; charges an optional budget hook. The
    store and the budget are reached off the event loop when the store is a server's (`off_loop`)."""

    def __init__(self, judge: Judge, store: Store, *, budget: Callable[[str], object] | None = None,
                 on_retry: Callable[[str], None] | None = None):
        self.judge, self.store, self.budget = judge, store, budget
        self.fingerprint = answer_fingerprint(judge)
        self.stats = CallStats()
        self.on_retry = on_retry        # told the sample id when a grade starts the official re-asks

    async def __call__(self, prompt: str, temperature: float, k: int, sample: Sample,
                       prediction: str, *, priority: int = 1) -> tuple[JudgeReply, bool]:
        if priority == 0 and self.on_retry is not None:
            self.on_retry(sample.id)
        sha = prompt_sha(prompt)
        hit = await off_loop(self.store, self.store.get_answer, self.fingerprint, sha, temperature, k)
        if hit is not None:
            self.stats.cached += 1
            return JudgeReply(**hit), True
        # the budget hook charges the call's estimated tokens (or raises BudgetExceeded) and returns what
        # corrects the estimate with the tokens the endpoint reports
        settle = await off_loop(self.store, self.budget, prompt) if self.budget is not None else None
        reply = await self.judge.complete(prompt, temperature, sample=sample, prediction=prediction,
                                          priority=priority)
        self.stats.calls += 1
        # the answer is paid for: keeping it (the budget's correction, then the cache) is not cancelled with the
        # grading (Stop's grace ends the calls in flight, not the storing of an answer that arrived)
        await asyncio.shield(self._keep(reply, settle, sha, temperature, k))
        return reply, False

    async def _keep(self, reply: JudgeReply, settle, sha: str, temperature: float, k: int) -> None:
        if callable(settle):
            await off_loop(self.store, settle, reply)
        await off_loop(self.store, self.store.put_answer, self.fingerprint, sha, temperature, k,
                       content=reply.content, model=reply.model, prompt_tokens=reply.prompt_tokens,
                       completion_tokens=reply.completion_tokens, sent=reply.sent)


def _attempt(reply: JudgeReply, temperature: float, retry: bool, cached: bool, score: float | None) -> dict:
    return {"temperature": temperature, "retry_prompt": retry, "content": reply.content, "score": score,
            "model": reply.model, "prompt_tokens": reply.prompt_tokens,
            "completion_tokens": reply.completion_tokens, "sent": reply.sent, "cached": cached}


async def grade_sample(call: CachedCaller, version: str, sample: Sample, prediction: str, run_index: int,
                       run_id: str = "") -> GradeRow:
    """Grade one sample for one run with the official policy. Raises `JudgeError` on API failure."""
    attempts: list[dict] = []
    flags = detect_steering(prediction)
    examples = call.judge.settings.prompt_examples      # None: the official prompt
    prompt = render_prompt(version, sample.question, sample.answer, prediction, examples=examples)
    try:
        reply, cached = await call(prompt, 0.0, run_index, sample, prediction)
        score = parse_score(reply.content)
        attempts.append(_attempt(reply, 0.0, False, cached, score))
        status, content = "ok", None
        if score is not None:
            content = (reply.content or "").split(" ")[0].strip()   # the official 'content' is the parsed token
        else:
            retry_prompt = render_prompt(version, sample.question, sample.answer, prediction, retry=True,
                                         examples=examples)
            for i, temperature in enumerate(RETRY_TEMPERATURES):
                # a retry continues a chain already started: it goes before new grades (priority 0)
                reply, cached = await call(retry_prompt, temperature, run_index, sample, prediction, priority=0)
                last = i == len(RETRY_TEMPERATURES) - 1
                score = None if last else parse_score(reply.content)   # official: the last answer is never read
                attempts.append(_attempt(reply, temperature, True, cached, score))
                if score is not None:
                    content = (reply.content or "").split(" ")[0].strip()
                    break
            else:
                status, score, content = "fallback", 0.0, reply.content
                flags = ["fallback"] + flags
    except JudgeError as err:
        if version == "v2" and err.kind == "bad_request":
            # Official v2 behaviour: a 400 Bad Request scores 0.0 with content "BadRequestError".
            return GradeRow(run_id, sample.id, run_index, "bad_request_zero", 0.0, "BadRequestError",
                            call.judge.settings.model, attempts, describe_judge_error(err),
                            ["bad_request_zero"] + flags, time.time())
        raise
    return GradeRow(run_id, sample.id, run_index, status, score, content, reply.model, attempts, None, flags,
                    time.time())


class WorkOrder:
    """The order in which a run's (sample, run index) pairs are graded.

    The official order is run-major (every sample of run 0, then of run 1, ...) and so is ours, with one change:
    once a grade of a sample needed several judge calls (the official retries after an unparsable answer), the
    sample's remaining runs move ahead of the others, longest chains first. Grades do not depend on the order; the
    wall time does, since a run ends when its last retry chain ends. Judges tend to stumble on the same prompts in
    every run, so starting the long chains early leaves short ones for the end (longest-first scheduling).

    >>> order = WorkOrder([("a", 0), ("b", 0), ("c", 0), ("a", 1), ("b", 1), ("c", 1)])
    >>> order.take(), order.take()
    (('a', 0), ('b', 0))
    >>> order.observe("b", 3)            # b's grade took 3 calls: its run 1 goes next
    >>> [order.take() for _ in range(len(order))]
    [('b', 1), ('c', 0), ('a', 1), ('c', 1)]
    >>> order.take() is None
    True
    """

    def __init__(self, items: list[tuple[str, int]]):
        self._order = deque(items)
        self._pending: dict[str, list[int]] = {}
        for sid, r in items:
            self._pending.setdefault(sid, []).append(r)
        self._total = len(items)
        self._taken: set[tuple[str, int]] = set()
        self._ahead: list[tuple[int, int, str, int]] = []     # heap of (-calls, order, sample id, run index)
        self._calls: dict[str, int] = {}
        self._seq = itertools.count()

    def __len__(self) -> int:
        return self._total - len(self._taken)

    def take(self) -> tuple[str, int] | None:
        """The next pair to grade, or None when every pair was taken."""
        while self._ahead:
            *_, sid, r = heapq.heappop(self._ahead)
            if (sid, r) not in self._taken:
                return self._mark(sid, r)
        while self._order:
            sid, r = self._order.popleft()
            if (sid, r) not in self._taken:
                return self._mark(sid, r)
        return None

    def observe(self, sample_id: str, calls: int) -> None:
        """A grade of `sample_id` took `calls` judge calls: move its remaining runs ahead when that is a chain."""
        if calls <= self._calls.get(sample_id, 1):
            return
        self._calls[sample_id] = calls
        for r in self._pending.get(sample_id, ()):
            if (sample_id, r) not in self._taken:
                heapq.heappush(self._ahead, (-calls, next(self._seq), sample_id, r))

    def _mark(self, sid: str, r: int) -> tuple[str, int]:
        self._taken.add((sid, r))
        return sid, r


async def grade_run(store: Store, run_id: str, benchmark: Benchmark, judge: Judge, *,
                    concurrency: int = DEFAULT_CONCURRENCY,
                    on_grade: Callable[[GradeRow], None] | None = None, stop: asyncio.Event | None = None,
                    budget: Callable[[str], object] | None = None) -> RunOutcome:
    """Grade every (sample, run) of `run_id` not yet graded. Returns how the run ended; never raises for
    judge failures (they are stored and reported). Cancelling the task stops the run cleanly ("stopped")."""
    run = store.get_run(run_id)
    if run is None:
        raise KeyError(f"no run {run_id!r} in {store.path}")
    pairs = missing_pairs(store, run_id, benchmark, run.n_runs)
    store.set_status(run_id, "running")
    try:
        state, stats = await grade_pairs(store, run, benchmark, judge, pairs, concurrency=concurrency,
                                         on_grade=on_grade, stop=stop, budget=budget)
    except asyncio.CancelledError:
        store.set_status(run_id, "stopped", "stopped by the user; resume continues without paying again")
        raise
    outcome = run_outcome(store, run_id, benchmark, run.n_runs, state, stop, stats)
    store.set_status(run_id, outcome.status, outcome.message)   # may raise StoreError: the caller records it
    return outcome


def missing_pairs(store: Store, run_id: str, benchmark: Benchmark, n_runs: int) -> list[tuple[str, int]]:
    """The (sample, run index) pairs of a run without a grade yet (an errored one included), in the official
    run-major order."""
    done = {(g.sample_id, g.run_index) for g in store.grades(run_id, evidence_for=None) if g.status in GRADED}
    return [(sid, r) for r in range(n_runs) for sid in benchmark.ids if (sid, r) not in done]


async def grade_pairs(store: Store, run, benchmark: Benchmark, judge: Judge, pairs: list[tuple[str, int]], *,
                      concurrency: int = DEFAULT_CONCURRENCY,
                      on_grade: Callable[[GradeRow], None] | None = None, stop: asyncio.Event | None = None,
                      budget: Callable[[str], object] | None = None) -> tuple[dict, CallStats]:
    """Grade `pairs` of the stored `run` (all of a run's missing pairs, or a slice of them graded by a worker:
    `mmvet_core/runs/taskqueue.py`), storing each grade as it is made; the run's status is the caller's. Returns the
    state (``graded``, ``errored``, ``fatal``/``budget``/``store``: why it halted early, else None) and the call
    counts. Cancelling it cancels the calls in flight."""
    run_id = run.id
    todo = WorkOrder(list(pairs))
    # a sample whose answer needed re-asking will likely need them in its other runs too: they go next
    call = CachedCaller(judge, store, budget=budget, on_retry=lambda sid: todo.observe(sid, 2))
    state = {"graded": 0, "errored": 0, "fatal": None, "budget": None, "store": None}
    halt = asyncio.Event()
    tasks: list[asyncio.Task] = []

    def abort_others() -> None:
        """A fatal error (a rejected key, an exhausted quota, no such model): every other call would fail the
        same way, so the workers waiting for their turn or in a call are cancelled instead of sending them."""
        me = asyncio.current_task()
        for t in tasks:
            if t is not me:
                t.cancel()

    async def worker() -> None:
        while not halt.is_set() and not (stop is not None and stop.is_set()):
            item = todo.take()
            if item is None:
                return
            sid, r = item
            sample, prediction = benchmark.samples[sid], run.predictions.get(sid, "")
            try:
                try:
                    row = await grade_sample(call, benchmark.version, sample, prediction, r, run_id)
                    state["graded"] += 1
                    todo.observe(sid, len(row.attempts))
                except BudgetExceeded as e:
                    state["budget"] = str(e)
                    halt.set()
                    return
                except JudgeError as err:
                    row = GradeRow(run_id, sid, r, "error", None, None, None, [], describe_judge_error(err),
                                   ["error"], time.time())
                    state["errored"] += 1
                    if err.kind in FATAL_KINDS:
                        state["fatal"] = describe_judge_error(err)
                        halt.set()
                        abort_others()
                await off_loop(store, store.put_grade, row)
            except StoreError as e:     # no more calls: their answers could not be kept
                state["store"] = str(e)
                halt.set()
                return
            if on_grade is not None:
                on_grade(row)

    n_workers = max(1, min(concurrency, len(todo)))
    tasks.extend(asyncio.create_task(worker()) for _ in range(n_workers))
    try:
        results = await asyncio.gather(*tasks, return_exceptions=True)   # (workers cancelled by abort_others)
    except asyncio.CancelledError:
        for t in tasks:
            t.cancel()
        raise
    finally:
        call.stats.requests = getattr(judge, "requests", call.stats.calls)
    for r in results:
        if isinstance(r, BaseException) and not isinstance(r, asyncio.CancelledError):
            raise r
    return state, call.stats


def run_outcome(store: Store, run_id: str, benchmark: Benchmark, n_runs: int, state: dict,
                stop: asyncio.Event | None, stats: CallStats) -> RunOutcome:
    """How a run ended, from its stored grades and the state of the grading that ended (`grade_pairs`)."""
    if state["store"]:
        return RunOutcome("failed", f"stopped: {state['store']}; the grades stored before are kept",
                          state["graded"], state["errored"], stats)
    return _outcome(store, run_id, benchmark, n_runs, state, stop, stats)


def _outcome(store: Store, run_id: str, benchmark: Benchmark, n_runs: int, state: dict,
             stop: asyncio.Event | None, stats: CallStats) -> RunOutcome:
    counts = store.count_grades(run_id)
    graded = sum(n for s, n in counts.items() if s in GRADED)
    errored = counts.get("error", 0)
    expected = len(benchmark) * n_runs
    if state["fatal"]:
        status, msg = "failed", f"stopped: {state['fatal']}"
    elif state["budget"]:
        status, msg = "stopped", state["budget"]
    elif stop is not None and stop.is_set():
        status, msg = "stopped", "stopped by the user; resume continues without paying again"
    elif graded >= expected:
        status, msg = "done", f"{graded} grades"
    else:
        status, msg = "incomplete", f"{errored} grade(s) failed after retries; resume retries them"
    return RunOutcome(status, msg, graded, errored, stats)
