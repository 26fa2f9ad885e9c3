"""A small OpenAI-compatible judge server for tests and benchmarks (real HTTP on 127.0.0.1).

The answer is a deterministic function of the filled prompt's last row (question | ground truth | prediction),
so the same prediction always gets the same grade. Faults are injectable at run time through `FakeState`:
latency, 429 with ``retry-after``, a rate limit enforced like OpenAI's (requests per second and / or tokens per
minute, with 429 + ``retry-after-ms`` and ``x-ratelimit-*`` headers), an exhausted quota, 500s, slow answers
(client timeouts), garbage answers, a 200 whose body is not a chat completion, a wrong key, a model the endpoint
does not serve, a model that was shut down (OpenAI's 404 ``model_not_found``, "has been deprecated": `retired_models`),
a model list with ``shutdown_date`` (`model_list`) or none at all (`no_model_list`; see `FakeState.after_gpt4`), and
reasoning-model parameter rejections. It also serves the Files and Batch APIs (``/v1/files``,
``/v1/batches``: a batch answers every line like a live call after `batch_delay` seconds, or once a test releases
`batch_hold`) and Azure OpenAI's deployment route (``/openai/deployments/{model}/chat/completions``, key in
``api-key``).

A test that must see something *while* a run grades does not make the judge slow and hope the machine is fast
enough to look in time: it sets a `CallGate` (``state.gate``, tests/call_gate.py), which holds every chat call until
the test lets some through, then waits for what those answers cause.

(Over 600 lines for a reason: it is one server, every behaviour it can be told to have is a field of `FakeState`
and a branch of its answer, and the simulated judges the tests give it answer through it.)

Hostile modes (attacks a visitor's endpoint can perform, issue 9): a huge 200 body streamed in 1 MB chunks
(`huge_body`), an endpoint that accepts the request and never answers (`hang`), one that drips a byte every N
seconds forever (`drip_every`), a 307 redirect re-sending the POST elsewhere (`redirect_to`), and a 401 whose body
echoes the caller's key (`echo_key`). `secret_page` is served at ``GET|POST /internal`` (an "internal" page for
SSRF tests).

Use in-process: ``with FakeJudgeServer() as srv: srv.url, srv.state.calls``; or as a process:
``python -m tests.fake_judge --port 8765 --latency 0.1``.
"""
from __future__ import annotations

import argparse
import asyncio
import hashlib
import json
import random
import socket
import threading
import time
from dataclasses import dataclass, field
from typing import Callable

import uvicorn
from fastapi import FastAPI, Request
from fastapi.responses import JSONResponse, Response, StreamingResponse

from tests.call_gate import CallGate

RETRY_MARK = "Predict the correctness of the answer (digit):"


def deterministic_answer(prompt: str, temperature: float) -> str:
    """The fake judge's answer. Rows hash to: 10% always garbage (official fallback), 10% garbage only on the
    first call (then a valid score on the retry), 10% a score followed by words, the rest a bare score."""
    is_retry = RETRY_MARK in prompt
    row = prompt.replace(RETRY_MARK, "").rstrip().rsplit("\n", 1)[-1]
    h = int(hashlib.sha256(row.encode("utf-8")).hexdigest()[:8], 16)
    score = f"{(h // 10) % 11 / 10:.1f}"
    kind = h % 10
    if kind == 0:
        return "I cannot" if temperature < 1.0 else "Sorry, no"
    if kind == 1:
        return score if is_retry and temperature >= 0.5 else "Score:"
    if kind == 2:
        return f"{score} because"
    return score


def parsable_answer(prompt: str, temperature: float) -> str:
    """A judge that answers like GPT-4 with MM-Vet's few-shot prompt and ``max_tokens=3``: a bare score for every
    row (the same score `deterministic_answer` gives it when it gives one), so a grade is one call. The benches'
    throughput figures use it (``--answers parsable``): their floor is then the pairs / the limit."""
    row = prompt.replace(RETRY_MARK, "").rstrip().rsplit("\n", 1)[-1]
    h = int(hashlib.sha256(row.encode("utf-8")).hexdigest()[:8], 16)
    return f"{(h // 10) % 11 / 10:.1f}"


ANSWERS = {"mixed": deterministic_answer, "parsable": parsable_answer}


