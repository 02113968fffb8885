"""Exact duplicates and conflicting outputs from compact per-row fingerprints.

The scan keeps three 64-bit integers per row (line, hash of the prompt side, hash of the output) in
`array('q')`s, 24 bytes a row, never the rows themselves. Duplicates are found afterwards (in C,
`_dups.c`, when the extension is built; else by sorting with numpy, or with dicts), so --jobs workers
can each fingerprint their part of the file and duplicates across parts are still found, with global
line numbers. Only rows whose prompt hash repeats can be duplicates or conflicts: one sort picks them
out, and the exact grouping then works on those few rows.

Hashes are Python's `hash()` of the strings, which differs between interpreters unless they share the
hash seed: the scan runs its workers with `fork` (same seed) or with PYTHONHASHSEED fixed (`spawn`).

Memory stays bounded whatever the file size: up to SPILL_ROWS rows (24 MiB) stay in memory; a part with
more spills its fingerprints to BUCKETS files by prompt hash (rows that can be duplicates or conflicts
share a bucket), and the duplicates are then found one bucket at a time.
"""

from __future__ import annotations

import os
import shutil
import tempfile
from array import array
from dataclasses import dataclass, field

from core.data import native

BUCKETS = 64
SPILL_ROWS = 1 << 20  # rows (24 MiB) kept in memory by one part before they go to disk
SPILL_AT_END = 1 << 20  # --jobs workers together hand over this many rows in memory, more on disk


@dataclass
class Fingerprints:
    lines: array = field(default_factory=lambda: array("q"))
    prompts: array = field(default_factory=lambda: array("q"))
    outputs: array = field(default_factory=lambda: array("q"))

    def add(self, line: int, prompt_hash: int, output_hash: int) -> None:
        self.lines.append(line)
        self.prompts.append(prompt_hash)
        self.outputs.append(output_hash)

    def __len__(self) -> int:
        return len(self.lines)

    delta: int = 0  # added to `lines` when the parts are merged (--jobs parts count lines from 1)
    spill_dir: str | None = None  # BUCKETS files of (line, prompt, output) int64 triplets
    spilled: int = 0

    def shifted(self, delta: int) -> "Fingerprints":
        return Fingerprints(self.lines, self.prompts, self.outputs, self.delta + delta, self.spill_dir, self.spilled)

    @property
    def total(self) -> int:
        return len(self.lines) + self.spilled

    def spill(self) -> None:
        """Move the rows in memory to the bucket files (numpy needed; without it rows stay in memory)."""
        if not len(self.lines):
            return
        try:
            import numpy as np
        except ImportError:
            return
        if self.spill_dir is None:
            self.spill_dir = tempfile.mkdtemp(prefix="devtune-fingerprints-")
        rows = np.empty((len(self.lines), 3), dtype=np.int64)
        rows[:, 0] = np.frombuffer(self.lines, dtype=np.int64)
        rows[:, 1] = np.frombuffer(self.prompts, dtype=np.int64)
        rows[:, 2] = np.frombuffer(self.outputs, dtype=np.int64)
        bucket = (rows[:, 1] & (BUCKETS - 1)).astype(np.uint8)
        order = np.argsort(bucket, kind="stable")  # a radix sort for uint8
        rows, bucket = rows[order], bucket[order]
        bounds = np.searchsorted(bucket, np.arange(BUCKETS + 1))
        for b in range(BUCKETS):
            lo, hi = bounds[b], bounds[b + 1]
            if hi > lo:
                with open(os.path.join(self.spill_dir, f"{b:02d}.bin"), "ab") as fh:
                    rows[lo:hi].tofile(fh)
        self.spilled += len(self.lines)
        self.lines, self.prompts, self.outputs = array("q"), array("q"), array("q")

    def maybe_spill(self, limit: int = SPILL_ROWS) -> None:
        if len(self.lines) >= limit:
            self.spill()

    def bucket_rows(self, b: int):
        """(lines, prompts, outputs) numpy arrays of bucket `b`, lines shifted by `delta`."""
        import numpy as np

        parts = []
        if self.spill_dir:
            path = os.path.join(self.spill_dir, f"{b:02d}.bin")
            if os.path.exists(path):
                parts.append(np.fromfile(path, dtype=np.int64).reshape(-1, 3))
        if len(self.lines):
            mem = np.empty((len(self.lines), 3), dtype=np.int64)
            mem[:, 0] = np.frombuffer(self.lines, dtype=np.int64)
            mem[:, 1] = np.frombuffer(self.prompts, dtype=np.int64)
            mem[:, 2] = np.frombuffer(self.outputs, dtype=np.int64)
            parts.append(mem[(mem[:, 1] & (BUCKETS - 1)) == b])
        rows = np.concatenate(parts) if parts else np.empty((0, 3), dtype=np.int64)
        return rows[:, 0] + self.delta, rows[:, 1].copy(), rows[:, 2].copy()

    def take_columns(self) -> list[array]:
        """The three in-memory columns, taken out of this object: a --jobs worker sends them through its
        pipe as raw bytes (pickling an array copies it twice more on each side)."""
        cols = [self.lines, self.prompts, self.outputs]
        self.lines, self.prompts, self.outputs = array("q"), array("q"), array("q")
        return cols

    def put_columns(self, cols: list[array]) -> None:
        self.lines, self.prompts, self.outputs = cols

    def discard(self) -> None:
        if self.spill_dir:
            shutil.rmtree(self.spill_dir, ignore_errors=True)


