"""The journal of a `data synth` run: one JSON line per request answered, so a resumed run sends none twice.

Each line is written and flushed as soon as its reply arrives; Ctrl-C, a dropped SSH session or a server
restart loses at most the requests in flight. A line torn by a crash is skipped when the journal is read
again (its request is simply sent again). The key of an entry is a hash of everything that decides the reply
(the rendered prompt, the model, the sampling settings), so an edited prompt or another model is a new key.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import IO


def journal_path(output: Path) -> Path:
    """`data/faq.jsonl` → `data/.faq.jsonl.synth-journal` (beside the output, hidden from the file list)."""
    return output.with_name(f".{output.name}.synth-journal")


class Journal:
    def __init__(self, path: Path) -> None:
        self.path = path
        self.entries: dict[str, dict] = {}
        self.torn = 0
        if path.exists():
            with open(path, "rb") as fh:
                for raw in fh:
                    try:
                        entry = json.loads(raw)
                        self.entries[entry["key"]] = entry
                    except (ValueError, KeyError, TypeError):
                        self.torn += 1
        self._fh: IO[str] | None = None

    def get(self, key: str) -> dict | None:
        return self.entries.get(key)

    def __len__(self) -> int:
        return len(self.entries)

    def put(self, entry: dict) -> None:
        if self._fh is None:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            self._fh = open(self.path, "a", encoding="utf-8")
            if self._fh.tell() and self.torn:  # a torn last line: start ours on a line of its own
                self._fh.write("\n")
        self._fh.write(json.dumps(entry, ensure_ascii=False) + "\n")
        self._fh.flush()
        self.entries[entry["key"]] = entry

    def __enter__(self) -> Journal:
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def close(self) -> None:
        """Flushed lines made durable (fsync) and the file closed; a later `put` opens it again."""
        if self._fh is not None:
            try:
                os.fsync(self._fh.fileno())
            finally:
                self._fh.close()
                self._fh = None
