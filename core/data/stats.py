"""Dataset statistics in bounded memory: length and token histograms (exact below 8192, 3 significant
digits above), percentiles, the share above `cutoff_len`, duplicates and the language mix.

Token counts are estimated from characters unless a tokenizer is given: ASCII text ~4 characters per
token, CJK ~1 token per character (conservative for llama3/qwen vocabularies), plus a template overhead.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field

EXACT_CAP = 8192
TEMPLATE_OVERHEAD = 8  # special tokens and role headers a chat template adds to one turn
PERCENTILES = (50, 90, 95, 99)
CUTOFFS = (512, 1024, 2048, 4096, 8192)


def estimate_tokens(chars: int, cjk: int) -> int:
    """~tokens of a row with `chars` characters of which `cjk` are CJK (or other multi-byte) characters."""
    ascii_chars = max(0, chars - cjk)
    return (ascii_chars + 3) // 4 + cjk + TEMPLATE_OVERHEAD


def cjk_chars(text: str) -> int:
    """Characters beyond ASCII, counted from the UTF-8 length (a 3-byte character counts 1)."""
    if text.isascii():
        return 0
    return (len(text.encode("utf-8", "surrogatepass")) - len(text)) >> 1


def _bucket(value: int) -> int:
    """Values ≥ EXACT_CAP rounded down to 3 significant digits."""
    if value < EXACT_CAP:
        return value
    scale = 10 ** max(0, len(str(value)) - 3)
    return value // scale * scale


class Histogram:
    """Counts of values (`collections.Counter`): exact below EXACT_CAP, 3 significant digits above (the
    exact maximum is kept), so its size stays bounded whatever the number of rows."""

    __slots__ = ("counts", "top", "count", "total", "max")
    COMPACT_AT = 1 << 15  # distinct values held before the large ones are rounded

    def __init__(self) -> None:
        self.counts: Counter[int] = Counter()
        self.top = 0  # the largest value rounded away by _compact
        self.count = self.total = self.max = 0

    def add(self, value: int) -> None:
        self.counts[value] += 1

    def update(self, values) -> None:
        self.counts.update(values)
        if len(self.counts) > self.COMPACT_AT:
            self._compact()

    def merge(self, other: "Histogram") -> None:
        """Add another part's counts (a --jobs lint merges one histogram per chunk)."""
        self.counts.update(other.counts)
        self.top = max(self.top, other.top)

    def _compact(self) -> None:
        big = [v for v in self.counts if v >= EXACT_CAP and _bucket(v) != v]
        if big:
            self.top = max(self.top, *big)
            for v in big:
                self.counts[_bucket(v)] += self.counts.pop(v)

    def finish(self) -> None:
        """count/total/max from the counts; the large values rounded for percentiles and bins."""
        self._compact()
        self.count = sum(self.counts.values())
        self.total = sum(v * c for v, c in self.counts.items())
        self.max = max(self.top, max(self.counts, default=0))

    def _items(self):
        for v in sorted(self.counts):
            if self.counts[v]:
                yield v, self.counts[v]

    def percentile(self, p: float) -> int:
        if not self.count:
            return 0
        rank = max(1, -(-self.count * p // 100))
        seen = 0
        for v, c in self._items():
            seen += c
            if seen >= rank:
                return int(v)
        return self.max

    def above(self, threshold: int) -> int:
        return sum(c for v, c in self.counts.items() if v > threshold and (v >= EXACT_CAP or threshold < EXACT_CAP))

    def percentiles(self) -> dict[str, int]:
        out = {f"p{p}": self.percentile(p) for p in PERCENTILES}
        out["max"] = self.max if self.count else 0
        out["mean"] = round(self.total / self.count) if self.count else 0
        return out

    def bins(self, n: int = 20) -> list[tuple[int, int, int]]:
        """(low, high, count) bins over [0, p99] plus one for the tail, for a histogram display."""
        if not self.count:
            return []
        top = max(1, self.percentile(99))
        width = max(1, -(-top // n))
        counts = [0] * (n + 1)
        for v, c in self._items():
            counts[min(n, v // width)] += c
        out = [(i * width, (i + 1) * width - 1, counts[i]) for i in range(n)]
        if counts[n]:
            out.append((n * width, self.max, counts[n]))
        return out


@dataclass
class StatsAccumulator:
    """What the scan gathers for stats; merged across --jobs workers."""

    fields: tuple[str, ...] = ("instruction", "input", "output")
    lengths: list[Histogram] = field(default_factory=list)
    tokens: Histogram = field(default_factory=Histogram)
    languages: dict[str, int] = field(default_factory=lambda: {"zh": 0, "en": 0, "mixed": 0})

    def __post_init__(self) -> None:
        if not self.lengths:
            self.lengths = [Histogram() for _ in self.fields]

    def add_row(self, lengths: tuple[int, ...], cjk: int, tokens: int) -> None:
        for h, v in zip(self.lengths, lengths):
            h.add(v)
        self.tokens.add(tokens)
        chars = sum(lengths)
        self.languages["en" if not cjk else "zh" if cjk * 2 > chars else "mixed"] += 1

    def merge(self, other: "StatsAccumulator") -> None:
        for a, b in zip(self.lengths, other.lengths):
            a.merge(b)
        self.tokens.merge(other.tokens)
        for k, v in other.languages.items():
            self.languages[k] = self.languages.get(k, 0) + v

    def finish(self) -> None:
        for h in self.lengths:
            h.finish()
        self.tokens.finish()


@dataclass
class DatasetStats:
    rows: int  # rows that can train (parsed and well-formed)
    fields: dict[str, dict[str, int]]  # field → {"p50","p90","p95","p99","max","mean"} in characters
    tokens: dict[str, int]
    token_source: str  # "estimate" or the tokenizer path
    cutoff_len: int
    over_cutoff: int
    over_cutoff_share: float
    over_cutoffs: dict[str, int]  # {"512": n, "1024": n, ...}
    duplicates: int
    conflicts: int
    near_duplicates: int | None  # None: not computed (--near-dups off)
    languages: dict[str, float]  # share of rows: zh (mostly CJK), en (ASCII), mixed
    token_bins: list[tuple[int, int, int]] = field(default_factory=list)
    length_bins: dict[str, list[tuple[int, int, int]]] = field(default_factory=dict)  # field → characters

    def to_json(self) -> dict:
        return {
            "rows": self.rows, "fields": self.fields, "tokens": self.tokens, "token_source": self.token_source,
            "cutoff_len": self.cutoff_len, "over_cutoff": self.over_cutoff,
            "over_cutoff_share": self.over_cutoff_share, "over_cutoffs": self.over_cutoffs,
            "duplicates": self.duplicates, "conflicts": self.conflicts, "near_duplicates": self.near_duplicates,
            "languages": self.languages, "token_histogram": [list(b) for b in self.token_bins],
            "length_histograms": {k: [list(b) for b in v] for k, v in self.length_bins.items()},
        }


def build_stats(acc: StatsAccumulator, *, rows: int, cutoff_len: int, token_source: str, duplicates: int,
                conflicts: int, near_duplicates: int | None) -> DatasetStats:
    acc.finish()
    over = acc.tokens.above(cutoff_len)
    n_lang = sum(acc.languages.values()) or 1
    return DatasetStats(
        rows=rows,
        fields={name: h.percentiles() for name, h in zip(acc.fields, acc.lengths)},
        tokens=acc.tokens.percentiles(),
        token_source=token_source,
        cutoff_len=cutoff_len,
        over_cutoff=over,
        over_cutoff_share=round(over / rows, 4) if rows else 0.0,
        over_cutoffs={str(c): acc.tokens.above(c) for c in CUTOFFS},
        duplicates=duplicates,
        conflicts=conflicts,
        near_duplicates=near_duplicates,
        languages={k: round(v / n_lang, 4) for k, v in acc.languages.items()},
        token_bins=acc.tokens.bins(),
        length_bins={name: h.bins() for name, h in zip(acc.fields, acc.lengths)},
    )
