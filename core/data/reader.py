"""Stream the records of a dataset file of any size, whatever its shape.

`probe_file` decides the encoding and the layout (JSON Lines, a JSON array, pretty-printed objects one
after another, or plain text / CSV that needs `convert`). `iter_records` then yields one `Record` per
JSON value with the 1-based line where it starts and its text as UTF-8 bytes, ready for `orjson.loads`:

- JSON Lines: CRLF, blank lines, a missing final newline and a BOM are noted in `ReadNotes`, never fatal;
  lines that are not UTF-8 are decoded as GB18030 when that works (and noted), else with bad bytes replaced.
- a JSON array, pretty or on one line, or pretty objects back to back: elements are found with the C JSON
  scanner and, when an element is broken, a tolerant bracket scanner (`core.data.jsonvalues`); memory
  holds one buffer, not the file.
- UTF-16 files are decoded incrementally.

Nothing here raises on bad content: a broken value is still a Record; judging it is lint's job.
"""

from __future__ import annotations

import codecs
import functools
import os
import re
from pathlib import Path
from typing import Iterator

from core.data.encoding import (BOM_UTF8, GB18030, UTF8, CountingErrors, EncodingGuess, decode_line, guess_encoding,
                                 iter_text_chunks)
from core.data.jsonvalues import iter_json_values, iter_nested_values
from core.data.nested_json import NestedRows, find_rows, flat_row, lifted
from core.data.records import (BLOCK, CSV, EMPTY, JSON_ARRAY, JSON_LAYOUTS, JSON_NESTED, JSON_STREAM,  # noqa: F401
                               JSONL, MAX_ELEMENT_CHARS, TEXT, FileProbe, ReadNotes, Record)
from core.i18n import _

def _first_text(path: Path, enc: EncodingGuess, limit: int = 64 * 1024) -> str:
    with open(path, "rb") as fh:
        head = fh.read(limit)
    if head.startswith(BOM_UTF8):
        head = head[3:]
    codec = enc.python_codec
    if codec.startswith("utf-16") and head[:2] in (b"\xff\xfe", b"\xfe\xff"):
        head = head[2:]
    return codecs.getincrementaldecoder(codec)(errors="replace").decode(head, final=False)


# `[12/03/2024, 10:15:22] Name: text` (a WhatsApp iOS export), `[2024-03-12 09:15:02] 用户：…`: a line that opens
# with a bracketed date is a chat log's, never JSON (no JSON value reads `12/03` or `2024-03`)
DATED_LINE = re.compile(r"\[\s*\d{1,4}[./\-年]\d{1,2}[./\-月]\d{1,4}")


def probe_file(path: str | os.PathLike) -> FileProbe:
    """Encoding and layout of a file. Raises OSError when it cannot be read."""
    p = Path(path)
    size = p.stat().st_size
    if p.is_dir():
        raise IsADirectoryError(_("{path} is a folder, not a file", path=p))
    enc = guess_encoding(p)
    text = _first_text(p, enc)
    stripped = text.lstrip("\ufeff \t\r\n")
    # JSON Lines end at "\n" only: str.splitlines() would also cut at U+0085 / U+2028 inside a string
    first_line = next((ln.strip() for ln in stripped.split("\n") if ln.strip()), "")
    if not stripped:
        layout = EMPTY
    elif stripped[0] == "[" and not DATED_LINE.match(first_line):
        layout = JSON_ARRAY
    elif stripped[0] == "{":
        layout = JSONL
        if first_line == "{" or first_line.endswith((",", "{", "[")) and not first_line.endswith("}"):
            layout = JSON_STREAM
    elif p.suffix.lower() in (".csv", ".tsv"):
        layout = CSV
    elif p.suffix.lower() in (".json", ".jsonl"):
        layout = JSONL  # JSON by name: lint shows what is wrong line by line
    else:
        layout = TEXT
    nested = None
    if layout in (JSONL, JSON_STREAM) and stripped[0] == "{" or layout == JSON_ARRAY:
        st = p.stat()
        nested = _nested_rows(str(p), st.st_size, st.st_mtime_ns, enc, layout == JSON_ARRAY)
        layout = JSON_NESTED if nested else layout
    return FileProbe(p, size, enc, layout, first_line[:120], nested)


