"""Near duplicates (opt-in, `lint --near-dups`): streaming MinHash over character 5-grams, LSH bands,
each candidate verified on its signature (estimated Jaccard ≥ 0.8, table A4 rule 19).

Rows are read once in file order; each row is compared with the rows before it, then added. Memory
grows with the rows (~1 KB each: a 64-value signature and 8 band keys), which is why it is opt-in.
Exact duplicates are skipped (lint reports them already). numpy does the hashing arithmetic.
"""

from __future__ import annotations

import re
from typing import Callable, Iterable

from core.data.reader import FileProbe, ReadNotes, iter_records
from core.data.schema import Schema, check_row

NUM_PERM = 64
BANDS, ROWS_PER_BAND = 8, 8  # LSH threshold ≈ (1/8)^(1/8) ≈ 0.77
THRESHOLD = 0.8
SHINGLE = 5
_MERSENNE = (1 << 61) - 1
_WS = re.compile(r"\s+")


class MinHasher:
    def __init__(self, num_perm: int = NUM_PERM, seed: int = 1) -> None:
        import numpy as np

        self.np = np
        rng = np.random.RandomState(seed)
        self.a = rng.randint(1, _MERSENNE, size=num_perm, dtype=np.uint64)
        self.b = rng.randint(0, _MERSENNE, size=num_perm, dtype=np.uint64)

    def signature(self, text: str):
        np = self.np
        text = _WS.sub(" ", text.lower()).strip()
        if len(text) < SHINGLE:
            grams = {text}
        else:
            grams = {text[i:i + SHINGLE] for i in range(len(text) - SHINGLE + 1)}
        hv = np.fromiter((hash(g) & 0xFFFFFFFF for g in grams), dtype=np.uint64, count=len(grams))
        # (a*x + b) mod p on 61-bit values, done in uint64 with wrap-around, then 32 bits kept
        phv = (self.a[:, None] * hv[None, :] + self.b[:, None]) % np.uint64(_MERSENNE)
        return (phv.min(axis=1) & np.uint64(0xFFFFFFFF)).astype(np.uint32)


def find_near_duplicates(probe: FileProbe, schema: Schema, *, skip_lines: Iterable[int] = (),
                         progress: Callable | None = None) -> list[tuple[int, int, float]]:
    """(line, earlier similar line, estimated Jaccard) for each near duplicate, in file order."""
    import orjson

    from core.data.json_repair import diagnose

    hasher = MinHasher()
    np = hasher.np
    skip = set(skip_lines)
    tables: list[dict[bytes, int]] = [{} for _ in range(BANDS)]
    signatures: list = []
    lines: list[int] = []
    found: list[tuple[int, int, float]] = []
    for n, rec in enumerate(iter_records(probe, ReadNotes())):
        if progress and n % 2000 == 0:
            from core.data.lint import LintProgress

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
            sig = hasher.signature(text)
            raw = sig.tobytes()
            keys = [raw[i * ROWS_PER_BAND * 4:(i + 1) * ROWS_PER_BAND * 4] for i in range(BANDS)]
            candidates = {tables[i][k] for i, k in enumerate(keys) if k in tables[i]}
            best = None
            for c in candidates:
                j = float(np.count_nonzero(signatures[c] == sig)) / NUM_PERM
                if j >= THRESHOLD and (best is None or j > best[1]):
                    best = (c, j)
            if best is not None:
                found.append((rec.line, lines[best[0]], best[1]))
            index = len(signatures)
            signatures.append(sig)
            lines.append(rec.line)
            for i, k in enumerate(keys):
                tables[i].setdefault(k, index)
    return found
