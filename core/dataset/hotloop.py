"""The lint hot loop for UTF-8 JSON Lines: one byte range of the file, 1 MiB blocks, one pass.

Per line it does only what a bare `orjson.loads` + key/type check loop does, plus appending four
lengths and three fingerprint integers. Everything else is done per block in C: `body.count` for CRLF
and duplicate keys (`":` per key), the content prefilters (`content.block_hit_lines`), and, with numpy,
token estimates, histograms, language mix and too-long rows. A line that is not an ordinary row
(broken JSON, other keys, a non-string, a hit of a content prefilter, odd whitespace, a short or
repetitive output) goes to the exact path (`scan.Sink`, `content.check_texts`).

Pure Python sets the floor: each extra pass over the bytes costs ~0.2-0.4 µs a row (≈ 10-20% of the bare
loop), so the content prefilters use memchr-speed primitives wherever one exists.
"""

from __future__ import annotations

from typing import Callable

from core.dataset import content
from core.dataset.findings import finding
from core.dataset.fingerprints import SPILL_AT_END, SPILL_ROWS
from core.dataset.scan import (LineNo, PartResult, ScanContext, Sink, key_count, new_result, non_utf8_line,
                               valid_utf8)
from core.dataset.schema import ALPACA
from core.dataset.stats import EXACT_CAP, TEMPLATE_OVERHEAD, cjk_chars
from core.i18n import _

BOM = b"\xef\xbb\xbf"
BLOCK = 256 * 1024  # small enough that a block's rows stay in the CPU cache while they are checked
FOLD_ROWS = 32768


def _blocks(path: str, start: int, end: int):
    """(body, file offset of body, final) for the lines in [start, end); body has no trailing newline."""
    with open(path, "rb") as fh:
        fh.seek(start)
        remaining = end - start
        pending = b""
        offset = start
        while True:
            block = fh.read(min(BLOCK, remaining)) if remaining > 0 else b""
            remaining -= len(block)
            if block:
                if pending:
                    block = pending + block
                cut = block.rfind(b"\n")
                if cut < 0:
                    pending = block
                    continue
                body, pending = block[:cut], block[cut + 1:]
                yield body, offset, False
                offset += cut + 1
            else:
                if pending:
                    yield pending, offset, True
                return


class _Fold:
    """Per-block arithmetic on the collected lengths: numpy when present, plain Python otherwise."""

    def __init__(self, ctx: ScanContext, result: PartResult) -> None:
        try:
            import numpy as np
        except ImportError:
            np = None
        self.np = np
        self.ctx = ctx
        self.r = result
        self.hists = list(result.stats.lengths[:3]) + [result.stats.tokens]
        self.acc = [np.zeros(EXACT_CAP + 1, dtype=np.int64) for _ in self.hists] if np else None

    def fold(self, li, ln, lo, rl, cjk_exact, lines, make_line) -> None:
        np = self.np
        if not lo:
            return
        if np is None:
            return self._fold_python(li, ln, lo, rl, cjk_exact, lines, make_line)
        a_li, a_ln, a_lo = (np.array(x, dtype=np.int64) for x in (li, ln, lo))
        chars = a_li + a_ln + a_lo
        if cjk_exact is not None:
            cjk = np.array(cjk_exact, dtype=np.int64)
        else:
            cjk = np.maximum((np.array(rl, dtype=np.int64) - self.ctx.key_overhead - chars) >> 1, 0)
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
        langs["mixed"] += len(lo) - en - zh
        if self.ctx.estimate_too_long:
            for j in np.flatnonzero(tokens > self.ctx.cutoff_len).tolist():
                self._too_long(make_line(lines[j]), int(tokens[j]))

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
                self._too_long(make_line(lines[j]), tokens)

    def _too_long(self, line, tokens: int) -> None:
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


