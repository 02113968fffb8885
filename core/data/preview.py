"""Pages of rows for the Data screen's preview, from a file of any size.

UTF-8/GB18030 JSON Lines are paged through a `LineIndex` (built in the background; the first page is
read from the head of the file before the index exists), so a 500 MB file shows its first rows at once.
Other layouts (JSON arrays, pretty objects, UTF-16) keep the records they have read, up to a memory cap.
Page positions are 0-based; a JSON Lines position is the physical line - 1 (blank lines included).
"""

from __future__ import annotations

import bisect
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable

from core.data.encoding import decode_line
from core.data.index import LineIndex, head_lines
from core.data.reader import JSONL, ReadNotes, iter_records, probe_file
from core.data.schema import ALPACA, PREFERENCE, PRETRAIN, Schema
from core.i18n import _

RECORD_CACHE_BYTES = 64 << 20
CELL_CHARS = 200


@dataclass
class PreviewRow:
    line: int
    raw: str
    value: Any = None
    error: str | None = None  # why this line is not a row (blank, invalid JSON)

    def cells(self, schema: Schema) -> list[str]:
        """Short texts for the table columns of `columns(schema)`."""
        v = self.value
        if self.error is not None:
            return [_short(self.error), _short(self.raw)] + [""] * (len(columns(schema)) - 2)
        if not isinstance(v, dict):
            return [_short(self.raw)] + [""] * (len(columns(schema)) - 1)
        if schema.task == PRETRAIN:
            return [_short(_text(v.get(schema.prompt, "")))]
        if schema.task == PREFERENCE:
            from core.data.render import row_messages

            _sys, chosen = row_messages(v, schema, "chosen")
            _sys, rejected = row_messages(v, schema, "rejected")
            prompt = next((m["content"] for m in reversed(chosen[:-1]) if m["role"] == "user"), "")
            return [_short(prompt), _short(chosen[-1]["content"]), _short(rejected[-1]["content"])]
        if schema.kind == ALPACA:
            keys = [schema.prompt, schema.query, schema.response]
            if schema.prompt not in v or schema.response not in v:  # other keys: show the row as it is
                return [_short(self.raw), "", ""]
            return [_short(_text(v.get(k, ""))) if k else "" for k in keys]
        turns = v.get(schema.messages) if isinstance(v.get(schema.messages), list) else []
        texts = [t.get(schema.content_tag, "") for t in turns if isinstance(t, dict)]
        first = next((t.get(schema.content_tag, "") for t in turns if isinstance(t, dict)
                      and t.get(schema.role_tag) != schema.system_tag), "")
        return [_short(_text(first)), str(len(texts)), _short(_text(texts[-1] if texts else ""))]


def columns(schema: Schema) -> list[str]:
    if schema.task == PRETRAIN:
        return [schema.prompt]
    if schema.task == PREFERENCE:
        return [_("prompt"), _("chosen"), _("rejected")]
    if schema.kind == ALPACA:
        return [schema.prompt, schema.query or "input", schema.response]
    return [_("first question"), _("turns"), _("last answer")]


def _text(x: Any) -> str:
    return x if isinstance(x, str) else repr(x)


def _short(s: str) -> str:
    s = s.replace("\n", "⏎ ").replace("\r", "")
    return s if len(s) <= CELL_CHARS else s[:CELL_CHARS - 1] + "…"


def parse_line(line: int, raw: bytes) -> PreviewRow:
    import orjson

    if line == 1 and raw.startswith(b"\xef\xbb\xbf"):
        raw = raw[3:]
    text, how = decode_line(raw)
    if not text.strip():
        return PreviewRow(line, "", None, _("blank line"))
    try:
        return PreviewRow(line, text, orjson.loads(text.encode("utf-8", "surrogatepass")))
    except orjson.JSONDecodeError as exc:
        from core.data.json_repair import diagnose

        d = diagnose(text.encode("utf-8", "surrogatepass"), line)
        if d.values and len(d.values) == 1:
            return PreviewRow(line, text, d.values[0], d.findings[0].message if d.findings else None)
        return PreviewRow(line, text, None, d.findings[0].message if d.findings else str(exc))


class Preview:
    """Rows of one file by position. `build()` (in a worker) makes every position reachable."""

    def __init__(self, path: str | os.PathLike) -> None:
        self.path = Path(path)
        self.probe = probe_file(self.path)
        self.line_based = self.probe.layout == JSONL and not self.probe.encoding.encoding.startswith("utf-16")
        self.index = LineIndex(self.path) if self.line_based else None
        self._records: list[tuple[int, bytes]] = []
        self._records_complete = False
        self._schema: Schema | None = None

    @property
    def schema(self) -> Schema:
        if self._schema is None:
            from core.data.lint import sample_rows, schema_for

            self._schema = schema_for(self.probe.path, sample_rows(self.probe, 100))
        return self._schema

    # building
    def build(self, progress: Callable[[int, int], None] | None = None,
              cancelled: Callable[[], bool] = lambda: False) -> None:
        if self.index is not None:
            self.index.build(progress, cancelled)
            return
        size = 0
        for rec in iter_records(self.probe, ReadNotes()):
            if cancelled():
                return
            self._records.append((rec.line, rec.raw))
            size += len(rec.raw)
            if size > RECORD_CACHE_BYTES:
                break
            if progress and len(self._records) % 5000 == 0:
                progress(size, self.probe.size)
        self._records_complete = True
        if progress:
            progress(self.probe.size, self.probe.size)

    @property
    def complete(self) -> bool:
        return self.index.complete if self.index is not None else self._records_complete

    def total(self) -> int | None:
        """Rows reachable now (the final count once `complete`)."""
        if self.index is not None:
            return self.index.known_lines
        return len(self._records)

    # reading
    def first_page(self, count: int) -> list[PreviewRow]:
        if self.index is not None:
            return [parse_line(i + 1, raw) for i, raw in enumerate(head_lines(self.path, count))]
        out = []
        for rec in iter_records(self.probe, ReadNotes()):
            out.append(parse_line(rec.line, rec.raw) if not rec.raw.startswith(b"\xef\xbb\xbf") else
                       parse_line(rec.line, rec.raw[3:]))
            if len(out) >= count:
                break
        return out

    def page(self, start: int, count: int) -> list[PreviewRow]:
        if self.index is not None:
            if self.index.known_lines < start + count and not self.index.complete and start == 0:
                return self.first_page(count)
            return [parse_line(start + i + 1, raw) for i, raw in enumerate(self.index.lines(start, count))]
        return [parse_line(line, raw) for line, raw in self._records[start:start + count]]

    def position_of_line(self, line: int) -> int:
        """The page position that shows `line` (a finding's line)."""
        if self.index is not None:
            return max(0, line - 1)
        lines = [ln for ln, _r in self._records]
        i = bisect.bisect_right(lines, line) - 1
        return max(0, i)
