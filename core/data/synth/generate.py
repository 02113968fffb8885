"""Questions and grounded answers from chunks, through any OpenAI-compatible server.

For each chunk one request asks for questions a customer would ask, then one request per question asks for the
answer from the chunk alone; both use JSON-schema structured output (`response_format: {"type": "json_schema"}`)
so every complete reply parses. Requests go through core.serve.client's `RequestClient` (the one `devtune eval`
uses too), at most `concurrency` at a time, a waiting answer request before a waiting questions request.

Transient failures are retried with back-off there; when a request still fails the run stops — the journal
keeps every reply so far, and the next run carries on. A refused key (401/403), an unknown model (404) or a
server that refuses structured output stops the run at once with what to do. Hard caps: `max_requests` (every
attempt counts) and `max_tokens` (the server's reported usage; a request is sent only when its reserve — the
estimated prompt ×1.5 plus the reply limit — fits in what is left), so the cap is never passed.

Progress is a `SynthProgress` after every reply, through a plain callback.
"""

from __future__ import annotations

import asyncio
import json
import re
import time
from collections.abc import Callable
from dataclasses import dataclass

from xxhash import xxh3_64_hexdigest

from core.data.synth.chunks import Chunk, count_tokens
from core.data.synth.journal import Journal
from core.data.synth.prompts import LANGUAGE_NAMES, Prompts
from core.errors import Unavailable
from core.i18n import _
from core.serve.chat import Endpoint
from core.serve.client import DOWN, KEY_REFUSED, ClientError, ClientOptions, Reply, RequestClient, json_schema_format
MAX_QUESTION_CHARS = 300
MAX_ANSWER_CHARS = 2000
_CONTROL = re.compile(r"[\x00-\x08\x0b\x0c\x0e-\x1f\x7f]")


class SynthError(Unavailable):
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
                "response_format": json_schema_format(self.kind, self.schema)}

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


ANSWER_FIRST, QUESTIONS_AFTER = 0, 1  # request priorities: a chunk that has its questions is finished first


class Generator:
    """One run over a list of chunks, journaled. `run()` returns the progress at the end; the replies are in
    the journal (read them with `parse_questions` / `parse_answer`, or `core.data.synth.dataset.collect`).
    The journal stays open: whoever opened it closes it (`core.data.synth.pipeline.generate_pairs` does)."""

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
        self.state = SynthProgress(0)
        self.client: RequestClient | None = None
        self._start = 0.0

    # ---------------------------------------------------------------- the run

    def run(self, chunks: list[Chunk]) -> SynthProgress:
        return asyncio.run(self.arun(chunks))

    async def arun(self, chunks: list[Chunk]) -> SynthProgress:
        o = self.options
        self.state = SynthProgress(len(chunks))
        self._start = time.perf_counter()
        client_options = ClientOptions(concurrency=o.concurrency, max_requests=o.max_requests, max_tokens=o.max_tokens,
                                       retries=o.retries, backoff_s=o.backoff_s, timeout_s=o.timeout_s)
        async with RequestClient(client_options, cancelled=lambda: self.cancelled(),
                                 transport=self.transport) as client:
            self.client = client
            tasks = [asyncio.create_task(self._chunk(c)) for c in chunks]
            try:
                await asyncio.gather(*tasks)
            finally:
                for t in tasks:
                    t.cancel()
                await asyncio.gather(*tasks, return_exceptions=True)
        self._tick()
        if client.fatal is not None:
            self.state.stopped = "error"
            raise synth_error(client.fatal)
        if not self.state.stopped:
            self.state.stopped = client.stopped
        return self.state

    def _halted(self) -> bool:
        return self.client is not None and self.client.halted

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
        reserve = int(count_tokens(request.prompt) * 1.5) + 16 + self.options.reply_tokens
        reply = await self.client.post(self.endpoint, request.body(self.endpoint.model, self.options),
                                       reserve=reserve,
                                       priority=ANSWER_FIRST if request.kind == "answer" else QUESTIONS_AFTER)
        if reply is None:
            return None
        entry = self._entry(request, key, reply)
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
        if self.client is not None:
            stats = self.client.stats
            self.state.requests, self.state.retries = stats.requests, stats.retries
            self.state.prompt_tokens, self.state.completion_tokens = stats.prompt_tokens, stats.completion_tokens
        self.state.elapsed_s = time.perf_counter() - self._start
        if self.on_progress:
            self.on_progress(self.state)

    def _entry(self, request: Request, key: str, reply: Reply) -> dict:
        entry = {"key": key, "kind": request.kind, "chunk": request.chunk.id, "doc": request.chunk.doc,
                 "chunk_index": request.chunk.index, "model": self.endpoint.model, "content": reply.content,
                 "finish": reply.finish,
                 "usage": {k: reply.usage.get(k) for k in ("prompt_tokens", "completion_tokens")},
                 "time": round(time.time(), 3)}
        if request.kind == "answer":
            entry["question"] = request.question
            entry["index"] = request.index
        if reply.error:
            entry["error"] = reply.error
        return entry


def synth_error(error: ClientError) -> SynthError:
    """The client's reason to stop, said for `data synth` (which flags set the key; the journal keeps the rest)."""
    if error.kind == KEY_REFUSED:
        return SynthError(_("the server at {url} refused the API key ({status}); for --server devtune reads it from "
                            "the server's api_key file, for --api-base from the variable named by --api-key-env",
                            url=error.endpoint.url, status=error.status))
    if error.kind == DOWN:
        return SynthError(_("the server at {url} failed {n} times in a row ({problem}); the replies so far are kept "
                            "in the journal — run the same command again to carry on", url=error.endpoint.url,
                            n=error.attempts, problem=error.problem))
    return SynthError(str(error))


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

