"""The lint hot loop for UTF-8 JSON Lines: one byte range of the file, 1 MiB blocks, one pass.

A block of ordinary alpaca rows (the common case) takes the fast path (`fastblock.read_block`): one
`orjson.loads` for the whole block and column-wise checks in C (`_fastcols`, which also folds the
block's lengths into the stats, `fold.CFold`: no numpy needed), or with Python's `map` and numpy without
it. A line that is not an
ordinary row (broken JSON, other keys, a non-string, a blank line) is checked line by line, as a bare
`orjson.loads` + key/type loop does, with the rows that are not ordinary going to the exact path
(`scan.Sink`); the lines before and after it are tried as blocks again (down to SPLIT_BYTES). All
paths hand the same per-row numbers to the stats (lengths, raw length, exact CJK count when the file
escapes non-ASCII) and to the duplicate finder (line, prompt hash, output hash), and send the same rows
to the exact content checks (`content.check_texts`), so they find the same
(tests/core/test_dataset_blockscan.py).

Where the time goes on the benchmark's file (1M rows, 515 MB; per row, against ~2 µs for the bare
loop): the block parse ~1 µs; the C column pass ~0.5 µs (mostly hashing the strings and the tail
count of the repetition test); the C byte pass (line bounds, colons, content hints) ~0.2 µs; reading,
the exact checks of flagged rows and the bookkeeping ~0.3 µs; duplicates, findings and stats after the
scan ~0.12 µs. Without the C extension the two passes take ~1.6 µs instead of ~0.7.

Per block, in C (`fold.CFold`) or with numpy (`fold.Fold`): token estimates, histograms, language mix and
too-long rows; with numpy, the content hints of the line-by-line path (`prefilter`). With neither,
every block goes line by line, with the same findings.
"""

from __future__ import annotations

from typing import Callable

from core.data import content
from core.data.fastblock import FastBlock, c_passes, read_block
from core.data.fold import CFold, Fold
from core.data.findings import finding
from core.data.npimport import numpy_or_none
from core.data.fingerprints import SPILL_ROWS
from core.data.prefilter import Scratch, hit_lines
from core.data.scan import (LineNo, PartResult, ScanContext, Sink, key_count, new_result, non_utf8_line,
                               paused_gc, valid_utf8)
from core.data.schema import ALPACA
from core.data.stats import cjk_chars
from core.i18n import _

BOM = b"\xef\xbb\xbf"
BLOCK = 1 << 20  # ~2,000 rows: large enough to spread the per-block set-up, small enough to stay in cache
FOLD_ROWS = 32768
SPLIT_BYTES = 16 << 10  # a block with a bad row is cut around it down to this size, then checked line by line
FAST_BLOCKS = True  # tests turn the fast path off to compare it with the line-by-line path
USE_NUMPY = True  # tests turn numpy off: every block then goes line by line


def _blocks(path: str, start: int, end: int):
    """(body, file offset of body, final) for the lines in [start, end); body has no trailing newline.
    The file is read into one reused buffer; each body is its one copy out of it."""
    buf = bytearray(BLOCK)
    view = memoryview(buf)
    used = 0  # bytes of an unfinished line kept at the front of buf
    offset = start
    remaining = end - start
    with open(path, "rb", buffering=0) as fh:
        fh.seek(start)
        while remaining > 0:
            if used == len(buf):  # a line longer than the buffer: grow it
                view.release()
                buf.extend(bytes(len(buf)))
                view = memoryview(buf)
            n = fh.readinto(view[used:used + min(len(buf) - used, remaining)])
            if not n:
                break
            remaining -= n
            filled = used + n
            cut = buf.rfind(b"\n", used, filled)
            if cut < 0:
                used = filled
                continue
            yield bytes(view[:cut]), offset, False
            offset += cut + 1
            rest = bytes(view[cut + 1:filled])  # the unfinished line (a copy: the ranges may overlap)
            used = len(rest)
            buf[:used] = rest
        if used:
            yield bytes(view[:used]), offset, True
        view.release()


