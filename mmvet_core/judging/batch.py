"""Grading through the OpenAI Batch API: the same grades at half the price, within 24 hours.

The official policy runs in rounds. Each round replays `grade_sample` (the one implementation of the official
policy) for every (sample, run) not yet graded, with a caller that answers from the store's answer cache and
otherwise names the call it needs. Grades whose answers are all stored are stored; the calls still needed (the
first call of a grade, or the next re-ask after an unparsable answer, at the next temperature) are submitted as
one batch (``/v1/files`` + ``/v1/batches``, ``completion_window`` 24h), polled, and every answer is stored in the
answer cache the moment its batch's output arrives, exactly as a live answer is. Then the next round.

Resumable: a batch is recorded in the store before anything is uploaded (with the calls it holds), its file id
and batch id as soon as they exist. A restarted run first finishes its open batches (a batch whose creation was
interrupted is found again by its input file) and never submits a call twice. A request that failed inside a
batch is submitted again in the next round, at most `MAX_LINE_FAILURES` times; then its grade is ``error``
(retried on resume), never a score. A 400 on MM-Vet v2 scores 0.0 as the official v2 script does.
"""
from __future__ import annotations

import asyncio
import json
import time
from typing import Callable

from ..inputs.benchmark import Benchmark, Sample
from .grading import GRADED, BudgetExceeded, CallStats, RunOutcome, grade_sample, prompt_sha
from .judge import JudgeError, JudgeReply, answer_fingerprint, describe_judge_error, reply_from_body
from ..store import GradeRow, Store

#: A request that failed this many times inside batches leaves its grade ``error``.
MAX_LINE_FAILURES = 3
#: Batch statuses after which nothing changes any more.
TERMINAL = frozenset({"completed", "failed", "expired", "cancelled"})
#: Seconds between two polls of a batch (a batch takes minutes to hours).
DEFAULT_POLL = 30.0
#: What a run that met an endpoint without the Files / Batch APIs says (vLLM, Ollama and most local servers).
NO_BATCH_API = ("this endpoint has no Batch API (POST {path} answered HTTP {status}; a wrong base URL answers the "
                "same): grade live instead (without --batch; in the app, pick live grading)")


class NeedAnswer(Exception):
    """The call a grade needs next: its prompt at a temperature for run `k` (not in the store yet)."""

    def __init__(self, prompt: str, temperature: float, k: int):
        super().__init__(f"needs an answer (run {k}, temperature {temperature})")
        self.prompt, self.temperature, self.k = prompt, temperature, k
        self.key = custom_id(prompt_sha(prompt), temperature, k)


def custom_id(sha: str, temperature: float, k: int) -> str:
    """The batch line id of one call: run index, temperature and the prompt's sha256.

    >>> custom_id("ab12", 0.5, 2)
    '2|0.5|ab12'
    """
    return f"{k}|{temperature!r}|{sha}"


def parse_custom_id(cid: str) -> tuple[str, float, int]:
    k, temperature, sha = cid.split("|", 2)
    return sha, float(temperature), int(k)


class StoredAnswers:
    """The caller `grade_sample` gets in batch mode: stored answers, else `NeedAnswer` (or the `JudgeError` of a
    request that kept failing inside batches)."""

    def __init__(self, judge, store: Store, fresh: set[str], failed: dict[str, JudgeError],
                 reused: set[str] | None = None):
        self.judge, self.store = judge, store
        self.fingerprint = answer_fingerprint(judge)
        self.fresh, self.failed = fresh, failed
        self.reused = set() if reused is None else reused     # stored answers used that no batch of ours made
        self.stats = CallStats()

    async def __call__(self, prompt: str, temperature: float, k: int, sample: Sample, prediction: str, *,
                       priority: int = 1) -> tuple[JudgeReply, bool]:
        sha = prompt_sha(prompt)
        hit = self.store.get_answer(self.fingerprint, sha, temperature, k)
        if hit is None:
            need = NeedAnswer(prompt, temperature, k)
            if need.key in self.failed:
                raise self.failed[need.key]
            raise need
        cid = custom_id(sha, temperature, k)
        fresh = cid in self.fresh
        if fresh:
            self.stats.calls += 1
        else:
            self.stats.cached += 1
            self.reused.add(cid)
        return JudgeReply(**hit), not fresh


