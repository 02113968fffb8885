"""Exact duplicates and conflicting outputs, from compact per-row fingerprints.

The scan keeps three 64-bit integers per row (line, hash of the prompt side, hash of the output) in
`array`s, 24 bytes a row, never the rows themselves. Duplicates are found afterwards, so --jobs workers
can each fingerprint their chunk of the file and duplicates across chunks are still found, with global
line numbers. Only rows whose prompt hash repeats can be duplicates or conflicts: set operations pick
them out, and dicts then group those few rows exactly.

The hashes are xxhash's XXH3 of the UTF-8 text: the same in every process, whatever PYTHONHASHSEED.

Memory stays bounded whatever the file size: up to SPILL_ROWS rows stay in memory; past that the
fingerprints go to BUCKETS files by prompt hash (rows that can be duplicates or conflicts share a
bucket), and the duplicates are then found one bucket at a time.
"""

from __future__ import annotations

import os
import shutil
import tempfile
from array import array
from collections import Counter
from dataclasses import dataclass, field
from itertools import compress, repeat
from operator import itemgetter

from xxhash import xxh3_64_intdigest

BUCKETS = 64
SHIFT = 64 - 6  # a hash's top 6 bits name its bucket
SPILL_ROWS = 1 << 20  # rows (24 MiB) kept in memory before they go to disk
SLICE = 1 << 8  # prompt hashes looked up at a time (small: a repeat inside a slice costs a Counter)


def text_hash(text: str, seed: int = 0) -> int:
    return xxh3_64_intdigest(text.encode("utf-8", "surrogatepass"), seed)


def prompt_hash(prompt: tuple) -> int:
    """The hash of a row's prompt side: its strings chained in order (tuples marked, so that nesting
    counts). For (instruction, input) it is text_hash(input, seed=text_hash(instruction)), which is
    how the scan computes it for a column of rows."""
    h = 0
    for part in prompt:
        if isinstance(part, str):
            h = text_hash(part, h)
        else:
            h = prompt_hash(part) ^ xxh3_64_intdigest(b"(", h)
    return h


def _columns() -> tuple[array, array, array]:
    return array("q"), array("Q"), array("Q")


@dataclass
class Fingerprints:
    lines: array = field(default_factory=lambda: array("q"))
    prompts: array = field(default_factory=lambda: array("Q"))
    outputs: array = field(default_factory=lambda: array("Q"))
    delta: int = 0  # added to `lines` when the chunks are merged (--jobs chunks count lines from 1)
    spill_dir: str | None = None  # BUCKETS files of (line, prompt, output) triplets
    spilled: int = 0

    def add(self, line: int, prompt: int, output: int) -> None:
        self.lines.append(line)
        self.prompts.append(prompt)
        self.outputs.append(output)

    def extend(self, lines, prompts, outputs) -> None:
        self.lines.extend(lines)
        self.prompts.extend(prompts)
        self.outputs.extend(outputs)

    def __len__(self) -> int:
        return len(self.lines)

    @property
    def total(self) -> int:
        return len(self.lines) + self.spilled

    def shifted(self, delta: int) -> "Fingerprints":
        return Fingerprints(self.lines, self.prompts, self.outputs, self.delta + delta, self.spill_dir, self.spilled)

    def spill(self) -> None:
        """Move the rows in memory to the bucket files."""
        if not len(self.lines):
            return
        if self.spill_dir is None:
            self.spill_dir = tempfile.mkdtemp(prefix="devtune-fingerprints-")
        buckets = [array("q") for _ in range(BUCKETS)]
        for line, p, o in zip(self.lines, self.prompts, self.outputs):
            buckets[p >> SHIFT].extend((line, p - (1 << 63), o - (1 << 63)))  # as signed int64
        for b, rows in enumerate(buckets):
            if rows:
                with open(os.path.join(self.spill_dir, f"{b:02d}.bin"), "ab") as fh:
                    rows.tofile(fh)
        self.spilled += len(self.lines)
        self.lines, self.prompts, self.outputs = _columns()

    def maybe_spill(self, limit: int | None = None) -> None:
        if len(self.lines) >= (SPILL_ROWS if limit is None else limit):
            self.spill()

    def bucket_rows(self, b: int) -> tuple[list[int], list[int], list[int]]:
        """(lines, prompts, outputs) of bucket `b` (spilled rows; the caller spills first), lines shifted
        by `delta`."""
        rows = array("q")
        path = os.path.join(self.spill_dir or "", f"{b:02d}.bin")
        if self.spill_dir and os.path.exists(path):
            with open(path, "rb") as fh:
                rows.frombytes(fh.read())
        top = 1 << 63
        return ([x + self.delta for x in rows[0::3]], [x + top for x in rows[1::3]], [x + top for x in rows[2::3]])

    def discard(self) -> None:
        if self.spill_dir:
            shutil.rmtree(self.spill_dir, ignore_errors=True)
            self.spill_dir = None


