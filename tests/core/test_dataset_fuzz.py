"""Reader, lint and fix on hostile input: random bytes, truncated lines, mixed encodings, broken JSON of
every kind, a 50 MB line. Never a crash or a hang; rows in = rows out + rows rejected; what fix writes
lints without errors."""

import json

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from core.data.fix import fix_file
from core.data.lint import LintOptions, lint_file
from core.data.preview import Preview

TEXT = st.text(alphabet=st.characters(codec="utf-8", exclude_categories=("Cs",)), max_size=40)


@st.composite
def good_row(draw) -> dict:
    return {"instruction": draw(TEXT), "input": draw(TEXT), "output": draw(TEXT)}


@st.composite
def line(draw) -> bytes:
    kind = draw(st.sampled_from(["good", "good", "good", "bytes", "truncated", "gbk", "repr", "comma", "blank",
                                 "two", "nan", "number", "array", "renamed", "control", "dupkey", "smart"]))
    row = draw(good_row())
    text = json.dumps(row, ensure_ascii=draw(st.booleans()))
    if kind == "good":
        return text.encode()
    if kind == "bytes":
        return draw(st.binary(max_size=60)).replace(b"\n", b" ")
    if kind == "truncated":
        return text.encode()[: draw(st.integers(0, max(0, len(text.encode()) - 1)))].replace(b"\n", b" ")
    if kind == "gbk":
        return json.dumps({"instruction": "你好" + row["instruction"][:3], "input": "", "output": "回答"},
                          ensure_ascii=False).encode("gb18030", "replace")
    if kind == "repr":
        return repr(row).encode("utf-8", "replace")
    if kind == "comma":
        return text[:-1].encode() + b",}"
    if kind == "blank":
        return draw(st.sampled_from([b"", b" ", b"\t", b"\r"]))
    if kind == "two":
        return text.encode() + json.dumps(draw(good_row())).encode()
    if kind == "nan":
        return text.replace('"output": ', '"output": NaN, "x": ', 1).encode()
    if kind == "number":
        return json.dumps({**row, "output": draw(st.integers())}).encode()
    if kind == "array":
        return json.dumps([row]).encode()
    if kind == "renamed":
        return json.dumps({"question": row["instruction"], "answer": row["output"]}).encode()
    if kind == "control":
        return text.replace('"input": "', '"input": "\t', 1).encode()
    if kind == "dupkey":
        return text[:-1].encode() + b', "output": "again"}'
    return text.replace('"', "“", 2).encode()


@st.composite
def dataset_file(draw) -> bytes:
    lines = draw(st.lists(line(), min_size=0, max_size=25))
    sep = draw(st.sampled_from([b"\n", b"\r\n"]))
    body = sep.join(lines) + (sep if draw(st.booleans()) else b"")
    if draw(st.booleans()):
        body = b"\xef\xbb\xbf" + body
    if draw(st.integers(0, 9)) == 0:
        body = b"[" + b",\n".join(lines) + b"]"
    return body


@settings(max_examples=120, deadline=None, suppress_health_check=[HealthCheck.too_slow,
                                                                   HealthCheck.function_scoped_fixture])
@given(body=dataset_file(), yes=st.booleans(), suffix=st.sampled_from([".jsonl", ".json"]))
@pytest.mark.timeout(600)
def test_lint_and_fix_never_lose_a_row(tmp_path_factory, body, yes, suffix):
    d = tmp_path_factory.mktemp("fuzz")
    src = d / f"in{suffix}"
    src.write_bytes(body)
    report = lint_file(src, LintOptions())
    for f in report.findings:
        assert f.line >= 1 and f.severity in ("error", "warning", "info") and f.message
    if report.layout in ("text", "csv", "empty"):
        return
    out = d / "out.jsonl"
    fixed = fix_file(src, out, yes=yes, lint=report)
    assert fixed.balanced, (fixed.rows_in, fixed.rows_out, fixed.rows_rejected)
    if out.stat().st_size:
        again = lint_file(out)
        assert again.errors == 0, [f.message for f in again.findings if f.severity == "error"]
        assert again.rows == fixed.rows_out
    pv = Preview(src)
    pv.first_page(10)
    pv.build()


@settings(max_examples=60, deadline=None)
@given(raw=st.binary(max_size=400))
@pytest.mark.timeout(300)
def test_random_bytes(tmp_path_factory, raw):
    d = tmp_path_factory.mktemp("bytes")
    src = d / "r.jsonl"
    src.write_bytes(raw)
    report = lint_file(src)
    if report.layout not in ("text", "csv", "empty"):
        assert fix_file(src, d / "o.jsonl", yes=True, lint=report).balanced


@pytest.mark.timeout(600)
def test_a_50_mb_line(tmp_path):
    src = tmp_path / "huge.jsonl"
    big = json.dumps({"instruction": "q", "input": "", "output": "长" * ((50 << 20) // 3)}, ensure_ascii=False)
    src.write_text('{"instruction": "a", "input": "", "output": "bbbbbbbbbbbb"}\n' + big + "\n"
                   + big[: len(big) // 2] + "\n")
    report = lint_file(src, LintOptions(cutoff_len=2048))
    assert report.rows == 3
    assert {(f.rule, f.line) for f in report.findings} >= {("too-long", 2), ("truncated", 3)}
    fixed = fix_file(src, tmp_path / "o.jsonl")
    assert fixed.balanced and (fixed.rows_out, fixed.rows_rejected) == (2, 1)
