"""Judges: the one module that talks to an LLM.

A judge answers one filled prompt at one temperature (`Judge.complete`). Two implementations:

- `OpenAIJudge`: any OpenAI-compatible chat endpoint (OpenAI, Azure OpenAI, vLLM, Ollama, ...) through the async
  openai SDK, paced by the account's limiter (`mmvet_core.judging.ratelimit`): 429s pause the account for the server's
  ``retry-after`` and are waited out; 5xx / timeouts are retried with backoff; what survives the retries becomes a
  `JudgeError`. Reasoning models that reject ``max_tokens`` or a temperature get the parameter
  swapped or dropped once, and every reply records the parameters actually sent.
- `BaselineJudge`: an offline keyword-matching baseline (the paper's "keyword matching", Table 6). It needs no
  key and no network and is clearly *not* the MM-Vet metric.

API keys live only in the judge object (never in `JudgeSettings`, its fingerprint, the store or any export).

Its size (over 600 lines) has a reason: it is the single place that calls a judge, so the call, its retries, its
parameter fallbacks and the reading of every reply stay together; the limiter and the transport live apart.
"""
from __future__ import annotations

import asyncio
import hashlib
import json
import random
import re
import time
from dataclasses import asdict, dataclass, field, replace
from functools import lru_cache
from typing import Protocol, runtime_checkable

from ..inputs.benchmark import Sample
from .ratelimit import AccountLimiter, account_key, limiter_for, retry_after_seconds

DEFAULT_JUDGE_MODEL = "gpt-4-0613"
BASELINE_NAME = "keyword-baseline"


@dataclass(frozen=True)
class JudgeSettings:
    """Everything that defines a judge except its secret. Serialisable; stored with runs."""

    model: str = DEFAULT_JUDGE_MODEL
    provider: str = "openai"               # "openai" (any compatible endpoint), "azure" or "baseline"
    base_url: str | None = None            # None: OPENAI_BASE_URL or api.openai.com
    api_version: str | None = None         # Azure only
    max_tokens: int = 3                    # official value
    token_param: str = "max_tokens"        # or "max_completion_tokens"; swapped automatically when rejected
    send_temperature: bool = True          # dropped automatically when the model rejects it
    timeout: float = 60.0
    max_retries: int = 6                   # retries of 5xx / timeouts / connection errors (429s are waited out)
    rate_limit_wait: float = 1800.0        # seconds of 429s with no answer in between before a call gives up
    deadline: float = 120.0                # seconds a call may spend in HTTP attempts and their backoff, all
                                           # retries included (waits for the rate limit are not counted)
    prompt_examples: tuple[int, ...] | None = None   # None: the official prompt's seven examples (paper §4.5)
    shutdown_date: str | None = None       # YYYY-MM-DD the endpoint announced for this model (a fact recorded with
                                           # the run, not part of the judge's identity: see `fingerprint`)

    def __post_init__(self):
        if self.prompt_examples is not None:       # stored runs give a JSON list back
            object.__setattr__(self, "prompt_examples", tuple(int(i) for i in self.prompt_examples))

    def fingerprint(self) -> str:
        """Identity of the judge for the answer cache: provider, endpoint, model and token limit (and the prompt's
        examples when they are not the official ones; the cache key also holds the prompt's hash)."""
        ident = {"provider": self.provider, "base_url": (self.base_url or "").rstrip("/"),
                 "model": self.model, "max_tokens": self.max_tokens, "api_version": self.api_version}
        if self.prompt_examples is not None:
            ident["prompt_examples"] = list(self.prompt_examples)
        return hashlib.sha256(json.dumps(ident, sort_keys=True).encode()).hexdigest()[:16]

    def to_dict(self) -> dict:
        return asdict(self)

    @property
    def is_official(self) -> bool:
        """False for the keyword baseline and for a prompt with other in-context examples than the official."""
        return self.provider != "baseline" and self.prompt_examples is None

    def not_official_reason(self) -> str | None:
        """Why grades of this judge are not the MM-Vet metric (None when the method is the official one)."""
        if self.provider == "baseline":
            return "offline keyword baseline: NOT the MM-Vet metric"
        if self.prompt_examples is not None:
            shown = "".join(f"({i})" for i in self.prompt_examples) or "none"
            return f"prompt with in-context examples {shown} only: NOT the official MM-Vet prompt"
        return None


