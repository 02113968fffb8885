"""A document's headings, by one grammar: Markdown `#` lines, and the numbered headings documents carry when
they have no markup (plain text, a PDF's text layer, a Word file typed without heading styles):

    decimal      `1.` `1` `3.1` `3.1.2` `2.0` (a chapter as 2.0, as many manuals number them), `0` (引言),
                 `1-1.` `2-1-1` (hyphens, as Japanese manuals and some handbooks number)
    zh chapters  `第一章` `第1章` `第二节` `第三编` `第二部分` `第3条` (an article only when it is short: a title),
                 traditional characters too (節 條 編)
    zh lists     `一、` `（一）` `(一)` `1、`
    en           `Chapter 2` `CHAPTER II` `Section 4` `Part 3` `Appendix A` / `附录A`

A numbered line is a heading only when it reads as one and its number follows from the headings before it:

- it is short (a title, not a paragraph), does not end as a sentence does (`。` `.` `;` `,` ...), holds no sentence
  end inside, is no table-of-contents line (dot leaders) and no table row;
- its number follows on: the next sibling (3.1 → 3.2, 一 → 二), the first child of an open heading (3 → 3.1), or
  a `1` / `一` opening a new kind of numbering under what is open. A date (2024.03.01), a price (99.00), a
  measure (1.5 kW) or a stray `12` never follows on;
- it is not one of a list: a numbered line right after a line ending in `:` / `：`, or two of the same kind,
  depth and form typed line under line (`1. 关闭进水阀` / `2. 连接进水管`), are list items;
- it is not a table of contents' line: a line that comes again further on is the contents naming it.

Levels come from nesting, not from a fixed table: the first kind of numbering met is the top (or the level under
the Markdown heading it sits in), a new kind met under it is one deeper; a `#` heading holding a number
(`## 3.1 环境要求`) sets the level its plain siblings (`3.2 安装步骤`) get.
"""

from __future__ import annotations

import re
from collections import Counter
from dataclasses import dataclass

MAX_TITLE = 80  # characters of a heading line; a CJK one at most half of it
_MD = re.compile(r"^(#{1,6})[ \t]+(.+?)[ \t#]*$")
_FENCE = re.compile(r"^\s*(```|~~~)")
_ZH_DIGITS = "零〇一二三四五六七八九"
_ZH_NUM = f"[{_ZH_DIGITS}十百两]+"
_ROMAN = "[IVXLC]+"
_ENDS_SENTENCE = tuple("。．.！!？?；;，,、")
_INNER_SENTENCE = re.compile(r"[。！？；]|[.!?;](?=\s+[A-Z])")
_LEADERS = re.compile(r"(?:\.{4,}|…{2,}|·{4,}|\s\.\s\.\s\.)")

_PATTERNS: list[tuple[str, re.Pattern[str]]] = [
    ("zh_part", re.compile(rf"^第\s*({_ZH_NUM}|\d{{1,2}})\s*(?:编|編|部分)(?:[\s:：、.．]*)(.*)$")),
    ("zh_chapter", re.compile(rf"^第\s*({_ZH_NUM}|\d{{1,2}})\s*章(?:[\s:：、.．]*)(.*)$")),
    ("zh_section", re.compile(rf"^第\s*({_ZH_NUM}|\d{{1,2}})\s*[节節](?:[\s:：、.．]*)(.*)$")),
    ("zh_article", re.compile(rf"^第\s*({_ZH_NUM}|\d{{1,3}})\s*[条條](?:[\s:：、.．]*)(.*)$")),
    ("appendix", re.compile(r"^(?:附\s*录|Appendix|APPENDIX|Annex|ANNEX)\s*([A-Z])\b[\s:：.．、-]*(.*)$")),
    ("en_part", re.compile(rf"^(?:Part|PART)\s+(\d{{1,2}}|{_ROMAN})\b[\s:.\-–—]*(.*)$")),
    ("en_chapter", re.compile(rf"^(?:Chapter|CHAPTER)\s+(\d{{1,2}}|{_ROMAN})\b[\s:.\-–—]*(.*)$")),
    ("en_section", re.compile(rf"^(?:Section|SECTION)\s+(\d{{1,2}}|{_ROMAN})\b[\s:.\-–—]*(.*)$")),
    ("zh_comma", re.compile(rf"^({_ZH_NUM})\s*[、.．]\s*(.+)$")),
    ("zh_paren", re.compile(rf"^[（(]\s*({_ZH_NUM})\s*[）)]\s*[、.．]?\s*(.+)$")),
    ("digit_comma", re.compile(r"^(\d{1,2})\s*、\s*(.+)$")),
    ("decimal", re.compile(r"^(\d{1,2}(?:([.-])\d{1,2})?(?:\2\d{1,2}){0,4})(?:(\.)[ \t\u3000]*|[ \t\u3000]+)(\S.*)$")),
]
_TITLE_REQUIRED = {"zh_comma", "zh_paren", "digit_comma", "decimal"}
_CHAPTERS = {"zh_part", "zh_chapter", "en_part", "en_chapter"}  # an excerpt may start at chapter 3