@dataclass
class DuplicateReport:
    """Two columns per kind, in line order: a duplicate at `duplicate_lines[i]` copies the row at
    `duplicate_of[i]` (its first copy); a conflict at `conflict_lines[i]` has the prompt of the row at
    `conflict_with[i]` (the first row with that prompt) and another output. Plain lists of ints, not
    pairs: tens of thousands of tuples would be that many more objects for the garbage collector."""

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
        d, c = sorted(duplicates), sorted(conflicts)
        return cls([a for a, _b in d], [b for _a, b in d], [a for a, _b in c], [b for _a, b in c])


def _in_line_order(lines, others) -> tuple[list[int], list[int]]:
    """Two numpy columns as lists sorted by the first (a line is a duplicate or a conflict once)."""
    import numpy as np

    order = np.argsort(lines, kind="stable")
    return lines[order].tolist(), others[order].tolist()


def find_duplicates(parts: list[Fingerprints]) -> DuplicateReport:
    """Exact duplicates (same prompt and output as an earlier row) and conflicts (same prompt as the
    earliest row with that prompt, a different output, and not itself a duplicate). In C (`_dups.c`)
    when the fingerprints are all in memory, else numpy (bucket by bucket from disk), else dicts."""
    total = sum(p.total for p in parts)
    if total < 2:
        return DuplicateReport([], [], [], [])
    c = _c_module()
    if c is not None and not any(p.spilled for p in parts):
        found = c.duplicates([(p.lines, p.prompts, p.outputs, p.delta) for p in parts if len(p)])
        return DuplicateReport(*(memoryview(b).cast("q").tolist() for b in found))
    try:
        import numpy as np
    except ImportError:
        return _find_with_dicts(parts)
    if not any(p.spilled for p in parts):
        return _report(*_find_with_numpy(parts))
    for p in parts:  # all on disk, so that each bucket is read, never carved out of the rows in memory
        p.spill()
    found = []
    for b in range(BUCKETS):  # one bucket at a time: same prompt → same bucket
        cols = [p.bucket_rows(b) for p in parts if p.total]
        lines, prompts, outputs = (np.concatenate([c[i] for c in cols]) for i in range(3))
        if len(lines) > 1:
            found.append(_find_arrays(lines, prompts, outputs))
    if not found:
        return DuplicateReport([], [], [], [])
    return _report(*(np.concatenate([f[i] for f in found]) for i in range(4)))


USE_C = True  # tests turn the C finder off to compare it with the numpy and dict ones


def _c_module():
    return native.fastcols if USE_C else None


def _report(dup_lines, dup_of, conflict_lines, conflict_with) -> DuplicateReport:
    return DuplicateReport(*_in_line_order(dup_lines, dup_of), *_in_line_order(conflict_lines, conflict_with))


