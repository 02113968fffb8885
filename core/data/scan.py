"""The lint scan's exact per-row path (`Sink`: orjson and the checks of `row_rules.check_row`), and the
general loop for everything but UTF-8 JSON Lines (arrays, pretty objects, UTF-16, GB18030 files).
UTF-8 JSON Lines are scanned by `core.data.jsonl_scan`, which sends `Sink` the lines msgspec rejects.

A chunk is a byte range that starts at a line start, so `--jobs N` workers can each scan one. Line
numbers inside a chunk are relative; the messages carry them as `LineNo` markers that the merge
rewrites (`relocate`), so a translated message can put the number anywhere.
"""

from __future__ import annotations

import gc
import re
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any, Iterable

from core.data import content
from core.data.content_hints import row_may_hit
from core.data.duplicates import Fingerprints, prompt_hash, text_hash
from core.data.findings import ERROR, INFO, NONE, Finding, finding
from core.data.json_repair import diagnose, duplicate_keys
from core.data.records import ReadNotes, Record
from core.data.row_rules import RowView, check_row
from core.data.schema import ALPACA, PRETRAIN, Schema
from core.data.stats import StatsAccumulator, cjk_chars, estimate_tokens
from core.i18n import _

HF_CHUNK_BYTES = 10 << 20  # datasets' JSON builder infers the columns from the first 10 MiB


class LineNo(int):
    """A line number relative to a --jobs part; formatted into messages as a marker for the merge."""

    def __format__(self, spec: str) -> str:
        return f"\x01{int(self)}\x02"

    __str__ = __repr__ = lambda self: f"\x01{int(self)}\x02"  # noqa: E731

    def __add__(self, other):
        return LineNo(int(self) + int(other))

    __radd__ = __add__


_MARK = re.compile("\x01(\\d+)\x02")


def relocate(text: str, delta: int) -> str:
    if "\x01" not in text:
        return text
    return _MARK.sub(lambda m: str(int(m.group(1)) + delta), text)


@dataclass
class ScanContext:
    """Everything a worker needs (picklable)."""

    path: str
    schema: Schema
    expected_keys: tuple[str, ...]
    key_overhead: int  # bytes of JSON syntax around the values of a typical row
    cutoff_len: int = 2048
    estimate_too_long: bool = True  # False when a tokenizer pass will judge lengths
    escaped: bool = False  # non-ASCII text written as \uXXXX escapes (ensure_ascii): count CJK exactly
    size: int = 0
    keep: frozenset[str] = frozenset()  # the workspace's kept contact details (core.data.pii_keep)


@dataclass
class PartResult:
    findings: list[Finding] = field(default_factory=list)
    rows: int = 0  # values seen (a broken line counts 1, a line with 2 objects counts 2)
    good: int = 0  # rows that can train as they are or after fixes
    lines: int = 0  # physical lines in the part
    fingerprints: Fingerprints = field(default_factory=Fingerprints)
    stats: StatsAccumulator | None = None
    keys_first: dict[str, tuple[int, int]] = field(default_factory=dict)  # key → (line, byte offset)
    notes: ReadNotes = field(default_factory=ReadNotes)
    relative: bool = False  # line numbers are relative to the part (messages carry LineNo markers)
    kto_tags: list[int] = field(default_factory=lambda: [0, 0])  # rows tagged false, true (KTO rows)


class Sink:
    """The exact path for one row; also used by the hot loop for rows it does not handle itself."""

    def __init__(self, ctx: ScanContext, result: PartResult) -> None:
        self.ctx = ctx
        self.schema = ctx.schema
        self.r = result
        self.out = result.findings
        self.stats = result.stats
        self.expected = set(ctx.expected_keys)

    def broken(self, raw: bytes, line: int, offset: int) -> None:
        """A record orjson rejected: diagnose, then check what could be recovered."""
        d = diagnose(raw, line)
        self.out.extend(d.findings)
        self.r.rows += len(d.values) + (1 if d.fix == NONE or d.reason else 0)
        for value in d.values:
            self.row(value, raw, line, offset, d.fix)

    def record(self, rec: Record) -> None:
        import orjson

        try:
            value = orjson.loads(rec.raw)
        except orjson.JSONDecodeError:
            self.broken(rec.raw, rec.line, rec.offset)
            return
        self.r.rows += 1
        if key_count(value) != rec.raw.count(b'":'):
            self.duplicate_keys(rec.raw, rec.line)
        self.row(value, rec.raw, rec.line, rec.offset, "safe")

    def duplicate_keys(self, raw: bytes, line: int) -> None:
        dups = duplicate_keys(raw.decode("utf-8", "replace"))
        if dups:
            self.out.append(finding("duplicate-key", line, _(
                "L{line}: key \"{key}\" repeated in one object; datasets refuses it; fix keeps the last "
                "(with --yes)", line=line, key=dups[0])))

    def row(self, value: Any, raw: bytes, line: int, offset: int, fix: str) -> RowView | None:
        view = check_row(value, line, self.schema, self.out)
        if view is None:
            return None
        if view.notes and view.notes[0].startswith("kto:"):
            self.r.kto_tags[view.notes[0] == "kto:1"] += 1
        if (isinstance(value, dict) and self.schema.kind == ALPACA
                and all(k in value for k in self.schema.required)):
            for k in value:
                if k not in self.expected and k not in self.r.keys_first:
                    self.r.keys_first[k] = (line, offset)
        return self.accept(view, raw, line)

    def accept(self, view: RowView, raw: bytes, line: int) -> RowView:
        """The checks and numbers of a row that can train."""
        out = self.out
        self.r.good += 1
        text = self.schema.task == PRETRAIN
        if not view.output.strip():
            out.append(finding("empty-output", line, _(
                "L{line}: empty text; LLaMA-Factory trains on the end-of-text token alone; fix drops the row "
                "(with --yes)", line=line) if text else _(
                "L{line}: empty output (trains on an empty target); fix drops the row (with --yes)", line=line)))
        content.check_texts(view.texts, view.output, line, out, pii=row_may_hit(raw), short=not text,
                            keep=self.ctx.keep)
        chars = sum(view.lengths)
        cjk = sum(cjk_chars(t) for _f, t in view.texts)
        tokens = estimate_tokens(chars, cjk)
        if self.ctx.estimate_too_long and tokens > self.ctx.cutoff_len:
            out.append(too_long(line, tokens, self.ctx.cutoff_len, text, estimated=True))
        self.stats.add_row(view.lengths, cjk, tokens)
        prompt = view.prompt + (view.context,) if view.context else view.prompt
        self.r.fingerprints.add(int(line), prompt_hash(prompt), text_hash(view.output))
        return view