@dataclass(frozen=True)
class Heading:
    line: int  # 0-based index of the heading's line in the text
    level: int  # 1 = top
    title: str  # as the document shows it: "3.1 环境要求", "第一章 总则"


@dataclass
class _Candidate:
    line: int
    kind: str  # "md" or one of _PATTERNS' kinds
    numbers: tuple[int, ...]  # () for a Markdown heading without a number
    form: str  # the numbering's form (the decimal's trailing dot), for telling list runs apart
    title: str
    md_level: int = 0


def _zh_number(text: str) -> int:
    """一 → 1, 十二 → 12, 二十 → 20, 一百零三 → 103."""
    text = text.replace("两", "二").replace("〇", "零")
    if text.isdigit():
        return int(text)
    total, current = 0, 0
    for char in text:
        if char == "百":
            total += (current or 1) * 100
            current = 0
        elif char == "十":
            total += (current or 1) * 10
            current = 0
        else:
            current = "零一二三四五六七八九".index(char)
    return total + current


def _roman(text: str) -> int:
    values = {"I": 1, "V": 5, "X": 10, "L": 50, "C": 100}
    total = 0
    for a, b in zip(text, text[1:] + " "):
        total += -values[a] if values.get(b, 0) > values[a] else values[a]
    return total


def _number(kind: str, raw: str) -> tuple[int, ...]:
    if kind == "decimal":
        parts = tuple(int(p) for p in re.split(r"[.-]", raw))
        return parts[:-1] if len(parts) == 2 and parts[1] == 0 else parts  # 2.0: chapter 2
    if kind == "appendix":
        return (ord(raw) - ord("A") + 1,)
    if raw.isdigit():
        return (int(raw),)
    if re.fullmatch(_ROMAN, raw):
        return (_roman(raw),)
    return (_zh_number(raw),)


def _reads_as_title(title: str, whole: str) -> bool:
    if len(whole) > MAX_TITLE or (sum(1 for c in whole if "\u3400" <= c <= "\u9fff") * 2 > MAX_TITLE):
        return False
    body = title.rstrip(":：").strip()
    if body.endswith(_ENDS_SENTENCE) or _INNER_SENTENCE.search(body) or _LEADERS.search(whole):
        return False
    return True


def parse_line(line: str) -> tuple[str, tuple[int, ...], str, str] | None:
    """(kind, numbers, form, title) of a line that reads as a numbered heading, else None."""
    text = line.strip().strip("*_").strip()  # **1. 总则**: a bold paragraph typed as a heading
    if not text or text.startswith(("|", ">", "-", "+", "!", "[")):
        return None
    for kind, pattern in _PATTERNS:
        match = pattern.match(text)
        if not match:
            continue
        raw, rest = match.group(1), match.groups()[-1].strip()
        if kind in _TITLE_REQUIRED and not re.match(r"[^\W\d_]|\d", rest):
            return None
        if not _reads_as_title(rest, text):
            return None
        numbers = _number(kind, raw)
        if any(n > 99 for n in numbers) or (kind == "decimal" and 0 in numbers[1:]):
            return None
        form = (match.group(2) or "") + (match.group(3) or "") if kind == "decimal" else ""
        return kind, numbers, form, text.rstrip(":：").strip()
    return None