def official_grades_answer(offset: float = 0.0, which: str = "default",
                           otherwise: Callable[[str, float], str] | None = None, *, transform: Callable | None = None,
                           extra: list | None = None) -> Callable[[str, float], str]:
    """A judge that answers the official GPT-4-0613 grades of the judge-check reference sets (`which`, as for
    `load_references`; the default ones unless told) and of the `extra` references (`judgecheck.Reference`s the
    check never sees: held-out models): for the filled official prompt of a reference sample it answers the
    per-sample mean of the official runs plus `offset`, or ``transform(official, sample, prompt)`` when given,
    clipped to [0, 1] (a grade above 1 is unparsable, the official parse refuses it), e.g. ``0.45``; any other prompt
    gets ``0.0`` (or `otherwise`'s answer when given). Two sets that answer a question word for word alike make one
    prompt: it gets the mean of both sets' official means (a judge can give one answer)."""
    from mmvet_core.inputs.benchmark import load_bundled_v1
    from mmvet_core.successors.judgecheck import load_references
    from mmvet_core.judging.prompt import render_prompt

    bench = load_bundled_v1()
    means: dict[str, list[float]] = {}
    samples: dict[str, object] = {}
    for ref in [*load_references(which=which), *(extra or [])]:
        for sid, runs in ref.official.items():
            s = bench.samples[sid]
            graded = [v for v in runs if v is not None]
            prompt = render_prompt("v1", s.question, s.answer, ref.predictions[sid])
            means.setdefault(prompt, []).append(sum(graded) / len(graded))
            samples[prompt] = s
    fn = transform or (lambda official, sample, prompt: official + offset)
    table = {prompt: repr(min(1.0, max(0.0, round(float(fn(sum(v) / len(v), samples[prompt], prompt)), 6))))
             for prompt, v in means.items()}

    def answer(prompt: str, temperature: float) -> str:
        if prompt not in table and otherwise is not None:
            return otherwise(prompt, temperature)
        return table.get(prompt, "0.0")

    return answer


def prompt_hash(prompt: str) -> int:
    """A stable number per prompt (for simulated judges that treat some samples differently)."""
    return int(hashlib.sha256(prompt.encode("utf-8")).hexdigest()[:8], 16)


#: The four simulated successor judges of issue 23, as functions of the official grade (transform arguments:
#: official per-sample mean, the sample, the filled prompt).
SUCCESSORS: dict[str, Callable] = {
    "official + 0.1, capped at 1": lambda o, s, p: o + 0.1,
    "another scale: 0.15 + 0.8 × official": lambda o, s, p: 0.15 + 0.8 * o,
    "math −0.25, every other sample +0.05": lambda o, s, p: o - 0.25 if "math" in s.capabilities else o + 0.05,
    "unbiased, 40 % of grades moved by ±0.1": lambda o, s, p: (o + (0.1 if prompt_hash(p) % 2 else -0.1)
                                                             if prompt_hash(p) % 10 < 4 else o),
}


def answer_length(sample, prompt: str) -> int:
    """The length of the answer a filled official v1 prompt carries (for simulated judges that look at it)."""
    from mmvet_core.judging.prompt import render_prompt

    return len(prompt) - len(render_prompt("v1", sample.question, sample.answer, ""))


def _question_hash(sample) -> int:
    return int(hashlib.sha256(sample.id.encode("utf-8")).hexdigest()[:8], 16)


def _coarse(o: float) -> float:
    return round(o * 2) / 2


def _long_kind(o: float, s, p) -> float:
    return o + 0.15 if answer_length(s, p) > 200 else o


def _fifth(o: float, s, p) -> float:
    h = _question_hash(s)
    return (o + 0.3 if h % 2 else o - 0.3) if h % 5 == 0 else o


#: Harder successors (issue 30): a coarse judge (0, 0.5 or 1 only), one kinder to long answers, one that
#: disagrees with GPT-4 on a fifth of the questions for every model alike, and all of them at once on another
#: scale (not coarse). The held-out bench and tests/test_calibration.py run them beside `SUCCESSORS`.
HARDER_SUCCESSORS: dict[str, Callable] = {
    "coarse: 0, 0.5 or 1 only": lambda o, s, p: _coarse(o),
    "kinder to long answers (+0.15 over 200 characters)": _long_kind,
    "disagrees on a fifth of the questions (±0.3)": _fifth,
    "everything at once, on another scale": lambda o, s, p: 0.15 + 0.8 * min(1.0, max(0.0, _fifth(_long_kind(
        o, s, p), s, p))),
}


