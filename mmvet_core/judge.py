"""Judges: the one module that talks to an LLM.

A judge answers one filled prompt at one temperature (`Judge.complete`). Two implementations:

- `OpenAIJudge`: any OpenAI-compatible chat endpoint (OpenAI, Azure OpenAI, vLLM, Ollama, ...) through the async
  openai SDK. The SDK retries 429 / 5xx / timeouts with backoff and honours ``retry-after``; what survives its
  retries becomes a `JudgeError`. Reasoning models that reject ``max_tokens`` or a temperature get the parameter
  swapped or dropped once, and every reply records the parameters actually sent.
- `BaselineJudge`: an offline keyword-matching baseline (the paper's "keyword matching", Table 6). It needs no
  key and no network and is clearly *not* the MM-Vet metric.

API keys live only in the judge object (never in `JudgeSettings`, its fingerprint, the store or any export).
"""
from __future__ import annotations

import asyncio
import hashlib
import json
import re
from dataclasses import asdict, dataclass, field
from typing import Protocol, runtime_checkable

from .benchmark import Sample

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
    max_retries: int = 6

    def fingerprint(self) -> str:
        """Identity of the judge for the answer cache: provider, endpoint, model and token limit."""
        ident = {"provider": self.provider, "base_url": (self.base_url or "").rstrip("/"),
                 "model": self.model, "max_tokens": self.max_tokens, "api_version": self.api_version}
        return hashlib.sha256(json.dumps(ident, sort_keys=True).encode()).hexdigest()[:16]

    def to_dict(self) -> dict:
        return asdict(self)

    @property
    def is_official(self) -> bool:
        return self.provider != "baseline"


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
        self.kind = kind          # auth, permission, not_found, bad_request, rate_limit, server, timeout, connection, other
        self.status = status
        self.message = message

    def __str__(self) -> str:
        return f"{self.kind}: {self.message}"


@runtime_checkable
class Judge(Protocol):
    settings: JudgeSettings

    @property
    def name(self) -> str: ...

    async def complete(self, prompt: str, temperature: float, *, sample: Sample, prediction: str) -> JudgeReply: ...

    async def aclose(self) -> None: ...


_HINTS = {
    "auth": "the API key was rejected: check it (and that it belongs to this endpoint)",
    "permission": "the key is not allowed to use this model or endpoint",
    "not_found": "the endpoint does not serve this model (or the base URL is wrong)",
    "connection": "the base URL could not be reached",
    "timeout": "the judge did not answer in time",
    "rate_limit": "the endpoint kept answering 429 (rate limit) after all retries",
    "server": "the endpoint kept failing with a server error after all retries",
}


def describe_judge_error(err: JudgeError) -> str:
    """A one-line, user-facing explanation of a judge failure."""
    hint = _HINTS.get(err.kind)
    status = f" (HTTP {err.status})" if err.status else ""
    return f"{hint}{status}: {err.message}" if hint else f"{err.kind}{status}: {err.message}"


