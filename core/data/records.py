"""What the reader yields and notes (core/data/reader.py), shared by the readers of each layout."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from core.data.encoding import UTF8, EncodingGuess
from core.data.nested_json import NestedRows

BLOCK = 1 << 20
MAX_ELEMENT_CHARS = 512 << 20  # an element larger than this is cut and reported as truncated

JSONL, JSON_ARRAY, JSON_STREAM, TEXT, CSV, EMPTY = "jsonl", "json-array", "json-stream", "text", "csv", "empty"
JSON_NESTED = "json-nested"  # one JSON object whose rows are an array under a key path (core/data/nested_json.py)
JSON_LAYOUTS = (JSONL, JSON_ARRAY, JSON_STREAM, JSON_NESTED)


@dataclass(slots=True)
class Record:
    line: int  # 1-based line where the value starts
    raw: bytes  # the value's text as UTF-8 (no line terminator, no BOM)
    offset: int = -1  # byte offset in the file when the file is UTF-8, else -1
    decoded: str = UTF8  # utf-8 | gb18030 | utf-16 | invalid (bad bytes were replaced)


@dataclass
class ReadNotes:
    """What the reader saw about the file as a whole (lint turns these into findings)."""

    bom: bool = False
    crlf_lines: int = 0
    first_crlf_line: int = 0
    blank_lines: list[int] = field(default_factory=list)
    blank_line_count: int = 0
    final_newline: bool = True
    last_line: int = 0
    transcoded_lines: int = 0  # lines decoded as GB18030
    first_transcoded_line: int = 0
    invalid_lines: int = 0  # lines with bytes that are neither UTF-8 nor GB18030
    first_invalid_line: int = 0
    array_trailing_comma: tuple[int, int] | None = None  # (line, column) of `,]`
    syntax: list[tuple[int, int, str]] = field(default_factory=list)  # (line, col, message) between values
    lines: int = 0  # physical lines in the file

    MAX_BLANK_KEPT = 10000

    def blank(self, line: int) -> None:
        self.blank_line_count += 1
        if len(self.blank_lines) < self.MAX_BLANK_KEPT:
            self.blank_lines.append(line)


@dataclass(frozen=True)
class FileProbe:
    path: Path
    size: int
    encoding: EncodingGuess
    layout: str  # jsonl | json-array | json-stream | json-nested | text | csv | empty
    first_line: str  # the first non-blank line, shortened (for messages)
    nested: NestedRows | None = None  # json-nested: where the rows are and what beside them is left out
