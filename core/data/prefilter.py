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

Cost is what matters here: a pass of `bytes.find` for one byte runs at memory speed (memchr), any
other pass over the bytes costs about as much as a third of the bare parse. So each group of patterns
runs only when `find` sees a byte it needs, and with numpy the multi-byte markers are found by
comparing 16-bit words (two alignments) instead of by `re`, which scans a byte at a time.
"""

from __future__ import annotations

import re

EMAIL_HINT = re.compile(rb"[A-Za-z0-9._%+-]@")
INTL_HINT = re.compile(rb"\+[1-9]")
# without numpy: literal-prefix regexes (re scans fastest from a literal first byte)
DIGIT_HINTS = (
    (b"1", re.compile(rb"1(?:[3-9][0-9]{9}|9[0-9]{2}(?:0[1-9]|1[0-2]))")),  # mobile; ID born 19xx
    (b"2", re.compile(rb"20[0-9]{2}(?:0[1-9]|1[0-2])[0-3][0-9]")),  # ID born 20xx
    (b"-", re.compile(rb"-[0-9]{4}(?![0-9])")),  # 555-123-4567, (555) 123-4567
    (b".", re.compile(rb"\.[0-9]{4}(?![0-9])")),  # 555.123.4567
)
DIGITS = tuple(bytes([c]) for c in b"0123456789")
# the exact multi-byte markers, by their first two bytes (UTF-8 of the characters check_texts looks for)
MARKERS = {
    b"\xe2\x80": re.compile(rb"\xe2\x80[\x8b-\x8d]"),  # zero-width space / non-joiner / joiner
    b"\xe2\x81": re.compile(rb"\xe2\x81\xa0"),  # word joiner
    b"\xef\xbb": re.compile(rb"\xef\xbb\xbf"),  # BOM inside the text
    b"\xef\xbf": re.compile(rb"\xef\xbf\xbd"),  # U+FFFD
    b"\xe9\x94": re.compile(rb"\xe9\x94\x9f"),  # 锟 (of 锟斤拷)
    b"\xc3\x83": re.compile(rb"\xc3\x83"),  # Ã (of Ã© ...; the next character may be escaped)
    b"\xc3\xa2": re.compile(rb"\xc3\xa2"),  # â (of â€)
    b"\xc3\x82": re.compile(rb"\xc3\x82"),  # Â
}
LEADS = tuple(sorted({pair[:1] for pair in MARKERS}))
# the same characters written as \uXXXX (files saved with ensure_ascii); case-insensitive hex
ESCAPED = re.compile(rb"\\u(?:200[bcdBCD]|2060|[fF][eE][fF][fF]|[fF][fF][fF][dD]|951[fF]|00[cC][23]|00[eE]2)")
NUMPY_MIN_BYTES = 4096  # below this the numpy set-up costs more than the regexes


class Scratch:
    """Work arrays reused from block to block for the numpy passes (`out=`): a fresh temporary per pass
    would be a fresh mapping of the memory, and its page faults cost more than the pass itself."""

    def __init__(self, np) -> None:
        self.np = np
        self.size = -1  # nothing allocated yet

    def ensure(self, n: int) -> "Scratch":
        if n > self.size:
            np = self.np
            self.size = n = max(n, 1 << 16)
            self.flags = np.empty(n, dtype=bool)
            self.half = np.empty(n // 2 + 1, dtype=bool)
            self.half2 = np.empty(n // 2 + 1, dtype=bool)
            self.words = np.empty(n // 2 + 1, dtype=np.uint16)
        return self


def hit_positions(body: bytes, np=None, a=None, scratch: Scratch | None = None) -> list[int]:
    """Byte positions in `body` of every hint (unsorted, may repeat). `a`: body as a numpy uint8 array."""
    find = body.find
    pos: list[int] = []
    if find(b"@") >= 0:
        pos += [m.start() for m in EMAIL_HINT.finditer(body)]
    if find(b"+") >= 0:
        pos += [m.start() for m in INTL_HINT.finditer(body)]
    if any(find(d) >= 0 for d in DIGITS):  # ten memchr passes: cheaper than one numpy range test
        if np is not None:
            pos += _digit_runs(np, a if a is not None else np.frombuffer(body, np.uint8))
        else:
            for first, rx in DIGIT_HINTS:
                if find(first) >= 0:
                    pos += [m.start() for m in rx.finditer(body)]
    if not body.isascii():
        leads = [lead for lead in LEADS if find(lead) >= 0]
        if leads:
            if np is not None:
                pos += _marker_words(np, body, leads, (scratch or Scratch(np)).ensure(len(body)))
            else:
                for pair, rx in MARKERS.items():
                    if pair[:1] in leads:
                        pos += [m.start() for m in rx.finditer(body)]
    if find(b"\\") >= 0:
        pos += [m.start() for m in ESCAPED.finditer(body)]
    return pos


def _digit_runs(np, a) -> list[int]:
    """Starts of digit runs ≥ 11 long, and of `ddd[-.]dddd` shapes (runs ≥ 3 and ≥ 4 around - or .)."""
    digit = ((a >= 48) & (a <= 57)).view(np.int8)
    edges = np.diff(digit, prepend=np.int8(0), append=np.int8(0))
    starts = np.flatnonzero(edges == 1)
    ends = np.flatnonzero(edges == -1)
    lengths = ends - starts
    out = starts[lengths >= 11].tolist()
    if len(starts) > 1:
        gap = starts[1:] - ends[:-1] == 1  # one byte between two runs
        sep = a[np.minimum(ends[:-1], len(a) - 1)]
        shape = gap & ((sep == 45) | (sep == 46)) & (lengths[:-1] >= 3) & (lengths[1:] >= 4)
        out += ends[:-1][shape].tolist()
    return out


def _marker_words(np, body: bytes, leads: list[bytes], scratch: Scratch) -> list[int]:
    """Positions of the exact markers, found as 16-bit words at even and at odd offsets: per offset one
    comparison per marker pair (EF BB and EF BF in one, as they differ in one bit) and one any()."""
    n = len(body)
    words = [np.uint16(pair[0] | pair[1] << 8) for pair in MARKERS if pair[:1] in leads and pair[:1] != b"\xef"]
    ef = b"\xef" in leads
    out: list[int] = []
    for start in (0, 1):
        m = (n - start) // 2
        view = np.frombuffer(body, dtype="<u2", count=m, offset=start)
        found, hit = scratch.half[:m], scratch.half2[:m]
        first = True
        if ef:  # (w | 0x0400) == EF BF: the words EF BB and EF BF
            np.bitwise_or(view, np.uint16(0x0400), out=scratch.words[:m])
            np.equal(scratch.words[:m], np.uint16(0xBFEF), out=found)
            first = False
        for word in words:
            if first:
                np.equal(view, word, out=found)
                first = False
            else:
                np.equal(view, word, out=hit)
                np.logical_or(found, hit, out=found)
        if not first and found.any():
            for p in (np.flatnonzero(found) * 2 + start).tolist():
                rx = MARKERS.get(body[p:p + 2])
                if rx is not None and rx.match(body, p):
                    out.append(p)
    return out


def hit_lines(body: bytes, np=None, a=None, starts=None, scratch: Scratch | None = None) -> list[int]:
    """Sorted indices of the lines of `body` (split on \\n) that hold a hint. `starts`: the offsets where
    lines start (numpy array) when the caller has them."""
    if np is not None and len(body) < NUMPY_MIN_BYTES and a is None:
        np = None
    pos = hit_positions(body, np, a, scratch)
    if not pos:
        return []
    if np is not None and starts is not None:
        rows = np.searchsorted(starts, np.asarray(pos, dtype=np.int64), side="right") - 1
        return np.unique(rows).tolist()
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
