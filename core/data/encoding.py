"""Which text encoding a dataset file uses, decided from its first bytes and said in words.

UTF-8 (with or without BOM), UTF-16 (BOM, or the NUL pattern of ASCII in UTF-16) and GB18030/GBK.
UTF-8 is tried first because GB18030 decodes almost any bytes; a file whose head is UTF-8 may still
hold GBK lines further down, which the readers decode line by line (`decode_line`).
"""

from __future__ import annotations

import codecs
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Iterator

from core.i18n import _

HEAD_BYTES = 256 * 1024
BOM_UTF8 = b"\xef\xbb\xbf"
UTF8, UTF8_BOM, UTF16_LE, UTF16_BE, GB18030, BINARY = (
    "utf-8", "utf-8-sig", "utf-16-le", "utf-16-be", "gb18030", "binary")


@dataclass(frozen=True)
class EncodingGuess:
    encoding: str  # utf-8 | utf-8-sig | utf-16-le | utf-16-be | gb18030 | binary
    bom: bool
    reason: str  # what was seen, in words

    @property
    def is_utf8(self) -> bool:
        return self.encoding in (UTF8, UTF8_BOM)

    @property
    def python_codec(self) -> str:
        return {UTF8_BOM: UTF8, BINARY: UTF8}.get(self.encoding, self.encoding)


def _trim_to_line(head: bytes, complete: bool) -> bytes:
    if complete:
        return head
    cut = head.rfind(b"\n")
    return head[: cut + 1] if cut > 0 else head[: max(0, len(head) - 4)]


def _utf16_by_nuls(head: bytes) -> str | None:
    sample = head[:4096]
    if len(sample) < 4 or sample.count(0) < len(sample) // 4:
        return None
    even = sample[0::2].count(0)
    odd = sample[1::2].count(0)
    if odd > even * 4:
        return UTF16_LE
    if even > odd * 4:
        return UTF16_BE
    return None


def guess_encoding_bytes(head: bytes, complete: bool = False) -> EncodingGuess:
    """Decide from the first bytes of a file (`complete`: they are the whole file)."""
    if head.startswith(BOM_UTF8):
        return EncodingGuess(UTF8_BOM, True, _("UTF-8 with a byte order mark (BOM)"))
    if head.startswith(b"\xff\xfe") and not head.startswith(b"\xff\xfe\x00\x00"):
        return EncodingGuess(UTF16_LE, True, _("UTF-16 little-endian (byte order mark FF FE)"))
    if head.startswith(b"\xfe\xff"):
        return EncodingGuess(UTF16_BE, True, _("UTF-16 big-endian (byte order mark FE FF)"))
    by_nuls = _utf16_by_nuls(head)
    if by_nuls:
        return EncodingGuess(by_nuls, False, _("UTF-16 without a byte order mark (every other byte is NUL)"))
    body = _trim_to_line(head, complete)
    if body.count(0) > len(body) // 10:
        return EncodingGuess(BINARY, False, _("binary data (NUL bytes), not text"))
    try:
        body.decode(UTF8)
        if body.isascii():
            return EncodingGuess(UTF8, False, _("ASCII, read as UTF-8"))
        return EncodingGuess(UTF8, False, _("UTF-8"))
    except UnicodeDecodeError as exc:
        first_bad = exc.start
    line = body.count(b"\n", 0, first_bad) + 1
    try:
        body.decode(GB18030)
        return EncodingGuess(GB18030, False, _(
            "not UTF-8 (first bad byte on line {line}); decodes cleanly as GB18030 (GBK)", line=line))
    except UnicodeDecodeError:
        pass
    hows = [decode_line(ln)[1] for ln in body.split(b"\n")]
    if "invalid" not in hows:
        return EncodingGuess(UTF8, False, _(
            "UTF-8 with some GB18030 (GBK) lines, the first on line {line}", line=line))
    return EncodingGuess(UTF8, False, _("neither UTF-8 nor GB18030; read as UTF-8 with bad bytes replaced"))


def guess_encoding(path: str | os.PathLike) -> EncodingGuess:
    with open(path, "rb") as fh:
        head = fh.read(HEAD_BYTES)
        complete = len(head) < HEAD_BYTES or not fh.read(1)
    return guess_encoding_bytes(head, complete)


def decode_line(raw: bytes) -> tuple[str, str]:
    """One line's text and how it was decoded: `utf-8`, `gb18030`, or `invalid` (bad bytes replaced)."""
    try:
        return raw.decode(UTF8), UTF8
    except UnicodeDecodeError:
        pass
    try:
        return raw.decode(GB18030), GB18030
    except UnicodeDecodeError:
        return raw.decode(UTF8, errors="replace"), "invalid"


# ---- decoded text (UTF-16, arrays, streams) --------------------------------------------------------

TEXT_CHUNK = 4 << 20


class CountingErrors:
    """A codec error handler that replaces bad bytes and remembers that it had to."""

    def __init__(self) -> None:
        self.count = 0
        self.name = f"devtune-count-{id(self)}"
        codecs.register_error(self.name, self)

    def __call__(self, exc: UnicodeDecodeError):
        self.count += 1
        return "\ufffd", exc.end


def iter_text_chunks(path: Path, enc: EncodingGuess, errors_handler: CountingErrors | None = None,
                     chunk: int = TEXT_CHUNK) -> Iterator[str]:
    codec = enc.python_codec
    if codec == GB18030:
        codec = "gb18030"
    errors = errors_handler.name if errors_handler else "replace"
    decoder = codecs.getincrementaldecoder(codec)(errors=errors)
    with open(path, "rb") as fh:
        first = True
        while True:
            raw = fh.read(chunk)
            text = decoder.decode(raw, final=not raw)
            if first:
                text = text.lstrip("\ufeff") if enc.bom else text
                first = False
            if text:
                yield text
            if not raw:
                return