@dataclass
class JudgeReply:
    """One answer of the judge, with what was sent to get it."""

    content: str | None
    model: str | None = None
    prompt_tokens: int | None = None
    completion_tokens: int | None = None
    sent: dict = field(default_factory=dict)


class JudgeError(Exception):
    """A judge call that failed after the SDK's retries. `kind` classifies it for the user."""

    def __init__(self, kind: str, message: str, status: int | None = None):
        super().__init__(message)
        # auth, permission, not_found, bad_request, rate_limit, quota, server, timeout, unresponsive, connection,
        # blocked, redirect, too_large, other
        self.kind = kind
        self.status = status
        self.message = message

    def __str__(self) -> str:
        return f"{self.kind}: {self.message}"


@runtime_checkable
class Judge(Protocol):
    settings: JudgeSettings

    @property
    def name(self) -> str: ...

    async def complete(self, prompt: str, temperature: float, *, sample: Sample, prediction: str,
                       priority: int = 1) -> JudgeReply: ...

    async def aclose(self) -> None: ...


_HINTS = {
    "auth": "the API key was rejected: check it (and that it belongs to this endpoint)",
    "permission": "the key is not allowed to use this model or endpoint",
    "not_found": "the endpoint does not serve this model (or the base URL is wrong)",
    "connection": "the base URL could not be reached",
    "timeout": "the judge did not answer in time",
    "rate_limit": "the endpoint kept answering 429 (rate limit) past the run's deadline for rate limits",
    "quota": "the account has no quota left (429 insufficient_quota): add credit or use another key",
    "server": "the endpoint kept failing with a server error after all retries",
    "unresponsive": "the endpoint has not answered a single call in time",
    "blocked": "this server does not call that address",
    "redirect": "the endpoint answered with a redirect, which is not followed: give the final URL as the base URL",
    "too_large": "the endpoint's answer was too large (a judge answer is a few bytes)",
    "bad_request": "the endpoint rejected the request",
    "other": "the endpoint's answer was not a chat completion",
}
#: What a redacted error says instead of the endpoint's own words (its body may echo a key or an internal page).
REDACTED = "details hidden on this server"


class _DeadlinePassed(Exception):
    """A call spent its `JudgeSettings.deadline` in HTTP attempts and backoff."""


def describe_judge_error(err: JudgeError) -> str:
    """A one-line, user-facing explanation of a judge failure."""
    hint = _HINTS.get(err.kind)
    status = f" (HTTP {err.status})" if err.status else ""
    text = f"{hint}{status}" if hint else f"{err.kind}{status}"
    return f"{text}: {err.message}" if err.message else text