def too_long(line: int, tokens: int, cutoff: int, text: bool, estimated: bool) -> Finding:
    """A row longer than cutoff_len: truncated, except pre-training text, which stage pt packs into blocks of
    cutoff_len tokens (`packing` is on by default there), so the rest goes on in the next block."""
    if text:
        return finding("too-long", line, _(
            "L{line}: longer than cutoff_len {cutoff} (tokens: {tokens}); stage pt packs the text into blocks of "
            "cutoff_len (its default), so the rest goes on in the next block; with packing: false it is truncated",
            line=line, tokens=f"~{tokens}" if estimated else tokens, cutoff=cutoff), severity=INFO)
    if estimated:
        return finding("too-long", line, _(
            "L{line}: ~{tokens} tokens > cutoff_len {cutoff}; will be truncated (raise cutoff_len or shorten "
            "the row)", line=line, tokens=tokens, cutoff=cutoff))
    return finding("too-long", line, _(
        "L{line}: {tokens} tokens > cutoff_len {cutoff}; will be truncated (raise cutoff_len or "
        "shorten the row)", line=line, tokens=tokens, cutoff=cutoff))


def key_count(value: Any) -> int:
    if isinstance(value, dict):
        return len(value) + sum(key_count(v) for v in value.values() if isinstance(v, (dict, list)))
    if isinstance(value, list):
        return sum(key_count(v) for v in value if isinstance(v, (dict, list)))
    return 0


def new_result(ctx: ScanContext, relative: bool) -> PartResult:
    return PartResult(stats=StatsAccumulator(fields=ctx.schema.fields), relative=relative)


# ------------------------------------------------------------------ the general loop

def scan_records(ctx: ScanContext, records: Iterable[Record], notes: ReadNotes) -> PartResult:
    result = new_result(ctx, relative=False)
    sink = Sink(ctx, result)
    for n, rec in enumerate(records):
        if n % 65536 == 65535:
            result.fingerprints.maybe_spill()
        if rec.decoded == "invalid":
            result.findings.append(finding("encoding", rec.line, _(
                "L{line}: bytes are neither UTF-8 nor GB18030; fix drops the line into the rejects file",
                line=rec.line), fix=NONE))
        sink.record(rec)
    result.notes = notes
    result.lines = notes.lines
    return result


def valid_utf8(raw: bytes) -> bool:
    try:
        raw.decode("utf-8")
        return True
    except UnicodeDecodeError:
        return False


def non_utf8_line(sink: Sink, raw: bytes, line: int, offset: int, notes: ReadNotes, line_no: int) -> None:
    """A line of a UTF-8 file that is not UTF-8: GB18030 when that decodes it, else bad bytes replaced."""
    from core.data.encoding import decode_line

    text, how = decode_line(raw)
    if how == "gb18030":
        notes.transcoded_lines += 1
        notes.first_transcoded_line = notes.first_transcoded_line or line_no
    else:
        notes.invalid_lines += 1
        notes.first_invalid_line = notes.first_invalid_line or line_no
    rec = Record(line, text.encode("utf-8", "surrogatepass"), offset, how)
    before = len(sink.out)
    sink.record(rec)
    if how != "gb18030":
        sink.out.insert(before, finding("encoding", line, _(
            "L{line}: bytes are neither UTF-8 nor GB18030; fix drops the line into the rejects file", line=line),
            fix=NONE))


@contextmanager
def paused_gc():
    """The cyclic garbage collector paused: the scan makes millions of short-lived containers and no
    cycles, and each collection would walk the rows of the block being checked."""
    enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if enabled:
            gc.enable()


def severity_of_key_change(offset: int) -> str:
    return ERROR if offset >= HF_CHUNK_BYTES else INFO