@dataclass
class DuplicateReport:
    """Two columns per kind, in line order: a duplicate at `duplicate_lines[i]` copies the row at
    `duplicate_of[i]` (its first copy); a conflict at `conflict_lines[i]` has the prompt of the row at
    `conflict_with[i]` (the first row with that prompt) and another output."""

    duplicate_lines: list[int]
    duplicate_of: list[int]
    conflict_lines: list[int]
    conflict_with: list[int]

    @property
    def duplicates(self) -> list[tuple[int, int]]:  # (line, line of the first copy)
        return list(zip(self.duplicate_lines, self.duplicate_of))

    @property
    def conflicts(self) -> list[tuple[int, int]]:  # (line, line of the first row with the same prompt)
        return list(zip(self.conflict_lines, self.conflict_with))

    @classmethod
    def from_pairs(cls, duplicates, conflicts) -> "DuplicateReport":
        d, c = sorted(duplicates, key=itemgetter(0)), sorted(conflicts, key=itemgetter(0))
        return cls([a for a, _b in d], [b for _a, b in d], [a for a, _b in c], [b for _a, b in c])


def _repeated(prompt_columns) -> set[int]:
    """The prompt hashes that occur more than once, with set operations (in C) a slice at a time."""
    seen: set[int] = set()
    repeated: set[int] = set()
    for column in prompt_columns:
        for at in range(0, len(column), SLICE):
            piece = column[at:at + SLICE]
            again = seen.intersection(piece)
            repeated |= again
            before = len(seen)
            seen.update(piece)
            if len(seen) - before + len(again) < len(piece):  # a value twice in the slice itself
                repeated.update(p for p, k in Counter(piece).items() if k > 1)
    return repeated


def _group(rows) -> tuple[list, list]:
    """(duplicates, conflicts) as (line, other line) pairs of rows (line, prompt, output) in line order."""
    first_pair: dict[tuple[int, int], int] = {}
    first_prompt: dict[int, tuple[int, int]] = {}
    duplicates, conflicts = [], []
    for line, p, o in rows:
        key = (p, o)
        if key in first_pair:
            duplicates.append((line, first_pair[key]))
            continue
        first_pair[key] = line
        ref = first_prompt.get(p)
        if ref is None:
            first_prompt[p] = (line, o)
        elif ref[1] != o:
            conflicts.append((line, ref[0]))
    return duplicates, conflicts


def _find_in(columns: list[tuple]) -> tuple[list, list]:
    """Duplicates and conflicts among (lines, prompts, outputs, delta) columns held in memory."""
    repeated = _repeated([c[1] for c in columns])
    if not repeated:
        return [], []
    picked = (compress(zip(lines, prompts, outputs, repeat(delta)), map(repeated.__contains__, prompts))
              for lines, prompts, outputs, delta in columns)
    # by line only (a stable sort): two values on one line (a line of concatenated JSON) keep their order
    return _group(sorted(((line + delta, p, o) for part in picked for line, p, o, delta in part), key=itemgetter(0)))


def find_duplicates(parts: list[Fingerprints]) -> DuplicateReport:
    """Exact duplicates (same prompt and output as an earlier row) and conflicts (same prompt as the
    earliest row with that prompt, a different output, and not itself a duplicate)."""
    if sum(p.total for p in parts) < 2:
        return DuplicateReport([], [], [], [])
    if not any(p.spilled for p in parts):
        return DuplicateReport.from_pairs(*_find_in([(p.lines, p.prompts, p.outputs, p.delta) for p in parts]))
    for p in parts:  # all on disk, then one bucket at a time: same prompt → same bucket
        p.spill()
    duplicates, conflicts = [], []
    for b in range(BUCKETS):
        d, c = _find_in([(*p.bucket_rows(b), 0) for p in parts if p.total])
        duplicates += d
        conflicts += c
    return DuplicateReport.from_pairs(duplicates, conflicts)

