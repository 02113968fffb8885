"""Many requests to OpenAI-compatible servers at once: bounded concurrency, retries with back-off, hard caps.

One `RequestClient` holds one `httpx.AsyncClient` and sends non-streamed chat requests (`post`) to any
`Endpoint`, at most `concurrency` at a time; a waiting request of a lower `priority` number gets the next free
slot first (`Slots`). `devtune data synth` (core.data.synth.generate) and `devtune eval` (core.eval.ask) both
send through it.

Transient failures (connection refused or reset, timeouts, 408/429/5xx) are retried with exponential back-off
and jitter (a server's Retry-After is honoured); when a request still fails, or the server refuses the key
(401/403), knows no such model (404) or refuses JSON-schema structured output, the client stops: `fatal` holds
a `ClientError` saying which, and every later `post` returns None at once. Hard caps: `max_requests` (every
attempt counts) and `max_tokens` (the server's reported usage; a request is sent only when the reserve its
caller gives — the estimated prompt plus the reply limit — fits in what is left), so a cap is never passed.

The key is the endpoint's (an `Authorization` header), never part of a body, an error or a count.
"""

from __future__ import annotations

import asyncio
import heapq
import itertools
import json
import random
import re
from collections.abc import Callable
from dataclasses import dataclass, field

from core.errors import Failed
from core.i18n import _
from core.serve.chat import Endpoint

TRANSIENT_STATUS = {408, 409, 425, 429, 500, 502, 503, 504}
MAX_BACKOFF_S = 20.0
DOWN, KEY_REFUSED, NO_MODEL, NO_STRUCTURED = "down", "key-refused", "no-model", "no-structured-output"


@dataclass
class ClientOptions:
    concurrency: int = 8
    max_requests: int | None = None  # hard cap on requests sent (every attempt counts)
    max_tokens: int | None = None  # hard cap on prompt + completion tokens (the server's usage)
    retries: int = 4  # attempts after the first, on transient errors
    backoff_s: float = 0.5  # first back-off; doubled on each retry, with jitter
    timeout_s: float = 180.0


@dataclass
class ClientStats:
    requests: int = 0  # attempts sent
    retries: int = 0
    prompt_tokens: int = 0
    completion_tokens: int = 0


@dataclass
class Reply:
    """A server's answer to one request: the message text, why it ended, the usage; or the error that is
    this request's alone (a 400, a body that is not JSON) — the run goes on."""

    content: str = ""
    finish: str | None = None
    usage: dict = field(default_factory=dict)
    error: str = ""


class ClientError(Failed):
    """The client cannot go on: `kind` is down | key-refused | no-model | no-structured-output, with the
    endpoint and what the server said; the message says it in words. Held as `RequestClient.fatal`, never
    raised by the client: its caller says it for its own command (`data synth`: SynthError; `eval`: the report)."""

    def __init__(self, kind: str, endpoint: Endpoint, message: str, *, attempts: int = 0, problem: str = "",
                 status: int = 0, detail: str = "") -> None:
        super().__init__(message)
        self.kind, self.endpoint, self.attempts = kind, endpoint, attempts
        self.problem, self.status, self.detail = problem, status, detail


class Budget:
    """The hard caps: `take(reserve)` before an attempt, `settle(reserve, used)` when it came back."""

    def __init__(self, options: ClientOptions) -> None:
        self.options = options
        self.requests = 0
        self.tokens = 0  # reported usage so far
        self.reserved = 0  # tokens held by requests in flight
        self.reached = ""  # max-requests | max-tokens once a cap forbade a request

    def take(self, reserve: int) -> bool:
        o = self.options
        if o.max_requests is not None and self.requests >= o.max_requests:
            self.reached = self.reached or "max-requests"
            return False
        if o.max_tokens is not None and self.tokens + self.reserved + reserve > o.max_tokens:
            self.reached = self.reached or "max-tokens"
            return False
        self.requests += 1
        self.reserved += reserve
        return True

    def settle(self, reserve: int, used: int) -> None:
        self.reserved -= reserve
        self.tokens += used


class Slots:
    """`size` request slots; a waiting request of a lower priority number gets the next free slot first
    (first come, first served within a priority)."""

    def __init__(self, size: int) -> None:
        self.free = size
        self.waiting: list[tuple[int, int, asyncio.Future]] = []
        self.order = itertools.count()

    async def acquire(self, priority: int = 0) -> None:
        if self.free > 0 and not self.waiting:
            self.free -= 1
            return
        future = asyncio.get_running_loop().create_future()
        heapq.heappush(self.waiting, (priority, next(self.order), future))
        try:
            await future
        except asyncio.CancelledError:
            if future.done() and not future.cancelled():  # handed a slot just as it was cancelled: pass it on
                self.release()
            raise

    def release(self) -> None:
        while self.waiting:
            _p, _n, future = heapq.heappop(self.waiting)
            if not future.done():
                future.set_result(None)  # the slot goes straight to the next waiter
                return
        self.free += 1


