"""Documents cut into chunks of one topic each: by headings first, then by a token budget with a small overlap.

A section is the text under one heading (its path of headings kept: "Returns > Refund time",
"3 安装 > 3.1 环境要求"): a Markdown `#` line or a numbered heading of plain text, a PDF or a converted document,
as `core.data.synth.headings` finds them (one grammar for every kind of document). A section within the budget
is one chunk; a longer one is cut at paragraph and sentence ends and between the rows of a Markdown table (a
sentence longer than the budget at the budget) into windows of at most `budget` tokens, each starting with the
last sentences of the window before it, up to `overlap` tokens (and a window inside a table with its header
row). Tokens are estimated as the Data step estimates them (~4 ASCII characters or 1 CJK character per token),
so chunking needs no tokenizer.

A chunk's `id` is a hash of its text: the journal's key, so the same text is never sent twice, and a chunk
whose text changed is new.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from xxhash import xxh3_64_hexdigest

from core.data.stats import cjk_chars
from core.data.synth.documents import Document
from core.data.synth.headings import find_headings

DEFAULT_BUDGET = 512
DEFAULT_OVERLAP = 48
_SENTENCE_END = re.compile(r"(?<=[。！？；!?])|(?<=[.;:])(?=\s)|(?<=\n)(?=\|)")  # a table row is a sentence


def count_tokens(text: str) -> int:
    """~tokens of a text: 4 ASCII characters or 1 CJK character each (the Data step's estimate)."""
    cjk = cjk_chars(text)
    return (max(0, len(text) - cjk) + 3) // 4 + cjk


def chunk_language(text: str) -> str:
    """'zh' when at least a fifth of the letters are CJK, else 'en' (what the prompt asks the answer in)."""
    letters = sum(1 for c in text if c.isalpha())
    cjk = sum(1 for c in text if "\u3400" <= c <= "\u9fff" or "\uf900" <= c <= "\ufaff")
    return "zh" if letters and cjk * 5 >= letters else "en"


@dataclass(frozen=True)
class Chunk:
    doc: str  # the document's path as given
    index: int  # 0-based, within its document
    heading: str  # "Returns > Refund time" (empty before the first heading)
    text: str  # the heading path as a first line (when there is one), then the section's text
    tokens: int
    start: int  # character offsets of the body in Document.text
    end: int
    page: int | None = None  # PDFs: the page where the chunk starts

    @property
    def id(self) -> str:
        return xxh3_64_hexdigest(self.text.encode("utf-8", "surrogatepass"))

    @property
    def language(self) -> str:
        return chunk_language(self.text)

    def preview(self, width: int = 80) -> str:
        body = " ".join(self.text.split())
        return body if len(body) <= width else body[: width - 1] + "…"


@dataclass
class _Section:
    path: list[str]
    start: int
    lines: list[str]


def sections(text: str) -> list[tuple[str, int, str]]:
    """(heading path, start offset of the body, body) for every heading's section, in order; text before the
    first heading is a section with an empty path."""
    heads = {h.line: h for h in find_headings(text)}
    out: list[_Section] = [_Section([], 0, [])]
    stack: list[tuple[int, str]] = []
    offset = 0
    for n, line in enumerate(text.splitlines(keepends=True)):
        head = heads.get(n)
        if head:
            while stack and stack[-1][0] >= head.level:
                stack.pop()
            stack.append((head.level, head.title))
            out.append(_Section([h for _, h in stack], offset + len(line), []))
        else:
            out[-1].lines.append(line)
        offset += len(line)
    return [(" > ".join(s.path), s.start, "".join(s.lines)) for s in out]


def _sentences(body: str, base: int) -> list[tuple[int, str]]:
    """(offset, piece) for each sentence of `body`; paragraph breaks end a sentence too."""
    pieces: list[tuple[int, str]] = []
    for para in re.finditer(r"[^\n]+(?:\n(?!\s*\n)[^\n]+)*", body):
        start = para.start()
        cut = 0
        text = para.group()
        for m in _SENTENCE_END.finditer(text):
            if m.start() > cut:
                pieces.append((base + start + cut, text[cut:m.start()]))
                cut = m.start()
        if cut < len(text):
            pieces.append((base + start + cut, text[cut:]))
    return [(o, p) for o, p in pieces if p.strip()]


def _split_long(offset: int, piece: str, budget: int) -> list[tuple[int, str]]:
    """A sentence longer than the budget, cut every ~budget tokens (at a space when there is one near)."""
    out = []
    while count_tokens(piece) > budget:
        size = budget * (1 if cjk_chars(piece[: budget * 4]) > budget else 4)
        cut = piece.rfind(" ", size // 2, size)
        cut = cut if cut > 0 else size
        out.append((offset, piece[:cut]))
        offset += cut
        piece = piece[cut:]
    if piece.strip():
        out.append((offset, piece))
    return out


def _windows(units: list[tuple[int, str]], budget: int, overlap: int) -> list[list[tuple[int, str]]]:
    sized = [(o, p, count_tokens(p)) for o, p in units]
    windows: list[list[tuple[int, str]]] = []
    i = 0
    while i < len(sized):
        window, used, j = [], 0, i
        while j < len(sized) and (not window or used + sized[j][2] <= budget):
            window.append(sized[j])
            used += sized[j][2]
            j += 1
        windows.append([(o, p) for o, p, _ in window])
        if j >= len(sized):
            break
        back, kept = j, 0  # the next window starts with the last sentences of this one, up to `overlap`
        while back - 1 > i and kept + sized[back - 1][2] <= overlap:
            back -= 1
            kept += sized[back][2]
        i = back
    return windows


_TABLE = re.compile(r"^(\|.*\|\n\|[ \t:|-]*-[ \t:|-]*\|\n)((?:\|.*\|(?:\n|$))*)", re.MULTILINE)


def _tables(body: str, base: int) -> list[tuple[int, int, str]]:
    """(first row's offset, end offset, header and separator lines) of each Markdown table of a section."""
    return [(base + m.start(2), base + m.end(2), m.group(1)) for m in _TABLE.finditer(body)]


def chunk_document(doc: Document, *, budget: int = DEFAULT_BUDGET, overlap: int = DEFAULT_OVERLAP) -> list[Chunk]:
    """A window that starts inside a Markdown table starts with the table's header row, so the rows it holds
    keep their column names."""
    if budget < 16:
        raise ValueError("budget must be at least 16 tokens")
    overlap = max(0, min(overlap, budget // 2))
    chunks: list[Chunk] = []
    for heading, start, body in sections(doc.text):
        if not body.strip():
            continue
        head = heading + "\n\n" if heading else ""
        tables = _tables(body, start)
        room = max(16, budget - count_tokens(head) - max((count_tokens(t[2]) for t in tables), default=0))
        if count_tokens(body) <= room:
            first = len(body) - len(body.lstrip())
            windows = [[(start + first, body.strip())]]
        else:
            units = [u for o, p in _sentences(body, start) for u in _split_long(o, p, room)]
            windows = _windows(units, room, overlap)
        for window in windows:
            w_start = window[0][0]
            w_end = window[-1][0] + len(window[-1][1])
            header = next((t[2] for t in tables if t[0] < w_start < t[1]), "")
            text = head + header + doc.text[w_start:w_end].strip()
            chunks.append(Chunk(doc.path, len(chunks), heading, text, count_tokens(text), w_start, w_end,
                                doc.page_at(w_start)))
    return chunks