def _candidates(lines: list[str]) -> list[_Candidate | None]:
    """One entry per line: its candidate, or None (the line is body text, or blank: see `_is_body`)."""
    out: list[_Candidate | None] = []
    fenced = False
    for n, line in enumerate(lines):
        stripped = line.rstrip("\n")
        if _FENCE.match(stripped):
            fenced = not fenced
            out.append(None)
            continue
        if fenced:
            out.append(None)
            continue
        md = _MD.match(stripped)
        if md:
            title = md.group(2).strip()
            parsed = parse_line(title)
            kind, numbers, form = (parsed[0], parsed[1], parsed[2]) if parsed else ("md", (), "")
            out.append(_Candidate(n, kind, numbers, form, title, md_level=len(md.group(1))))
            continue
        parsed = parse_line(stripped)
        out.append(_Candidate(n, *parsed) if parsed else None)
    return out


def _list_items(lines: list[str], found: list[_Candidate | None]) -> set[int]:
    """Lines of numbered candidates that are no headings: one right after a line ending in a colon; those of
    a block of candidates typed line under line that share their kind, depth and form with another of the block
    (a numbered list); and those of such a block of which two or more come again further on (a table of
    contents; one `一、目的` in two chapters is none)."""
    items: set[int] = set()
    blocks: list[list[_Candidate]] = []  # blocks of two candidates or more
    previous_text = ""
    block: list[_Candidate] = []

    def close() -> None:
        shapes = Counter((c.kind, len(c.numbers), c.form) for c in block)
        items.update(c.line for c in block if shapes[(c.kind, len(c.numbers), c.form)] > 1)
        if len(block) > 1:
            blocks.append(list(block))
        block.clear()

    for n, cand in enumerate(found):
        line = lines[n].strip()
        if cand is None or cand.md_level:
            close()  # a blank line ends a block too: a list is typed line under line
            if line:
                previous_text = line
            continue
        if not block and previous_text.endswith((":", "：")):
            items.add(n)
        block.append(cand)
        previous_text = line
    close()
    last_seen = {"".join(c.title.split()): c.line for c in found if c is not None}
    for members in blocks:
        again = [c for c in members if last_seen["".join(c.title.split())] > members[-1].line]
        if len(again) >= 2:
            items.update(c.line for c in again)
    return items


def _follows(cand: _Candidate, open_: list[_Candidate]) -> int | None:
    """Where `cand` goes in the stack of open headings (its index: entries from it up are closed), or None when
    its number does not follow from them."""
    nums = cand.numbers
    for i in range(len(open_) - 1, -1, -1):
        entry = open_[i]
        if entry.kind != cand.kind or not entry.numbers:
            continue
        prev = entry.numbers
        if cand.kind != "decimal":
            return i if nums[0] == prev[0] + 1 else None
        if len(nums) == len(prev) and nums[:-1] == prev[:-1] and nums[-1] == prev[-1] + 1:
            return i  # the next sibling
        if len(nums) == len(prev) + 1 and nums[:-1] == prev and nums[-1] == 1:
            return i + 1  # the first child
        if len(nums) < len(prev):
            continue  # 4 after 3.2: look further down for 3
        return None
    if cand.kind == "decimal" and any(e.kind == "decimal" and e.numbers for e in open_):
        return None  # decimal numbering is open: a number that does not follow from it is no heading
    first = nums[-1] in (0, 1) if cand.kind == "decimal" else (nums[0] == 1 or cand.kind in _CHAPTERS)
    return len(open_) if first else None


def find_headings(text: str) -> list[Heading]:
    """The headings of `text`, in order, with their nesting levels (see the module's doc)."""
    lines = text.splitlines()
    found = _candidates(lines)
    items = _list_items(lines, found)
    open_: list[tuple[int, _Candidate]] = []  # (level, candidate) of the headings open at this point
    out: list[Heading] = []
    for cand in found:
        if cand is None or cand.line in items:
            continue
        if cand.md_level:
            while open_ and open_[-1][0] >= cand.md_level:
                open_.pop()
            level = cand.md_level
        else:
            at = _follows(cand, [c for _lvl, c in open_])
            if at is None:
                continue
            if cand.kind == "appendix" and at == len(open_):  # an appendix closes the numbered body
                at = next((i for i, (_l, c) in enumerate(open_) if not c.md_level), len(open_))
            level = open_[at][0] if at < len(open_) else (open_[-1][0] if open_ else 0) + 1
            del open_[at:]
        open_.append((level, cand))
        out.append(Heading(cand.line, level, cand.title))
    return out
