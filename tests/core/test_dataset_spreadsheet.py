"""Spreadsheets convert like CSV (each sheet, the header found below a title, merged cells filled), and every
format keeps its rows: rows in = rows out + rejects (issue 30). The workbooks are built here with openpyxl; the
.ods one is committed (tests/fixtures/data/spreadsheets/make_ods.py made it)."""

from __future__ import annotations

import csv
import json
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from core.data.convert import convert_file
from core.data.fix import fix_file
from core.data.sources import names_question_and_answer
from core.data.spreadsheet import find_header, read_tables

openpyxl = pytest.importorskip("openpyxl")
ODS = Path(__file__).parent.parent / "fixtures" / "data" / "spreadsheets" / "faq.ods"


def _book(path: Path, sheets: dict[str, list[list]], merges: dict[str, list[str]] | None = None) -> Path:
    wb = openpyxl.Workbook()
    wb.remove(wb.active)
    for name, rows in sheets.items():
        ws = wb.create_sheet(name)
        for row in rows:
            ws.append(row)
        for rng in (merges or {}).get(name, []):
            ws.merge_cells(rng)
    wb.save(path)
    return path


def _rows(path: Path) -> list[dict]:
    return [json.loads(x) for x in path.read_text(encoding="utf-8").splitlines()]


def test_each_sheet_a_title_above_the_header_and_a_merged_category(tmp_path):
    book = _book(tmp_path / "faq.xlsx", {
        "售后": [["售后常见问题 2024"], [], ["分类", "问题", "答案"], ["物流", "怎么查物流？", "在订单页查看。"],
                 [None, "多久发货？", "48 小时内。"]],
        "English": [["Question", "Answer"], ["Where is my order?", "See Orders."], ["No answer here", None]],
        "notes": [["just one cell"]]},
        {"售后": ["A1:C1", "A4:A5"]})
    tables = list(read_tables(book, names_question_and_answer))
    assert [(t.name, t.header_row) for t in tables] == [("售后", 3), ("English", 1)]
    body = list(tables[0].rows)
    assert body[1] == (5, ["物流", "多久发货？", "48 小时内。"])  # the merged category fills its range
    report = convert_file(book, tmp_path / "out.jsonl")
    assert (report.rows_in, report.rows_out, report.rows_rejected) == (4, 3, 1)
    assert [r["instruction"] for r in _rows(tmp_path / "out.jsonl")] == ["怎么查物流？", "多久发货？",
                                                                         "Where is my order?"]
    reject = _rows(tmp_path / "out.rejects.jsonl")[0]
    assert reject["raw"].startswith("English!3:") and "empty output" in reject["reason"]


def test_the_header_is_the_row_naming_question_and_answer():
    named = names_question_and_answer
    assert find_header([["Report", "2024"], ["", ""], ["id", "question", "answer"], ["1", "q", "a"]], named) == 2
    assert find_header([["", ""], ["name", "text"], ["x", "y"]], named) == 1  # none named: the first with two cells
    assert find_header([["title"], [""]], named) is None
    assert named(["序号", "用户问题", "客服回复"]) and not named(["name", "text"])


def test_an_ods_workbook_converts(tmp_path):
    report = convert_file(ODS, tmp_path / "out.jsonl")
    assert report.rows_out == 2 and _rows(tmp_path / "out.jsonl")[0]["output"] == "在订单页查看。"


def test_a_workbook_without_a_table_is_refused_with_the_reason(devtune_cli, tmp_path):
    book = _book(tmp_path / "empty.xlsx", {"S": [["only a title"]]})
    done = devtune_cli("data", "convert", str(book), "-o", str(tmp_path / "o.jsonl"))
    assert done.returncode == 2 and "no sheet has a header row" in done.stderr


# ------------------------------------------------------------------ rows in = rows out + rejects, every format

TEXT = st.one_of(st.text(st.characters(exclude_categories=("Cs", "Cc")), max_size=12), st.sampled_from(["", " ", "<p>a&nbsp;b</p>", "问题", "a\nb", "1"]))
PAIR = st.tuples(TEXT, TEXT)
SETTINGS = settings(max_examples=20, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])


def _counted(report, rejects: Path) -> None:
    lines = _rows(rejects) if rejects.exists() else []
    assert report.rows_in == report.rows_out + report.rows_rejected
    assert report.rows_rejected == sum(1 for r in lines if not r.get("trimmed"))
    assert report.trimmed == sum(1 for r in lines if r.get("trimmed"))


def _write(path: Path, layout: str, pairs: list[tuple[str, str]]) -> None:
    rows = [{"question": q, "answer": a} for q, a in pairs]
    if layout == "jsonl":
        path.write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in rows), encoding="utf-8")
    elif layout == "array":
        path.write_text(json.dumps(rows, ensure_ascii=False, indent=1), encoding="utf-8")
    elif layout == "nested":
        path.write_text(json.dumps({"code": 0, "data": {"list": rows, "total": len(rows)}}, ensure_ascii=False),
                        encoding="utf-8")
    elif layout == "sharegpt":
        convs = [{"conversations": [{"from": "human", "value": q}, {"from": "gpt", "value": a}]
                  + ([{"from": "human", "value": q}] if k % 2 else [])} for k, (q, a) in enumerate(pairs)]
        path.write_text("".join(json.dumps(c, ensure_ascii=False) + "\n" for c in convs), encoding="utf-8")
    elif layout == "csv":
        with open(path, "w", encoding="utf-8", newline="") as fh:
            csv.writer(fh).writerows([["question", "answer"]] + [list(p) for p in pairs])
    else:
        _book(path, {"S": [["Title"], ["question", "answer"]] + [list(p) for p in pairs]})


@pytest.mark.parametrize("layout,suffix", [("jsonl", ".jsonl"), ("array", ".json"), ("nested", ".json"),
                                           ("sharegpt", ".jsonl"), ("csv", ".csv"), ("xlsx", ".xlsx")])
@SETTINGS
@given(pairs=st.lists(PAIR, min_size=1, max_size=6), yes=st.booleans())
def test_rows_in_equal_rows_out_plus_rejects(tmp_path, layout, suffix, pairs, yes):
    src = tmp_path / f"src{suffix}"
    _write(src, layout, pairs)
    for old in tmp_path.glob("out*"):
        old.unlink()
    out = tmp_path / "out.jsonl"
    if layout in ("csv", "xlsx"):
        report = convert_file(src, out, source_format="csv")
        assert report.rows_in == report.rows_out + report.rows_rejected
        return
    report = fix_file(src, out, yes=yes)
    _counted(report, tmp_path / "out.rejects.jsonl")
    conv = convert_file(src, tmp_path / "out_c.jsonl")
    assert conv.rows_in == conv.rows_out + conv.rows_rejected


def test_lint_of_a_workbook_says_to_convert_it(devtune_cli, tmp_path):
    book = _book(tmp_path / "faq.xlsx", {"FAQ": [["问题", "答案"], ["怎么查物流？", "在订单页查看。"]]})
    out = devtune_cli("-w", str(tmp_path), "data", "lint", str(book))
    assert out.returncode == 1
    assert "a spreadsheet (.xlsx)" in out.stdout and "devtune data convert faq.xlsx -o data/NAME.jsonl" in out.stdout
    assert "binary data" not in out.stdout
    assert devtune_cli("-w", str(tmp_path), "data", "convert", str(book), "-o",
                       str(tmp_path / "data" / "faq.jsonl")).returncode == 0  # the command it names works