class OpenAIJudge:
    """An OpenAI-compatible chat-completions judge (async openai SDK; OpenAI, Azure, vLLM, Ollama...).

    The SDK (and its HTTP client) is imported and built on the first call only: a cached re-grade never pays for
    it. Every call goes through the account's `AccountLimiter` (one per key and endpoint, shared by all runs).
    The SDK's own retries are off (``max_retries=0``): we retry here so that a 429 pauses the whole account for
    the server's ``retry-after`` and is waited out without counting against the retry budget, while 408, 409,
    5xx, timeouts and connection errors are retried ``max_retries`` times with the SDK's backoff (0.5 s x 2^n,
    at most 8 s, or the server's ``retry-after``).

    Whatever the endpoint does, a call ends: each attempt is bounded in total by ``timeout`` (a server that drips
    a byte at a time cannot stretch it), and the call by ``deadline`` (attempts and backoff; waiting for the
    account's rate-limit turn is not counted). `policy` (a `transport.EndpointPolicy`) caps response bodies and
    can refuse private destinations; `redact` replaces the endpoint's own error text by a generic one (a public
    host: an upstream body may echo the key or an internal page). The key never appears in an error."""

    def __init__(self, settings: JudgeSettings, api_key: str | None, *, client=None, policy=None,
                 redact: bool = False):
        self.settings = settings
        self._api_key = api_key
        self._client_obj = client
        self._policy = policy
        self._redact = redact
        self._secrets = tuple(x for x in (api_key,) if x and len(x) >= 4)
        self._token_param = settings.token_param
        self._send_temperature = settings.send_temperature
        self._reached = False       # has the endpoint answered at least once? (see `_post`)
        self._account = account_key(settings.provider, settings.base_url, settings.api_version, api_key)
        self._limiter_obj = None
        self.requests = 0           # HTTP requests sent, failed ones included (what the endpoint saw)

    @property
    def _client(self):
        """The SDK client, built on first use (the only import of the SDK in the package)."""
        if self._client_obj is None:
            self._client_obj = make_sdk_client(self.settings, self._api_key, self._policy)
        return self._client_obj

    @property
    def limiter(self) -> AccountLimiter:
        """This judge's account limiter on the running loop (shared with every judge of the same account)."""
        if self._limiter_obj is None or self._limiter_obj is not limiter_for(self._account):
            self._limiter_obj = limiter_for(self._account)
        return self._limiter_obj

    def waiting_until(self) -> float | None:
        """Wall-clock time until which this judge's calls wait for the rate limit, or None."""
        return self._limiter_obj.waiting_until() if self._limiter_obj is not None else None

    @property
    def name(self) -> str:
        return self.settings.model

    def _params(self, temperature: float) -> dict:
        params: dict = {self._token_param: self.settings.max_tokens}
        if self._send_temperature:
            params["temperature"] = temperature
        return params

    async def complete(self, prompt: str, temperature: float, *, sample: Sample | None = None,
                       prediction: str | None = None, priority: int = 1) -> JudgeReply:
        """One judge answer, or `JudgeError` (scrubbed of the key; redacted when the judge redacts)."""
        try:
            return await self._complete(prompt, temperature, priority)
        except JudgeError as e:
            raise self._scrubbed(e) from e.__cause__

    def _scrubbed(self, err: JudgeError) -> JudgeError:
        """`err` without the endpoint's own words when redacting, and never with the key in it."""
        message = err.message
        if self._redact and err.kind not in ("timeout", "unresponsive", "blocked", "redirect", "too_large"):
            message = REDACTED
        for secret in self._secrets:
            message = message.replace(secret, "[key]")
        return err if message == err.message else JudgeError(err.kind, message, err.status)

    async def _complete(self, prompt: str, temperature: float, priority: int) -> JudgeReply:
        import openai as o

        from .transport import CAPPED, BlockedDestination

        client = self._client
        for _ in range(3):  # at most: original, token-param swap, temperature drop
            params = self._params(temperature)
            body = {"model": self.settings.model, "messages": [{"role": "user", "content": prompt}], **params}
            try:
                response = await self._post(client, body, len(prompt), priority)
            except _DeadlinePassed:
                if not self._reached:
                    raise JudgeError("unresponsive", f"no answer within {self.settings.deadline:g} s") from None
                raise JudgeError("timeout", f"no answer within the call's deadline of {self.settings.deadline:g} s"
                                 ) from None
            except BlockedDestination as e:
                raise JudgeError("blocked", str(e)) from e
            except o.BadRequestError as e:
                # retry when this rejection adapted the parameters, or a concurrent call already had
                if self._adapt_to(e) or params != self._params(temperature):
                    continue
                raise JudgeError("bad_request", _message(e), 400) from e
            except o.AuthenticationError as e:
                raise JudgeError("auth", _message(e), 401) from e
            except o.PermissionDeniedError as e:
                raise JudgeError("permission", _message(e), 403) from e
            except o.NotFoundError as e:
                raise JudgeError("not_found", _message(e), 404) from e
            except o.RateLimitError as e:
                raise JudgeError("quota" if _is_quota(e) else "rate_limit", _message(e), 429) from e
            except o.APITimeoutError as e:
                raise JudgeError("timeout", str(e) or "request timed out") from e
            except o.APIConnectionError as e:
                blocked = _blocked(e)
                if blocked is not None:
                    raise JudgeError("blocked", str(blocked)) from e
                raise JudgeError("connection", str(e) or "connection failed") from e
            except o.APIStatusError as e:
                if e.response.extensions.get(CAPPED):
                    raise JudgeError("too_large", "", e.status_code) from e
                if 300 <= e.status_code < 400:
                    raise JudgeError("redirect", "", e.status_code) from e
                kind = "server" if e.status_code >= 500 else "other"
                raise JudgeError(kind, _message(e), e.status_code) from e
            if response.extensions.get(CAPPED):
                raise JudgeError("too_large", "", response.status_code)
            return reply_from_body(response.status_code, response.content, params, redact=self._redact)
        raise JudgeError("bad_request", "the endpoint rejected every parameter combination tried")

    async def _post(self, client, body: dict, prompt_chars: int, priority: int):
        """POST the chat-completions `body` through the SDK (its auth, Azure deployment URLs, timeouts and error
        classes) when the account's limiter gives the turn, and return the raw HTTP response.

        This is the SDK's documented generic ``client.post`` with ``cast_to`` the HTTP response class, which is
        exactly what ``chat.completions.create`` sends minus two steps whose result we do not use: re-checking our
        own parameters against the SDK's type declarations and building typed response models. They cost about a
        third of the client's CPU per call; `reply_from_body` reads the four fields we keep.

        Retries (see the class docstring): a 429 pauses the account and is retried until the run's rate-limit
        deadline (``settings.rate_limit_wait`` seconds of 429s with no answer in between); a 429 saying the quota
        is exhausted (``insufficient_quota``) is not a rate limit and fails at once. Until the endpoint has
        answered once a connection error is not retried: a wrong base URL or a server that is down then fails
        the run at once instead of after the backoff."""
        import openai as o

        limiter = self.limiter
        cost = limiter.estimate_tokens(prompt_chars, self.settings.max_tokens)
        failures = 0
        left = self.settings.deadline       # for attempts and their backoff (rate-limit waits are not counted)
        while True:
            ticket = await limiter.acquire(cost, priority=priority)
            self.requests += 1
            t0 = time.monotonic()
            try:
                try:
                    async with asyncio.timeout(max(left, 0.0)):
                        resp = await _chat_post(client, body)
                finally:
                    left -= time.monotonic() - t0
            except TimeoutError:                      # the call's deadline (not the SDK's APITimeoutError)
                limiter.release(ticket, outcome="timeout")
                raise _DeadlinePassed() from None
            except o.RateLimitError as e:
                self._reached = True
                headers = _headers(e)
                limiter.release(ticket, outcome="error" if _is_quota(e) else "rate_limited", headers=headers,
                                retry_after=retry_after_seconds(headers))
                if _is_quota(e):
                    raise
                self._check_rate_limit_deadline(limiter, e)
                continue
            except o.APIStatusError as e:
                self._reached = True
                limiter.release(ticket, outcome="error", headers=_headers(e))
                if e.status_code not in (408, 409) and e.status_code < 500:      # not retryable
                    raise
                failures += 1
                if failures > self.settings.max_retries:
                    raise
                left = await _sleep_within(_backoff(failures, retry_after_seconds(_headers(e))), left)
                continue
            except o.APIConnectionError as e:          # includes APITimeoutError
                timed_out = isinstance(e, o.APITimeoutError)
                limiter.release(ticket, outcome="timeout" if timed_out else "error")
                if not timed_out and not self._reached:   # slow is not unreachable; unreachable fails at once
                    raise
                failures += 1
                if failures > self.settings.max_retries:
                    raise
                left = await _sleep_within(_backoff(failures, None), left)
                continue
            except BaseException:
                limiter.release(ticket, outcome="error")
                raise
            self._reached = True
            limiter.release(ticket, outcome="ok", headers=resp.headers, latency=time.monotonic() - t0,
                            prompt_chars=prompt_chars, prompt_tokens=_usage_prompt_tokens(resp))
            return resp

    def _check_rate_limit_deadline(self, limiter: AccountLimiter, err) -> None:
        """Raise the 429 when waiting it out would pass the run's deadline for rate limits."""
        now = time.monotonic()
        waited = now - (limiter.limited_since or now)
        ahead = max(0.0, limiter.paused_until - now)
        if waited + ahead > self.settings.rate_limit_wait:
            raise err

    def _adapt_to(self, err) -> bool:
        """Swap ``max_tokens`` for ``max_completion_tokens`` or drop the temperature when the model rejects it."""
        param = (getattr(err, "param", None) or "").lower()
        text = _message(err).lower()
        if self._token_param == "max_tokens" and (param == "max_tokens" or "max_completion_tokens" in text):
            self._token_param = "max_completion_tokens"
            return True
        if self._send_temperature and (param == "temperature" or "'temperature'" in text
                                       or "temperature" in text and "unsupported" in text):
            self._send_temperature = False
            return True
        return False

    async def aclose(self) -> None:
        if self._client_obj is not None:
            await self._client_obj.close()