def scan_jsonl_part(ctx: ScanContext, start: int, end: int, relative: bool,
                    progress: Callable[[int], None] | None = None) -> PartResult:
    """Scan the lines that start in [start, end) of a UTF-8 JSON Lines file (start is a line start)."""
    import orjson

    result = new_result(ctx, relative)
    sink = Sink(ctx, result)
    fold = _Fold(ctx, result)
    notes = result.notes
    schema = ctx.schema
    k_ins, k_inp, k_out = schema.prompt, schema.query, schema.response
    nkeys = len(ctx.expected_keys)
    fast = (schema.kind == ALPACA and k_inp is not None and nkeys == 3
            and set(ctx.expected_keys) == {k_ins, k_inp, k_out})
    make_line = LineNo if relative else int
    loads = orjson.loads
    decode_error = orjson.JSONDecodeError
    fp = result.fingerprints
    fp_prompt, fp_out = fp.prompts.append, fp.outputs.append
    out = result.findings
    check_texts = content.check_texts
    line_base = 0
    rows = good = 0
    escaped = ctx.escaped
    # lengths of the ordinary rows, folded into the stats every FOLD_ROWS rows
    li_l: list[int] = []
    ln_l: list[int] = []
    lo_l: list[int] = []
    rl_l: list[int] = []
    cjk_l: list[int] | None = [] if escaped else None
    app_li, app_ln, app_lo = li_l.append, ln_l.append, lo_l.append
    fp_start = 0

    for body, offset, final in _blocks(ctx.path, start, end):
        if final:
            notes.final_newline = False
        lines = body.split(b"\n")
        shift = 0
        if offset == 0 and lines[0].startswith(BOM):
            notes.bom = True
            lines[0] = lines[0][3:]
            shift = 3
        crlf = body.count(b"\r\n") + (1 if body.endswith(b"\r") else 0) if body.find(b"\r") >= 0 else 0
        if crlf:
            notes.crlf_lines += crlf
            if not notes.first_crlf_line:
                notes.first_crlf_line = line_base + body.count(b"\n", 0, body.find(b"\r")) + 1
        hits = content.block_hit_lines(body)
        block_fast = len(lo_l)
        slow_idx: list[int] = []
        cursor = [0, shift]  # (line index, its position in body): offsets for the exact path, computed lazily


        def offset_of(idx: int) -> int:
            i, pos = cursor
            while i < idx:
                pos += len(lines[i]) + 1
                i += 1
            cursor[0], cursor[1] = i, pos
            return offset + pos

        for idx, raw in enumerate(lines):
            try:
                obj = loads(raw)
            except decode_error:
                slow_idx.append(idx)
                line_no = line_base + idx + 1
                raw = raw[:-1] if raw.endswith(b"\r") else raw
                if not raw.strip():
                    notes.blank(line_no)
                    continue
                line = make_line(line_no)
                if raw.isascii() or valid_utf8(raw):
                    sink.broken(raw, line, offset_of(idx))
                else:
                    non_utf8_line(sink, raw, line, offset_of(idx), notes, line_no)
                continue
            if fast and type(obj) is dict and len(obj) == 3:
                ins = obj.get(k_ins)
                inp = obj.get(k_inp)
                outs = obj.get(k_out)
                if type(ins) is str and type(inp) is str and type(outs) is str:
                    lo = len(outs)
                    app_li(len(ins))
                    app_ln(len(inp))
                    app_lo(lo)
                    fp_prompt(hash((ins, inp)))
                    fp_out(hash(outs))
                    if escaped:
                        cjk_l.append(cjk_chars(ins) + cjk_chars(inp) + cjk_chars(outs))
                    if (idx in hits or lo < 10 or ins.strip() is not ins or inp.strip() is not inp
                            or outs.strip() is not outs or (lo >= 80 and outs.count(outs[-8:]) >= 4)):
                        line = make_line(line_base + idx + 1)
                        if not outs.strip():
                            out.append(finding("empty-output", line, _(
                                "L{line}: empty output (trains on an empty target); fix drops the row (with "
                                "--yes)", line=line)))
                        check_texts(((k_ins, ins), (k_inp, inp), (k_out, outs)), outs, line, out, pii=idx in hits)
                    continue
            slow_idx.append(idx)
            rows += 1
            line = make_line(line_base + idx + 1)
            if key_count(obj) != raw.count(b'":'):
                sink.duplicate_keys(raw, line)
            sink.row(obj, raw, line, offset_of(idx), "safe")

        n_fast = len(lo_l) - block_fast
        rows += n_fast
        good += n_fast
        if n_fast:
            first = line_base + 1
            block_lines = len(fp.lines)
            if not slow_idx:
                fp.lines.extend(range(first, first + len(lines)))
                rl_l.extend(map(len, lines))
            else:
                slow_set = set(slow_idx)
                fp.lines.extend(first + i for i in range(len(lines)) if i not in slow_set)
                rl_l.extend(len(lines[i]) for i in range(len(lines)) if i not in slow_set)
            if slow_idx or body.count(b":") != 3 * n_fast and body.count(b'":') != 3 * n_fast:
                for ln_no in fp.lines[block_lines:]:
                    raw = lines[ln_no - first]
                    if raw.count(b'":') != 3:
                        sink.duplicate_keys(raw, make_line(ln_no))
            if len(lo_l) >= FOLD_ROWS:
                fold.fold(li_l, ln_l, lo_l, rl_l, cjk_l, fp.lines[fp_start:], make_line)
                for lst in (li_l, ln_l, lo_l, rl_l) + ((cjk_l,) if cjk_l is not None else ()):
                    lst.clear()
                if len(fp.lines) >= SPILL_ROWS:  # bounded memory: the fingerprints go to disk
                    fp.spill()
                    fp_prompt, fp_out = fp.prompts.append, fp.outputs.append
                fp_start = len(fp.lines)
        line_base += len(lines)
        if progress:
            progress(offset + len(body) + 1 - start)
    fold.fold(li_l, ln_l, lo_l, rl_l, cjk_l, fp.lines[fp_start:], make_line)
    fold.finish()
    for f in (fp, result.slow_fingerprints):
        if f.total > SPILL_AT_END:
            f.spill()
    result.rows += rows
    result.good += good
    notes.lines = notes.last_line = result.lines = line_base
    return result