@functools.lru_cache(maxsize=32)
def _nested_rows(path: str, _size: int, _mtime: int, enc: EncodingGuess, array: bool = False) -> NestedRows | None:
    """The rows inside a file that is one JSON object which is no row itself (an API response): None for
    JSON Lines, objects back to back, a single row. A top-level array (`array`) is parsed whole only when its
    first element must be lifted into a row (`nested_json.lifted`); other arrays stream as they are."""
    import orjson

    from core.data.schema import UNKNOWN, detect_schema

    if array:
        head = next(iter_json_values(Path(path), enc, ReadNotes(), array=True), None)
        try:
            if head is None or not lifted(orjson.loads(head.raw)):
                return None
            return find_rows(orjson.loads("".join(iter_text_chunks(Path(path), enc, CountingErrors()))
                                          .lstrip("\ufeff")))
        except orjson.JSONDecodeError:
            return None
    values = iter_json_values(Path(path), enc, ReadNotes(), array=False)
    first = next(values, None)
    if first is None or next(values, None) is not None:
        return None
    try:
        doc = orjson.loads(first.raw)
    except orjson.JSONDecodeError:
        return None
    if not isinstance(doc, dict) or detect_schema([doc]).kind != UNKNOWN:
        return None
    return find_rows(doc)


# ---------------------------------------------------------------- JSON Lines (UTF-8 / GB18030 bytes)

def iter_jsonl_records(path: Path, notes: ReadNotes, *, start: int = 0, end: int | None = None,
                       first_line: int = 1) -> Iterator[Record]:
    """Records of a JSON Lines file from byte `start` (a line start) to `end` (lines starting before it)."""
    line_no = first_line - 1
    with open(path, "rb") as fh:
        fh.seek(start)
        offset = start
        pending = b""
        stop = end if end is not None else float("inf")
        while offset < stop or pending:
            block = fh.read(BLOCK)
            if not block:
                if pending:
                    notes.final_newline = False
                    line_no += 1
                    yield from _jsonl_line(pending, line_no, offset, notes)
                    offset += len(pending)
                break
            data = pending + block if pending else block
            lines = data.split(b"\n")
            pending = lines.pop()
            for raw in lines:
                if offset >= stop:
                    pending = b""
                    break
                line_no += 1
                yield from _jsonl_line(raw, line_no, offset, notes)
                offset += len(raw) + 1
            else:
                continue
            break
        notes.lines = line_no
        notes.last_line = line_no


def _jsonl_line(raw: bytes, line_no: int, offset: int, notes: ReadNotes) -> Iterator[Record]:
    start = offset
    if line_no == 1 and raw.startswith(BOM_UTF8):
        notes.bom = True
        raw = raw[3:]
        start += 3
    if raw.endswith(b"\r"):
        raw = raw[:-1]
        notes.crlf_lines += 1
        if not notes.first_crlf_line:
            notes.first_crlf_line = line_no
    if not raw.strip():
        notes.blank(line_no)
        return
    if raw.isascii():
        yield Record(line_no, raw, start)
        return
    text, how = decode_line(raw)
    if how == UTF8:
        yield Record(line_no, raw, start)
        return
    if how == GB18030:
        notes.transcoded_lines += 1
        if not notes.first_transcoded_line:
            notes.first_transcoded_line = line_no
    else:
        notes.invalid_lines += 1
        if not notes.first_invalid_line:
            notes.first_invalid_line = line_no
    yield Record(line_no, text.encode(UTF8, errors="surrogatepass"), start, how)


# ---------------------------------------------------------------- decoded text (UTF-16, arrays, streams)

def iter_text_lines(path: Path, enc: EncodingGuess, notes: ReadNotes) -> Iterator[tuple[int, str]]:
    """(line number, text) of every line of a decoded file, CR stripped; notes CRLF and the final newline."""
    handler = CountingErrors()
    pending = ""
    line_no = 0
    for text in iter_text_chunks(path, enc, handler):
        data = pending + text
        parts = data.split("\n")
        pending = parts.pop()
        for part in parts:
            line_no += 1
            if part.endswith("\r"):
                part = part[:-1]
                notes.crlf_lines += 1
                notes.first_crlf_line = notes.first_crlf_line or line_no
            yield line_no, part
    if pending:
        line_no += 1
        notes.final_newline = False
        yield line_no, pending.rstrip("\r")
    if handler.count:
        notes.invalid_lines += handler.count
        notes.first_invalid_line = notes.first_invalid_line or 1
    notes.lines = notes.last_line = line_no


def iter_decoded_jsonl(path: Path, enc: EncodingGuess, notes: ReadNotes) -> Iterator[Record]:
    how = "utf-16" if enc.encoding.startswith("utf-16") else enc.python_codec
    for line_no, text in iter_text_lines(path, enc, notes):
        if not text.strip():
            notes.blank(line_no)
            continue
        yield Record(line_no, text.encode(UTF8, errors="surrogatepass"), -1, how)


# ---------------------------------------------------------------- a .txt dataset (pre-training text)

TEXT_COLUMN = "text"  # the one column datasets' text builder makes


def is_text_file(probe: FileProbe) -> bool:
    """Plain text in a .txt file: what LLaMA-Factory loads as rows of text, one per line."""
    return probe.layout == TEXT and probe.path.suffix.lower() == ".txt"


