"""The lint's C passes (core/data/_fastcols.c) compute exactly what the Python and numpy passes they
replace compute: the column pass on rows of every shape, the repetition test on every string width, the
byte pass (line bounds, shape test, hint lines, repeated-key lines) on generated blocks and on every pair
of hint edge pieces, the colon counter on long blocks; and the extension is built wherever a C compiler is.
The findings of whole files through both are compared in test_dataset_blockscan.py."""

import json
import sys

import numpy as np
import orjson
import pytest
from hypothesis import given
from hypothesis import strategies as st

import core.data.fastblock as fastblock
from core.data import content, prefilter
from tests.core.test_dataset_blockscan import PIECES, SETTINGS, TEXT

# ------------------------------------------------------------------ the C column pass = the Python one

EDGES = ["", " ", "\t", "\x1c", "\x85", "\xa0", "\u2028", "\u3000", "\ud800", "\U0001f600", "é", "中"]
CELL = st.one_of(TEXT, st.builds(lambda a, t, b: a + t + b, st.sampled_from(EDGES), TEXT, st.sampled_from(EDGES)),
                 st.builds(lambda t, n: (t or "ab") * n, st.text(max_size=9), st.integers(1, 40)),
                 # the thresholds: 10 characters (short), 80 (repetition judged), the tail 3 or 4 times
                 st.builds(lambda c, n: c * n, st.sampled_from("a中 \U0001f600"), st.integers(8, 11)),
                 st.builds(lambda c, n, r: c * n + "12345678" * r, st.sampled_from("a中\U0001f600"), st.integers(54, 60),
                           st.integers(3, 4)))
KEYS = ("instruction", "input", "output")


@st.composite
def parsed_rows(draw) -> list:
    rows = []
    for _ in range(draw(st.integers(1, 30))):
        row = dict(zip(KEYS, (draw(CELL) for _ in KEYS)))
        odd = draw(st.sampled_from([None] * 12 + ["list", "extra", "missing", "number", "none", "renamed"]))
        if odd == "list":
            row = list(row.values())
        elif odd == "extra":
            row["history"] = []
        elif odd == "missing":
            del row[draw(st.sampled_from(KEYS))]
        elif odd in ("number", "none"):
            row[draw(st.sampled_from(KEYS))] = 7 if odd == "number" else None
        elif odd == "renamed":
            row["prompt"] = row.pop("instruction")
        rows.append(row)
    return rows


def _normalise(got):
    if type(got) is not tuple:
        return got
    ins, inp, outs, li, ln, lo, prompts, outputs, cjk, exact = got
    return (ins, inp, outs, [np.asarray(x).tolist() for x in (li, ln, lo, prompts, outputs)],
            None if cjk is None else np.asarray(cjk).tolist(), sorted(set(exact)))


@pytest.mark.skipif(fastblock._fastcols is None, reason="the C extension is not built here")
@SETTINGS
@given(rows=parsed_rows(), escaped=st.booleans())
def test_c_columns_compute_what_the_python_columns_compute(rows, escaped):
    got = fastblock._fastcols.columns(rows, *KEYS, escaped)
    if type(got) is int:
        # the first row that is not a dict of exactly the three keys with str values
        assert got == fastblock._first_odd(rows, KEYS)
        return
    ins, inp, outs, table = got
    k = len(rows)
    t = np.frombuffer(table, np.int64).reshape(-1, k)
    assert len(t) == (7 if escaped else 6)
    c = (ins, inp, outs, t[0], t[1], t[2], t[3], t[4], t[6] if escaped else None, np.flatnonzero(t[5]).tolist())
    colons = 3 * k  # every row here has exactly its three keys
    assert _normalise(c) == _normalise(fastblock._python_columns(np, rows, KEYS, escaped, colons))
    assert all(a is b for a, b in zip(ins, (r["instruction"] for r in rows)))  # the same objects, not copies
    if sys.implementation.name == "cpython":  # hash((a, b)) computed without building the tuple
        assert fastblock._fastcols.TUPLE_HASH_INLINE == 1


