"""The fast path of the lint hot loop: a block of ordinary alpaca rows, parsed with one `orjson.loads`
and checked column by column, never row by row in Python bytecode: in C (`_fastcols.scan_lines` over
the bytes, `_fastcols.columns` over the parsed rows; an optional extension) or, without it, with numpy
passes over the bytes and `map` over the rows.

A block qualifies when every line is one JSON object with exactly the three expected keys and string
values; otherwise `read_block` says which line is the first that does not, and the caller checks that
line by line and the lines before and after it again as blocks. Rows of a
qualifying block that need a closer look (a content hint, edge whitespace, a short or possibly
repetitive output, a repeated key) are listed in `FastBlock.exact` / `dup_key_rows` for the exact
per-row checks, so the findings are the same as the line-by-line path's.

Why one parse per block is exact: the lines are joined as `[L1,\\n L2,\\n ...]`. A JSON string cannot
hold a raw newline, so no joiner is inside a string; every line ends with `}`; every parsed element is
an object of strings only (no nested container). A line-ending `}` followed by `,\\n` therefore closes
a top-level element, so element i ends where line i ends, and with exactly one element per line,
element i is `orjson.loads(line i)`.
"""

from __future__ import annotations

import sys
from dataclasses import dataclass
from operator import itemgetter
from typing import Any

from core.data.prefilter import Scratch, hit_lines
from core.data.stats import cjk_chars

from core.data.native import fastcols as _fastcols  # the byte and column passes in C, or None

USE_C = True  # tests turn the C passes off to compare them with the Python ones

_TAIL = itemgetter(slice(-8, None))  # content.maybe_repetitive: the last 8 characters occur 4 times
_strip = str.strip
_count = str.count
CLOSE, CR, NL, COLON = 125, 13, 10, 58  # } \r \n :


@dataclass(slots=True)
class FastBlock:
    """A block's rows, column by column: int64 numpy arrays on the numpy path; on the C path (no numpy)
    memoryviews of int64 ('q') for starts/ends, raw byte views for prompts/outputs, and `table`, the
    column table `_fastcols.fold` reads (li/ln/lo/rl/cjk are then None: fold reads them from there)."""

    k: int  # rows (= lines) in the block
    starts: Any  # offset of each line in the block
    ends: Any  # offset of each line's \n (or the block's end)
    ins: list[str]
    inp: list[str]
    outs: list[str]
    li: Any  # int64 lengths in characters
    ln: Any
    lo: Any
    rl: Any  # raw line lengths in bytes (CR included)
    cjk: Any  # exact non-ASCII counts (files with \\u escapes), else None
    prompts: Any  # hash((instruction, input)) per row
    outputs: Any  # hash(output) per row
    exact: list[int]  # rows for the exact content checks, in order
    hits: set[int]  # rows with a content hint (personal data is checked only there)
    dup_key_rows: list[int]  # rows whose `":` count is not 3: check for a repeated key
    table: Any = None  # the C path: columns() table (bytes), for _fastcols.fold


def c_passes():
    """The C extension when it is built and not turned off (tests), else None."""
    return _fastcols if USE_C else None


_FLAG_BYTE = 0 if sys.byteorder == "little" else 7  # the byte of an int64 0/1 flag that holds it


def read_block(np, loads, decode_error, body: bytes, a, keys: tuple[str, str, str], escaped: bool,
               scratch: Scratch | None) -> tuple[FastBlock | None, int | None]:
    """(the rows of `body`, None), or (None, index of the first line that is not an ordinary row, or None
    when that is not known). `body`: lines without the final newline; `a`: body as a numpy uint8 array
    (numpy path only: the C path needs no numpy)."""
    c = c_passes()
    if c is not None:
        return _c_block(c, loads, decode_error, body, keys, escaped)
    starts, ends, bad = _line_bounds(np, body, a, scratch)
    if bad is not None:
        return None, bad
    k = len(starts)
    rows, bad = _parse(loads, decode_error, b"".join((b"[", body.replace(b"\n", b",\n"), b"]")), k)
    if rows is None:
        return None, bad
    flags = scratch.flags[:len(body)]
    colons = int(np.count_nonzero(np.equal(a, np.uint8(COLON), out=flags)))
    got = _python_columns(np, rows, keys, escaped, colons)
    if type(got) is not tuple:
        return None, got
    del rows
    ins, inp, outs, li, ln, lo, prompts, outputs, cjk, exact = got
    hits = hit_lines(body, np, a, starts, scratch)
    # each row has its three keys, so at least three colons: 3 × k colons settles it at once
    dup_keys = [] if colons == 3 * k else _dup_key_rows(np, a, k, starts)
    return FastBlock(k, starts, ends, ins, inp, outs, li, ln, lo, ends - starts, cjk, prompts, outputs,
                     _with_hits(exact, hits), set(hits), dup_keys), None


