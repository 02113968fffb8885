"""Questions and grounded answers from chunks, through any OpenAI-compatible server.

For each chunk one request asks for questions a customer would ask, then one request per question asks for the
answer from the chunk alone; both use JSON-schema structured output (`response_format: {"type": "json_schema"}`)
so every complete reply parses. Requests run on one `httpx.AsyncClient`, at most `concurrency` at a time, a
waiting answer request before a waiting questions request (`_Slots`).

Transient failures (connection refused or reset, timeouts, 408/429/5xx) are retried with exponential back-off
and jitter (a server's Retry-After is honoured); when a request still fails the run stops — the journal keeps
every reply so far, and the next run carries on. A refused key (401/403), an unknown model (404) or a server
that refuses structured output stops the run at once with what to do. Hard caps: `max_requests` (every
attempt counts) and `max_tokens` (the server's reported usage; a request is sent only when its reserve — the
estimated prompt ×1.5 plus the reply limit — fits in what is left), so the cap is never passed.

Progress is a `SynthProgress` after every reply, through a plain callback.
"""

from __future__ import annotations

import asyncio
import heapq
import itertools
import json
import random
import re
import time
from collections.abc import Callable
from dataclasses import dataclass

from xxhash import xxh3_64_hexdigest

from core.data.synth.chunks import Chunk, count_tokens
from core.data.synth.journal import Journal
from core.data.synth.prompts import LANGUAGE_NAMES, Prompts
from core.i18n import _
from core.serve.chat import Endpoint

TRANSIENT_STATUS = {408, 409, 425, 429, 500, 502, 503, 504}
MAX_BACKOFF_S = 20.0
MAX_QUESTION_CHARS = 300
MAX_ANSWER_CHARS = 2000
_CONTROL = re.compile(r"[\x00-\x08\x0b\x0c\x0e-\x1f\x7f]")


class SynthError(Exception):
    """The run cannot go on (key refused, model unknown, server unreachable after retries); the message says
    what to do. Everything answered before it is in the journal."""


@dataclass
class SynthOptions:
    questions: int = 3  # questions asked per chunk
    concurrency: int = 8
    max_requests: int | None = None  # hard cap on requests sent (every attempt counts)
    max_tokens: int | None = None  # hard cap on prompt + completion tokens (the server's usage)
    reply_tokens: int = 512  # max_tokens of one reply
    temperature: float = 0.7
    seed: int | None = None  # the server's sampling seed (vLLM honours it): the same replies on every run
    retries: int = 4  # attempts after the first, on transient errors
    backoff_s: float = 0.5  # first back-off; doubled on each retry, with jitter
    timeout_s: float = 180.0


@dataclass
class SynthProgress:
    chunks_total: int
    chunks_done: int = 0
    pairs: int = 0  # answers received (before the filters)
    requests: int = 0  # sent in this run (attempts)
    from_journal: int = 0  # replies found in the journal, not sent again
    prompt_tokens: int = 0
    completion_tokens: int = 0
    errors: int = 0  # requests that ended without a usable reply
    retries: int = 0
    elapsed_s: float = 0.0
    stopped: str = ""  # max-requests | max-tokens | cancelled | error (empty: every chunk done)

    @property
    def tokens_per_s(self) -> float:
        return self.completion_tokens / self.elapsed_s if self.elapsed_s > 0 else 0.0

    def line(self) -> str:
        return _("chunks {done}/{total} · pairs {pairs} · {rate:.1f} tokens/s · errors {errors} · requests {requests}"
                 " (+{cached} from the journal)", done=self.chunks_done, total=self.chunks_total, pairs=self.pairs,
                 rate=self.tokens_per_s, errors=self.errors, requests=self.requests, cached=self.from_journal)


def questions_schema(n: int) -> dict:
    return {"type": "object", "additionalProperties": False, "required": ["questions"],
            "properties": {"questions": {"type": "array", "minItems": 1, "maxItems": max(1, n),
                                         "items": {"type": "string", "maxLength": MAX_QUESTION_CHARS}}}}


def answer_schema() -> dict:
    return {"type": "object", "additionalProperties": False, "required": ["answer"],
            "properties": {"answer": {"type": "string", "maxLength": MAX_ANSWER_CHARS}}}


def clean_text(text: str) -> str:
    """A generated string with control characters removed and whitespace runs collapsed."""
    text = _CONTROL.sub("", text).replace("\r\n", "\n").replace("\r", "\n")
    text = re.sub(r"[ \t]+", " ", text)
    return re.sub(r"\n\s*\n+", "\n\n", text).strip()


