"""Which lines of a block of JSON Lines may hold personal data, zero-width characters or mojibake.

The answer is a superset: every line where `content.check_texts` would report personal data, a
zero-width character or mojibake is in it; a line that is in it only gets the exact (slower) checks.
Speed therefore never changes the findings, and the rules of the superset are:

- e-mail: a local-part character before `@` (`[A-Za-z0-9._%+-]@`);
- international phone: `+` and a digit 1-9;
- Chinese mobile and ID numbers: a run of 11 or more ASCII digits; US phones: a run of 3 or more digits,
  `-` or `.`, then a run of 4 or more digits;
- zero-width characters, BOM, U+FFFD, 锟 (of 锟斤拷) and the Ã, â, Â that start Latin-1 mojibake: found
  by their first two UTF-8 bytes (E2 80, E2 81, EF BB, EF BF, E9 94, C3 83, C3 A2, C3 82), then checked;
- the same written as JSON escapes (`\\u200b`, `\\ufffd`, `\\u951f`, `\\u00c3` ...).

Cost is what matters here: a pass of `bytes.find` for one byte runs at memory speed (memchr), a regex
pass costs far more. So each group of patterns runs only when `find` sees a byte it needs, and each
regex starts with a literal byte (which `re` looks for first).
"""

from __future__ import annotations

import re

from core.data.html_text import HTML_HINT
EMAIL_HINT = re.compile(rb"[A-Za-z0-9._%+-]@")
INTL_HINT = re.compile(rb"\+[1-9]")
DIGIT_HINTS = (
    (b"1", re.compile(rb"1(?:[3-9][0-9]{9}|9[0-9]{2}(?:0[1-9]|1[0-2]))")),  # mobile; ID born 19xx
    (b"2", re.compile(rb"20[0-9]{2}(?:0[1-9]|1[0-2])[0-3][0-9]")),  # ID born 20xx
    (b"-", re.compile(rb"-[0-9]{4}(?![0-9])")),  # 555-123-4567, (555) 123-4567
    (b".", re.compile(rb"\.[0-9]{4}(?![0-9])")),  # 555.123.4567
)
DIGITS = tuple(bytes([c]) for c in b"0123456789")
# the exact multi-byte markers by their first byte (UTF-8 of the characters check_texts looks for)
MARKERS = {
    b"\xe2": re.compile(rb"\xe2(?:\x80[\x8b-\x8d]|\x81\xa0)"),  # zero-width space / (non-)joiner, word joiner
    b"\xef": re.compile(rb"\xef(?:\xbb\xbf|\xbf\xbd)"),  # BOM inside the text, U+FFFD
    b"\xe9": re.compile(rb"\xe9\x94\x9f"),  # 锟 (of 锟斤拷)
    b"\xc3": re.compile(rb"\xc3[\x83\xa2\x82]"),  # Ã (of Ã© ...; the next character may be escaped), â (of â€), Â
}
# the same characters written as \uXXXX (files saved with ensure_ascii); case-insensitive hex
ESCAPED = re.compile(rb"\\u(?:200[bcdBCD]|2060|[fF][eE][fF][fF]|[fF][fF][fF][dD]|951[fF]|00[cC][23]|00[eE]2)")


def hit_positions(body: bytes) -> list[int]:
    """Byte positions in `body` of every hint (unsorted, may repeat)."""
    find = body.find
    pos: list[int] = []
    if find(b"@") >= 0:
        pos += [m.start() for m in EMAIL_HINT.finditer(body)]
    if find(b"+") >= 0:
        pos += [m.start() for m in INTL_HINT.finditer(body)]
    if any(find(d) >= 0 for d in DIGITS):  # ten memchr passes: cheaper than one regex pass
        for first, rx in DIGIT_HINTS:
            if find(first) >= 0:
                pos += [m.start() for m in rx.finditer(body)]
    if not body.isascii():
        for lead, rx in MARKERS.items():
            if find(lead) >= 0:
                pos += [m.start() for m in rx.finditer(body)]
    if find(b"\\") >= 0:
        pos += [m.start() for m in ESCAPED.finditer(body)]
    if find(b"<") >= 0 or find(b"&") >= 0:  # HTML left in the text (core.data.html_text)
        pos += [m.start() for m in HTML_HINT.finditer(body)]
    return pos


def hit_lines(body: bytes) -> list[int]:
    """Sorted indices of the lines of `body` (split on \\n) that hold a hint."""
    pos = hit_positions(body)
    if not pos:
        return []
    out: list[int] = []
    line = prev = 0
    for p in sorted(set(pos)):
        line += body.count(b"\n", prev, p)
        prev = p
        if not out or out[-1] != line:
            out.append(line)
    return out


def row_may_hit(raw: bytes) -> bool:
    """The hints for one row (the exact path)."""
    return bool(hit_positions(raw))
