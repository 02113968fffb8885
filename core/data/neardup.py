"""Near duplicates (opt-in, `lint --near-dups`): datasketch's MinHash over character 5-grams and its LSH
index (threshold 0.8), each candidate verified on its signature (estimated Jaccard ≥ 0.8, table A4
rule 19).

Rows are read once in file order; each row is compared with the rows before it, then added. Memory
grows with the rows (a 64-value signature each, and the LSH bands), which is why it is opt-in. Exact
duplicates are skipped (lint reports them already). The 5-grams are hashed with xxhash, so the result
is the same in every process and every run.

`near_duplicate_matches` yields every earlier row each row is similar to (the held-out split,
core.data.holdout_files, keeps all of them on one side); the lint's `find_near_duplicates` reports the
most similar one.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Callable, Iterable, Iterator

from xxhash import xxh32_intdigest

from core.data.lint_progress import LintProgress
from core.data.reader import FileProbe, ReadNotes, iter_records
from core.data.row_rules import check_row
from core.data.schema import Schema

NUM_PERM = 64
THRESHOLD = 0.8
SHINGLE = 5
_WS = re.compile(r"\s+")


def shingles(text: str) -> list[bytes]:
    text = _WS.sub(" ", text.lower()).strip()
    grams = {text} if len(text) < SHINGLE else {text[i:i + SHINGLE] for i in range(len(text) - SHINGLE + 1)}
    return [g.encode("utf-8", "surrogatepass") for g in grams]


@dataclass(frozen=True, slots=True)
class NearMatch:
    """A row (its record's number in file order, and its line) and the earlier rows it is similar to, as
    (record number, line, estimated Jaccard), in the order the rows were read."""

    record: int
    line: int
    similar: tuple[tuple[int, int, float], ...]


def near_duplicate_matches(probe: FileProbe, schema: Schema, *, skip_lines: Iterable[int] = (),
                           progress: Callable[[LintProgress], None] | None = None) -> Iterator[NearMatch]:
    """For each row with at least one near duplicate before it: every such earlier row."""
    import orjson
    from datasketch import MinHash, MinHashLSH

    from core.data.json_repair import diagnose

    skip = set(skip_lines)
    # the seed's permutations made once, not per row (a tenth of a millisecond each; the values are the same)
    template = MinHash(num_perm=NUM_PERM, seed=1, hashfunc=xxh32_intdigest)
    lsh = MinHashLSH(threshold=THRESHOLD, num_perm=NUM_PERM)
    signatures: list[MinHash] = []
    rows: list[tuple[int, int]] = []  # (record number, line) of each signature
    for n, rec in enumerate(iter_records(probe, ReadNotes())):
        if progress and n % 2000 == 0:
            progress(LintProgress("near-duplicates", n, 0))
        if rec.line in skip:
            continue
        try:
            values = [orjson.loads(rec.raw)]
        except orjson.JSONDecodeError:
            values = diagnose(rec.raw, rec.line).values
        for value in values:
            view = check_row(value, rec.line, schema, [])
            if view is None:
                continue
            text = "\n".join(str(x) for x in view.prompt if isinstance(x, str)) + "\n" + view.output
            sig = MinHash(num_perm=NUM_PERM, seed=1, hashfunc=xxh32_intdigest, permutations=template.permutations,
                          scheme=template.scheme)
            sig.update_batch(shingles(text))
            similar = []
            for c in sorted(lsh.query(sig)):
                j = sig.jaccard(signatures[c])
                if j >= THRESHOLD:
                    similar.append((*rows[c], j))
            if similar:
                yield NearMatch(n, rec.line, tuple(similar))
            lsh.insert(len(signatures), sig, check_duplication=False)
            signatures.append(sig)
            rows.append((n, rec.line))


def find_near_duplicates(probe: FileProbe, schema: Schema, *, skip_lines: Iterable[int] = (),
                         progress: Callable[[LintProgress], None] | None = None) -> list[tuple[int, int, float]]:
    """(line, earlier similar line, estimated Jaccard) for each near duplicate, in file order: the most
    similar earlier row (the first of equals)."""
    found: list[tuple[int, int, float]] = []
    for match in near_duplicate_matches(probe, schema, skip_lines=skip_lines, progress=progress):
        best = match.similar[0]
        for candidate in match.similar[1:]:
            if candidate[2] > best[2]:
                best = candidate
        found.append((match.line, best[1], best[2]))
    return found