@dataclass
class Request:
    kind: str  # questions | answer
    chunk: Chunk
    prompt: str
    schema: dict
    question: str = ""
    index: int = 0  # the question's index within its chunk

    def body(self, model: str, options: SynthOptions) -> dict:
        seed = {} if options.seed is None else {"seed": options.seed}
        return {**seed, "model": model, "messages": [{"role": "user", "content": self.prompt}],
                "temperature": options.temperature, "max_tokens": options.reply_tokens, "stream": False,
                "response_format": {"type": "json_schema",
                                    "json_schema": {"name": self.kind, "schema": self.schema, "strict": True}}}

    def key(self, model: str, options: SynthOptions) -> str:
        basis = json.dumps([self.kind, model, options.temperature, options.reply_tokens, self.prompt, self.schema]
                           + ([] if options.seed is None else [options.seed]),
                           ensure_ascii=False, sort_keys=True)
        return xxh3_64_hexdigest(basis.encode("utf-8", "surrogatepass"))


def questions_request(prompts: Prompts, chunk: Chunk, n: int) -> Request:
    prompt = prompts.render("questions", chunk=chunk.text, heading=chunk.heading or "-", document=_doc_name(chunk),
                            language=LANGUAGE_NAMES[chunk.language], n=n)
    return Request("questions", chunk, prompt, questions_schema(n))


def answer_request(prompts: Prompts, chunk: Chunk, question: str, index: int) -> Request:
    prompt = prompts.render("answer", chunk=chunk.text, heading=chunk.heading or "-", document=_doc_name(chunk),
                            language=LANGUAGE_NAMES[chunk.language], question=question)
    return Request("answer", chunk, prompt, answer_schema(), question=question, index=index)


def _doc_name(chunk: Chunk) -> str:
    return chunk.doc.replace("\\", "/").rsplit("/", 1)[-1]


def questions_problem(entry: dict) -> str:
    """Why a questions reply gave no question: error | truncated | invalid-reply | empty ('' when it gave some)."""
    if parse_questions(entry):
        return ""
    if entry.get("error"):
        return "error"
    if entry.get("finish") == "length":
        return "truncated"
    value = _parsed(entry)
    return "empty" if isinstance(value, dict) and isinstance(value.get("questions"), list) else "invalid-reply"


def parse_questions(entry: dict) -> list[str]:
    """The questions of a journaled reply ([] when it did not parse)."""
    value = _parsed(entry)
    items = value.get("questions") if isinstance(value, dict) else None
    if not isinstance(items, list):
        return []
    seen, out = set(), []
    for item in items:
        text = clean_text(item) if isinstance(item, str) else ""
        if text and text not in seen:
            seen.add(text)
            out.append(text)
    return out


def parse_answer(entry: dict) -> tuple[str, str]:
    """(answer, problem): problem is '' or truncated | invalid-reply."""
    if entry.get("finish") == "length":
        return "", "truncated"
    value = _parsed(entry)
    if not isinstance(value, dict) or not isinstance(value.get("answer"), str):
        return "", "invalid-reply"
    return clean_text(value["answer"]), ""


def _parsed(entry: dict):
    if entry.get("error"):
        return None
    try:
        return json.loads(entry.get("content") or "", strict=False)  # raw control characters inside strings
    except ValueError:
        return None


class _Budget:
    def __init__(self, options: SynthOptions) -> None:
        self.options = options
        self.requests = 0
        self.tokens = 0  # reported usage so far
        self.reserved = 0  # tokens held by requests in flight
        self.reached = ""

    def take(self, prompt: str) -> int | None:
        """Reserve room for one attempt; None (and `reached` set) when a cap forbids it."""
        o = self.options
        if o.max_requests is not None and self.requests >= o.max_requests:
            self.reached = self.reached or "max-requests"
            return None
        need = int(count_tokens(prompt) * 1.5) + 16 + o.reply_tokens
        if o.max_tokens is not None and self.tokens + self.reserved + need > o.max_tokens:
            self.reached = self.reached or "max-tokens"
            return None
        self.requests += 1
        self.reserved += need
        return need

    def settle(self, need: int, used: int) -> None:
        self.reserved -= need
        self.tokens += used


ANSWER_FIRST, QUESTIONS_AFTER = 0, 1


