"""The fast lint paths find exactly what the straightforward ones find.

- block fast path (one parse per block, column-wise checks in C, or with map() without the extension; a
  block with a bad row halved until the bad row is isolated) = line-by-line path = no-numpy path = the
  general per-row loop (the same rows read from a UTF-16 copy), on random files mixing ordinary rows
  with every kind of trouble (the C passes alone against the Python ones: test_dataset_fastcols.py);
- the block content hints are a superset of the rows where the exact per-row checks find personal data,
  zero-width characters or mojibake (with numpy and without);
- the duplicate finder agrees with a plain dict reference; the block reader cuts lines like split();
  the bulk finding builder and the early-exit repetition check agree with the plain versions.
"""

import json
import random
from array import array
from pathlib import Path

import numpy as np
import orjson
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import core.data.fastblock as fastblock
import core.data.hotloop as hotloop
from core.data import content, prefilter
from core.data.findings import Finding, findings_for_pairs
from core.data.fingerprints import Fingerprints, _find_arrays, _find_with_dicts, _report, find_duplicates
from core.data.lint import lint_file

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
    # line by line with numpy (hints, fold), and with neither numpy nor the C passes
    lines = _lint(src, monkeypatch, BLOCK=block, FAST_BLOCKS=False, USE_C=False)
    plain = _lint(src, monkeypatch, BLOCK=block, USE_NUMPY=False, USE_C=False)
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


@pytest.mark.parametrize("escape", [False, True])
def test_the_c_fold_counts_what_numpy_and_python_count(tmp_path, monkeypatch, escape):
    """Lengths past the exact histogram (8192), token estimates past cutoff_len, CJK rows with and
    without \\u escapes: the C fold, numpy's and the plain one give the same stats and findings."""
    if fastblock._fastcols is None:
        pytest.skip("no C compiler here: the extension was not built")
    rng = random.Random(5)
    rows = []
    for i in range(3000):
        out = " ".join(rng.choices(PIECES, k=rng.choice([3, 40, 400])))
        if i % 97 == 0:
            out = "长" * 9000 if i % 2 else "word " * 2500
        rows.append({"instruction": f"问题 {i}" if i % 3 else f"question {i}", "input": "", "output": out})
    src = tmp_path / "f.jsonl"
    src.write_text("\n".join(json.dumps(r, ensure_ascii=escape) for r in rows) + "\n")
    got = {name: _lint(src, monkeypatch, BLOCK=1 << 16, **flags) for name, flags in [
        ("c", {}), ("numpy", {"USE_C": False}), ("plain", {"USE_C": False, "USE_NUMPY": False})]}
    assert got["c"].stats.fields["output"]["max"] >= 9000 and got["c"].stats.tokens["max"] > 8192
    assert _key(got["c"]) == _key(got["numpy"]) == _key(got["plain"])
    assert got["c"].stats.to_json() == got["numpy"].stats.to_json() == got["plain"].stats.to_json()
    assert sum(f.rule == "too-long" for f in got["c"].findings) > 10


def test_a_c_lint_imports_no_numpy(tmp_path):
    """With the C passes the lint (--jobs 2 included) never imports numpy: ~0.1 s of start-up saved."""
    import subprocess
    import sys

    if fastblock._fastcols is None:
        pytest.skip("no C compiler here: the extension was not built")
    src = tmp_path / "n.jsonl"
    row = '{"instruction": "question %d about orders", "input": "", "output": "answer %d, long enough here"}'
    src.write_text("\n".join(row % (i, i % 5000) for i in range(120000)) + "\n")
    assert src.stat().st_size > 8 << 20
    code = ("import sys; from core.data.lint import LintOptions, lint_file; "
            f"r = lint_file({str(src)!r}, LintOptions(jobs=2)); "
            "print(r.rows, r.stats.duplicates, 'numpy' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True,
                         cwd=Path(__file__).resolve().parents[2])
    assert out.stdout.split() == ["120000", "0", "False"]


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

# prompt hashes that share their top 33 bits (what the C finder sorts by) but differ below, negative ones,
# and the extremes of int64
_PROMPTS = [7919, -3, 5 << 40, (5 << 40) + 1, (5 << 40) + (1 << 30), -(1 << 63), (1 << 63) - 1, 0]


