"""The fast lint paths find exactly what the straightforward ones find.

- block fast path (one parse per block, column-wise checks in C, or with map() without the extension; a
  block with a bad row halved until the bad row is isolated) = line-by-line path = no-numpy path = the general per-row loop (the same rows read
  from a UTF-16 copy), on random files mixing ordinary rows with every kind of trouble;
- the block content hints are a superset of the rows where the exact per-row checks find personal data,
  zero-width characters or mojibake (with numpy and without);
- the C column pass returns exactly what the Python one computes, on rows of every shape;
- the duplicate finder agrees with a plain dict reference; the block reader cuts lines like split();
  the bulk finding builder and the early-exit repetition check agree with the plain versions.
"""

import json
import random
import sys
from array import array

import numpy as np
import orjson
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import core.dataset.fastblock as fastblock
import core.dataset.hotloop as hotloop
from core.dataset import content, prefilter
from core.dataset.findings import findings_for_pairs
from core.dataset.fingerprints import Fingerprints, _find_arrays, _find_with_dicts
from core.dataset.lint import lint_file

PIECES = ["13812345678", "+44 20 7946 0958", "555.123.4567", "(555) 123-4567", "555-123-4567",
          "li.lei@example.com", "a@b", "110101199003074518", "44030120080101123X", "2024-03-12", "12345",
          "\u200b", "\u200c", "\u2060", "\ufeff", "\ufffd", "锟斤拷", "Ã©", "â€œ", "Â¡", "错误", "生日",
          "中文", "，", "。", " ", "  ", "\t", "\n", "\u3000", "\xa0", "ok", "refund", "-", ".", "+", "@", ":", '"',
          "\\", "谢谢" * 45, "ab" * 50, "x"]
TEXT = st.lists(st.one_of(st.sampled_from(PIECES), st.text(max_size=6)), max_size=8).map("".join)
SETTINGS = settings(max_examples=60, deadline=None,
                    suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture])


@st.composite
def rows_file(draw) -> bytes:
    pool: list[dict] = []
    lines = []
    for _ in range(draw(st.integers(1, 40))):
        kind = draw(st.sampled_from(["row"] * 8 + ["dup", "conflict", "broken", "blank", "extra", "number",
                                                   "dupkey", "order"]))
        row = {"instruction": draw(TEXT), "input": draw(TEXT), "output": draw(TEXT)}
        if kind == "dup" and pool:
            row = dict(draw(st.sampled_from(pool)))
        elif kind == "conflict" and pool:
            row = {**draw(st.sampled_from(pool)), "output": draw(TEXT)}
        if kind == "order":
            row = {"output": row["output"], "instruction": row["instruction"], "input": row["input"]}
        pool.append(row)
        style = draw(st.sampled_from(["orjson", "json", "ascii"]))
        text = (orjson.dumps(row).decode() if style == "orjson"
                else json.dumps(row, ensure_ascii=style == "ascii"))
        if kind == "broken":
            text = text[: draw(st.integers(0, max(0, len(text) - 1)))]
        elif kind == "blank":
            text = draw(st.sampled_from(["", " "]))
        elif kind == "extra":
            text = text[:-1] + ', "history": []}'
        elif kind == "number":
            text = json.dumps({**row, "output": 42})
        elif kind == "dupkey":
            text = text[:-1] + ', "output": "again and again"}'
        lines.append(text)
    sep = draw(st.sampled_from(["\n", "\r\n"]))
    return (sep.join(lines) + (sep if draw(st.booleans()) else "")).encode("utf-8", "surrogatepass")


def _key(report):
    return [(f.rule, f.line, f.severity, f.fix, f.column, f.message) for f in report.findings]


def _lint(path, monkeypatch, **flags):
    with monkeypatch.context() as m:
        for name, value in flags.items():
            m.setattr(fastblock if name == "USE_C" else hotloop, name, value)
        return lint_file(path)