def simulate_grades(answer: Callable[[str, float], str], predictions: dict[str, str]) -> dict[str, list[float | None]]:
    """What the fake judge answering `answer` gives each sample of `predictions` (the official parse of its
    answer), without the HTTP round trip: sample id -> [grade]."""
    from mmvet_core.inputs.benchmark import load_bundled_v1
    from mmvet_core.judging.prompt import parse_score, render_prompt

    bench = load_bundled_v1()
    return {sid: [parse_score(answer(render_prompt("v1", s.question, s.answer, predictions.get(sid, "")), 0.0))]
            for sid, s in bench.samples.items()}


@dataclass
class FakeState:
    latency: float = 0.0                 # seconds before every answer
    gate: CallGate | None = None         # when set, every chat call first waits for a pass from the test
    model_reported: str = "gpt-4-0613"
    served_models: set[str] | None = None    # None: any model
    api_key: str | None = None           # when set, other keys get 401
    fail_429: int = 0                    # the next N calls answer 429
    retry_after: float = 0.05
    fail_500: int = 0                    # the next N calls answer 500
    fail_500_ratio: float = 0.0          # this share of all calls answers 500 (seeded, reproducible)
    slow_calls: int = 0                  # the next N calls wait `slow_seconds` (client timeouts) or until the
    slow_seconds: float = 5.0            # client hangs up, whichever comes first
    reject_max_tokens: bool = False      # 400 like reasoning models
    reject_temperature: bool = False
    answer_fn: object = None             # callable(prompt, temperature) -> str, overrides the default
    raw_body: bytes | None = None        # when set, every call answers 200 with this body (a broken proxy)
    raw_media_type: str = "text/html"
    rps: float | None = None             # enforce this many requests per second (429 + retry-after-ms beyond)
    tpm: float | None = None             # enforce this many tokens per minute (prompt tokens + max_tokens)
    token_period: float = 60.0           # the tokens bucket refills `tpm` tokens in this many seconds
    ratelimit_headers: bool = True       # send OpenAI's x-ratelimit-* headers with every answer
    quota_exhausted: bool = False        # every call answers 429 insufficient_quota (no credit left)
    model_list: list[dict] | None = None     # GET /v1/models answers these entries (id, shutdown_date, ...)
    no_model_list: bool = False          # GET /v1/models (and Azure's deployments) answer 404: no model list
    retired_models: set[str] = field(default_factory=set)   # answer 404 model_not_found "has been deprecated"
    buckets: dict = field(default_factory=dict)
    files: dict = field(default_factory=dict)        # Files API: id -> {"bytes", "purpose", "filename"}
    batches: dict = field(default_factory=dict)      # Batch API: id -> batch object
    batch_delay: float = 0.0             # seconds a batch stays in progress
    batch_hold: bool = False             # while True, batches stay in progress (a test releases them)
    batch_requests: list[dict] = field(default_factory=list)   # every request a batch ran (its body)
    batch_api: bool = True               # False: /v1/files and /v1/batches answer 404, as vLLM's and Ollama's do
    in_flight: int = 0                   # requests being answered now (after the rate-limit check)
    peak_in_flight: int = 0
    huge_body: int = 0                   # > 0: answer 200 with a JSON body of this many bytes, streamed
    hang: bool = False                   # accept the request, never answer
    drip_every: float = 0.0              # > 0: answer 200 and send one byte every this many seconds, forever
    redirect_to: str | None = None       # answer 307 to this URL (clients that follow re-send the POST)
    echo_key: bool = False               # answer 401 with the Authorization header in the error message
    secret_page: str = "INTERNAL-ONLY: db password hunter2"    # served at /internal
    open_streams: int = 0                # hostile answers still being sent (a client that hung up ends them)
    calls: list[dict] = field(default_factory=list)   # every request that reached the server (model lists apart)
    list_calls: list[dict] = field(default_factory=list)   # every model-list request (GET /v1/models, deployments)
    lock: threading.Lock = field(default_factory=threading.Lock)
    rng: random.Random = field(default_factory=lambda: random.Random(0))

    def take(self, name: str) -> bool:
        with self.lock:
            n = getattr(self, name)
            if n > 0:
                setattr(self, name, n - 1)
                return True
            return False

    def completed_calls(self) -> list[dict]:
        return [c for c in self.calls if c.get("status") == 200]

    def chat_calls(self, model: str | None = None) -> list[dict]:
        """Chat-completion requests that reached the server (of `model` when given), whatever their answer."""
        return [c for c in self.calls if "prompt" in c and (model is None or c.get("model") == model)]

    @classmethod
    def after_gpt4(cls, *, listed: bool = True, **kw) -> "FakeState":
        """An endpoint after OpenAI's 2026-10-23 shutdown (issue 17): it serves ``judge-b`` (shutdown announced for
        2026-12-11) and ``judge-c`` (no date), and answers ``gpt-4-0613`` and ``gpt-4`` with OpenAI's 404
        ``model_not_found`` ("has been deprecated"). `listed=False`: the same endpoint without ``/v1/models``."""
        return cls(model_list=[{"id": "judge-b", "shutdown_date": "2026-12-11"},
                               {"id": "judge-c", "shutdown_date": None},
                               {"id": "text-embedding-3-small", "shutdown_date": None}],
                   served_models={"judge-b", "judge-c"}, retired_models={"gpt-4-0613", "gpt-4"},
                   no_model_list=not listed, model_reported="judge-b", **kw)