class _PartScan:
    """The state of one part's scan: findings, notes, stats not yet folded, fingerprints."""

    COLUMNS = 6  # li, ln, lo, rl, cjk, line

    def __init__(self, ctx: ScanContext, relative: bool) -> None:
        import orjson

        # the C passes need no numpy; without them the fast path is numpy's (or there is none)
        self.c = c_passes()
        np = numpy_or_none() if USE_NUMPY and self.c is None else None
        self.np = np
        self.scratch = Scratch(np) if np is not None else None
        self.loads, self.decode_error = orjson.loads, orjson.JSONDecodeError
        self.ctx = ctx
        self.result = result = new_result(ctx, relative)
        self.sink = Sink(ctx, result)
        self.fold = Fold(ctx, result, np)
        self.cfold = CFold(ctx, self.fold, self.c) if self.c is not None else None
        self.make_line = LineNo if relative else int
        schema = ctx.schema
        self.keys = (schema.prompt, schema.query, schema.response)
        self.fast = (schema.kind == ALPACA and schema.query is not None and len(ctx.expected_keys) == 3
                     and set(ctx.expected_keys) == set(self.keys))
        self.line_base = 0
        self.rows = self.good = 0
        self.pending: list[tuple] = []  # per-row numbers not yet folded into the stats, one tuple a block
        self.pending_rows = 0

    # ---------------------------------------------------------------- one block

    def block(self, body: bytes, offset: int, final: bool) -> None:
        notes = self.result.notes
        if final:
            notes.final_newline = False
        if offset == 0 and body.startswith(BOM):
            notes.bom = True
            body, offset = body[3:], 3
        if body.find(b"\r") >= 0:
            crlf = body.count(b"\r\n") + (1 if body.endswith(b"\r") else 0)
            if crlf:
                notes.crlf_lines += crlf
                if not notes.first_crlf_line:
                    notes.first_crlf_line = self.line_base + body.count(b"\n", 0, body.find(b"\r")) + 1
        if self.fast and (self.c is not None or self.np is not None) and FAST_BLOCKS and body:
            self._rows(body, offset)
        else:
            self.line_base += self._line_rows(body, offset)
        if self.pending_rows >= FOLD_ROWS:
            self._fold_pending()

    def _rows(self, body: bytes, offset: int) -> None:
        """The fast path for the block; when one of its lines is not an ordinary row, the fast path for the
        lines before it, that line by the line-by-line path, and the same again for the lines after it.
        Pieces below SPLIT_BYTES, or with a trouble spot that cannot be placed, go line by line."""
        np = self.np
        todo = [(True, body, offset)]  # (try the fast path, lines, offset), last one first
        while todo:
            fast_ok, body, offset = todo.pop()
            if fast_ok:
                fast, bad = read_block(np, self.loads, self.decode_error, body,
                                       np.frombuffer(body, np.uint8) if np is not None else None,
                                       self.keys, self.ctx.escaped, self.scratch)
                if fast is not None:
                    self.line_base += self._fast_rows(fast, body)
                    continue
                if bad is not None:
                    at = 0
                    for _i in range(bad):  # the offset of line `bad`
                        at = body.index(b"\n", at) + 1
                    end = body.find(b"\n", at)
                    if end >= 0:
                        rest = body[end + 1:]
                        todo.append((len(rest) > SPLIT_BYTES, rest, offset + end + 1))
                    else:
                        end = len(body)
                    todo.append((False, body[at:end], offset + at))
                    if at:
                        todo.append((at - 1 > SPLIT_BYTES, body[:at - 1], offset))
                    continue
            self.line_base += self._line_rows(body, offset)

    def _fast_rows(self, fb: FastBlock, body: bytes) -> int:
        out = self.result.findings
        base = self.line_base
        make_line = self.make_line
        k_ins, k_inp, k_out = self.keys
        for i in fb.exact:
            line = make_line(base + i + 1)
            o = fb.outs[i]
            if not o.strip():
                out.append(_empty_output(line))
            content.check_texts(((k_ins, fb.ins[i]), (k_inp, fb.inp[i]), (k_out, o)), o, line, out,
                                pii=i in fb.hits)
        for i in fb.dup_key_rows:
            self.sink.duplicate_keys(body[int(fb.starts[i]):int(fb.ends[i])], make_line(base + i + 1))
        self.rows += fb.k
        self.good += fb.k
        if self.cfold is not None:
            self.cfold.block(fb, base, make_line)
            return fb.k
        lines = self.np.arange(base + 1, base + fb.k + 1, dtype=self.np.int64)
        self._push((fb.li, fb.ln, fb.lo, fb.rl, fb.cjk, lines), fb.prompts, fb.outputs, fb.k)
        return fb.k

    def _line_rows(self, body: bytes, offset: int) -> int:
        """The block line by line: what a bare orjson.loads + key/type loop does, plus the checks."""
        ctx, sink, notes, out = self.ctx, self.sink, self.result.notes, self.result.findings
        np = self.np
        lines = body.split(b"\n")
        big = np is not None and len(body) >= 4096
        hits = set(hit_lines(body, np if big else None, np.frombuffer(body, np.uint8) if big else None,
                             scratch=self.scratch))
        k_ins, k_inp, k_out = self.keys
        fast = self.fast
        make_line = self.make_line
        loads, decode_error = self.loads, self.decode_error
        check_texts = content.check_texts
        escaped = ctx.escaped
        base = self.line_base
        li, ln, lo, rl, cjk, nums, hp, ho = [], [], [], [], [] if escaped else None, [], [], []
        slow = False
        pos = 0  # offset of lines[idx] in body
        for idx, raw in enumerate(lines):
            at, pos = pos, pos + len(raw) + 1
            try:
                obj = loads(raw)
            except decode_error:
                slow = True
                line_no = base + idx + 1
                raw = raw[:-1] if raw.endswith(b"\r") else raw
                if not raw.strip():
                    notes.blank(line_no)
                    continue
                line = make_line(line_no)
                if raw.isascii() or valid_utf8(raw):
                    sink.broken(raw, line, offset + at)
                else:
                    non_utf8_line(sink, raw, line, offset + at, notes, line_no)
                continue
            if fast and type(obj) is dict and len(obj) == 3:
                ins, inp, outs = obj.get(k_ins), obj.get(k_inp), obj.get(k_out)
                if type(ins) is str and type(inp) is str and type(outs) is str:
                    n = len(outs)
                    li.append(len(ins))
                    ln.append(len(inp))
                    lo.append(n)
                    rl.append(len(raw))
                    nums.append(base + idx + 1)
                    hp.append(hash((ins, inp)))
                    ho.append(hash(outs))
                    if escaped:
                        cjk.append(cjk_chars(ins) + cjk_chars(inp) + cjk_chars(outs))
                    if (idx in hits or n < 10 or ins.strip() is not ins or inp.strip() is not inp
                            or outs.strip() is not outs or content.maybe_repetitive(outs)):
                        line = make_line(base + idx + 1)
                        if not outs.strip():
                            out.append(_empty_output(line))
                        check_texts(((k_ins, ins), (k_inp, inp), (k_out, outs)), outs, line, out, pii=idx in hits)
                    continue
            slow = True
            self.rows += 1
            line = make_line(base + idx + 1)
            if key_count(obj) != raw.count(b'":'):
                sink.duplicate_keys(raw, line)
            sink.row(obj, raw, line, offset + at, "safe")
        if nums and (slow or body.count(b":") != 3 * len(nums)):
            for line_no in nums:
                raw = lines[line_no - base - 1]
                if raw.count(b'":') != 3:
                    sink.duplicate_keys(raw, make_line(line_no))
        self.rows += len(nums)
        self.good += len(nums)
        if nums:
            if np is not None:
                arrays = [np.array(x, dtype=np.int64) for x in (hp, ho)]
                hp, ho = arrays
            self._push((li, ln, lo, rl, cjk, nums), hp, ho, len(nums))
        return len(lines)

    # ---------------------------------------------------------------- per-row numbers

    def _push(self, columns: tuple, prompts, outputs, n: int) -> None:
        fp = self.result.fingerprints
        np = self.np
        if np is not None:
            fp.lines.frombytes(np.asarray(columns[5], dtype=np.int64).tobytes())
            fp.prompts.frombytes(np.asarray(prompts, dtype=np.int64).tobytes())
            fp.outputs.frombytes(np.asarray(outputs, dtype=np.int64).tobytes())
        else:
            fp.lines.extend(columns[5])
            fp.prompts.extend(prompts)
            fp.outputs.extend(outputs)
        self.pending.append(columns)
        self.pending_rows += n

    def _fold_pending(self) -> None:
        if not self.pending:
            return
        np = self.np
        cols = []
        for c in range(self.COLUMNS):
            parts = [p[c] for p in self.pending]
            if c == 4 and parts[0] is None:
                cols.append(None)
            elif np is not None:
                cols.append(np.concatenate([np.asarray(x, dtype=np.int64) for x in parts]))
            else:
                cols.append([v for x in parts for v in x])
        self.pending, self.pending_rows = [], 0
        self.fold.fold(*cols, self.make_line)
        fp = self.result.fingerprints
        if len(fp.lines) >= SPILL_ROWS:  # bounded memory: the fingerprints go to disk
            fp.spill()

    def finish(self) -> PartResult:
        self._fold_pending()
        self.fold.finish()
        result = self.result
        result.rows += self.rows
        result.good += self.good
        notes = result.notes
        notes.lines = notes.last_line = result.lines = self.line_base
        return result


def _empty_output(line):
    return finding("empty-output", line, _(
        "L{line}: empty output (trains on an empty target); fix drops the row (with --yes)", line=line))


def scan_jsonl_part(ctx: ScanContext, start: int, end: int, relative: bool,
                    progress: Callable[[int], None] | None = None) -> PartResult:
    """Scan the lines that start in [start, end) of a UTF-8 JSON Lines file (start is a line start).
    `progress(done)`: bytes of the range scanned so far, after each block."""
    with paused_gc():
        scan = _PartScan(ctx, relative)
        for body, offset, final in _blocks(ctx.path, start, end):
            scan.block(body, offset, final)
            if progress:
                progress(offset + len(body) + 1 - start)
        return scan.finish()