class OpenAIJudge:
    """An OpenAI-compatible chat-completions judge (async openai SDK; OpenAI, Azure, vLLM, Ollama...)."""

    def __init__(self, settings: JudgeSettings, api_key: str | None, *, client=None):
        import openai  # the only import of the SDK in the package

        self.settings = settings
        self._openai = openai
        self._token_param = settings.token_param
        self._send_temperature = settings.send_temperature
        if client is not None:
            self._client = client
        else:
            from .transport import make_http_client   # aiohttp under the SDK (less CPU); None: the SDK's default

            http_client = make_http_client(settings.timeout)
            if settings.provider == "azure":
                self._client = openai.AsyncAzureOpenAI(
                    api_key=api_key, azure_endpoint=settings.base_url, api_version=settings.api_version,
                    timeout=settings.timeout, max_retries=settings.max_retries, http_client=http_client)
            else:
                self._client = openai.AsyncOpenAI(
                    api_key=api_key or "EMPTY", base_url=settings.base_url,
                    timeout=settings.timeout, max_retries=settings.max_retries, http_client=http_client)
        self._reached = False       # has the endpoint answered at least once? (see `_create`)

    @property
    def name(self) -> str:
        return self.settings.model

    def _params(self, temperature: float) -> dict:
        params: dict = {self._token_param: self.settings.max_tokens}
        if self._send_temperature:
            params["temperature"] = temperature
        return params

    async def complete(self, prompt: str, temperature: float, *, sample: Sample | None = None,
                       prediction: str | None = None) -> JudgeReply:
        o = self._openai
        for _ in range(3):  # at most: original, token-param swap, temperature drop
            params = self._params(temperature)
            body = {"model": self.settings.model, "messages": [{"role": "user", "content": prompt}], **params}
            try:
                response = await self._post(body)
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
                raise JudgeError("rate_limit", _message(e), 429) from e
            except o.APITimeoutError as e:
                raise JudgeError("timeout", str(e) or "request timed out") from e
            except o.APIConnectionError as e:
                raise JudgeError("connection", str(e) or "connection failed") from e
            except o.APIStatusError as e:
                kind = "server" if e.status_code >= 500 else "other"
                raise JudgeError(kind, _message(e), e.status_code) from e
            return reply_from_body(response.status_code, response.content, params)
        raise JudgeError("bad_request", "the endpoint rejected every parameter combination tried")

    async def _post(self, body: dict):
        """POST the chat-completions `body` through the SDK (its auth, Azure deployment URLs, retries honouring
        ``retry-after``, timeouts and error classes) and return the raw HTTP response.

        This is the SDK's documented generic ``client.post`` with ``cast_to`` the HTTP response class, which is
        exactly what ``chat.completions.create`` sends minus two steps whose result we do not use: re-checking our
        own parameters against the SDK's type declarations and building typed response models. They cost about a
        third of the client's CPU per call; `reply_from_body` reads the four fields we keep.

        Until the endpoint has answered once a connection error is not retried: a wrong base URL or a server that
        is down then fails the run at once instead of after the SDK's backoff (about 20 s with 6 retries). The
        retry count is kept overall."""
        o = self._openai
        client = self._client
        if not self._reached:
            try:
                resp = await _chat_post(client.with_options(max_retries=0), body)
                self._reached = True
                return resp
            except o.APITimeoutError as e:      # slow is not unreachable: the remaining retries apply
                err, delay = e, 0.0
            except o.APIStatusError as e:
                self._reached = True
                if e.status_code not in (408, 409, 429) and e.status_code < 500:   # the SDK would not retry
                    raise
                err, delay = e, _retry_after(e.response)
            if client.max_retries < 1:
                raise err
            await asyncio.sleep(delay)
            client = client.with_options(max_retries=client.max_retries - 1)
        resp = await _chat_post(client, body)
        self._reached = True
        return resp

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
        await self._client.close()


async def _chat_post(client, body: dict):
    """``client.post("/chat/completions", ...)`` as ``chat.completions.create`` sends it (the key as a bearer
    token), returning the raw ``httpx2.Response``."""
    import httpx2

    return await client.post("/chat/completions", body=body, cast_to=httpx2.Response,
                             options={"security": {"bearer_auth": True}})


def reply_from_body(status: int, content: bytes, sent: dict) -> JudgeReply:
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
    mmvet_core.judge.JudgeError: other: the endpoint answered HTTP 200 with a body that is not a chat completion: '<html>Bad gateway</html>'
    """
    try:
        data = json.loads(content)
    except ValueError:
        data = None
    if not isinstance(data, dict):
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


def _retry_after(response, default: float = 0.5, cap: float = 60.0) -> float:
    """Seconds a 429 / 5xx response asks to wait (``retry-after-ms`` or ``retry-after``), else the SDK's first
    backoff."""
    headers = getattr(response, "headers", None) or {}
    for name, scale in (("retry-after-ms", 0.001), ("retry-after", 1.0)):
        try:
            return min(cap, max(0.0, float(headers[name]) * scale))
        except (KeyError, TypeError, ValueError):
            continue
    return default


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

    async def complete(self, prompt: str, temperature: float, *, sample: Sample, prediction: str) -> JudgeReply:
        score = keyword_score(sample.answer, prediction)
        return JudgeReply(content=f"{score:.1f}", model=BASELINE_NAME, sent={"temperature": temperature})

    async def aclose(self) -> None:
        return None


def make_judge(settings: JudgeSettings, api_key: str | None = None) -> Judge:
    """Build the judge `settings` describe. The key is used by the client only and never stored."""
    if settings.provider == "baseline":
        return BaselineJudge(settings)
    return OpenAIJudge(settings, api_key)