# the edges of the hint rules: runs of 2/3 and 3/4 digits around - or ., 10/11 digits, each e-mail
# local-part character, + before 0 and 9, escapes in either case, near-miss escapes
HINT_EDGES = ["55-1234", "555-123", "555-1234", "12.3456", "123.4567", "1234567890", "12345678901", "%@", "_@",
              "-@", ".@", "+@", " @", "+0", "+9", "\\u200B", "\\u200e", "\\u00C3", "\\uFFFD", "\\u951F",
              "\\u00e2", "\\u2061", "\\U200b", "\\u200D", "\u200d", "\u200e", "\u00a0", "\ue000", "\u9500"]
HINTY = st.lists(st.sampled_from(PIECES + HINT_EDGES), max_size=8).map("".join)


@st.composite
def block_bytes(draw) -> bytes:
    """Lines as the fast path sees them: rows with hint-prone text, blank or cut lines, spaced or repeated
    keys, \\r endings, JSON escapes, stray bytes."""
    lines = []
    for _ in range(draw(st.integers(1, 25))):
        row = {"instruction": draw(HINTY), "input": draw(TEXT), "output": draw(HINTY)}
        style = draw(st.sampled_from(["orjson", "orjson", "ascii", "spaced", "dupkey", "cut", "blank", "junk"]))
        text = (json.dumps(row, ensure_ascii=True) if style == "ascii"
                else json.dumps(row, separators=(", ", " : ")) if style == "spaced" else orjson.dumps(row).decode())
        if style == "dupkey":
            text = text[:-1] + ',"output":"x"}'
        elif style == "cut":
            text = text[: draw(st.integers(0, len(text)))]
        elif style == "blank":
            text = draw(st.sampled_from(["", " ", "}", "\r"]))
        raw = text.encode("utf-8", "surrogatepass")
        if style == "junk":
            raw = draw(st.binary(max_size=30)).replace(b"\n", b"") + b"}"
        lines.append(raw + (b"\r" if draw(st.booleans()) else b""))
    return b"\n".join(lines) or b"\n"  # the hot loop hands over no empty block


@pytest.mark.skipif(fastblock._fastcols is None, reason="the C extension is not built here")
def test_c_repetition_test_on_every_width_and_offset():
    """The tail-count test on 1-, 2- and 4-byte strings, the tail at every parity and count 2 to 5, and
    tails that overlap themselves (str.count does not count overlaps): flagged exactly when
    content.maybe_repetitive says so."""
    outputs = [c * n + unit * r for c in ("a", "中", "\U0001f600") for n in range(50, 62) for r in range(2, 6)
               for unit in ("12345678", "中文中文中文中文", "\U0001f600b" * 4, "aaaaaaaa")]
    outputs += [c * 70 + unit * k for c in ("x", "中") for unit in ("ab", "文b", "\U0001f600b") for k in range(4, 20)]
    rows = [{"instruction": "q", "input": "", "output": o} for o in outputs]
    *_cols, table = fastblock._fastcols.columns(rows, *KEYS, False)
    flags = np.frombuffer(table, np.int64).reshape(-1, len(rows))[5].tolist()
    assert flags == [int(content.maybe_repetitive(o)) for o in outputs]


@pytest.mark.skipif(fastblock._fastcols is None, reason="the C extension is not built here")
@SETTINGS
@given(body=block_bytes())
def test_c_byte_pass_finds_what_the_numpy_passes_find(body):
    a = np.frombuffer(body, np.uint8)
    scratch = prefilter.Scratch(np)
    starts, ends, bad, hits, dup_keys = fastblock._fastcols.scan_lines(body)
    starts, ends = np.frombuffer(starts, np.int64), np.frombuffer(ends, np.int64)
    splits = body.split(b"\n")
    assert [body[s:e] for s, e in zip(starts.tolist(), ends.tolist())] == splits
    np_starts, _, np_bad = fastblock._line_bounds(np, body, a, scratch)
    assert (bad if bad >= 0 else None) == np_bad
    assert hits == prefilter.hit_lines(body, np, a, starts, scratch)
    k = len(splits)
    colons = body.count(b":")
    assert dup_keys == ([] if colons == 3 * k else fastblock._dup_key_rows(np, a, k, starts))
    assert fastblock._fastcols.json_array(body, k) == b"".join((b"[", body.replace(b"\n", b",\n"), b"]"))
    for wrong in (k - 1, k + 1):
        with pytest.raises(ValueError):
            fastblock._fastcols.json_array(body, wrong)