class _Slots:
    """`concurrency` request slots; a waiting answer request gets the next free slot before a waiting questions
    request, so a chunk that has its questions is finished before new chunks are started: "chunks done" moves
    steadily, and the run never ends on a tail of questions whose answers must still be asked one after another."""

    def __init__(self, size: int) -> None:
        self.free = size
        self.waiting: list[tuple[int, int, asyncio.Future]] = []
        self.order = itertools.count()

    async def acquire(self, priority: int) -> None:
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


class Generator:
    """One run over a list of chunks, journaled. `run()` returns the progress at the end; the replies are in
    the journal (read them with `parse_questions` / `parse_answer`, or `core.data.synth.dataset.candidates`)."""

    def __init__(self, endpoint: Endpoint, prompts: Prompts, journal: Journal, options: SynthOptions | None = None,
                 *, progress: Callable[[SynthProgress], None] | None = None,
                 cancelled: Callable[[], bool] | None = None, transport=None) -> None:
        self.endpoint = endpoint
        self.prompts = prompts
        self.journal = journal
        self.options = options or SynthOptions()
        self.on_progress = progress
        self.cancelled = cancelled or (lambda: False)
        self.transport = transport  # tests: an httpx transport
        self.budget = _Budget(self.options)
        self.state = SynthProgress(0)
        self.fatal: SynthError | None = None
        self._start = 0.0

    # ---------------------------------------------------------------- the run

    def run(self, chunks: list[Chunk]) -> SynthProgress:
        return asyncio.run(self.arun(chunks))

    async def arun(self, chunks: list[Chunk]) -> SynthProgress:
        import httpx

        self.state = SynthProgress(len(chunks))
        self._start = time.perf_counter()
        limits = httpx.Limits(max_connections=self.options.concurrency,
                              max_keepalive_connections=self.options.concurrency)
        self._slots = _Slots(self.options.concurrency)
        async with httpx.AsyncClient(timeout=httpx.Timeout(self.options.timeout_s, connect=10.0), limits=limits,
                                     transport=self.transport) as client:
            self._client = client
            tasks = [asyncio.create_task(self._chunk(c)) for c in chunks]
            try:
                await asyncio.gather(*tasks)
            finally:
                for t in tasks:
                    t.cancel()
                await asyncio.gather(*tasks, return_exceptions=True)
                self.journal.close()
        self._tick()
        if self.fatal is not None:
            self.state.stopped = "error"
            raise self.fatal
        if not self.state.stopped:
            self.state.stopped = self.budget.reached or ("cancelled" if self.cancelled() else "")
        return self.state

    def _halted(self) -> bool:
        return self.fatal is not None or bool(self.budget.reached) or self.cancelled()

    async def _chunk(self, chunk: Chunk) -> None:
        if self._halted():
            return
        entry = await self._ask(questions_request(self.prompts, chunk, self.options.questions))
        if entry is None:
            return
        questions = parse_questions(entry)[: self.options.questions]
        answers = await asyncio.gather(*(self._ask(answer_request(self.prompts, chunk, q, i))
                                         for i, q in enumerate(questions)))
        if all(a is not None for a in answers):
            self.state.chunks_done += 1
            self._tick()

    async def _ask(self, request: Request) -> dict | None:
        """The journaled reply to a request: from the journal, else from the server (and then journaled).
        None when the run stopped before it was answered."""
        key = request.key(self.endpoint.model, self.options)
        found = self.journal.get(key)
        if found is not None:
            self.state.from_journal += 1
            self._count(found)
            return found
        await self._slots.acquire(ANSWER_FIRST if request.kind == "answer" else QUESTIONS_AFTER)
        try:
            if self._halted():
                return None
            entry = await self._send(request, key)
        finally:
            self._slots.release()
        if entry is None:
            return None
        self.journal.put(entry)
        self._count(entry)
        return entry

    def _count(self, entry: dict) -> None:
        if entry["kind"] == "answer":
            _answer, problem = parse_answer(entry)
            if problem or entry.get("error"):
                self.state.errors += 1
            else:
                self.state.pairs += 1
        elif not parse_questions(entry):
            self.state.errors += 1
        self._tick()

    def _tick(self) -> None:
        self.state.elapsed_s = time.perf_counter() - self._start
        if self.on_progress:
            self.on_progress(self.state)

    # ---------------------------------------------------------------- one request, retried

    async def _send(self, request: Request, key: str) -> dict | None:
        import httpx

        body = request.body(self.endpoint.model, self.options)
        headers = {**self.endpoint.headers(), "Accept": "application/json"}
        attempt = 0
        while True:
            need = self.budget.take(request.prompt)
            if need is None:
                return None
            used = 0
            retry_after = None
            problem = ""
            try:
                resp = await self._client.post(self.endpoint.chat_url, json=body, headers=headers)
                self.state.requests += 1
                if resp.status_code == 200:
                    payload = resp.json()
                    usage = payload.get("usage") or {}
                    used = int(usage.get("total_tokens") or 0)
                    self.state.prompt_tokens += int(usage.get("prompt_tokens") or 0)
                    self.state.completion_tokens += int(usage.get("completion_tokens") or 0)
                    choice = (payload.get("choices") or [{}])[0]
                    return self._entry(request, key, content=(choice.get("message") or {}).get("content") or "",
                                       finish=choice.get("finish_reason"), usage=usage)
                if resp.status_code not in TRANSIENT_STATUS:
                    return self._refused(request, key, resp.status_code, resp.text)
                problem = f"HTTP {resp.status_code}"
                retry_after = _retry_after(resp.headers.get("retry-after"))
            except httpx.TransportError as exc:
                self.state.requests += 1
                problem = type(exc).__name__
            except ValueError as exc:  # a 200 whose body is not JSON
                return self._entry(request, key, content="", finish=None, usage={},
                                   error=_("the reply was not JSON: {error}", error=exc))
            finally:
                self.budget.settle(need, used)
            if attempt >= self.options.retries:
                self.fatal = self.fatal or SynthError(_(
                    "the server at {url} failed {n} times in a row ({problem}); the replies so far are kept in the "
                    "journal — run the same command again to carry on", url=self.endpoint.url, n=attempt + 1,
                    problem=problem))
                return None
            self.state.retries += 1
            delay = min(MAX_BACKOFF_S, self.options.backoff_s * 2 ** attempt) * (0.5 + random.random() / 2)
            await asyncio.sleep(max(delay, min(retry_after or 0.0, MAX_BACKOFF_S)))
            attempt += 1
            if self._halted():
                return None

    def _refused(self, request: Request, key: str, status: int, text: str) -> dict | None:
        detail = _error_detail(text)
        if status in (401, 403):
            self.fatal = self.fatal or SynthError(_(
                "the server at {url} refused the API key ({status}); for --server devtune reads it from the "
                "server's api_key file, for --api-base from the variable named by --api-key-env", url=self.endpoint.url,
                status=status))
            return None
        if status == 404:
            self.fatal = self.fatal or SynthError(_(
                "the server at {url} has no model named {model} (404: {detail}); `GET /v1/models` lists its models",
                url=self.endpoint.url, model=self.endpoint.model, detail=detail[:300]))
            return None
        if re.search(r"response_format|json_schema|guided|structured|grammar", detail, re.IGNORECASE):
            self.fatal = self.fatal or SynthError(_(
                "the server at {url} refused JSON-schema structured output ({status}: {detail}); use a server that "
                "supports response_format json_schema (vLLM does)", url=self.endpoint.url, status=status,
                detail=detail[:300]))
            return None
        return self._entry(request, key, content="", finish=None, usage={},
                           error=_("the server answered {status}: {detail}", status=status, detail=detail[:300]))

    def _entry(self, request: Request, key: str, *, content: str, finish, usage: dict, error: str = "") -> dict:
        entry = {"key": key, "kind": request.kind, "chunk": request.chunk.id, "doc": request.chunk.doc,
                 "chunk_index": request.chunk.index, "model": self.endpoint.model, "content": content,
                 "finish": finish, "usage": {k: usage.get(k) for k in ("prompt_tokens", "completion_tokens")},
                 "time": round(time.time(), 3)}
        if request.kind == "answer":
            entry["question"] = request.question
            entry["index"] = request.index
        if error:
            entry["error"] = error
        return entry


def _retry_after(value: str | None) -> float | None:
    try:
        return max(0.0, float(value)) if value else None
    except ValueError:
        return None


def _error_detail(text: str) -> str:
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


def answered(journal: Journal, endpoint_model: str, prompts: Prompts, chunk: Chunk, options: SynthOptions
             ) -> tuple[dict | None, list[dict]]:
    """The journaled questions reply of a chunk and the answer replies found for its questions."""
    q_entry = journal.get(questions_request(prompts, chunk, options.questions).key(endpoint_model, options))
    if q_entry is None:
        return None, []
    out = []
    for i, q in enumerate(parse_questions(q_entry)[: options.questions]):
        a = journal.get(answer_request(prompts, chunk, q, i).key(endpoint_model, options))
        if a is not None:
            out.append(a)
    return q_entry, out

