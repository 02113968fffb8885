"""From the journal to the files: the candidate pairs, the person's review, the dataset and its sidecars.

`collect` turns what the journal holds for a list of chunks into `Candidate`s (a questions reply that did not
parse is one candidate with that reason, so every failure is counted); `review` runs the filters; a person may
then accept, reject or edit a candidate (the wizard does); `write_dataset` writes, each atomically:

    data/NAME.jsonl              alpaca rows {"instruction", "input", "output"}: the kept pairs
    data/NAME.rejects.jsonl      the others, each with its reason, grounding score and source
    data/NAME.provenance.jsonl   one line per row of NAME.jsonl, same order: file, chunk, heading, page,
                                 character span, grounding, model, whether a person edited or accepted it
"""

from __future__ import annotations

import json
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

from core.data.fix import default_rejects_path
from core.data.synth.chunks import Chunk
from core.data.synth.decisions import pair_key
from core.data.synth.filters import DEFAULT_GROUNDING, Pair, apply_filters
from core.data.synth.generate import SynthOptions, answered, parse_answer, questions_problem
from core.data.synth.journal import Journal
from core.data.synth.prompts import Prompts
from core.files.atomic import write_atomic, write_new

ACCEPTED, REJECTED = "accepted", "rejected"  # a reviewer's decisions


def provenance_path(output: Path) -> Path:
    name = output.name
    stem = name[: -len(".jsonl")] if name.endswith(".jsonl") else output.stem
    return output.with_name(f"{stem}.provenance.jsonl")


@dataclass
class Candidate:
    pair: Pair
    chunk: Chunk
    model: str
    decision: str = ""  # "" (the filters decide), accepted or rejected by a reviewer
    edited: bool = False
    key: str = ""  # the pair as generated (core.data.synth.decisions.pair_key): an edit keeps it

    def __post_init__(self) -> None:
        if not self.key:
            self.key = pair_key(self.chunk.id, self.pair.question, self.pair.answer)

    @property
    def kept(self) -> bool:
        return self.decision == ACCEPTED or (not self.decision and not self.pair.reason)

    @property
    def reason(self) -> str:
        """Why it is not kept ('' when kept)."""
        if self.kept:
            return ""
        return "reviewer" if self.decision == REJECTED else self.pair.reason

    def edit(self, question: str, answer: str) -> None:
        """A reviewer's own wording: kept as written (the reviewer vouches for it)."""
        self.pair.question, self.pair.answer = question.strip(), answer.strip()
        self.edited = True
        self.decision = ACCEPTED


def collect(chunks: list[Chunk], journal: Journal, model: str, prompts: Prompts, options: SynthOptions
            ) -> list[Candidate]:
    """Every pair the journal holds for `chunks`, in chunk order (chunks not yet asked contribute nothing)."""
    out: list[Candidate] = []
    for chunk in chunks:
        q_entry, answers = answered(journal, model, prompts, chunk, options)
        if q_entry is None:
            continue
        problem = questions_problem(q_entry)
        if problem:
            out.append(Candidate(Pair("", "", chunk.text, problem=problem, detail=q_entry.get("error", "")),
                                 chunk, model))
            continue
        for entry in answers:
            answer, problem = parse_answer(entry)
            if entry.get("error"):
                problem = "error"
            out.append(Candidate(Pair(entry.get("question", ""), answer, chunk.text, problem=problem,
                                      detail=entry.get("error", "")), chunk, model))
    seen: Counter = Counter()
    for c in out:  # the same pair twice (a model repeating itself): each keeps a review decision of its own
        seen[c.key] += 1
        if seen[c.key] > 1:
            c.key = f"{c.key}#{seen[c.key]}"
    return out


def review(candidates: list[Candidate], *, min_grounding: float = DEFAULT_GROUNDING) -> Counter:
    """Run the filters over the candidates; the count per reason."""
    return apply_filters([c.pair for c in candidates], min_grounding=min_grounding)


def rejected_counts(candidates: list[Candidate]) -> dict[str, int]:
    return dict(sorted(Counter(c.reason for c in candidates if not c.kept).items()))


@dataclass
class DatasetFiles:
    output: Path
    rejects: Path
    provenance: Path
    rows: int
    rejected: dict[str, int] = field(default_factory=dict)
    written: bool = True  # False: no row, OUT not written (empty=False)


def _source(c: Candidate) -> dict:
    return {"file": c.chunk.doc, "chunk": c.chunk.index, "chunk_id": c.chunk.id, "heading": c.chunk.heading,
            "page": c.chunk.page, "start": c.chunk.start, "end": c.chunk.end}


def write_dataset(output: Path, candidates: list[Candidate], *, force: bool = False,
                  min_grounding: float = DEFAULT_GROUNDING, empty: bool = True) -> DatasetFiles:
    """Write the kept pairs, the rejects and the provenance (atomically; OUT is replaced only with `force`).
    With `empty=False` and no pair kept, OUT is left alone (not created, not replaced): only the rejects are
    written, so the next run needs no --force."""
    rows, provenance, rejects = [], [], []
    for c in candidates:
        if c.kept:
            rows.append(json.dumps({"instruction": c.pair.question, "input": "", "output": c.pair.answer},
                                   ensure_ascii=False))
            provenance.append(json.dumps({"line": len(rows), **_source(c), "grounding": c.pair.grounding,
                                          "min_grounding": min_grounding, "model": c.model, "edited": c.edited,
                                          "reviewed": c.decision or None}, ensure_ascii=False))
        else:
            rejects.append(json.dumps({"reason": c.reason, "detail": c.pair.detail, "instruction": c.pair.question,
                                       "output": c.pair.answer, "grounding": c.pair.grounding,
                                       "min_grounding": min_grounding, **_source(c), "model": c.model},
                                      ensure_ascii=False))
    output = Path(output)
    rej, prov = default_rejects_path(output), provenance_path(output)
    written = bool(rows) or empty
    if written:
        write_new(output, "".join(r + "\n" for r in rows), force=force)
        write_atomic(prov, "".join(r + "\n" for r in provenance))
    write_atomic(rej, "".join(r + "\n" for r in rejects))
    return DatasetFiles(output, rej, prov, len(rows), rejected_counts(candidates), written)