@settings(max_examples=120, deadline=None)
@given(rows=st.lists(st.tuples(st.sampled_from(_PROMPTS), st.integers(-2, 3)), max_size=80),
       shuffle=st.booleans(), cuts=st.lists(st.integers(0, 80), max_size=3))
def test_duplicate_finders_agree_with_the_dict_reference(rows, shuffle, cuts):
    """numpy and C find what the dict reference finds, whatever the parts (line order across parts
    mixed, as the exact path's rows are) and however close the prompt hashes are."""
    lines = list(range(1, len(rows) + 1))
    if shuffle:
        random.Random(len(rows)).shuffle(lines)
    prompts, outputs = [p for p, _o in rows], [o for _p, o in rows]
    fp = Fingerprints(array("q", lines), array("q", prompts), array("q", outputs))
    want = _find_with_dicts([fp])
    got = _report(*_find_arrays(np.array(lines, dtype=np.int64), np.frombuffer(fp.prompts, dtype=np.int64),
                                np.frombuffer(fp.outputs, dtype=np.int64)))
    assert got.duplicates == want.duplicates and got.conflicts == want.conflicts
    if fastblock._fastcols is None:
        return
    bounds = sorted({0, len(rows), *(min(c, len(rows)) for c in cuts)})
    parts = [Fingerprints(array("q", [x - 100 for x in lines[a:b]]), array("q", prompts[a:b]),
                          array("q", outputs[a:b]), 100) for a, b in zip(bounds, bounds[1:])]
    c = find_duplicates(parts)
    assert c.duplicates == want.duplicates and c.conflicts == want.conflicts


def test_the_c_duplicate_finder_rejects_bad_columns():
    c = fastblock._fastcols
    if c is None:
        pytest.skip("no C compiler here: the extension was not built")
    q = array("q", [1, 2])
    with pytest.raises(ValueError):
        c.duplicates([(q, q, array("q", [1]), 0)])
    with pytest.raises(ValueError):
        c.duplicates([(q, q, array("i", [1, 2, 3, 4]), 0)])
    with pytest.raises(TypeError):
        c.duplicates([(q, q, q)])
    assert c.duplicates([]) == (b"", b"", b"", b"")
    assert [memoryview(b).cast("q").tolist() for b in c.duplicates([(q, array("q", [9, 9]), q, 10)])] == [
        [], [], [12], [11]]


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


@pytest.mark.parametrize("use_c", [True, False])
def test_findings_for_pairs_follows_the_template(monkeypatch, use_c):
    from core.data import findings

    if use_c and findings._pairs_in_c() is None:
        pytest.skip("no C compiler here: the extension was not built")
    monkeypatch.setattr(findings, "USE_C", use_c)
    pairs = [3, 9], [1, 2]
    plain = findings_for_pairs("duplicate", "L{line}: duplicate of L{other}; 100% sure", *pairs)
    assert [f.message for f in plain] == ["L3: duplicate of L1; 100% sure", "L9: duplicate of L2; 100% sure"]
    assert [(f.rule, f.severity, f.line, f.fix, f.column, f.fixable) for f in plain] == [
        ("duplicate", "warning", 3, "safe", None, True), ("duplicate", "warning", 9, "safe", None, True)]
    swapped = findings_for_pairs("duplicate", "与 L{other} 重复：L{line}", *pairs)
    assert [f.message for f in swapped] == ["与 L1 重复：L3", "与 L2 重复：L9"]
    odd = findings_for_pairs("conflict", "L{line:>4}: see {other!r}", *pairs)
    assert odd[0].message == "L   3: see 1" and odd[0].severity == "warning" and odd[1].line == 9
    edges = findings_for_pairs("conflict", "{line}{other}", [0, 7, 1 << 62], [-(1 << 63), 10, 5])
    assert [f.message for f in edges] == ["0" + str(-(1 << 63)), "710", str(1 << 62) + "5"]
    assert findings_for_pairs("conflict", "{other}-{line}", [], []) == []
    assert all(type(f) is Finding for f in plain + swapped + odd + edges)
    edges[0].line += 1  # an ordinary, mutable Finding
    assert edges[0].sort_key() == (1, 0, 1, "conflict")


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