def make_sdk_client(settings: JudgeSettings, api_key: str | None, policy=None, *, timeout: float | None = None):
    """The openai SDK client for `settings`' endpoint (OpenAI-compatible or Azure), over our HTTP layer
    (`transport.make_http_client`: the body cap, and `policy`'s refusal of private destinations), with the SDK's
    own retries off. Also used by `mmvet_core.judging.endpoints` to read the endpoint's model list."""
    import openai

    from .transport import make_http_client   # aiohttp under the SDK (less CPU), with the body cap

    timeout = settings.timeout if timeout is None else timeout
    http_client = make_http_client(timeout, policy)
    if settings.provider == "azure":
        return openai.AsyncAzureOpenAI(api_key=api_key, azure_endpoint=settings.base_url,
                                       api_version=settings.api_version, timeout=timeout, max_retries=0,
                                       http_client=http_client)
    return openai.AsyncOpenAI(api_key=api_key or "EMPTY", base_url=settings.base_url, timeout=timeout,
                              max_retries=0, http_client=http_client)


async def _sleep_within(delay: float, left: float) -> float:
    """Sleep `delay` seconds of backoff out of the call's `left` seconds; `_DeadlinePassed` when they do not
    fit. Returns the seconds left."""
    if delay >= left:
        raise _DeadlinePassed()
    await asyncio.sleep(delay)
    return left - delay