class ServerBucket:
    """A token bucket as OpenAI enforces limits: `limit` per `period` seconds, refilled continuously."""

    def __init__(self, limit: float, period: float):
        self.limit, self.period = float(limit), float(period)
        self.level, self.stamp = self.limit, time.monotonic()

    def refill(self, now: float) -> None:
        self.level = min(self.limit, self.level + (now - self.stamp) * self.limit / self.period)
        self.stamp = now

    def wait(self, cost: float) -> float:
        return 0.0 if self.level >= cost else (cost - self.level) * self.period / self.limit

    def reset(self) -> float:
        return (self.limit - self.level) * self.period / self.limit


def openai_duration(seconds: float) -> str:
    """A duration as OpenAI writes it in ``x-ratelimit-reset-*``: ``20ms``, ``1.5s``, ``6m0s``."""
    if seconds < 1:
        return f"{max(0, round(seconds * 1000))}ms"
    minutes, rest = divmod(seconds, 60)
    text = f"{rest:.3f}".rstrip("0").rstrip(".") + "s"
    return f"{int(minutes)}m{text}" if minutes else text


def request_tokens(body: dict) -> int:
    """Tokens a request counts against a tokens-per-minute limit: its prompt tokens (as `usage` reports them)
    plus its ``max_tokens``."""
    prompt = body["messages"][-1]["content"]
    return len(prompt) // 4 + int(body.get("max_tokens") or body.get("max_completion_tokens") or 16)


def check_rate_limit(state: "FakeState", body: dict) -> tuple[dict, JSONResponse | None]:
    """Spend this request from the state's buckets: (x-ratelimit headers, None) or (headers, a 429)."""
    limits = [("requests", state.rps, 1.0, 1), ("tokens", state.tpm, state.token_period, request_tokens(body))]
    now = time.monotonic()
    headers: dict = {}
    with state.lock:
        active = []
        for kind, limit, period, cost in limits:
            if not limit:
                continue
            bucket = state.buckets.get(kind)
            if bucket is None or bucket.limit != limit:
                bucket = state.buckets[kind] = ServerBucket(limit, period)
            bucket.refill(now)
            active.append((kind, bucket, cost))
        wait = max((b.wait(c) for _, b, c in active), default=0.0)
        if wait == 0:
            for _, bucket, cost in active:
                bucket.level -= cost
        if state.ratelimit_headers:
            for kind, bucket, _ in active:
                headers[f"x-ratelimit-limit-{kind}"] = str(int(bucket.limit))
                headers[f"x-ratelimit-remaining-{kind}"] = str(max(0, int(bucket.level)))
                headers[f"x-ratelimit-reset-{kind}"] = openai_duration(bucket.reset())
    if wait == 0:
        return headers, None
    kind, bucket, cost = max(active, key=lambda a: a[1].wait(a[2]))
    unit = "RPM" if kind == "requests" else "TPM"
    message = (f"Rate limit reached for {body.get('model')} in organization org-fake on {kind} per min ({unit}): "
               f"Limit {int(bucket.limit)}, Used {int(bucket.limit - bucket.level)}, Requested {cost}. "
               f"Please try again in {openai_duration(wait)}.")
    headers.update({"retry-after-ms": str(max(1, round(wait * 1000))), "retry-after": str(max(1, round(wait)))})
    return headers, JSONResponse({"error": {"message": message, "type": kind, "param": None,
                                            "code": "rate_limit_exceeded"}}, status_code=429, headers=headers)