@pytest.mark.skipif(fastblock._fastcols is None, reason="the C extension is not built here")
def test_c_byte_pass_on_every_pair_of_edge_pieces():
    """Each hint edge alone on its line, and every pair of pieces side by side (one line each), written
    as orjson and as ASCII-escaped JSON: the C pass marks exactly the lines the numpy passes mark."""
    pieces = PIECES + HINT_EDGES
    texts = ["ok " + a + b for a in pieces for b in pieces] + ["x" + a for a in pieces]
    for dump in (lambda t: orjson.dumps({"instruction": "q", "input": "", "output": t}),
                 lambda t: json.dumps({"instruction": "q", "input": "", "output": t}).encode()):
        body = b"\n".join(dump(t) for t in texts) + b"\n\\u200b"  # the last bytes of a block
        a = np.frombuffer(body, np.uint8)
        starts, _ends, bad, hits, _dup = fastblock._fastcols.scan_lines(body)
        starts = np.frombuffer(starts, np.int64)
        expected = prefilter.hit_lines(body, np, a, starts, prefilter.Scratch(np))
        assert bad == len(texts) and expected[-1] == len(texts) and len(expected) > len(texts) // 4
        missing, extra = sorted(set(expected) - set(hits)), sorted(set(hits) - set(expected))
        assert not missing and not extra, ([texts[i] for i in missing[:5]], [texts[i] for i in extra[:5]])


@pytest.mark.skipif(fastblock._fastcols is None, reason="the C extension is not built here")
@pytest.mark.parametrize("rows", [3, 700, 3000])
def test_c_byte_pass_counts_colons_in_a_long_block(rows):
    """A line with a spaced key has three colons but two `":`: only when the block's colon count is not
    three a line are the lines counted one by one (and then that line is listed)."""
    lines = [orjson.dumps({"instruction": "q", "input": "", "output": "x" * (i % 50)}) for i in range(rows)]
    lines.insert(rows // 2, b'{"instruction" : "a", "input":"", "output":"b"}')
    body = b"\n".join(lines)
    assert fastblock._fastcols.scan_lines(body)[4] == []
    assert fastblock._fastcols.scan_lines(body + b'\n{"instruction":"a:","input":"","output":"b"}')[4] == [rows // 2]
    # 8,192 colons in a row, starting at a multiple of 8,192 bytes: 256 in each counter lane within one
    # stretch of 256 × 32 bytes (a byte-wide counter flushed every 256 steps would wrap to 0 and find
    # exactly three colons a line); that row's `"::::` makes it a row to check too
    head = body + b"\n"
    pad = -(len(head) + len(b'{"instruction":"q","input":"","output":"')) % 8192
    colons = orjson.dumps({"instruction": "q" + "x" * pad, "input": "", "output": ":" * 8192})
    assert (len(head) + colons.index(b":::")) % 8192 == 0
    assert fastblock._fastcols.scan_lines(head + colons)[4] == [rows // 2, rows + 1]


def test_the_c_extension_is_built_where_a_compiler_is():
    """setup.py marks the extension optional: a failed build would only make lint slower, silently.
    Where this machine has a C compiler (CI, the dev boxes), it must have been built."""
    import shutil
    import sysconfig

    if shutil.which(sysconfig.get_config_var("CC").split()[0] if sysconfig.get_config_var("CC") else "cc") is None:
        pytest.skip("no C compiler on this machine: the Python column pass is used")
    assert fastblock._fastcols is not None, "core/data/_fastcols.c was not built: run `make envs` again"
