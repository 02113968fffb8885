"""`devtune data synth` as one call: documents → chunks → generation (journaled) → filters → files.

`plan_chunks` reads and chunks the documents (the wizard previews its result): a document found in a folder that
cannot be read (a scan, a damaged file) is skipped with its reason, one named directly stops the run, and so does
a set of sources of which nothing can be read; `resolve_endpoint` finds the
server (`--server ID`, devtune's own, or `--api-base URL --model NAME` with the key from an environment
variable) and checks that it answers before anything is sent; `synthesize` runs the rest and returns a
`SynthReport`, whose `to_json` is the CLI's contract.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from core.data.synth.chunks import DEFAULT_BUDGET, DEFAULT_OVERLAP, Chunk, chunk_document
from core.data.synth.dataset import collect, review, write_dataset
from core.data.synth.documents import Document, DocumentError, read_document, walk_documents
from core.data.synth.filters import DEFAULT_GROUNDING
from core.data.synth.generate import Generator, SynthError, SynthOptions, SynthProgress
from core.data.synth.journal import Journal, journal_path
from core.data.synth.prompts import Prompts
from core.files.atomic import FileExistsRefused
from core.i18n import _
from core.serve.chat import Endpoint

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
    chunks = [c for d in docs for c in chunk_document(d, budget=budget, overlap=overlap)]
    return ChunkPlan(docs, chunks, skipped)


def skipped_lines(skipped: list[tuple[str, str]]) -> list[str]:
    """What the person reads about the documents left out."""
    if not skipped:
        return []
    from core.data.wording import counted

    return [_("skipped {n} that cannot be read:", n=counted("document", len(skipped)))] + \
        [f"  {why}" for _path, why in skipped]


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
class SynthReport:
    output: Path
    documents: int
    chunks: int
    rows: int
    rejected: dict[str, int]
    rejects: Path
    provenance: Path
    journal: Path
    progress: SynthProgress
    min_grounding: float
    model: str
    elapsed_s: float
    per_document: dict[str, int] = field(default_factory=dict)
    skipped: list[tuple[str, str]] = field(default_factory=list)
    written: bool = True  # False: no pair passed, OUT was not written (nor replaced)

    def to_json(self) -> dict:
        p = self.progress
        return {"output": str(self.output), "rows": self.rows, "chunks": self.chunks,
                "chunks_done": p.chunks_done, "documents": self.documents, "rejected": self.rejected,
                "rejects": str(self.rejects), "provenance": str(self.provenance), "journal": str(self.journal),
                "model": self.model, "min_grounding": self.min_grounding, "requests": p.requests,
                "from_journal": p.from_journal, "retries": p.retries, "errors": p.errors,
                "tokens": {"prompt": p.prompt_tokens, "completion": p.completion_tokens},
                "tokens_per_s": round(p.tokens_per_s, 2), "stopped": p.stopped or None,
                "skipped": [{"file": f, "reason": why} for f, why in self.skipped], "written": self.written,
                "elapsed_s": round(self.elapsed_s, 2)}

    def lines(self) -> list[str]:
        from core.data.wording import counted

        p = self.progress
        if self.written:
            out = [_("{pairs} written to {output} from {chunks} of {docs} ({done} answered)",
                     pairs=counted("pair", self.rows), output=self.output, chunks=counted("chunk", self.chunks),
                     docs=counted("document", self.documents), done=p.chunks_done)]
        else:
            out = [_("no pair passed the filters: {output} was not written (the rejects say why; the journal keeps "
                     "every reply, so a run with other settings asks nothing again)", output=self.output)]
        out += skipped_lines(self.skipped)
        if self.rejected:
            out.append(_("  rejected: {reasons} → {rejects}", rejects=self.rejects,
                         reasons=", ".join(f"{k} {v}" for k, v in self.rejected.items())))
        out.append(_("  grounding threshold {t:.2f} · provenance {prov}", t=self.min_grounding, prov=self.provenance))
        out.append(_("  {requests} sent, {cached} answered from the journal, {retries} · tokens {prompt} + "
                     "{completion} · {rate:.1f} tokens/s", requests=counted("request", p.requests),
                     cached=p.from_journal, retries=counted("retry", p.retries), prompt=p.prompt_tokens,
                     completion=p.completion_tokens, rate=p.tokens_per_s))
        if p.stopped in ("max-requests", "max-tokens"):
            out.append(_("  stopped at the cap ({cap}): {left} not asked yet; run again with a higher cap "
                         "and --force to carry on", cap=p.stopped, left=counted("chunk", self.chunks - p.chunks_done)))
        return out


def synthesize(plan: ChunkPlan, output: Path, endpoint: Endpoint, prompts: Prompts, options: SynthOptions, *,
               min_grounding: float = DEFAULT_GROUNDING, force: bool = False,
               progress: Callable[[SynthProgress], None] | None = None,
               cancelled: Callable[[], bool] | None = None) -> SynthReport:
    output = Path(output)
    if output.exists() and not force:
        raise FileExistsRefused(output)
    if not plan.chunks:
        raise SynthError(_("the documents hold no text to ask about"))
    began = time.perf_counter()
    journal = Journal(journal_path(output))
    state = Generator(endpoint, prompts, journal, options, progress=progress, cancelled=cancelled).run(plan.chunks)
    candidates = collect(plan.chunks, journal, endpoint.model, prompts, options)
    review(candidates, min_grounding=min_grounding)
    files = write_dataset(output, candidates, force=force, min_grounding=min_grounding, empty=False)
    return SynthReport(output, len(plan.documents), len(plan.chunks), files.rows, files.rejected, files.rejects,
                       files.provenance, journal.path, state, min_grounding, endpoint.model,
                       time.perf_counter() - began, plan.per_document(), plan.skipped, files.written)