def _error(status: int, message: str, *, param: str | None = None, code: str | None = None,
           headers: dict | None = None) -> JSONResponse:
    return JSONResponse({"error": {"message": message, "type": "invalid_request_error", "param": param,
                                   "code": code}}, status_code=status, headers=headers or {})


def make_app(state: FakeState) -> FastAPI:
    app = FastAPI()
    app.state.fake = state

    def model_entries() -> list[dict]:
        if state.model_list is not None:
            return [{"object": "model", "owned_by": "fake", **m} for m in state.model_list]
        names = sorted(state.served_models or {state.model_reported})
        return [{"id": n, "object": "model"} for n in names]

    @app.get("/v1/models")
    async def models():
        with state.lock:
            state.list_calls.append({"route": "models", "t": time.time(),
                                     "status": 404 if state.no_model_list else 200})
        if state.no_model_list:
            return _error(404, "Not Found")
        return {"object": "list", "data": model_entries()}

    @app.get("/openai/deployments")
    async def azure_deployments(request: Request):
        """Azure OpenAI's (older data-plane) deployment list: ``{"data": [{"id": deployment, "model": ...}]}``."""
        with state.lock:
            state.list_calls.append({"route": "azure:deployments", "t": time.time(),
                                     "status": 404 if state.no_model_list else 200})
        if state.no_model_list or not request.query_params.get("api-version"):
            return _error(404, "Resource not found")
        data = [{"id": m["id"], "model": m["id"], "object": "deployment", "status": "succeeded"}
                for m in model_entries()]
        return {"object": "list", "data": data}

    @app.get("/fake/stats")
    async def stats():
        """What the server saw (for benchmarks running it as a process): answers, 429s, tokens, timing."""
        with state.lock:
            calls = list(state.calls)
        ok = [c for c in calls if c.get("status") == 200]
        by_status: dict = {}
        for c in calls:
            by_status[str(c.get("status"))] = by_status.get(str(c.get("status")), 0) + 1
        return {"calls": len(calls), "by_status": by_status, "ok": len(ok),
                "rate_limited": by_status.get("429", 0),
                "ok_tokens": sum(request_tokens(c["body"]) for c in ok),
                "first": min((c["t"] for c in calls), default=None), "last_ok": max((c["t"] for c in ok), default=None),
                "peak_in_flight": state.peak_in_flight,
                "ok_per_second": _per_second([c["t"] for c in ok], min((c["t"] for c in calls), default=0.0))}

    @app.post("/fake/reset")
    async def reset():
        with state.lock:
            state.calls.clear()
            state.peak_in_flight = 0
            state.buckets.clear()
        return {"ok": True}

    # --- Files and Batch APIs (the shapes of OpenAI's /v1/files and /v1/batches) ------------------------------
    app.add_middleware(_NoBatchApi, state=state)

    def file_object(fid: str) -> dict:
        f = state.files[fid]
        return {"id": fid, "object": "file", "bytes": len(f["bytes"]), "created_at": f["created_at"],
                "filename": f["filename"], "purpose": f["purpose"], "status": "processed"}

    def new_file(data: bytes, purpose: str, filename: str) -> str:
        with state.lock:
            fid = f"file-fake{len(state.files) + 1}"
            state.files[fid] = {"bytes": data, "purpose": purpose, "filename": filename,
                                "created_at": int(time.time())}
        return fid

    @app.post("/v1/files")
    async def upload(request: Request):
        form = await request.form()
        upload = form.get("file")
        if upload is None or not form.get("purpose"):
            return _error(400, "file and purpose are required")
        data = await upload.read()
        return file_object(new_file(data, str(form["purpose"]), upload.filename or "upload.jsonl"))

    @app.get("/v1/files/{fid}/content")
    async def file_content(fid: str):
        if fid not in state.files:
            return _error(404, f"No such File object: {fid}")
        return Response(state.files[fid]["bytes"], media_type="application/octet-stream")

    @app.get("/v1/files/{fid}")
    async def file_get(fid: str):
        return file_object(fid) if fid in state.files else _error(404, f"No such File object: {fid}")

    def run_line(line: dict) -> dict:
        body = line.get("body") or {}
        with state.lock:
            state.batch_requests.append({"custom_id": line.get("custom_id"), "body": body})
        prompt = body["messages"][-1]["content"]
        content = (state.answer_fn or deterministic_answer)(prompt, body.get("temperature", 1.0))
        return {"id": f"batch_req_{len(state.batch_requests)}", "custom_id": line.get("custom_id"),
                "response": {"status_code": 200, "request_id": "req-fake",
                             "body": completion_body(state, prompt, content)},
                "error": None}

    async def process(bid: str) -> None:
        batch = state.batches[bid]
        batch["status"] = "in_progress"
        batch["in_progress_at"] = int(time.time())
        await asyncio.sleep(state.batch_delay)
        while state.batch_hold:
            await asyncio.sleep(0.05)
        if batch["status"] != "in_progress":
            return
        lines = [json.loads(x) for x in state.files[batch["input_file_id"]]["bytes"].decode().splitlines() if x.strip()]
        out = [run_line(line) for line in lines]
        batch["output_file_id"] = new_file("".join(json.dumps(o) + "\n" for o in out).encode(), "batch_output",
                                           "batch_output.jsonl")
        batch["request_counts"] = {"total": len(lines), "completed": len(out), "failed": 0}
        batch["status"], batch["completed_at"] = "completed", int(time.time())

    @app.post("/v1/batches")
    async def create_batch(request: Request):
        body = await request.json()
        fid = body.get("input_file_id")
        if fid not in state.files:
            return _error(400, f"No such File object: {fid}")
        if body.get("endpoint") != "/v1/chat/completions" or body.get("completion_window") != "24h":
            return _error(400, "endpoint must be /v1/chat/completions and completion_window 24h")
        with state.lock:
            bid = f"batch_fake{len(state.batches) + 1}"
            state.batches[bid] = {"id": bid, "object": "batch", "endpoint": body["endpoint"], "errors": None,
                                  "input_file_id": fid, "completion_window": "24h", "status": "validating",
                                  "output_file_id": None, "error_file_id": None, "created_at": int(time.time()),
                                  "request_counts": {"total": 0, "completed": 0, "failed": 0},
                                  "metadata": body.get("metadata")}
        asyncio.get_running_loop().create_task(process(bid))
        return state.batches[bid]

    @app.get("/v1/batches/{bid}")
    async def get_batch(bid: str):
        return state.batches[bid] if bid in state.batches else _error(404, f"No such Batch object: {bid}")

    @app.get("/v1/batches")
    async def list_batches():
        data = sorted(state.batches.values(), key=lambda b: b["created_at"], reverse=True)
        return {"object": "list", "data": data, "first_id": None, "last_id": None, "has_more": False}

    @app.post("/v1/batches/{bid}/cancel")
    async def cancel_batch(bid: str):
        if bid not in state.batches:
            return _error(404, f"No such Batch object: {bid}")
        state.batches[bid]["status"] = "cancelled"
        return state.batches[bid]

    @app.api_route("/internal", methods=["GET", "POST"])
    async def internal():
        with state.lock:
            state.calls.append({"route": "internal", "t": time.time(), "status": 200})
        return Response(state.secret_page, media_type="text/plain")

    @app.post("/v1/chat/completions")
    async def chat(request: Request):
        return await answer(await request.json(), request.headers.get("authorization", ""),
                            gone=request.is_disconnected)

    @app.post("/openai/deployments/{deployment}/chat/completions")
    async def azure_chat(deployment: str, request: Request):
        """Azure OpenAI's route: the deployment in the path, the key in ``api-key``, ``api-version`` required."""
        if not request.query_params.get("api-version"):
            return _error(404, "Resource not found")
        body = await request.json()
        body.setdefault("model", deployment)
        return await answer(body, f"Bearer {request.headers.get('api-key', '')}", route=f"azure:{deployment}",
                            gone=request.is_disconnected)

    async def answer(body: dict, auth: str, route: str = "openai", gone: Callable[[], object] | None = None):
        """Answer one chat call; `gone()` (awaitable) tells whether its client hung up meanwhile."""
        record = {"model": body.get("model"), "prompt": body["messages"][-1]["content"],
                  "temperature": body.get("temperature"), "max_tokens": body.get("max_tokens"),
                  "max_completion_tokens": body.get("max_completion_tokens"), "body": body, "route": route,
                  "auth": auth, "t": time.time()}
        with state.lock:
            state.calls.append(record)
        gate = state.gate
        if gate is not None and not await gate.wait(gone):
            record["status"] = "gone"       # the client hung up while the call was held: nothing to answer
            return Response(status_code=499)
        hostile = _hostile(state, record)
        if hostile is not None:
            return hostile
        if state.api_key is not None and record["auth"] != f"Bearer {state.api_key}":
            record["status"] = 401
            return _error(401, "Incorrect API key provided.", code="invalid_api_key")
        if body.get("model") in state.retired_models:     # OpenAI's answer after a shutdown
            record["status"] = 404
            return _error(404, f"The model `{body.get('model')}` has been deprecated, learn more here: "
                               "https://platform.openai.com/docs/deprecations", code="model_not_found")
        if state.served_models is not None and body.get("model") not in state.served_models:
            record["status"] = 404
            return _error(404, f"The model `{body.get('model')}` does not exist.", code="model_not_found")
        if state.reject_max_tokens and "max_tokens" in body:
            record["status"] = 400
            return _error(400, "Unsupported parameter: 'max_tokens' is not supported with this model. "
                               "Use 'max_completion_tokens' instead.", param="max_tokens",
                          code="unsupported_parameter")
        if state.reject_temperature and "temperature" in body:
            record["status"] = 400
            return _error(400, "Unsupported value: 'temperature' does not support 0 with this model.",
                          param="temperature", code="unsupported_value")
        if state.quota_exhausted:
            record["status"] = 429
            return _error(429, "You exceeded your current quota, please check your plan and billing details.",
                          code="insufficient_quota")
        if state.take("fail_429"):
            record["status"] = 429
            return _error(429, "Rate limit reached", headers={"retry-after": str(state.retry_after)})
        rl_headers, refused = check_rate_limit(state, body) if (state.rps or state.tpm) else ({}, None)
        if refused is not None:
            record["status"] = 429
            return refused
        with state.lock:
            random_500 = state.fail_500_ratio > 0 and state.rng.random() < state.fail_500_ratio
        if state.take("fail_500") or random_500:
            record["status"] = 500
            return _error(500, "The server had an error while processing your request.",
                          headers={"retry-after": "0.01"})
        return await finish(body, record, rl_headers, gone)

    async def finish(body: dict, record: dict, rl_headers: dict, gone: Callable[[], object] | None):
        """The end of a call that passed every check: latency, then its answer."""
        with state.lock:
            state.in_flight += 1
            state.peak_in_flight = max(state.peak_in_flight, state.in_flight)
        try:
            if state.take("slow_calls"):
                await _until_gone(state.slow_seconds, gone)
            if state.latency:
                await asyncio.sleep(state.latency)
        finally:
            with state.lock:
                state.in_flight -= 1
        if state.raw_body is not None:
            record["status"] = 200
            return Response(state.raw_body, status_code=200, media_type=state.raw_media_type, headers=rl_headers)
        fn = state.answer_fn or deterministic_answer
        content = fn(record["prompt"], body.get("temperature", 1.0))
        record["status"] = 200
        record["answer"] = content
        return JSONResponse(completion_body(state, record["prompt"], content), headers=rl_headers)

    return app


