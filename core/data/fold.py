"""The per-row numbers of the lint hot loop folded into the stats, one block or batch at a time:
character lengths and token estimates into the histograms, the language mix, and a finding for each
row whose estimated tokens pass cutoff_len.

`CFold` (the C extension's `fold`, straight into the histograms' exact counts: no numpy), `Fold` with
numpy over batches of rows, or `Fold` in plain Python without numpy: the same counts
(tests/core/test_dataset_blockscan.py compares them).
"""

from __future__ import annotations

from core.data.fastblock import FastBlock
from core.data.findings import finding
from core.data.fingerprints import SPILL_ROWS
from core.data.scan import PartResult, ScanContext
from core.data.stats import EXACT_CAP, TEMPLATE_OVERHEAD
from core.i18n import _


class Fold:
    """Per-chunk arithmetic on the collected lengths: numpy when present, plain Python otherwise."""

    def __init__(self, ctx: ScanContext, result: PartResult, np) -> None:
        self.np = np
        self.ctx = ctx
        self.r = result
        self.hists = list(result.stats.lengths[:3]) + [result.stats.tokens]
        self.acc = [np.zeros(EXACT_CAP + 1, dtype=np.int64) for _ in self.hists] if np else None

    def fold(self, li, ln, lo, rl, cjk_exact, lines, make_line) -> None:
        np = self.np
        if not len(lo):
            return
        if np is None:
            return self._fold_python(li, ln, lo, rl, cjk_exact, lines, make_line)
        a_li, a_ln, a_lo = (np.asarray(x, dtype=np.int64) for x in (li, ln, lo))
        chars = a_li + a_ln + a_lo
        if cjk_exact is not None:
            cjk = np.asarray(cjk_exact, dtype=np.int64)
        else:
            cjk = np.maximum((np.asarray(rl, dtype=np.int64) - self.ctx.key_overhead - chars) >> 1, 0)
        tokens = ((chars - cjk + 3) >> 2) + cjk + TEMPLATE_OVERHEAD
        for acc, h, v in zip(self.acc, self.hists, (a_li, a_ln, a_lo, tokens)):
            acc += np.bincount(np.minimum(v, EXACT_CAP), minlength=EXACT_CAP + 1)
            if acc[EXACT_CAP]:
                for big in v[v >= EXACT_CAP].tolist():
                    h.add(big)
                acc[EXACT_CAP] = 0
        langs = self.r.stats.languages
        en = int(np.count_nonzero(cjk == 0))
        zh = int(np.count_nonzero(cjk * 2 > chars))
        langs["en"] += en
        langs["zh"] += zh
        langs["mixed"] += len(a_lo) - en - zh
        if self.ctx.estimate_too_long:
            for j in np.flatnonzero(tokens > self.ctx.cutoff_len).tolist():
                self.too_long(make_line(int(lines[j])), int(tokens[j]))

    def _fold_python(self, li, ln, lo, rl, cjk_exact, lines, make_line) -> None:
        langs = self.r.stats.languages
        overhead = self.ctx.key_overhead
        for j, (a, b, c, r) in enumerate(zip(li, ln, lo, rl)):
            chars = a + b + c
            cjk = cjk_exact[j] if cjk_exact is not None else max(0, (r - overhead - chars) >> 1)
            tokens = ((chars - cjk + 3) >> 2) + cjk + TEMPLATE_OVERHEAD
            for h, v in zip(self.hists, (a, b, c, tokens)):
                h.add(v)
            langs["en" if not cjk else "zh" if cjk * 2 > chars else "mixed"] += 1
            if self.ctx.estimate_too_long and tokens > self.ctx.cutoff_len:
                self.too_long(make_line(lines[j]), tokens)

    def too_long(self, line, tokens: int) -> None:
        cutoff = self.ctx.cutoff_len
        self.r.findings.append(finding("too-long", line, _(
            "L{line}: ~{tokens} tokens > cutoff_len {cutoff}; will be truncated (raise cutoff_len or shorten "
            "the row)", line=line, tokens=tokens, cutoff=cutoff)))

    def finish(self) -> None:
        if self.acc is None:
            return
        for acc, h in zip(self.acc, self.hists):
            ex = h.exact
            for v in self.np.flatnonzero(acc[:EXACT_CAP]).tolist():
                ex[v] += int(acc[v])


class CFold:
    """The C path's per-block bookkeeping (no numpy): the block's fingerprints appended as raw bytes, and
    `_fastcols.fold` adding its lengths and token estimates to the histograms in place."""

    def __init__(self, ctx: ScanContext, fold: Fold, c) -> None:
        self.c = c
        self.ctx = ctx
        self.fold = fold
        self.exact = [h.exact for h in fold.hists]
        self.cutoff = ctx.cutoff_len if ctx.estimate_too_long else -1

    def block(self, fb: FastBlock, base: int, make_line) -> None:
        fp = self.fold.r.fingerprints
        fp.lines.frombytes(self.c.arange(base + 1, fb.k))
        fp.prompts.frombytes(fb.prompts)
        fp.outputs.frombytes(fb.outputs)
        en, zh, too_long, big = self.c.fold(fb.table, fb.k, self.ctx.escaped, fb.starts, fb.ends,
                                            self.ctx.key_overhead, self.cutoff, *self.exact)
        langs = self.fold.r.stats.languages
        langs["en"] += en
        langs["zh"] += zh
        langs["mixed"] += fb.k - en - zh
        hists = self.fold.hists
        for h, value in big:
            hists[h].add(value)
        for j, tokens in too_long:
            self.fold.too_long(make_line(base + j + 1), tokens)
        if len(fp.lines) >= SPILL_ROWS:  # bounded memory: the fingerprints go to disk
            fp.spill()