def batch_line(judge, need: NeedAnswer) -> dict:
    """One line of a batch input file: the body a live call would POST to ``/v1/chat/completions``."""
    params = judge._params(need.temperature)
    body = {"model": judge.settings.model, "messages": [{"role": "user", "content": need.prompt}], **params}
    return {"custom_id": need.key, "method": "POST", "url": "/v1/chat/completions", "body": body}


def _judge_error(err, path: str | None = None) -> JudgeError:
    """A `JudgeError` for an SDK exception raised by a Files / Batch API call; a 404 / 405 to the request that
    creates something (`path`) means the endpoint has no such API (kind ``no_batch_api``)."""
    import openai as o

    status = getattr(err, "status_code", None)
    if path is not None and status in (404, 405):
        return JudgeError("no_batch_api", NO_BATCH_API.format(path=path, status=status), status)
    kinds = {400: "bad_request", 401: "auth", 403: "permission", 404: "not_found", 429: "rate_limit"}
    if isinstance(err, o.APITimeoutError):
        return JudgeError("timeout", str(err) or "request timed out")
    if isinstance(err, o.APIConnectionError):
        return JudgeError("connection", str(err) or "connection failed")
    kind = kinds.get(status, "server" if status and status >= 500 else "other")
    return JudgeError(kind, str(getattr(err, "message", None) or err), status)