async def _until_gone(seconds: float, gone: Callable[[], object] | None) -> None:
    """Sleep `seconds`, or less when `gone()` says the client hung up (a slow call then ends with its client, and
    a server shut down after a client timeout is not held up by it)."""
    end = time.monotonic() + seconds
    while (left := end - time.monotonic()) > 0:
        if gone is not None and await gone():
            return
        await asyncio.sleep(min(left, 0.05))


class _NoBatchApi:
    """`FakeState.batch_api` off: /v1/files and /v1/batches answer FastAPI's own 404, as vLLM's do. (A plain ASGI
    middleware: Starlette's BaseHTTPMiddleware would hide a client's hang-up from `Request.is_disconnected`.)"""

    def __init__(self, app, state: FakeState):
        self.app, self.state = app, state

    async def __call__(self, scope, receive, send):
        if (scope["type"] == "http" and not self.state.batch_api
                and scope["path"].startswith(("/v1/files", "/v1/batches"))):
            await JSONResponse({"detail": "Not Found"}, status_code=404)(scope, receive, send)
            return
        await self.app(scope, receive, send)


def _per_second(times: list[float], start: float) -> list[int]:
    counts: list[int] = []
    for t in times:
        i = int(t - start)
        counts.extend([0] * (i + 1 - len(counts)))
        counts[i] += 1
    return counts


