"""A CSV/TSV file read as a table, the one way lint (its rows) and convert (its units) read it: the file's
encoding, tab-separated when the first line has more tabs than commas or the name ends in .tsv."""

from __future__ import annotations

import csv
from pathlib import Path

from core.data.reader import ReadNotes, iter_text_lines, probe_file


def csv_reader(path: Path):
    probe = probe_file(path)
    text_lines = (t + "\n" for _n, t in iter_text_lines(path, probe.encoding, ReadNotes()))
    first = next(text_lines, "")
    dialect = "excel-tab" if first.count("\t") > first.count(",") or path.suffix.lower() == ".tsv" else "excel"

    def lines():
        yield first
        yield from text_lines

    return csv.reader(lines(), dialect=dialect)


def csv_rows(path: str | Path) -> int:
    """The table's rows below its header, as convert reads them (blank rows are not rows)."""
    reader = csv_reader(Path(path))
    if next(reader, None) is None:
        return 0
    return sum(1 for row in reader if any(c.strip() for c in row))