class BatchGrader:
    """Grades one stored run through the Batch API (see the module docstring)."""

    def __init__(self, store: Store, run_id: str, benchmark: Benchmark, judge, *, poll: float = DEFAULT_POLL,
                 on_grade: Callable[[GradeRow], None] | None = None, on_event: Callable[[str], None] | None = None,
                 stop: asyncio.Event | None = None, budget: Callable[[str], object] | None = None):
        if judge.settings.provider != "openai":
            raise JudgeError("other", "the Batch API is used with OpenAI-compatible endpoints only (not Azure here, "
                                      "not the offline baseline)")
        self.store, self.run_id, self.benchmark, self.judge = store, run_id, benchmark, judge
        self.poll, self.on_grade, self.stop, self.budget = poll, on_grade, stop, budget
        self.on_event = on_event or (lambda message: None)
        self.fresh: set[str] = set()
        self.failed: dict[str, JudgeError] = {}
        self.failures: dict[str, int] = {}
        self.reused: set[str] = set()       # stored answers reused (each counted once over the rounds)
        self.submitted = 0

    @property
    def client(self):
        """The judge's SDK client, with the SDK's own retries for these few management calls."""
        return self.judge._client.with_options(max_retries=3)

    async def run(self) -> RunOutcome:
        store, run_id = self.store, self.run_id
        run = store.get_run(run_id)
        if run is None:
            raise KeyError(f"no run {run_id!r}")
        store.set_status(run_id, "running")
        state = {"fatal": None, "budget": None}
        try:
            for batch in store.open_batches(run_id):
                await self._finish(batch)
            round_ = max((b["round"] for b in store.batches(run_id)), default=-1) + 1
            while True:
                caller, needs = await self._replay(run)
                if not needs or (self.stop is not None and self.stop.is_set()):
                    break
                if self.budget is not None:      # charged with each call's estimated tokens (see budget.py)
                    for need in needs.values():
                        self.budget(need.prompt)
                batch = await self._submit(round_, needs)
                await self._finish(batch)
                round_ += 1
        except BudgetExceeded as e:
            state["budget"] = str(e)
        except JudgeError as e:
            state["fatal"] = e.message if e.kind == "no_batch_api" else describe_judge_error(e)
        except asyncio.CancelledError:
            store.set_status(run_id, "stopped", "stopped; resume continues with the batches already submitted")
            raise
        counts = store.count_grades(run_id)
        graded = sum(n for s, n in counts.items() if s in GRADED)
        errored = counts.get("error", 0)
        stats = CallStats(calls=len(self.fresh), cached=len(self.reused))
        if state["fatal"] and not any(b.get("batch_id") for b in store.batches(run_id)):   # none to resume
            status, message = "failed", f"stopped: {state['fatal']}"
        elif state["fatal"]:
            status, message = "failed", f"stopped: {state['fatal']} (submitted batches are resumed on the next run)"
        elif state["budget"]:
            status, message = "stopped", state["budget"]
        elif graded >= len(self.benchmark) * run.n_runs:
            status, message = "done", f"{graded} grades"
        elif self.stop is not None and self.stop.is_set():
            status, message = "stopped", "stopped by the user; resume continues without paying again"
        else:
            status, message = "incomplete", f"{errored} grade(s) failed after retries; resume retries them"
        store.set_status(run_id, status, message)
        return RunOutcome(status, message, graded, errored, stats)

    async def _replay(self, run) -> tuple[StoredAnswers, dict[str, NeedAnswer]]:
        """Grade every missing (sample, run) from stored answers; return the calls still needed."""
        done = {(g.sample_id, g.run_index) for g in self.store.grades(self.run_id, evidence_for=None)
                if g.status in GRADED}
        caller = StoredAnswers(self.judge, self.store, self.fresh, self.failed, self.reused)
        needs: dict[str, NeedAnswer] = {}
        for r in range(run.n_runs):
            for sid in self.benchmark.ids:
                if (sid, r) in done:
                    continue
                sample, prediction = self.benchmark.samples[sid], run.predictions.get(sid, "")
                try:
                    row = await grade_sample(caller, self.benchmark.version, sample, prediction, r, self.run_id)
                except NeedAnswer as need:
                    needs.setdefault(need.key, need)
                    continue
                except JudgeError as err:
                    row = GradeRow(self.run_id, sid, r, "error", None, None, None, [], describe_judge_error(err),
                                   ["error"], time.time())
                self.store.put_grade(row)
                if self.on_grade is not None:
                    self.on_grade(row)
        return caller, needs

    async def _submit(self, round_: int, needs: dict[str, NeedAnswer]) -> dict:
        """Record, upload and create one batch of `needs`; returns its store record."""
        import openai

        requests = {key: [need.k, need.temperature] for key, need in needs.items()}
        bid = self.store.add_batch(self.run_id, round_, requests)
        data = "".join(json.dumps(batch_line(self.judge, need), ensure_ascii=False) + "\n"
                       for need in needs.values()).encode("utf-8")
        path = "/v1/files"
        try:
            uploaded = await self.client.files.create(file=(f"mmvet-{bid}.jsonl", data), purpose="batch")
            self.store.update_batch(bid, input_file_id=uploaded.id)
            path = "/v1/batches"
            created = await self.client.batches.create(input_file_id=uploaded.id, endpoint="/v1/chat/completions",
                                                       completion_window="24h", metadata={"mmvet_batch": bid})
        except openai.APIError as e:
            if getattr(e, "status_code", None) in (404, 405):     # nothing was submitted: forget this batch
                self.store.update_batch(bid, status="failed", message="no Batch API")
            raise _judge_error(e, path) from e
        self.store.update_batch(bid, batch_id=created.id, status="submitted")
        self.submitted += len(needs)
        self.on_event(f"round {round_ + 1}: batch {created.id} submitted with {len(needs)} call(s)")
        return {"id": bid, "round": round_, "batch_id": created.id, "input_file_id": uploaded.id,
                "requests": requests, "status": "submitted"}

    async def _finish(self, batch: dict) -> None:
        """Poll one recorded batch to its end and store its answers."""
        import openai

        try:
            batch_id = batch.get("batch_id") or await self._find_created(batch)
            if batch_id is None:         # interrupted before the batch was created: nothing was sent
                self.store.update_batch(batch["id"], status="failed", message="never created")
                return
            last = None
            while True:
                remote = await self.client.batches.retrieve(batch_id)
                counts = remote.request_counts
                note = f"batch {batch_id}: {remote.status}" + (
                    f", {counts.completed}/{counts.total} answered" if counts is not None and counts.total else "")
                if note != last:
                    self.on_event(note)
                    last = note
                if remote.status in TERMINAL:
                    break
                await asyncio.sleep(self.poll)
            for file_id in (remote.output_file_id, remote.error_file_id):
                if file_id:
                    content = await self.client.files.content(file_id)
                    self._store_lines(content.content, batch["requests"])
        except openai.APIError as e:
            raise _judge_error(e) from e
        if remote.status == "failed":
            errors = getattr(remote, "errors", None)
            detail = "; ".join(str(getattr(e, "message", e)) for e in (getattr(errors, "data", None) or []))
            self.store.update_batch(batch["id"], status="failed", message=detail or "failed")
            raise JudgeError("other", f"the batch {batch_id} failed: {detail or 'no reason given'}")
        self.store.update_batch(batch["id"], status="done", message=remote.status)

    async def _find_created(self, batch: dict) -> str | None:
        """The id of a batch whose creation was interrupted before we stored it (found by its input file)."""
        if not batch.get("input_file_id"):
            return None
        async for remote in self.client.batches.list(limit=100):
            if remote.input_file_id == batch["input_file_id"]:
                self.store.update_batch(batch["id"], batch_id=remote.id, status="submitted")
                return remote.id
        return None

    def _store_lines(self, content: bytes, requests: dict) -> None:
        """Store every answer of a batch output (or error) file in the answer cache, as live answers are."""
        fingerprint = answer_fingerprint(self.judge)
        for raw in content.decode("utf-8", "replace").splitlines():
            if not raw.strip():
                continue
            try:
                line = json.loads(raw)
                cid = line["custom_id"]
                sha, temperature, k = parse_custom_id(cid)
            except (ValueError, KeyError, TypeError):
                continue
            if cid not in requests:
                continue
            response = line.get("response") or {}
            status = response.get("status_code")
            body = response.get("body")
            if status == 200 and isinstance(body, dict):
                try:
                    reply = reply_from_body(200, json.dumps(body).encode("utf-8"), self.judge._params(temperature))
                except JudgeError as err:
                    self._line_failed(cid, err)
                    continue
                self.store.put_answer(fingerprint, sha, temperature, k, content=reply.content, model=reply.model,
                                      prompt_tokens=reply.prompt_tokens, completion_tokens=reply.completion_tokens,
                                      sent=reply.sent)
                self.fresh.add(cid)
                self.failed.pop(cid, None)
            else:
                error = (body or {}).get("error") if isinstance(body, dict) else None
                message = (error or {}).get("message") if isinstance(error, dict) else None
                message = message or json.dumps(line.get("error") or body)[:300]
                kind = "bad_request" if status == 400 else ("server" if (status or 0) >= 500 else "other")
                self._line_failed(cid, JudgeError(kind, message, status))

    def _line_failed(self, cid: str, err: JudgeError) -> None:
        self.failures[cid] = self.failures.get(cid, 0) + 1
        if err.kind == "bad_request" or self.failures[cid] >= MAX_LINE_FAILURES:
            self.failed[cid] = err


async def grade_run_batch(store: Store, run_id: str, benchmark: Benchmark, judge, **kwargs) -> RunOutcome:
    """Grade every missing (sample, run) of `run_id` through the Batch API (see `BatchGrader`)."""
    return await BatchGrader(store, run_id, benchmark, judge, **kwargs).run()