def completion_body(state: FakeState, prompt: str, content: str) -> dict:
    return {"id": "chatcmpl-fake", "object": "chat.completion", "created": int(time.time()),
            "model": state.model_reported,
            "choices": [{"index": 0, "message": {"role": "assistant", "content": content}, "finish_reason": "length"}],
            "usage": {"prompt_tokens": len(prompt) // 4, "completion_tokens": 2, "total_tokens": len(prompt) // 4 + 2}}


def _hostile(state: FakeState, record: dict):
    """The answer of a hostile mode, or None when no hostile mode is on."""
    if state.echo_key:
        record["status"] = 401
        return _error(401, f"Incorrect API key provided: {record['auth'].removeprefix('Bearer ')}",
                      code="invalid_api_key")
    if state.redirect_to:
        record["status"] = 307
        return Response(status_code=307, headers={"location": state.redirect_to})
    if state.hang:
        record["status"] = "hang"
        return _Forever()
    if state.huge_body or state.drip_every:
        record["status"] = "hostile-200"
        return StreamingResponse(_hostile_stream(state), media_type="application/json")
    return None


async def _hostile_stream(state: FakeState):
    with state.lock:
        state.open_streams += 1
    try:
        if state.huge_body:
            yield b'{"model": "m", "choices": [{"message": {"content": "1.0"}}], "pad": "'
            chunk, left = b"x" * (1 << 20), state.huge_body
            while left > 0:
                yield chunk[:left]
                left -= len(chunk)
            yield b'"}'
        else:
            while True:
                yield b" "
                await asyncio.sleep(state.drip_every)
    finally:
        with state.lock:
            state.open_streams -= 1


class _Forever(Response):
    """A response that never starts (the request was read; no status line is ever sent) until the client
    hangs up."""

    async def __call__(self, scope, receive, send):
        while (await receive())["type"] != "http.disconnect":
            pass


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class FakeJudgeServer:
    """Runs the fake judge with uvicorn in a daemon thread on 127.0.0.1 (a real HTTP server)."""

    def __init__(self, state: FakeState | None = None, port: int | None = None):
        self.state = state or FakeState()
        self.port = port or free_port()
        config = uvicorn.Config(make_app(self.state), host="127.0.0.1", port=self.port, log_level="warning",
                                access_log=False)
        self._server = uvicorn.Server(config)
        self._thread = threading.Thread(target=self._server.run, daemon=True)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}/v1"

    def __enter__(self) -> "FakeJudgeServer":
        self._thread.start()
        deadline = time.time() + 10
        while not self._server.started:
            if time.time() > deadline:
                raise RuntimeError("fake judge server did not start")
            time.sleep(0.01)
        return self

    def wait_quiet(self, timeout: float = 120.0) -> None:
        """Wait until no client connection is open and no request is being answered: after its client was killed,
        every request that client had sent is then in `state.calls`."""
        st = self._server.server_state
        deadline = time.monotonic() + timeout
        while st.connections or st.tasks:
            if time.monotonic() > deadline:
                raise TimeoutError(f"{len(st.connections)} connection(s) still open on the fake judge")
            time.sleep(0.01)

    def __exit__(self, *exc) -> None:
        self._server.should_exit = True
        self._thread.join(timeout=5)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--port", type=int, default=8765)
    parser.add_argument("--latency", type=float, default=0.0)
    parser.add_argument("--fail-500-ratio", type=float, default=0.0, help="share of calls answering 500")
    parser.add_argument("--rps", type=float, default=None, help="enforce this many requests per second")
    parser.add_argument("--tpm", type=float, default=None, help="enforce this many tokens per minute")
    parser.add_argument("--no-ratelimit-headers", action="store_true", help="429s without x-ratelimit-* headers")
    parser.add_argument("--batch-delay", type=float, default=0.0, help="seconds a batch stays in progress")
    parser.add_argument("--api-key", default=None, help="answer 401 to every other key")
    parser.add_argument("--answers", choices=sorted(ANSWERS), default="mixed",
                        help="mixed (the default: 20%% of rows unparsable at first, the official re-asks follow) or "
                             "parsable (a bare score for every row, as a real judge answers)")
    args = parser.parse_args()
    state = FakeState(latency=args.latency, fail_500_ratio=args.fail_500_ratio, rps=args.rps, tpm=args.tpm,
                      ratelimit_headers=not args.no_ratelimit_headers, batch_delay=args.batch_delay,
                      api_key=args.api_key, answer_fn=ANSWERS[args.answers])
    print(json.dumps({"url": f"http://127.0.0.1:{args.port}/v1"}), flush=True)
    uvicorn.run(make_app(state), host="127.0.0.1", port=args.port, log_level="warning", access_log=False)


if __name__ == "__main__":
    main()
