"""What a generation from documents gives back, to both front-ends: `SynthOutcome` (the chunks, the candidate
pairs through the filters, the run's progress; the wizard restores a saved review onto it and the person reviews
it) and `SynthReport` (the CLI's: the outcome written as files, with `to_json`, the CLI's contract, and `lines`).

Light on imports: the wizard names these types at its first paint; what they do imports the rest when called.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from core.data.synth.filters import DEFAULT_GROUNDING
from core.i18n import _

if TYPE_CHECKING:
    from core.data.synth.generate import SynthProgress


def skipped_lines(skipped: list[tuple[str, str]]) -> list[str]:
    """What the person reads about the documents left out."""
    if not skipped:
        return []
    from core.data.wording import counted

    return [_("skipped {n} that cannot be read:", n=counted("document", len(skipped)))] + \
        [f"  {why}" for _path, why in skipped]


@dataclass
class SynthOutcome:
    """One generation: `candidates` are the pairs the journal holds for `chunks`, put through the filters."""

    output: Path
    chunks: list
    candidates: list  # core.data.synth.dataset.Candidate, in chunk order
    progress: SynthProgress
    model: str
    min_grounding: float = DEFAULT_GROUNDING
    reviews: object = None  # core.data.synth.decisions.ReviewFile, once `restore_review` ran
    restored: int = 0  # decisions found in the review file and applied
    skipped: list = field(default_factory=list)  # (path, why) of the documents left out
    documents: int = 0
    per_document: dict[str, int] = field(default_factory=dict)  # chunks per document
    journal: Path | None = None
    elapsed_s: float = 0.0

    def restore_review(self) -> int:
        """Apply the decisions saved beside the journal (a review made before quitting the wizard)."""
        from core.data.synth.decisions import ReviewFile, decisions_path

        self.reviews = ReviewFile(decisions_path(self.output))
        self.restored = self.reviews.apply(self.candidates)
        return self.restored

    def write(self, *, force: bool = False) -> SynthReport:
        """The kept pairs, the rejects and the provenance written; OUT is neither created nor replaced when no
        pair is kept (the next run then needs no --force)."""
        from core.data.synth.dataset import write_dataset

        files = write_dataset(self.output, self.candidates, force=force, min_grounding=self.min_grounding,
                              empty=False)
        return SynthReport(self.output, self.documents, len(self.chunks), files.rows, files.rejected, files.rejects,
                           files.provenance, self.journal, self.progress, self.min_grounding, self.model,
                           self.elapsed_s, self.per_document, self.skipped, files.written)


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