def _blocked(err: BaseException):
    """The `transport.BlockedDestination` behind an SDK connection error, if any."""
    from .transport import BlockedDestination

    for _ in range(6):
        if err is None or isinstance(err, BlockedDestination):
            return err
        err = err.__cause__ or err.__context__
    return None


def _headers(err):
    return getattr(getattr(err, "response", None), "headers", None) or {}


def _is_quota(err) -> bool:
    """A 429 that is not a rate limit: the account has no quota left (OpenAI's ``insufficient_quota``)."""
    return (getattr(err, "code", None) or "") == "insufficient_quota" or "insufficient_quota" in _message(err)


def _backoff(failures: int, retry_after: float | None) -> float:
    """The SDK's retry delay: the server's ``retry-after`` when given (up to 60 s), else 0.5 s x 2^(n-1), at most
    8 s, minus up to 25% jitter."""
    if retry_after is not None and retry_after <= 60:
        return retry_after
    return min(0.5 * 2 ** (failures - 1), 8.0) * (1 - 0.25 * random.random())


def _usage_prompt_tokens(resp) -> int | None:
    """``usage.prompt_tokens`` of a raw response, cheaply (the body is parsed again by `reply_from_body`)."""
    content = resp.content
    i = content.rfind(b'"prompt_tokens"')
    if i < 0:
        return None
    m = re.match(rb'"prompt_tokens"\s*:\s*(\d+)', content[i:i + 40])
    return int(m.group(1)) if m else None


