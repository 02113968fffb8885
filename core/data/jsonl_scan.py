"""The lint scan of one byte range of a UTF-8 JSON Lines file: 1 MiB blocks of whole lines, each line
decoded by msgspec into the `Struct` of the file's format, which checks its keys and their types in C.

- alpaca rows of exactly the expected three string fields (the common case) are checked a block at a
  time, column by column (`map` and comprehensions): lengths, token estimates, histograms, hashes for
  the duplicate finder, and the exact content checks for the rows whose bytes or text need them
  (`content_hints`, edge whitespace, a short or possibly repetitive output);
- sharegpt / messages rows whose turns are typed and in order are turned into their `RowView` here;
- every line msgspec rejects (broken JSON, other keys, a wrong type, a blank line, bad bytes) takes the
  exact path: orjson and the per-row checks (`scan.Sink`), as it always did.

Both paths hand the same per-row numbers to the stats and the duplicate finder, so a row's findings
do not depend on the path it took (tests/core/test_dataset_scan.py checks it against a reference lint).
"""

from __future__ import annotations

from itertools import accumulate, repeat
from operator import add, attrgetter, gt, itemgetter, sub
from typing import Any, Callable

import msgspec
from xxhash import xxh3_64_intdigest as _xxh

from core.data import content
from core.data.content_hints import hit_lines
from core.data.findings import finding
from core.data.scan import (LineNo, PartResult, ScanContext, Sink, key_count, new_result, non_utf8_line, paused_gc,
                            valid_utf8)
from core.data.row_rules import RowView
from core.data.schema import ALPACA, MESSAGES, SHAREGPT
from core.data.stats import TEMPLATE_OVERHEAD, cjk_chars
from core.i18n import _

BOM = b"\xef\xbb\xbf"
BLOCK = 1 << 20  # ~2,000 rows a block: the per-block work spread thin, the block still in cache
_FIELDS = attrgetter("f0"), attrgetter("f1"), attrgetter("f2")
_TAIL = itemgetter(slice(-8, None))
_encode = str.encode
_strip = str.strip


def alpaca_struct(keys: tuple[str, str, str]) -> type:
    """An alpaca row of exactly these three string fields (f0, f1, f2 are the JSON keys renamed)."""
    return msgspec.defstruct("AlpacaRow", [("f0", str), ("f1", str), ("f2", str)],
                             rename=dict(zip(("f0", "f1", "f2"), keys)), forbid_unknown_fields=True, gc=False)


def conversation_struct(messages: str, role: str, text: str) -> type:
    """A sharegpt / messages row: only the list of turns, each turn only a role and a text (strings)."""
    turn = msgspec.defstruct("Turn", [("role", str), ("text", str)], rename={"role": role, "text": text},
                             forbid_unknown_fields=True, gc=False)
    return msgspec.defstruct("ConversationRow", [("turns", list[turn])], rename={"turns": messages},
                             forbid_unknown_fields=True)


def read_blocks(path: str, start: int, end: int):
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


