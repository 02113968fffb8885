"""Histograms merge the same with numpy and without (a --jobs lint merges one per span)."""

from __future__ import annotations

import random
import sys

from core.data.stats import EXACT_CAP, Histogram


def _filled(seed: int) -> Histogram:
    rnd = random.Random(seed)
    h = Histogram()
    for _ in range(3000):
        h.add(rnd.choice([rnd.randrange(EXACT_CAP), rnd.randrange(EXACT_CAP, 10 * EXACT_CAP)]))
    return h


def _merged(monkeypatch, numpy: bool) -> Histogram:
    with monkeypatch.context() as m:
        if not numpy:
            m.setitem(sys.modules, "numpy", None)
        h = _filled(1)
        for seed in (2, 3):
            h.merge(_filled(seed))
    h.finish()
    return h


def test_merge_adds_every_count_with_and_without_numpy(monkeypatch):
    __import__("numpy")
    with_np, without = _merged(monkeypatch, True), _merged(monkeypatch, False)
    want = Histogram()
    for seed in (1, 2, 3):
        rnd_h = _filled(seed)
        for v, c in enumerate(rnd_h.exact):
            want.exact[v] += c
        for v, c in rnd_h.big.items():
            want.big[v] = want.big.get(v, 0) + c
        want.max = max(want.max, rnd_h.max)
    want.finish()
    for h in (with_np, without):
        assert list(h.exact) == list(want.exact) and h.big == want.big
        assert (h.count, h.total, h.max) == (want.count, want.total, want.max) == (9000, h.total, h.max)