class RequestClient:
    """`async with RequestClient(options) as client: reply = await client.post(endpoint, body, reserve=n)`.
    `post` returns None when the client stopped (a cap reached, a fatal error, `cancelled()`) before the
    request was answered."""

    def __init__(self, options: ClientOptions | None = None, *, cancelled: Callable[[], bool] | None = None,
                 transport=None) -> None:
        self.options = options or ClientOptions()
        self.cancelled = cancelled or (lambda: False)
        self.transport = transport  # tests: an httpx transport
        self.budget = Budget(self.options)
        self.stats = ClientStats()
        self.fatal: ClientError | None = None
        self.slots = Slots(self.options.concurrency)
        self._client = None

    async def __aenter__(self) -> RequestClient:
        import httpx

        n = self.options.concurrency
        self._client = httpx.AsyncClient(timeout=httpx.Timeout(self.options.timeout_s, connect=10.0),
                                         limits=httpx.Limits(max_connections=n, max_keepalive_connections=n),
                                         transport=self.transport)
        return self

    async def __aexit__(self, *exc) -> None:
        await self._client.aclose()

    @property
    def halted(self) -> bool:
        return self.fatal is not None or bool(self.budget.reached) or self.cancelled()

    @property
    def stopped(self) -> str:
        """Why the client stopped: '' (it did not), error, max-requests, max-tokens or cancelled."""
        if self.fatal is not None:
            return "error"
        return self.budget.reached or ("cancelled" if self.cancelled() else "")

    async def post(self, endpoint: Endpoint, body: dict, *, reserve: int = 0, priority: int = 0) -> Reply | None:
        await self.slots.acquire(priority)
        try:
            if self.halted:
                return None
            return await self._send(endpoint, body, reserve)
        finally:
            self.slots.release()

    async def _send(self, endpoint: Endpoint, body: dict, reserve: int) -> Reply | None:
        import httpx

        headers = {**endpoint.headers(), "Accept": "application/json"}
        attempt = 0
        while True:
            if not self.budget.take(reserve):
                return None
            used = 0
            retry_after = None
            try:
                resp = await self._client.post(endpoint.chat_url, json=body, headers=headers)
                self.stats.requests += 1
                if resp.status_code == 200:
                    payload = resp.json()
                    usage = payload.get("usage") or {}
                    used = int(usage.get("total_tokens") or 0)
                    self.stats.prompt_tokens += int(usage.get("prompt_tokens") or 0)
                    self.stats.completion_tokens += int(usage.get("completion_tokens") or 0)
                    choice = (payload.get("choices") or [{}])[0]
                    return Reply(content=(choice.get("message") or {}).get("content") or "",
                                 finish=choice.get("finish_reason"), usage=usage)
                if resp.status_code not in TRANSIENT_STATUS:
                    return self._refused(endpoint, resp.status_code, resp.text)
                problem = f"HTTP {resp.status_code}"
                retry_after = _retry_after(resp.headers.get("retry-after"))
            except httpx.TransportError as exc:
                self.stats.requests += 1
                problem = type(exc).__name__
            except ValueError as exc:  # a 200 whose body is not JSON
                return Reply(error=_("the reply was not JSON: {error}", error=exc))
            finally:
                self.budget.settle(reserve, used)
            if attempt >= self.options.retries:
                self.fatal = self.fatal or ClientError(
                    DOWN, endpoint, _("the server at {url} failed {n} times in a row ({problem})", url=endpoint.url,
                                      n=attempt + 1, problem=problem), attempts=attempt + 1, problem=problem)
                return None
            self.stats.retries += 1
            delay = min(MAX_BACKOFF_S, self.options.backoff_s * 2 ** attempt) * (0.5 + random.random() / 2)
            await asyncio.sleep(max(delay, min(retry_after or 0.0, MAX_BACKOFF_S)))
            attempt += 1
            if self.halted:
                return None

    def _refused(self, endpoint: Endpoint, status: int, text: str) -> Reply | None:
        detail = error_detail(text)[:300]
        if status in (401, 403):
            self._stop(ClientError(KEY_REFUSED, endpoint, _("the server at {url} refused the API key ({status})",
                                                             url=endpoint.url, status=status), status=status))
            return None
        if status == 404:
            self._stop(ClientError(NO_MODEL, endpoint, _(
                "the server at {url} has no model named {model} (404: {detail}); `GET /v1/models` lists its models",
                url=endpoint.url, model=endpoint.model, detail=detail), status=status, detail=detail))
            return None
        if re.search(r"response_format|json_schema|guided|structured|grammar", detail, re.IGNORECASE):
            self._stop(ClientError(NO_STRUCTURED, endpoint, _(
                "the server at {url} refused JSON-schema structured output ({status}: {detail}); use a server that "
                "supports response_format json_schema (vLLM does)", url=endpoint.url, status=status, detail=detail),
                status=status, detail=detail))
            return None
        return Reply(error=_("the server answered {status}: {detail}", status=status, detail=detail))

    def _stop(self, error: ClientError) -> None:
        self.fatal = self.fatal or error


def json_schema_format(name: str, schema: dict) -> dict:
    """The `response_format` of a request whose reply must be JSON of `schema` (strict)."""
    return {"type": "json_schema", "json_schema": {"name": name, "schema": schema, "strict": True}}


def _retry_after(value: str | None) -> float | None:
    try:
        return max(0.0, float(value)) if value else None
    except ValueError:
        return None


def error_detail(text: str) -> str:
    """What an error reply says: its `error.message`, `detail`, or the body itself."""
    try:
        payload = json.loads(text)
    except ValueError:
        return text.strip()
    if isinstance(payload, dict):
        error = payload.get("error", payload.get("detail", payload))
        if isinstance(error, dict):
            return str(error.get("message") or error)
        return str(error)
    return str(payload)