@SETTINGS
@given(body=rows_file(), block=st.sampled_from([64, 300, 4096]), split=st.sampled_from([100, 1 << 20]))
def test_fast_path_finds_what_the_line_by_line_paths_find(tmp_path_factory, monkeypatch, body, block, split):
    d = tmp_path_factory.mktemp("blocks")
    src = d / "t.jsonl"
    src.write_bytes(body)
    try:
        body.decode("utf-8")
    except UnicodeDecodeError:
        return
    fast = _lint(src, monkeypatch, BLOCK=block, SPLIT_BYTES=split)
    lines = _lint(src, monkeypatch, BLOCK=block, FAST_BLOCKS=False)
    plain = _lint(src, monkeypatch, BLOCK=block, USE_NUMPY=False)
    py_cols = _lint(src, monkeypatch, BLOCK=block, SPLIT_BYTES=split, USE_C=False)
    assert _key(fast) == _key(lines) == _key(plain) == _key(py_cols)
    assert fast.stats.to_json() == lines.stats.to_json() == plain.stats.to_json() == py_cols.stats.to_json()
    assert (fast.rows, fast.trainable_rows) == (lines.rows, lines.trainable_rows) == (plain.rows, plain.trainable_rows)
    if fast.layout != "jsonl" or fast.format != "alpaca":
        return
    u16 = d / "t16.jsonl"
    u16.write_bytes(body.decode("utf-8").encode("utf-16"))
    general = lint_file(u16)
    skip = {"encoding", "too-long"}
    assert [(f.rule, f.line, f.message) for f in general.findings if f.rule not in skip] == [
        (f.rule, f.line, f.message) for f in fast.findings if f.rule not in skip]
    assert (general.stats.duplicates, general.stats.conflicts) == (fast.stats.duplicates, fast.stats.conflicts)


def test_a_large_clean_file_takes_the_fast_path(tmp_path, monkeypatch):
    calls = {"fast": 0, "lines": 0}
    fast_rows, line_rows = hotloop._PartScan._fast_rows, hotloop._PartScan._line_rows

    def count_fast(self, *a):
        calls["fast"] += 1
        return fast_rows(self, *a)

    def count_lines(self, *a):
        calls["lines"] += 1
        return line_rows(self, *a)

    monkeypatch.setattr(hotloop._PartScan, "_fast_rows", count_fast)
    monkeypatch.setattr(hotloop._PartScan, "_line_rows", count_lines)
    monkeypatch.setattr(hotloop, "BLOCK", 4096)
    rng = random.Random(3)
    rows = [{"instruction": f"question {i} 请问", "input": "", "output": " ".join(rng.choices(PIECES[20:40], k=9))}
            for i in range(400)]
    src = tmp_path / "c.jsonl"
    src.write_bytes(b"\n".join(orjson.dumps(r) for r in rows) + b"\n")
    report = lint_file(src)
    assert report.rows == 400 and calls["fast"] >= 5 and calls["lines"] == 0


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
    assert fastblock._fastcols is not None, "core/dataset/_fastcols.c was not built: run `make envs` again"


# ------------------------------------------------------------------ the content hints are a superset

CONTENT_RULES = {"pii", "mojibake", "whitespace"}


@SETTINGS
@given(texts=st.lists(st.tuples(TEXT, TEXT, TEXT), min_size=1, max_size=12), ascii_=st.booleans())
def test_hints_cover_every_row_with_content_findings(texts, ascii_):
    raws = [json.dumps({"instruction": a, "input": b, "output": c}, ensure_ascii=ascii_).encode()
            for a, b, c in texts]
    body = b"\n".join(raws)
    a = np.frombuffer(body, np.uint8)
    starts = np.array([0] + [i + 1 for i, c in enumerate(body) if c == 10], dtype=np.int64)
    with_np = set(prefilter.hit_lines(body, np, a, starts))
    without = set(prefilter.hit_lines(body))
    for i, (x, y, z) in enumerate(texts):
        out: list = []
        content.check_texts((("instruction", x), ("input", y), ("output", z)), z, i + 1, out, pii=True)
        needed = {f.rule for f in out} & CONTENT_RULES
        if "whitespace" in needed and not any(content._ZW_RE.search(t) for t in (x, y, z)):
            needed.discard("whitespace")  # edge whitespace is checked on every row, not hinted
        if needed:
            assert i in with_np and i in without, (i, needed, texts[i])
        assert prefilter.row_may_hit(raws[i]) or not needed


