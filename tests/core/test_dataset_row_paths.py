"""A row inside one JSON document (rows under a key path, core/data/nested_json.py) is named by its path and
index (`data.items[2]`), never by a line: a minified API response is one line, so every row was "L1". The
name is the same in lint's findings, fix's rejects file and convert's report, in English and Chinese."""

import json

import pytest

from core.data.convert import convert_file
from core.data.fix import fix_file
from core.data.lint import lint_file
from core.i18n import set_language

GOOD = [{"question": f"How do I reset password {n}?", "answer": f"Open settings, step {n}."} for n in range(4)]
BAD = {"question": "Where is my invoice?", "answer": {"html": "<p>In billing</p>"}}  # not text: rejected


@pytest.fixture
def minified(tmp_path):
    """An API response on one line, its third row bad: `data.items[2]`."""
    doc = {"code": 0, "msg": "ok", "data": {"items": GOOD[:2] + [BAD] + GOOD[2:], "has_more": False}}
    path = tmp_path / "faq_api.json"
    path.write_text(json.dumps(doc, ensure_ascii=False), encoding="utf-8")
    return path


@pytest.fixture(params=["en", "zh"])
def lang(request, monkeypatch):
    monkeypatch.setenv("DEVTUNE_LANG", request.param)
    set_language(request.param)
    return request.param


def _reject_lines(path):
    return [json.loads(x) for x in path.read_text(encoding="utf-8").splitlines()]


def test_lint_names_the_bad_row_by_its_path(minified, lang):
    report = lint_file(minified)
    bad = [f for f in report.findings if f.at]
    assert bad and {f.at for f in bad} == {"data.items[2]"}
    for f in bad:
        assert f.message.startswith("`data.items[2]`"), f.message
        assert "L1" not in f.message and "第 1 行" not in f.message
        assert f.to_json()["at"] == "data.items[2]"
    assert any(f.at == "" and f.rule == "json-array" for f in report.findings)  # the document itself: line 1


def test_fix_rejects_file_names_the_row_by_its_path(minified, tmp_path, lang):
    report = fix_file(minified, tmp_path / "fixed.jsonl", yes=True)
    assert (report.rows_in, report.rows_out, report.rows_rejected) == (5, 4, 1)
    (reject,) = _reject_lines(tmp_path / "fixed.rejects.jsonl")
    assert reject["at"] == "data.items[2]" and "line" not in reject
    assert reject["reason"].startswith("`data.items[2]`") and "Where is my invoice?" in reject["raw"]
    assert any("`data.items[2]`" in line for line in report.lines())


def test_convert_report_names_the_row_by_its_path(tmp_path, lang):
    doc = {"data": {"items": GOOD[:2] + [BAD] + GOOD[2:]}}
    src = tmp_path / "faq_api.json"
    src.write_text(json.dumps(doc), encoding="utf-8")
    report = convert_file(src, tmp_path / "out.jsonl")
    assert (report.rows_out, report.rows_rejected) == (4, 1)
    (reject,) = _reject_lines(tmp_path / "out.rejects.jsonl")
    assert reject["at"] == "data.items[2]" and "line" not in reject


def test_duplicates_inside_one_line_document_point_at_each_other(tmp_path, monkeypatch):
    doc = {"data": [GOOD[0], GOOD[1], GOOD[0]]}
    src = tmp_path / "dups.json"
    src.write_text(json.dumps(doc), encoding="utf-8")
    monkeypatch.setenv("DEVTUNE_LANG", "en")
    dup = [f for f in lint_file(src).findings if f.rule == "duplicate"]
    assert [(f.at, f.message.split(";")[0]) for f in dup] == [("data[2]", "`data[2]`: duplicate of `data[0]`")]


def test_json_lines_keep_their_line_numbers(tmp_path, monkeypatch):
    src = tmp_path / "rows.jsonl"
    src.write_text("".join(json.dumps(r) + "\n" for r in GOOD[:2] + [BAD]), encoding="utf-8")
    monkeypatch.setenv("DEVTUNE_LANG", "en")
    bad = [f for f in lint_file(src).findings if f.line == 3 and f.rule == "non-string"]
    assert bad and not bad[0].at and bad[0].message.startswith("L3")
    fix_file(src, tmp_path / "fixed.jsonl", yes=True)
    assert _reject_lines(tmp_path / "fixed.rejects.jsonl")[0]["line"] == 3
