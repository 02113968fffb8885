"""JSON values one after another in decoded text: the elements of a JSON array (pretty or on one line) or
pretty-printed objects back to back, each with the line where it starts.

Elements are found with the C JSON scanner (`json.JSONDecoder.raw_decode`) and, when an element is
broken, with a tolerant bracket scanner (`find_value_end`); memory holds one text buffer, not the file.
Nothing here raises on bad content: a broken element is still a Record.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Iterator

from core.data.encoding import GB18030, UTF8, CountingErrors, EncodingGuess, iter_text_chunks
from core.data.records import MAX_ELEMENT_CHARS, ReadNotes, Record
from core.i18n import _

_WS = re.compile(r"[ \t\r\n\ufeff]*")
_SIGNIFICANT = re.compile(r"[\"'{}\[\]\n]")
_STRING_BODY = {'"': re.compile(r'(?:[^"\\\n]|\\.)*"'), "'": re.compile(r"(?:[^'\\\n]|\\.)*'")}


def find_value_end(buf: str, pos: int, eof: bool) -> int | None:
    """End (exclusive) of the JSON-ish value starting at buf[pos], tolerant of broken syntax:
    brackets are balanced outside strings, a string ends at its quote or at the end of its line,
    single-quoted strings count too. None when the buffer ends first and more text may follow."""
    depth = 0
    i = pos
    n = len(buf)
    while i < n:
        m = _SIGNIFICANT.search(buf, i)
        if m is None:
            break
        ch = m.group()
        j = m.end()
        if ch in "\"'":
            body = _STRING_BODY[ch].match(buf, j)
            if body is None:
                nl = buf.find("\n", j)
                if nl < 0:
                    return n if eof else None
                i = nl  # unterminated string: recover at the end of the line
                continue
            i = body.end()
            continue
        if ch in "{[":
            depth += 1
        elif ch in "}]":
            depth -= 1
            if depth <= 0:
                return j if depth == 0 else m.start()
        elif ch == "\n" and depth <= 0:
            return m.start()
        i = j
    return n if eof else None


def iter_json_values(path: Path, enc: EncodingGuess, notes: ReadNotes, *, array: bool) -> Iterator[Record]:
    """Elements of a JSON array (`array`) or JSON values back to back (pretty-printed objects)."""
    decoder = json.JSONDecoder()
    handler = CountingErrors()
    chunks = iter_text_chunks(path, enc, handler)
    how = "utf-16" if enc.encoding.startswith("utf-16") else UTF8 if enc.is_utf8 else enc.python_codec
    buf = ""
    pos = 0
    line = 1  # line number of buf[counted]
    counted = 0
    eof = False

    def fill() -> bool:
        nonlocal buf, pos, counted, eof
        if eof:
            return False
        try:
            more = next(chunks)
        except StopIteration:
            eof = True
            return False
        if pos > len(buf) // 2 and pos > 0:
            advance_line(pos)
            buf, counted = buf[pos:], 0
            pos = 0
        buf += more
        return True

    def advance_line(to: int) -> None:
        nonlocal line, counted
        if to > counted:
            line += buf.count("\n", counted, to)
            counted = to

    def skip_ws() -> bool:
        nonlocal pos
        while True:
            pos = _WS.match(buf, pos).end()
            if pos < len(buf):
                return True
            if not fill():
                return False

    def col_of(at: int) -> int:
        return at - (buf.rfind("\n", 0, at) + 1) + 1

    fill()
    if not skip_ws():
        notes.lines = notes.last_line = line
        return
    if array and buf[pos] == "[":
        pos += 1
    elements = 0
    while skip_ws():
        ch = buf[pos]
        if array and ch == "]":
            pos += 1
            if skip_ws():
                advance_line(pos)
                notes.syntax.append((line, col_of(pos), _("text after the closing ]")))
            break
        if ch == ",":
            advance_line(pos)
            notes.syntax.append((line, col_of(pos), _("unexpected comma")))
            pos += 1
            continue
        start = pos
        while True:
            try:
                _value, end = decoder.raw_decode(buf, start)
                if end >= len(buf) and not eof and buf[start] not in "{[\"":
                    raise ValueError  # a bare number or word cut at the buffer end
                break
            except ValueError:
                end = find_value_end(buf, start, eof)
                if end is not None or len(buf) - start > MAX_ELEMENT_CHARS:
                    end = end if end is not None else len(buf)
                    break
                if not fill():
                    end = len(buf)
                    break
                start = pos  # fill() may have moved the buffer
        advance_line(start)
        text = buf[start:end]
        if not text.strip():
            pos = max(end, start + 1)
            continue
        elements += 1
        yield Record(line, text.encode(UTF8, errors="surrogatepass"), -1, how)
        pos = end
        if skip_ws() and buf[pos] == ",":
            comma = pos
            pos += 1
            if skip_ws() and array and buf[pos] == "]":
                advance_line(comma)
                notes.array_trailing_comma = (line, col_of(comma))
    advance_line(len(buf))
    notes.lines = notes.last_line = line
    if handler.count:
        notes.invalid_lines += handler.count
        notes.first_invalid_line = notes.first_invalid_line or 1
    if enc.encoding == GB18030:
        notes.transcoded_lines = max(notes.transcoded_lines, 1)
        notes.first_transcoded_line = notes.first_transcoded_line or 1


def iter_nested_values(path: Path, enc: EncodingGuess, notes: ReadNotes, at: tuple[str, ...]):
    """(line, value) of each element of the array at key path `at` inside the one JSON object of the file
    (core/data/nested_json.py chose it). The document is decoded whole: it was parsed whole to choose."""
    from json.decoder import scanstring

    handler = CountingErrors()
    text = "".join(iter_text_chunks(path, enc, handler)).lstrip("\ufeff")
    decoder = json.JSONDecoder()
    pos = _WS.match(text, 0).end()
    line, counted = 1, 0

    def ws(i: int) -> int:
        return _WS.match(text, i).end()

    for want in at:
        if text[pos] != "{":
            return
        pos = ws(pos + 1)
        while text[pos] == '"':
            key, pos = scanstring(text, pos + 1)
            pos = ws(ws(pos) + 1)  # past ':'
            if key == want:
                break
            _v, pos = decoder.raw_decode(text, pos)
            pos = ws(pos)
            pos = ws(pos + 1) if text[pos] == "," else pos
        else:
            return
        pos = ws(pos)
    if text[pos] != "[":
        return
    pos = ws(pos + 1)
    while pos < len(text) and text[pos] != "]":
        line += text.count("\n", counted, pos)
        counted = pos
        value, pos = decoder.raw_decode(text, pos)
        yield line, value
        pos = ws(pos)
        pos = ws(pos + 1) if pos < len(text) and text[pos] == "," else pos
    notes.lines = notes.last_line = line + text.count("\n", counted)
    if handler.count:
        notes.invalid_lines += handler.count
        notes.first_invalid_line = notes.first_invalid_line or 1
