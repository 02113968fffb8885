"""The message-header line of a text chat export, learned from the file: each line is read as a timestamp
with what stands around it, and the most common arrangement is the header:

- `TIME NAME` with the message on the lines below (WeChat exporters, QQ's 消息管理器: `NAME(12345)`),
- `NAME TIME` with the message below (DingTalk, WeCom, copied chats),
- `[TIME] NAME: text` or `TIME - NAME: text` on one line (WhatsApp),
- `TIME<tab>NAME<tab>text` under day lines (`2024/03/08(Fri)`, LINE).

Rule lines (`=====`) end a section; lines before the first header or after a rule (titles, `消息对象:…`)
are no message and are reported. Nothing here knows a tool by name."""

from __future__ import annotations

import re
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Iterable

from core.data.transcripts.messages import Message
from core.data.transcripts.stamps import DATE, STAMP, WEEKDAY, day_first, has_date, text_seconds, ymd

LEAD = re.compile(rf"^[\[(【]?\s*(?P<stamp>{STAMP})\s*[\])】]?\s*(?:[-–—|]\s+)?(?P<rest>.*)$")
TRAIL = re.compile(rf"^(?P<rest>\S.{{0,39}}?)\s+[\[(【]?(?P<stamp>{STAMP})[\])】]?\s*$")
DAY = re.compile(rf"^[\[(]?\s*(?P<stamp>{DATE}){WEEKDAY}\s*[\])]?\s*$")
RULE = re.compile(r"^\s*[=\-_*~#]{3,}\s*$")
ID_SUFFIX = re.compile(r"^(?P<name>.+?)\s*(?:\([^()]{3,40}\)|<[^<>]+@[^<>]+>|（[^（）]{3,40}）)$")
INLINE = re.compile(r"^(?P<name>[^:：\t]{1,40}?)\s*[:：]\s?(?P<text>.*)$")
LOG_LEVEL = re.compile(r"^(?:TRACE|DEBUG|INFO|NOTICE|WARN|WARNING|ERROR|FATAL|CRITICAL|SEVERE)\b")
SAMPLE_LINES = 2000
LAYOUTS = {"header": "`TIME NAME` header lines, the message below",
           "trail": "`NAME TIME` header lines, the message below",
           "colon": "`TIME NAME: text` lines",
           "tab": "`TIME<tab>NAME<tab>text` lines under day lines"}


@dataclass
class Header:
    kind: str        # header, trail, colon, tab, bare (a stamp and words with no name), day
    dated: bool
    stamp: str
    name: str = ""
    text: str = ""


@dataclass
class TextLayout:
    kind: str
    dated: bool
    dayfirst: bool
    headers: int     # header lines seen in the sample

    @property
    def label(self) -> str:
        return LAYOUTS[self.kind]


@dataclass
class TextParse:
    messages: list[Message] = field(default_factory=list)
    ignored_lines: list[int] = field(default_factory=list)


def read_header(line: str) -> Header | None:
    s = line.strip()
    if not s or RULE.match(s):
        return None
    m = DAY.match(s)
    if m:
        return Header("day", True, m.group("stamp"))
    m = LEAD.match(s)
    if m and m.group("stamp").strip():
        stamp, rest = m.group("stamp"), m.group("rest").strip()
        dated = has_date(stamp)
        if not rest:
            return None
        if "\t" in rest:
            name, text = rest.split("\t", 1)
            return Header("tab", dated, stamp, name.strip(), text.strip())
        inline = INLINE.match(rest)
        if inline and inline.group("name").strip():
            return Header("colon", dated, stamp, inline.group("name").strip(), inline.group("text"))
        return Header("header" if len(rest) <= 40 else "bare", dated, stamp, rest, rest)
    m = TRAIL.match(s)
    if m and has_date(m.group("stamp")):
        return Header("trail", True, m.group("stamp"), m.group("rest").strip())
    return None