def _c_block(c, loads, decode_error, body: bytes, keys: tuple[str, str, str], escaped: bool):
    """read_block with the C passes: line bounds, the shape test, hint lines and repeated-key lines in one
    pass over the bytes, the block as one JSON array in one copy, the columns in one walk of the rows."""
    starts, ends, bad, hits, dup_keys = c.scan_lines(body)
    if bad >= 0:
        return None, bad
    starts, ends = memoryview(starts).cast("q"), memoryview(ends).cast("q")
    k = len(starts)
    rows, bad = _parse(loads, decode_error, c.json_array(body, k), k)
    if rows is None:
        return None, bad
    got = c.columns(rows, *keys, escaped)
    if type(got) is int:
        return None, got
    del rows
    ins, inp, outs, table = got
    raw = memoryview(table)
    width = 8 * k
    flags = table[5 * width + _FLAG_BYTE:6 * width:8]  # column 5 (needs the exact checks), one byte a row
    exact = []
    i = flags.find(1)
    while i >= 0:
        exact.append(i)
        i = flags.find(1, i + 1)
    return FastBlock(k, starts, ends, ins, inp, outs, None, None, None, None, None, raw[3 * width:4 * width],
                     raw[4 * width:5 * width], _with_hits(exact, hits), set(hits), dup_keys, table), None


def _parse(loads, decode_error, joined: bytes, k: int):
    """(the k rows of a block joined as one JSON array, None), or (None, the first bad line or None)."""
    try:
        rows = loads(joined)
    except decode_error as exc:  # lineno is 1-based; line i of `joined` holds line i of body
        return None, max(0, min(k - 1, exc.lineno - 1)) if exc.lineno else None
    if len(rows) != k:
        return None, None
    return rows, None


def _with_hits(exact: list[int], hits) -> list[int]:
    if hits:
        exact += hits
    if len(exact) > 1:
        exact = sorted(set(exact))
    return exact


def _line_bounds(np, body: bytes, a, scratch: Scratch):
    """(starts, ends, None), or (None, None, the first line that cannot be an ordinary row): shorter than
    two bytes, or not ending in `}` (before an optional \\r). What `_fastcols.scan_lines` does in C."""
    flags = scratch.ensure(len(body)).flags[:len(body)]
    nl = np.flatnonzero(np.equal(a, np.uint8(NL), out=flags))
    k = len(nl) + 1
    starts = np.empty(k, dtype=np.int64)
    starts[0] = 0
    starts[1:] = nl + 1
    ends = np.empty(k, dtype=np.int64)
    ends[:-1] = nl
    ends[-1] = len(body)
    short = ends - starts < 2  # a blank line, or a line too short to be an object
    last = np.maximum(ends - 1, 0)
    if body.find(b"\r") >= 0:
        last -= (a[last] == CR) & (last > starts)
    bad = short | (a[last] != CLOSE)
    if bad.any():
        return None, None, int(np.argmax(bad))
    return starts, ends, None


def _python_columns(np, rows: list, keys: tuple[str, str, str], escaped: bool, colons: int):
    """What `_fastcols.columns` computes, with `map` over the rows: (ins, inp, outs, li, ln, lo, prompts,
    outputs, cjk, exact rows), or the index of the first odd row (None when not known)."""
    k = len(rows)
    k_ins, k_inp, k_out = keys
    try:
        ins = list(map(itemgetter(k_ins), rows))
        inp = list(map(itemgetter(k_inp), rows))
        outs = list(map(itemgetter(k_out), rows))
        s_ins = list(map(_strip, ins))  # str.strip refuses anything but a str: this is also the type check
        s_inp = list(map(_strip, inp))
        s_out = list(map(_strip, outs))
    except (KeyError, TypeError):  # a key missing, not an object, a value not a string
        return _first_odd(rows, keys)
    # 3 × k colons means exactly three keys each; else count them
    if colons != 3 * k and set(map(len, rows)) != {3}:
        return _first_odd(rows, keys)

    def column(values: list):  # from a list: np.fromiter straight over a map is several times slower
        return np.fromiter(values, np.int64, k)

    li = column(list(map(len, ins)))
    ln = column(list(map(len, inp)))
    lo = column(list(map(len, outs)))
    prompts = column(list(map(hash, zip(ins, inp))))
    outputs = column(list(map(hash, outs)))
    repeats = column(list(map(_count, outs, map(_TAIL, outs))))
    cjk = column(list(map(_cjk3, ins, inp, outs))) if escaped else None
    exact = np.flatnonzero((lo < 10) | ((lo >= 80) & (repeats >= 4))).tolist()
    if s_ins != ins or s_inp != inp or s_out != outs:
        exact += [i for i, (a1, b1, a2, b2, a3, b3) in enumerate(zip(s_ins, ins, s_inp, inp, s_out, outs))
                  if a1 is not b1 or a2 is not b2 or a3 is not b3]
    return ins, inp, outs, li, ln, lo, prompts, outputs, cjk, exact


def _first_odd(rows: list, keys: tuple[str, str, str]) -> int | None:
    """Index of the first row that is not an object of exactly the three keys with string values."""
    for i, row in enumerate(rows):
        if type(row) is not dict or len(row) != 3 or any(type(row.get(key)) is not str for key in keys):
            return i
    return None


def _dup_key_rows(np, a, k: int, starts) -> list[int]:
    """Rows whose raw text does not hold exactly three `":` (the line-by-line path's test for a repeated
    key). Every row has at least three colons, so exactly 3 × k colons in the block settles it at once."""
    pairs = np.flatnonzero((a[:-1] == 34) & (a[1:] == COLON))
    per_row = np.bincount(np.searchsorted(starts, pairs, side="right") - 1, minlength=k)
    return np.flatnonzero(per_row != 3).tolist()


def _cjk3(a: str, b: str, c: str) -> int:
    return cjk_chars(a) + cjk_chars(b) + cjk_chars(c)
