"""Histograms merge to the sum of their counts (a --jobs lint merges one per chunk), and stay small
without changing a figure: values from 8192 up are kept to 3 significant digits, the maximum exactly."""

from __future__ import annotations

import random

from core.data.stats import EXACT_CAP, Histogram


def _values(seed: int) -> list[int]:
    rnd = random.Random(seed)
    return [rnd.choice([rnd.randrange(EXACT_CAP), rnd.randrange(EXACT_CAP, 10 * EXACT_CAP)]) for _ in range(3000)]


def _filled(seed: int) -> Histogram:
    h = Histogram()
    for v in _values(seed):
        h.add(v)
    return h


def test_merge_adds_every_count():
    h = _filled(1)
    for seed in (2, 3):
        h.merge(_filled(seed))
    h.finish()
    want = Histogram()
    want.update(v for seed in (1, 2, 3) for v in _values(seed))
    want.finish()
    assert h.counts == want.counts
    assert (h.count, h.total, h.max) == (want.count, want.total, want.max)
    assert h.count == 9000 and h.max == max(v for seed in (1, 2, 3) for v in _values(seed))


def test_large_values_are_rounded_and_the_size_stays_bounded(monkeypatch):
    values = [EXACT_CAP + 7 * i for i in range(60000)] + list(range(100))
    plain = Histogram()
    for v in values:
        plain.add(v)
    plain.finish()
    monkeypatch.setattr(Histogram, "COMPACT_AT", 1000)
    small = Histogram()
    for at in range(0, len(values), 500):
        small.update(values[at:at + 500])
        assert len(small.counts) <= 1000 + 500 + 900 * 3  # the slice, the rounded values of 3 decades
    small.finish()
    assert small.percentiles() == plain.percentiles() and small.bins() == plain.bins()
    assert len(small.counts) < len(set(values)) / 10 and small.max == max(values) and small.above(9000) == plain.above(9000) > 0
    assert all(len(str(plain.percentile(p)).rstrip("0")) <= 3 for p in (50, 90, 99))  # all above EXACT_CAP