def learn_layout(lines: Iterable[str]) -> TextLayout | None:
    """The header arrangement most lines share, or None: fewer than two header lines from two speakers, or
    headers that are log lines (`2024-03-01 10:00:00 INFO …`: a level for a name, no message under a header)."""
    sample = [line for _n, line in zip(range(SAMPLE_LINES + 1), lines)]
    heads = [read_header(line) for line in sample]
    kinds: Counter = Counter()
    bodies: Counter = Counter()
    names: dict[tuple[str, bool], set[str]] = {}
    stamps: list[str] = []
    for i, h in enumerate(heads):
        if h is None or h.kind in ("day", "bare") or LOG_LEVEL.match(speaker_name(h.name)):
            continue
        key = (h.kind, h.dated)
        kinds[key] += 1
        names.setdefault(key, set()).add(speaker_name(h.name))
        stamps.append(h.stamp)
        if h.kind in ("header", "trail"):
            nxt = next((j for j in range(i + 1, len(sample)) if sample[j].strip()), None)
            bodies[key] += nxt is not None and heads[nxt] is None and not RULE.match(sample[nxt])
    for (kind, dated), count in kinds.most_common():
        if count < 2 or len(names[(kind, dated)]) < 2:
            continue
        if kind in ("header", "trail") and bodies[(kind, dated)] * 2 < count:
            continue
        return TextLayout(kind, dated, day_first(stamps), count)
    return None


def speaker_name(name: str) -> str:
    """`赵先生(283746123)` / `钱女士<qian@example.com>` → the name."""
    m = ID_SUFFIX.match(name.strip())
    return (m.group("name") if m else name).strip()


def parse_text(lines: Iterable[tuple[int, str]], layout: TextLayout) -> TextParse:
    out = TextParse()
    section, day, in_meta = 0, None, True
    cur: Message | None = None
    body: list[str] = []

    def close() -> None:
        nonlocal cur, body
        if cur is not None:
            cur.raw = "\n".join([cur.raw.rstrip("\n"), *body]).rstrip()
            if layout.kind in ("header", "trail"):
                text = "\n".join(body).strip()
                if not text:  # a header line and nothing under it: a notice (`NAME 撤回了一条消息`)
                    cur.notice, text = True, cur.speaker
                cur.text = text
            else:
                cur.text = (cur.text + ("\n" + "\n".join(body) if body else "")).strip()
            out.messages.append(cur)
        cur, body = None, []

    for line, text in lines:
        s = text.strip()
        if RULE.match(s):
            close()
            section, in_meta = section + 1, True
            continue
        h = read_header(s)
        if h is not None and h.kind == "day":
            close()
            day = ymd(h.stamp, layout.dayfirst)
            continue
        message = _message(h, layout, line, text, day, section) if h is not None else None
        if message is not None:
            close()
            cur, in_meta = message, False
            continue
        if cur is not None and not in_meta:
            body.append(s)
        elif s:
            out.ignored_lines.append(line)
    close()
    return out


def _message(h: Header, layout: TextLayout, line: int, raw: str, day, section: int) -> Message | None:
    seconds = text_seconds(h.stamp, layout.dayfirst, day)
    chat = f"section {section}"
    if layout.kind in ("header", "trail"):
        if h.kind not in ("header", "trail", "colon") or h.kind != layout.kind and h.kind != "colon" \
                or h.dated != layout.dated:
            return None
        name = h.name if h.kind != "colon" else f"{h.name}: {h.text}".strip(": ")
        return Message(line, speaker_name(name), "", seconds, chat, raw=raw)
    if h.dated != layout.dated:
        return None
    if h.kind == layout.kind:
        return Message(line, speaker_name(h.name), h.text, seconds, chat, raw=raw)
    if h.kind in ("header", "bare") and layout.kind == "colon":  # `TIME - Tom added Priya`: no one speaks
        return Message(line, "", h.text, seconds, chat, notice=True, raw=raw)
    return None


def sample_lines(path: Path, encoding) -> list[str]:
    from core.data.reader import iter_text_lines
    from core.data.records import ReadNotes

    out = []
    for n, (_line, text) in enumerate(iter_text_lines(path, encoding, ReadNotes())):
        out.append(text)
        if n >= SAMPLE_LINES:
            break
    return out


def text_transcript_lines(path: Path, encoding) -> int:
    """Header lines of a text transcript among the sampled lines (0: not one); cheap, for the text checks."""
    layout = learn_layout(sample_lines(path, encoding))
    return layout.headers if layout else 0