def iter_text_rows(probe: FileProbe, notes: ReadNotes) -> Iterator[Record]:
    """Every line of a .txt file as the Record of the row LLaMA-Factory reads from it, {"text": line}:
    datasets' text builder opens the file as UTF-8 text (universal newlines: "\n", "\r\n" and a lone "\r"
    each end a line, and the break is not kept) and makes a row of every line, an empty one too. `line`
    counts those rows (a lone "\r" starts a new one). A UTF-8 BOM is noted and left out of the text."""
    import orjson

    def record(line_no: int, text: str, how: str) -> Record:
        try:
            raw = orjson.dumps({TEXT_COLUMN: text})
        except TypeError:  # a lone surrogate: orjson refuses it
            import json

            raw = json.dumps({TEXT_COLUMN: text}, ensure_ascii=False).encode(UTF8, "surrogatepass")
        return Record(line_no, raw, -1, how)

    row = 0
    enc = probe.encoding
    if enc.encoding.startswith("utf-16"):
        notes.bom = enc.bom
        how = "utf-16"
        for _line, text in iter_text_lines(probe.path, enc, notes):
            for part in text.split("\r"):
                row += 1
                yield record(row, part, how)
        notes.lines = notes.last_line = row
        notes.crlf_lines = notes.first_crlf_line = 0  # datasets reads CRLF as a line break
        notes.final_newline = True
        return
    with open(probe.path, "rb") as fh:
        pending = b""
        while True:
            block = fh.read(BLOCK)
            data = pending + block
            lines = data.split(b"\n")
            pending = lines.pop() if block else b""
            for raw in lines if block or data else ():
                if raw.endswith(b"\r"):
                    raw = raw[:-1]
                for part in raw.split(b"\r"):
                    row += 1
                    if row == 1 and part.startswith(BOM_UTF8):
                        notes.bom = True
                        part = part[3:]
                    if part.isascii():
                        yield record(row, part.decode("ascii"), UTF8)
                        continue
                    text, how = decode_line(part)
                    if how == GB18030:
                        notes.transcoded_lines += 1
                        notes.first_transcoded_line = notes.first_transcoded_line or row
                    elif how != UTF8:
                        notes.invalid_lines += 1
                        notes.first_invalid_line = notes.first_invalid_line or row
                    yield record(row, text, how)
            if not block:
                break
    notes.lines = notes.last_line = row


def iter_records(probe: FileProbe, notes: ReadNotes | None = None) -> Iterator[Record]:
    """Every JSON value of the file as a Record, whatever the layout (a .txt file: the row of each line,
    `iter_text_rows`; other text/CSV files yield their lines)."""
    notes = notes if notes is not None else ReadNotes()
    enc = probe.encoding
    if is_text_file(probe):
        yield from iter_text_rows(probe, notes)
    elif probe.layout == JSON_NESTED and probe.nested:
        import orjson

        how = "utf-16" if enc.encoding.startswith("utf-16") else UTF8 if enc.is_utf8 else enc.python_codec
        for number, (_line, value) in enumerate(iter_nested_values(probe.path, enc, notes, probe.nested.at), 1):
            yield Record(number, orjson.dumps(flat_row(value, probe.nested.unwrap)), -1, how)  # NestedRows.element
    elif probe.layout in (JSON_ARRAY, JSON_STREAM):
        yield from iter_json_values(probe.path, enc, notes, array=probe.layout == JSON_ARRAY)
    elif probe.layout == EMPTY:
        return
    elif enc.encoding.startswith("utf-16"):
        notes.bom = enc.bom
        yield from iter_decoded_jsonl(probe.path, enc, notes)
    else:
        yield from iter_jsonl_records(probe.path, notes)


def input_problem(path: str | os.PathLike) -> str | None:
    """Why `path` cannot be a dataset at all, in words that name it (None when it can be read as one): the
    one verdict every data command gives for a missing, folder, empty, unreadable or binary file."""
    from core.data.wording import os_reason

    p = Path(path)
    try:
        st = p.stat()
    except FileNotFoundError:
        return _("{path}: no such file", path=p)
    except OSError as exc:
        return _("{path} cannot be read: {reason}", path=p, reason=os_reason(exc))
    if p.is_dir():
        return _("{path} is a folder, not a dataset file", path=p)
    if st.st_size == 0:
        return _("{path} is empty: there is nothing to read", path=p)
    try:
        with open(p, "rb") as fh:
            fh.read(1)
    except OSError as exc:
        return _("{path} cannot be read: {reason}", path=p, reason=os_reason(exc))
    from core.data.encoding import BINARY, guess_encoding

    from core.data.spreadsheet import is_spreadsheet

    if guess_encoding(p).encoding == BINARY and not is_spreadsheet(p):
        return _("{path} is binary data, not a text dataset (JSON Lines, JSON, CSV or plain text)", path=p)
    return None
