"""A spreadsheet (.xlsx, .xlsm, .xls, .ods) read as tables, one per sheet, the way convert reads a CSV file.

Read with python-calamine (Rust; every format above through one reader; chosen on speed and memory at 100k rows
against openpyxl read-only and pandas: bench/spreadsheet.py, docs/steps/1-data.md). A merged cell's value fills
its whole range (a category merged down a column belongs to every row beside it). The header is the first row,
in the first 20, that names a question and an answer column (English or Chinese, core.data.sources); failing
that, the first row with two or more filled cells: a title row or blank rows above it are skipped.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Iterator

SPREADSHEET_SUFFIXES = (".xlsx", ".xlsm", ".xls", ".ods")
HEADER_SEARCH_ROWS = 20


@dataclass
class SheetTable:
    name: str
    header_row: int  # 1-based row of the header in the sheet
    header: list[str]
    rows: list[tuple[int, list[str]]]  # (1-based sheet row, cells as text) below the header


def is_spreadsheet(path: str | Path) -> bool:
    return Path(path).suffix.lower() in SPREADSHEET_SUFFIXES


def _text(cell) -> str:
    if cell is None:
        return ""
    if isinstance(cell, float) and cell.is_integer():
        return str(int(cell))
    return str(cell).strip()


def _filled(rows: list[list], merged, top: int, left: int) -> None:
    """Copy each merged range's top-left value into the rest of the range (in place)."""
    for (r0, c0), (r1, c1) in merged or ():
        r0, r1, c0, c1 = r0 - top, r1 - top, c0 - left, c1 - left
        if r0 < 0 or c0 < 0 or r0 >= len(rows):
            continue
        value = rows[r0][c0] if c0 < len(rows[r0]) else ""
        for r in range(r0, min(r1, len(rows) - 1) + 1):
            for c in range(c0, min(c1, len(rows[r]) - 1) + 1):
                rows[r][c] = value


def find_header(rows: list[list[str]], names_question_and_answer: Callable[[list[str]], bool]) -> int | None:
    """Index of the header row among the first rows (the first that `names_question_and_answer`, else the first
    with two filled cells), or None when no row has two filled cells."""
    first = None
    for i, row in enumerate(rows[:HEADER_SEARCH_ROWS]):
        cells = [c for c in row if c]
        if len(cells) < 2:
            continue
        if names_question_and_answer(row):
            return i
        first = i if first is None else first
    return first


def read_tables(path: str | Path, names_question_and_answer: Callable[[list[str]], bool]) -> Iterator[SheetTable]:
    """Every sheet with a header, in workbook order (sheets without two filled cells in a row are skipped)."""
    from python_calamine import CalamineWorkbook

    from core.errors import BadInput
    from core.i18n import _

    try:
        book = CalamineWorkbook.from_path(str(path))
    except Exception as exc:  # calamine raises its own error kinds for a broken or encrypted file
        raise BadInput(_("{file} cannot be read as a spreadsheet: {reason}", file=path, reason=exc)) from exc
    for name in book.sheet_names:
        sheet = book.get_sheet_by_name(name)
        rows = [[_text(c) for c in row] for row in sheet.to_python(skip_empty_area=False)]
        _filled(rows, sheet.merged_cell_ranges, 0, 0)  # the rows start at A1 (skip_empty_area=False)
        at = find_header(rows, names_question_and_answer)
        if at is None:
            continue
        header = rows[at]
        yield SheetTable(name, at + 1, header, list(enumerate(rows[at + 1:], start=at + 2)))
