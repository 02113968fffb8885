"""A generation from documents, composed once for `devtune data synth` and the wizard's From documents view:
documents → chunks → generation (journaled) → filters, and for the CLI → files.

`plan_chunks` reads and chunks the documents (the wizard previews its result): a document found in a folder that
cannot be read (a scan, a damaged file) is skipped with its reason, one named directly stops the run, and so does
a set of sources of which nothing can be read; `resolve_endpoint` finds the
server (`--server ID`, devtune's own, or `--api-base URL --model NAME` with the key from an environment
variable) and checks that it answers before anything is sent. `generate_pairs` takes a `SynthRequest` (the CLI
maps its flags to it, the wizard its form), runs all of it — the journal opened, the replies journaled, the
journal closed and synced however the run ends (done, a cap, Stop, Ctrl-C, a server gone) — and returns a
`SynthOutcome` (core/data/synth/outcome.py); `synthesize` is the CLI's: the same, then the files written, as a
`SynthReport`.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from core.data.synth.chunks import DEFAULT_BUDGET, DEFAULT_OVERLAP, Chunk, chunk_document
from core.data.synth.dataset import collect, review
from core.data.synth.documents import Document, DocumentError, read_document, walk_documents
from core.data.synth.filters import DEFAULT_GROUNDING
from core.data.synth.generate import Generator, SynthError, SynthOptions, SynthProgress
from core.data.synth.journal import Journal, journal_path
from core.data.synth.outcome import SynthOutcome, SynthReport, skipped_lines
from core.data.synth.prompts import Prompts, workspace_prompts
from core.errors import BadInput
from core.files.atomic import FileExistsRefused
from core.i18n import _
from core.serve.chat import Endpoint

__all__ = ["ChunkPlan", "SynthOutcome", "SynthReport", "SynthRequest", "SynthStart", "generate_pairs",
           "plan_chunks", "resolve_endpoint", "skipped_lines", "synthesize"]

DEFAULT_KEY_ENV = "OPENAI_API_KEY"


@dataclass
class ChunkPlan:
    documents: list[Document]
    chunks: list[Chunk]
    skipped: list[tuple[str, str]] = field(default_factory=list)  # (path, why) of the unreadable ones in folders

    def per_document(self) -> dict[str, int]:
        counts = {d.path: 0 for d in self.documents}
        for c in self.chunks:
            counts[c.doc] += 1
        return counts


def plan_chunks(sources, *, budget: int = DEFAULT_BUDGET, overlap: int = DEFAULT_OVERLAP) -> ChunkPlan:
    """Read every document named (folders walked) and chunk it. A document named that cannot be read is a
    DocumentError; one found in a folder is skipped (`ChunkPlan.skipped`), unless none at all can be read."""
    docs: list[Document] = []
    skipped: list[tuple[str, str]] = []
    for path, named in walk_documents(sources):
        try:
            docs.append(read_document(path))
        except DocumentError as exc:
            if named:
                raise
            skipped.append((str(path), str(exc)))
    if not docs:
        raise DocumentError(_("none of the documents can be read:\n{why}",
                              why="\n".join(f"  {why}" for _path, why in skipped)))
    try:
        chunks = [c for d in docs for c in chunk_document(d, budget=budget, overlap=overlap)]
    except ValueError as exc:  # a budget too small to hold a sentence
        raise BadInput(str(exc)) from exc
    return ChunkPlan(docs, chunks, skipped)


def resolve_endpoint(ws, *, server: str | None = None, api_base: str | None = None, model: str | None = None,
                     key_env: str = DEFAULT_KEY_ENV) -> Endpoint:
    """The endpoint to use, checked with `GET /v1/models`. SynthError when there is none or it does not answer."""
    from core.serve.chat import ChatError, list_models

    if api_base:
        key = os.environ.get(key_env) or None
        url = api_base.rstrip("/")
        url = url.removesuffix("/v1")
        try:
            models = list_models(url, key, timeout=10.0)
        except ChatError as exc:
            raise SynthError(str(exc)) from exc
        if not model:
            if len(models) != 1:
                raise SynthError(_("{url} serves {n} models ({names}); name one with --model", url=url,
                                   n=len(models), names=", ".join(models[:8]) or "-"))
            model = models[0]
        return Endpoint(url=url, model=model, api_key=key, label=url)
    from core.serve.servers import ServerError, endpoint, find_server

    try:
        record = find_server(ws, server)
        ep = endpoint(ws, record)
    except (ServerError, OSError) as exc:
        raise SynthError(str(exc)) from exc
    if not record.live:
        raise SynthError(_("server {id} is {status}; start one with `devtune serve MODEL`", id=record.id,
                           status=record.status))
    try:
        list_models(ep.url, ep.api_key, timeout=10.0)
    except ChatError as exc:
        raise SynthError(str(exc)) from exc
    return Endpoint(url=ep.url, model=model or ep.model, api_key=ep.api_key, label=ep.label)


@dataclass
class SynthRequest:
    """What to generate: the documents, the file the pairs are for (the journal and the review sit beside it),
    the run's options and filter threshold, and whom to ask — `server` (a server devtune started; None: the
    active one) or `api_base` (any OpenAI-compatible server, with `model` and the key read from `key_env`)."""

    sources: list[Path]
    output: Path
    options: SynthOptions = field(default_factory=SynthOptions)
    min_grounding: float = DEFAULT_GROUNDING
    server: str | None = None
    api_base: str | None = None
    model: str | None = None
    key_env: str = DEFAULT_KEY_ENV
    budget: int = DEFAULT_BUDGET  # tokens of a chunk
    overlap: int = DEFAULT_OVERLAP


@dataclass
class SynthStart:
    """Said once, before the first request: what is asked, of whom, with which prompts."""

    plan: ChunkPlan
    endpoint: Endpoint
    prompts: Prompts


def generate_pairs(ws, request: SynthRequest, *, started: Callable[[SynthStart], None] | None = None,
                   progress: Callable[[SynthProgress], None] | None = None,
                   cancelled: Callable[[], bool] | None = None) -> SynthOutcome:
    """Plan the chunks, find the server, generate (journaled) and filter. The errors are core's (a document,
    a prompt, the server: DevtuneError kinds); everything answered before one is in the journal."""
    began = time.perf_counter()
    plan = plan_chunks(request.sources, budget=request.budget, overlap=request.overlap)
    if not plan.chunks:
        raise SynthError(_("the documents hold no text to ask about"))
    endpoint = resolve_endpoint(ws, server=request.server, api_base=request.api_base, model=request.model,
                                key_env=request.key_env)
    prompts = workspace_prompts(ws.configs_dir)
    if started is not None:
        started(SynthStart(plan, endpoint, prompts))
    output = Path(request.output)
    with Journal(journal_path(output)) as journal:
        state = Generator(endpoint, prompts, journal, request.options, progress=progress,
                          cancelled=cancelled).run(plan.chunks)
    candidates = collect(plan.chunks, journal, endpoint.model, prompts, request.options)
    review(candidates, min_grounding=request.min_grounding)
    return SynthOutcome(output, plan.chunks, candidates, state, endpoint.model, request.min_grounding,
                        skipped=plan.skipped, documents=len(plan.documents), per_document=plan.per_document(),
                        journal=journal.path, elapsed_s=time.perf_counter() - began)


def synthesize(ws, request: SynthRequest, *, force: bool = False,
               started: Callable[[SynthStart], None] | None = None,
               progress: Callable[[SynthProgress], None] | None = None,
               cancelled: Callable[[], bool] | None = None) -> SynthReport:
    """`devtune data synth`: an existing OUT is refused before anything is asked (unless `force`), then the
    pairs are generated and written."""
    output = Path(request.output)
    if output.exists() and not force:
        raise FileExistsRefused(output)
    outcome = generate_pairs(ws, request, started=started, progress=progress, cancelled=cancelled)
    return outcome.write(force=force)
