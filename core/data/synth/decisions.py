"""A reviewer's decisions on generated pairs (accept, reject, edit), kept beside the journal so a review survives
quitting the wizard or a dropped SSH session.

    data/.NAME.jsonl.synth-review   {"version": 1, "decisions": {KEY: {"decision", "edited", "question", "answer"}}}

A pair's KEY is a hash of its chunk's id and the question and answer as generated, so an edit does not change it,
and a pair generated again from the same journal finds its decision; decisions of pairs not in the current run
(another set of documents) are kept in the file, never dropped. The file is written atomically; `record` (on the
UI thread) takes a snapshot and `write` (in a worker) writes it unless a newer snapshot was written already.
"""

from __future__ import annotations

import json
import threading
from pathlib import Path

from xxhash import xxh3_64_hexdigest

from core.files.atomic import write_atomic

VERSION = 1


def decisions_path(output: Path) -> Path:
    """`data/faq.jsonl` → `data/.faq.jsonl.synth-review` (beside the journal)."""
    return output.with_name(f".{output.name}.synth-review")


def pair_key(chunk_id: str, question: str, answer: str) -> str:
    return xxh3_64_hexdigest("\0".join((chunk_id, question, answer)).encode("utf-8", "surrogatepass"))


class ReviewFile:
    def __init__(self, path: Path) -> None:
        self.path = Path(path)
        self.entries: dict[str, dict] = {}
        self.unreadable = ""  # why the file on disk could not be read ("" when it could, or there is none)
        self._lock = threading.Lock()
        self._seq = 0
        self._written = 0
        if self.path.exists():
            try:
                data = json.loads(self.path.read_text(encoding="utf-8"))
                self.entries = {str(k): dict(v) for k, v in data["decisions"].items()}
            except (OSError, ValueError, KeyError, TypeError, AttributeError) as exc:
                self.unreadable = f"{type(exc).__name__}: {exc}"

    def apply(self, candidates) -> int:
        """Give each candidate its saved decision (and its edit); how many had one."""
        applied = 0
        for c in candidates:
            entry = self.entries.get(c.key)
            if not entry:
                continue
            if entry.get("edited"):
                c.edit(str(entry.get("question", c.pair.question)), str(entry.get("answer", c.pair.answer)))
            c.decision = str(entry.get("decision", c.decision))
            applied += 1
        return applied

    def record(self, candidates) -> tuple[int, str]:
        """The candidates' decisions into the entries; (sequence, text) for `write`."""
        for c in candidates:
            if c.decision or c.edited:
                entry = {"decision": c.decision, "edited": c.edited}
                if c.edited:
                    entry.update(question=c.pair.question, answer=c.pair.answer)
                self.entries[c.key] = entry
            else:
                self.entries.pop(c.key, None)
        with self._lock:
            self._seq += 1
            seq = self._seq
        text = json.dumps({"version": VERSION, "decisions": self.entries}, ensure_ascii=False, indent=1) + "\n"
        return seq, text

    def write(self, seq: int, text: str) -> bool:
        """Write a snapshot from `record`, atomically; False when a newer one was written already."""
        with self._lock:
            if seq <= self._written:
                return False
            write_atomic(self.path, text)
            self._written = seq
            return True

    def save(self, candidates) -> None:
        self.write(*self.record(candidates))