# ------------------------------------------------------------------ duplicates, reader, builders

@settings(max_examples=80, deadline=None)
@given(rows=st.lists(st.tuples(st.integers(0, 6), st.integers(0, 3)), max_size=60), shuffle=st.booleans())
def test_duplicate_finder_agrees_with_the_dict_reference(rows, shuffle):
    lines = list(range(1, len(rows) + 1))
    if shuffle:
        random.Random(len(rows)).shuffle(lines)
    fp = Fingerprints(array("q", lines), array("q", [p * 7919 - 3 for p, _o in rows]),
                      array("q", [o for _p, o in rows]))
    want = _find_with_dicts([fp])
    got = _find_arrays(np.array(lines, dtype=np.int64), np.frombuffer(fp.prompts, dtype=np.int64),
                       np.frombuffer(fp.outputs, dtype=np.int64))
    assert got.duplicates == sorted(want.duplicates) and got.conflicts == sorted(want.conflicts)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(lines=st.lists(st.binary(max_size=40).map(lambda b: b.replace(b"\n", b"")), max_size=30),
       final=st.booleans(), block=st.sampled_from([1, 2, 7, 64]))
def test_block_reader_cuts_lines_like_split(tmp_path_factory, monkeypatch, lines, final, block):
    data = b"\n".join(lines) + (b"\n" if final and lines else b"")
    p = tmp_path_factory.mktemp("reader") / "r.bin"
    p.write_bytes(data)
    got, offsets = [], []
    with monkeypatch.context() as m:
        m.setattr(hotloop, "BLOCK", block)
        for body, offset, _final in hotloop._blocks(str(p), 0, len(data)):
            assert data[offset:offset + len(body)] == body
            got += body.split(b"\n")
            offsets.append(offset)
    want = data.split(b"\n")
    if data.endswith(b"\n"):
        want.pop()
    assert got == (want if data else [])
    assert offsets == sorted(offsets)


def test_findings_for_pairs_follows_the_template():
    pairs = [(3, 1), (9, 2)]
    plain = findings_for_pairs("duplicate", "L{line}: duplicate of L{other}; 100% sure", pairs)
    assert [f.message for f in plain] == ["L3: duplicate of L1; 100% sure", "L9: duplicate of L2; 100% sure"]
    swapped = findings_for_pairs("duplicate", "与 L{other} 重复：L{line}", pairs)
    assert [f.message for f in swapped] == ["与 L1 重复：L3", "与 L2 重复：L9"]
    odd = findings_for_pairs("conflict", "L{line:>4}: see {other!r}", pairs)
    assert odd[0].message == "L   3: see 1" and odd[0].severity == "warning" and odd[1].line == 9


@settings(max_examples=200, deadline=None)
@given(text=st.text(alphabet="ab谢c ", max_size=200))
def test_repetition_over_matches_the_plain_ratio(text):
    ratio = content.repetition_ratio(text)
    got = content.repetition_over(text, 0.6)
    assert got == (ratio if ratio > 0.6 else None)


@pytest.mark.parametrize("text", ["call 13812345678 now", "mail li.lei@example.com", "+44 20 7946 0958",
                                  "555.123.4567", "(555) 123-4567", "ID 110101199003074518", "a\u200bb",
                                  "bad \ufffd", "锟斤拷", "cafÃ© ok", "â€œquotedâ€", "Â¡hola"])
@pytest.mark.parametrize("ascii_", [False, True])
def test_each_marker_is_hinted(text, ascii_):
    raw = json.dumps({"instruction": "q", "input": "", "output": text}, ensure_ascii=ascii_).encode()
    body = b"\n".join([b'{"instruction":"x","input":"","output":"plain text here"}'] * 300 + [raw])
    a = np.frombuffer(body, np.uint8)
    starts = np.array([0] + [i + 1 for i, c in enumerate(body) if c == 10], dtype=np.int64)
    assert prefilter.hit_lines(body, np, a, starts) == [300]
    assert prefilter.hit_lines(body) == [300]