async def _chat_post(client, body: dict):
    """``client.post("/chat/completions", ...)`` as ``chat.completions.create`` sends it (the key as a bearer
    token), returning the raw ``httpx2.Response``."""
    import httpx2

    return await client.post("/chat/completions", body=body, cast_to=httpx2.Response,
                             options={"security": {"bearer_auth": True}})


def reply_from_body(status: int, content: bytes, sent: dict, *, redact: bool = False) -> JudgeReply:
    """The judge's answer in a chat-completions response body (pure). A body that is not a JSON object is a
    `JudgeError` (kind ``other``): the sample is left errored and retryable, never scored.

    >>> reply_from_body(200, b'{"model": "m", "choices": [{"message": {"content": "0.5"}}],'
    ...                 b' "usage": {"prompt_tokens": 9, "completion_tokens": 1}}', {"max_tokens": 3})
    JudgeReply(content='0.5', model='m', prompt_tokens=9, completion_tokens=1, sent={'max_tokens': 3})
    >>> reply_from_body(200, b'{"choices": []}', {}).content is None
    True
    >>> reply_from_body(200, b'<html>Bad gateway</html>', {})
    Traceback (most recent call last):
    ...
    mmvet_core.judging.judge.JudgeError: other: the endpoint answered HTTP 200 with a body that is not a chat completion: '<html>Bad gateway</html>'
    """
    try:
        data = json.loads(content)
    except ValueError:
        data = None
    if not isinstance(data, dict):
        if redact:      # the body may be an internal page the visitor pointed us at
            raise JudgeError("other", f"the endpoint answered HTTP {status} with a body that is not a chat "
                                      f"completion ({REDACTED})", status)
        preview = content[:200].decode("utf-8", "replace")
        raise JudgeError("other", f"the endpoint answered HTTP {status} with a body that is not a chat completion: "
                                  f"{preview!r}", status)
    choices = data.get("choices")
    choice = choices[0] if isinstance(choices, list) and choices and isinstance(choices[0], dict) else {}
    message = choice.get("message")
    text = message.get("content") if isinstance(message, dict) else None
    usage = data.get("usage") if isinstance(data.get("usage"), dict) else {}
    model = data.get("model")
    return JudgeReply(content=text if text is None or isinstance(text, str) else json.dumps(text),
                      model=model if isinstance(model, str) else None,
                      prompt_tokens=_int_or_none(usage.get("prompt_tokens")),
                      completion_tokens=_int_or_none(usage.get("completion_tokens")), sent=sent)


def _int_or_none(value) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def _message(err) -> str:
    body = getattr(err, "body", None)
    if isinstance(body, dict):
        inner = body.get("error", body)
        if isinstance(inner, dict) and inner.get("message"):
            return str(inner["message"])
    return str(getattr(err, "message", None) or err)


# --- the offline baseline ------------------------------------------------------------------------------------

_WORD = re.compile(r"[a-z0-9]+(?:[.,/][0-9]+)*")
_STOP = frozenset("a an the of to in on and or is are was were be it its this that with for as at by from".split())


def _norm(text: str) -> str:
    return " ".join(_WORD.findall(text.lower().replace("\\n", " ")))