class JsonlScan:
    """The state of one chunk's scan: findings, notes, stats, fingerprints."""

    def __init__(self, ctx: ScanContext, relative: bool) -> None:
        import orjson

        self.loads, self.decode_error = orjson.loads, orjson.JSONDecodeError
        self.ctx = ctx
        self.result = new_result(ctx, relative)
        self.sink = Sink(ctx, self.result)
        self.make_line = LineNo if relative else int
        schema = ctx.schema
        self.keys = (schema.prompt, schema.query, schema.response)
        self.alpaca = (schema.kind == ALPACA and schema.plain and schema.query is not None
                       and len(ctx.expected_keys) == 3
                       and set(ctx.expected_keys) == set(self.keys))
        self.decode = None
        if self.alpaca:
            self.struct = alpaca_struct(self.keys)
            self.decode = msgspec.json.Decoder(self.struct).decode
        elif schema.kind in (SHAREGPT, MESSAGES) and schema.plain:
            self.decode = msgspec.json.Decoder(conversation_struct(schema.messages, schema.role_tag,
                                                                   schema.content_tag)).decode
        self.line_base = 0

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
        lines = body.split(b"\n")
        rows: list[Any] = []
        odd: list[int] = []  # the lines msgspec rejected
        if self.decode is None:
            rows, odd = [None] * len(lines), list(range(len(lines)))
        else:
            it = iter(lines)
            while True:  # list.extend keeps what it appended before the line that raised; `it` goes on after
                try:
                    rows.extend(map(self.decode, it))
                    break
                except msgspec.DecodeError:
                    odd.append(len(rows))
                    rows.append(None)
        starts = [0, *accumulate(len(x) + 1 for x in lines)] if odd or not self.alpaca else []
        for i in odd:
            rows[i] = self._exact_line(lines[i], i, offset + starts[i])
        if self.alpaca:
            self._alpaca_rows(body, lines, rows, odd)
        elif self.decode is not None:
            gone = set(odd)
            for i, row in enumerate(rows):
                if i not in gone:
                    self._conversation_row(row, lines[i], i, offset + starts[i])
        self.line_base += len(lines)

    def _exact_line(self, raw: bytes, i: int, at: int):
        """A line msgspec rejected: what a bare orjson.loads + key/type loop does, then the exact checks.
        An alpaca line orjson reads as a row of the three string fields goes back to the block's rows."""
        sink, notes = self.sink, self.result.notes
        line_no = self.line_base + i + 1
        try:
            obj = self.loads(raw)
        except self.decode_error:
            raw = raw[:-1] if raw.endswith(b"\r") else raw
            if not raw.strip():
                notes.blank(line_no)
            elif raw.isascii() or valid_utf8(raw):
                sink.broken(raw, self.make_line(line_no), at)
            else:
                non_utf8_line(sink, raw, self.make_line(line_no), at, notes, line_no)
            return None
        if self.alpaca and type(obj) is dict and len(obj) == 3:
            values = [obj.get(k) for k in self.keys]
            if all(type(v) is str for v in values):
                return self.struct(*values)
        self.result.rows += 1
        line = self.make_line(line_no)
        if key_count(obj) != raw.count(b'":'):
            sink.duplicate_keys(raw, line)
        sink.row(obj, raw, line, at, "safe")
        return None

    def _conversation_row(self, row, raw: bytes, i: int, at: int) -> None:
        """A typed sharegpt / messages row: its view when its turns are in order, else the exact path
        (which says what is wrong)."""
        schema, turns = self.ctx.schema, row.turns
        system = ""
        if turns and turns[0].role == schema.system_tag:
            system, turns = turns[0].text, turns[1:]
        user = (schema.user_tag, "observation", "tool")
        assistant = (schema.assistant_tag, "function_call", "function")
        in_order = bool(turns) and len(turns) % 2 == 0 and all(
            t.role in (user if k % 2 == 0 else assistant) for k, t in enumerate(turns))
        if not in_order or raw.count(b'":') != 1 + 2 * len(row.turns):  # or a key repeated
            self._exact_line(raw, i, at)  # says what is wrong
            return
        texts = ([(schema.system_tag, system)] if system else []) + [(t.role, t.text) for t in turns]
        prompt = tuple(t for _r, t in texts[:-1])
        output = texts[-1][1]
        view = RowView(prompt, output, (sum(map(len, prompt)), len(output)), tuple(texts), "safe",
                       (schema.messages,))
        self.result.rows += 1
        self.sink.accept(view, raw, self.make_line(self.line_base + i + 1))

    # ---------------------------------------------------------------- alpaca rows, column by column

    def _alpaca_rows(self, body: bytes, lines: list[bytes], rows: list, odd: list[int]) -> None:
        ctx, result, make_line = self.ctx, self.result, self.make_line
        out = result.findings
        base = self.line_base
        if odd:
            idx = [i for i, r in enumerate(rows) if r is not None]
            rows = [rows[i] for i in idx]
            raws = [lines[i] for i in idx]
        else:
            idx, raws = range(len(rows)), lines
        if not rows:
            return
        k = len(rows)
        ins, inp, outs = (list(map(f, rows)) for f in _FIELDS)
        li, ln, lo = list(map(len, ins)), list(map(len, inp)), list(map(len, outs))
        # a key repeated in a row: each row has three `":`, so 3 × rows colons in all settles it at once
        if odd or body.count(b":") != 3 * k:
            for i, raw in zip(idx, raws):
                if raw.count(b'":') != 3:
                    self.sink.duplicate_keys(raw, make_line(base + i + 1))
        # the exact content checks, for the rows that may need them
        hits = set(hit_lines(body))
        check = {i for i, n in zip(idx, lo) if n < 10} | hits.intersection(idx)
        for column in (ins, inp, outs):
            stripped = list(map(_strip, column))
            if stripped != column:  # compared in C; the rows only when one differs
                check.update(i for i, s, t in zip(idx, stripped, column) if s is not t)
        # content.maybe_repetitive: the last 8 characters occur 4 times or more in an output of 80 or more
        repeats = map(str.count, outs, map(_TAIL, outs))
        check.update(i for i, n, r in zip(idx, lo, repeats) if r >= 4 and n >= 80)
        if check:
            k_ins, k_inp, k_out = self.keys
            where = dict(zip(idx, range(k))) if odd else None
            for i in sorted(check):
                j = where[i] if where is not None else i
                line, o = make_line(base + i + 1), outs[j]
                if not o.strip():
                    out.append(finding("empty-output", line, _(
                        "L{line}: empty output (trains on an empty target); fix drops the row (with --yes)",
                        line=line)))
                content.check_texts(((k_ins, ins[j]), (k_inp, inp[j]), (k_out, o)), o, line, out, pii=i in hits,
                                    keep=self.ctx.keep)
        # numbers: lengths and token estimates into the histograms, the language mix, too-long rows
        chars = list(map(add, map(add, li, ln), lo))
        if ctx.escaped:  # non-ASCII text as \\u escapes: count it exactly
            cjk = [cjk_chars(a) + cjk_chars(b) + cjk_chars(c) for a, b, c in zip(ins, inp, outs)]
        else:  # the UTF-8 bytes beyond the characters and the JSON around them
            extra = map(sub, map(len, raws), map(add, chars, repeat(ctx.key_overhead)))
            cjk = [d >> 1 if d > 0 else 0 for d in extra]
        tokens = [((c - j + 3) >> 2) + j + TEMPLATE_OVERHEAD for c, j in zip(chars, cjk)]
        stats = result.stats
        for h, values in zip(stats.lengths, (li, ln, lo)):
            h.update(values)
        stats.tokens.update(tokens)
        en = cjk.count(0)
        zh = sum(map(gt, map(add, cjk, cjk), chars))
        langs = stats.languages
        langs["en"] += en
        langs["zh"] += zh
        langs["mixed"] += k - en - zh
        if ctx.estimate_too_long:
            cutoff = ctx.cutoff_len
            for i, t in zip(idx, tokens):
                if t > cutoff:
                    line = make_line(base + i + 1)
                    out.append(finding("too-long", line, _(
                        "L{line}: ~{tokens} tokens > cutoff_len {cutoff}; will be truncated (raise cutoff_len or "
                        "shorten the row)", line=line, tokens=t, cutoff=cutoff)))
        # the duplicate finder's fingerprints: hash(input) seeded with hash(instruction), hash(output)
        prompts = map(_xxh, map(_encode, inp), map(_xxh, map(_encode, ins)))
        numbers = range(base + 1, base + k + 1) if not odd else [base + i + 1 for i in idx]
        result.fingerprints.extend(numbers, prompts, map(_xxh, map(_encode, outs)))
        result.rows += k
        result.good += k

    def finish(self) -> PartResult:
        result = self.result
        notes = result.notes
        notes.lines = notes.last_line = result.lines = self.line_base
        return result


def scan_jsonl_part(ctx: ScanContext, start: int, end: int, relative: bool,
                    progress: Callable[[int], None] | None = None) -> PartResult:
    """Scan the lines that start in [start, end) of a UTF-8 JSON Lines file (start is a line start).
    `progress(done)`: bytes of the range scanned so far, after each block."""
    with paused_gc():
        scan = JsonlScan(ctx, relative)
        for body, offset, final in read_blocks(ctx.path, start, end):
            scan.block(body, offset, final)
            scan.result.fingerprints.maybe_spill()
            if progress:
                progress(offset + len(body) + 1 - start)
        return scan.finish()