def _find_with_numpy(parts: list[Fingerprints]):
    """The parts in memory: only the prompt column is put together; lines and outputs are read for the
    candidate rows only (a --jobs run holds several parts at once)."""
    import numpy as np

    cols = [(np.frombuffer(p.lines, dtype=np.int64), np.frombuffer(p.prompts, dtype=np.int64),
             np.frombuffer(p.outputs, dtype=np.int64), p.delta) for p in parts if len(p)]
    prompts = cols[0][1] if len(cols) == 1 else np.concatenate([c[1] for c in cols])
    keep = _candidates(prompts)
    lines = np.empty(len(keep), dtype=np.int64)
    outputs = np.empty(len(keep), dtype=np.int64)
    start = 0
    for part_lines, _prompts, part_outputs, delta in cols:
        lo, hi = np.searchsorted(keep, [start, start + len(part_lines)])
        at = keep[lo:hi] - start
        lines[lo:hi] = part_lines[at] + delta
        outputs[lo:hi] = part_outputs[at]
        start += len(part_lines)
    return _find_in_groups(lines, prompts[keep], outputs)


def _find_arrays(lines, prompts, outputs):
    """Duplicates and conflicts from the three columns (numpy int64 arrays), as _find_in_groups."""
    keep = _candidates(prompts)
    return _find_in_groups(lines[keep], prompts[keep], outputs[keep])


def _candidates(prompts):
    """Sorted indices of the rows that can be duplicates or conflicts: those whose prompt hash may occur
    twice or more. One plain sort of (high bits of the hash | row index) finds them: rows whose high bits
    equal a neighbour's (a few more than the repeated prompts; _find_in_groups is exact)."""
    import numpy as np

    n = len(prompts)
    if n < 2:
        return np.empty(0, dtype=np.int64)
    bits = max(1, (n - 1).bit_length())
    low = np.uint64((1 << bits) - 1)
    keys = prompts.view(np.uint64) & ~low
    keys |= np.arange(n, dtype=np.uint64)
    keys.sort()
    high = keys & ~low
    same = high[1:] == high[:-1]
    del high
    pick = np.zeros(n, dtype=bool)
    pick[1:] = same
    pick[:-1] |= same
    keep = (keys[pick] & low).astype(np.int64)
    keep.sort()
    return keep


def _find_in_groups(lines, prompts, outputs):
    """(duplicate lines, their first copies, conflict lines, their first rows with the same prompt): four
    numpy int64 arrays, in no particular order."""
    import numpy as np

    by_line = np.argsort(lines, kind="stable")  # parts and exact-path rows interleave: put them in file order
    lines, prompts, outputs = lines[by_line], prompts[by_line], outputs[by_line]
    del by_line
    n = len(lines)
    idx = np.arange(n)
    with np.errstate(over="ignore"):
        pairs = prompts * np.int64(1000003) ^ outputs  # one key for (prompt, output)

    # exact duplicates: a stable sort by the pair key keeps file order inside each group
    order = np.argsort(pairs, kind="stable")
    k_s = pairs[order]
    same = np.zeros(n, dtype=bool)
    same[1:] = k_s[1:] == k_s[:-1]
    del k_s, pairs
    run_start = np.maximum.accumulate(np.where(same, 0, idx))
    dup_pos = np.flatnonzero(same)
    duplicates = lines[order[dup_pos]], lines[order[run_start[dup_pos]]]
    is_dup = np.zeros(n, dtype=bool)
    is_dup[order[dup_pos]] = True
    del order, run_start, dup_pos, same

    # conflicts: group by prompt (stable: file order inside); the group's first row is the reference;
    # a row whose output differs from it, and that is not itself a copy of an earlier row, conflicts
    order = np.argsort(prompts, kind="stable")
    p_s = prompts[order]
    starts = np.ones(n, dtype=bool)
    starts[1:] = p_s[1:] != p_s[:-1]
    del p_s
    ref = order[np.maximum.accumulate(np.where(starts, idx, 0))]
    conflict_sorted = (outputs[order] != outputs[ref]) & ~is_dup[order]
    pos = np.flatnonzero(conflict_sorted)
    return (*duplicates, lines[order[pos]], lines[ref[pos]])


def _find_with_dicts(parts: list[Fingerprints]) -> DuplicateReport:
    rows = sorted((line + part.delta, p, o) for part in parts
                  for line, p, o in zip(part.lines, part.prompts, part.outputs))  # never spilled: no numpy
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
    return DuplicateReport.from_pairs(duplicates, conflicts)