@lru_cache(maxsize=2048)        # pure: a judge check scores the same reference predictions at every assessment
def keyword_score(answer: str, prediction: str) -> float:
    """Keyword-matching score in [0, 1], honouring ``<AND>`` / ``<OR>`` (pure).

    Each ``<OR>`` alternative scores the fraction of its ``<AND>`` elements found in the prediction; the best
    alternative wins. A long element (more than 5 words) is matched by the share of its content words found.

    >>> keyword_score("-1<AND>-5", "x = -1 or x = -5"), keyword_score("-1<AND>-5", "x = -5")
    (1.0, 0.5)
    >>> keyword_score("1.25<OR>=1.25<OR>5/4", "d is 5/4"), keyword_score("milk", "eggs")
    (1.0, 0.0)
    """
    pred = f" {_norm(prediction)} "
    pred_words = set(pred.split())
    best = 0.0
    for alternative in answer.split("<OR>"):
        elements = [e for e in alternative.split("<AND>") if _norm(e)]
        if not elements:
            continue
        total = 0.0
        for element in elements:
            norm = _norm(element)
            words = [w for w in norm.split() if w not in _STOP] or norm.split()
            if len(norm.split()) <= 5:
                total += 1.0 if f" {norm} " in pred else 0.0
            else:
                total += sum(w in pred_words for w in words) / len(words)
        best = max(best, total / len(elements))
    return round(best, 1)


class BaselineJudge:
    """Offline keyword-matching judge: no key, no network. Not the MM-Vet metric (an LLM judge is)."""

    def __init__(self, settings: JudgeSettings | None = None):
        self.settings = settings or JudgeSettings(model=BASELINE_NAME, provider="baseline")

    @property
    def name(self) -> str:
        return BASELINE_NAME

    async def complete(self, prompt: str, temperature: float, *, sample: Sample, prediction: str,
                       priority: int = 1) -> JudgeReply:
        score = keyword_score(sample.answer, prediction)
        return JudgeReply(content=f"{score:.1f}", model=BASELINE_NAME, sent={"temperature": temperature})

    async def aclose(self) -> None:
        return None


def check_settings(settings: JudgeSettings) -> JudgeSettings:
    """The settings a judge check grades with: the candidate judge with the official prompt (here, beside the
    settings, for the endpoint listing reads a stored check too; `judgecheck` re-exports it)."""
    return replace(settings, prompt_examples=None)


def make_judge(settings: JudgeSettings, api_key: str | None = None, *, policy=None, redact: bool = False,
               cache_scope: str = "") -> Judge:
    """Build the judge `settings` describe. The key is used by the client only and never stored.

    `policy` (a `transport.EndpointPolicy`) bounds what the endpoint can do to us (body cap, private destinations);
    `redact` replaces the endpoint's own error text by a generic one (see `OpenAIJudge`); `cache_scope`: whose
    stored answers it reads and adds to (`answer_scope`: "" for the host's key, else the visitor's key's)."""
    if settings.provider == "baseline":
        return BaselineJudge(settings)
    judge = OpenAIJudge(settings, api_key, policy=policy, redact=redact)
    judge.cache_scope = cache_scope
    return judge


def answer_scope(api_key: str | None) -> str:
    """The answer-cache scope of a visitor's own key (issue 33): answers are paid by a credential, so they are
    reused only under it. The host's key (and the CLI's) has the scope "" (the plain judge fingerprint, as
    before); a visitor's key a hash of the key, so the host's answers are never served to a visitor's key, and
    a visitor's answers never reach the server's runs and checks, even at the server's own endpoint.

    >>> answer_scope("sk-a") == answer_scope("sk-a") != answer_scope("sk-b"), answer_scope(None).startswith("key:")
    (True, True)
    """
    return "key:" + hashlib.sha256(f"mmvet-answers:{api_key or ''}".encode("utf-8")).hexdigest()[:32]


def answer_fingerprint(judge) -> str:
    """The answer-cache identity of `judge`: its settings' fingerprint, scoped by its key's `answer_scope`
    (a judge without one is the host's)."""
    fp = judge.settings.fingerprint()
    scope = getattr(judge, "cache_scope", "") or ""
    if not scope:
        return fp
    return hashlib.sha256(f"{fp}\n{scope}".encode("utf-8")).hexdigest()[:16]
