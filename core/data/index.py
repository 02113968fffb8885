"""A line-offset index for instant random access to multi-GB JSON Lines files.

The index is the byte offset of every line start (8 bytes a line, `array('q')`), built in the
background in 8 MiB windows (the newlines found by `bytes.split`, the offsets summed by `accumulate`) and
usable while it grows: `lines(start, n)` reads just those lines with one `os.pread`. Before the index
has reached a line, `head_lines` reads the first page straight from the file.
"""

from __future__ import annotations

import os
import threading
import time
from array import array
from itertools import accumulate
from pathlib import Path
from typing import Callable

WINDOW = 8 << 20


class LineIndex:
    def __init__(self, path: str | os.PathLike) -> None:
        self.path = Path(path)
        self.size = self.path.stat().st_size
        self.offsets = array("q", [0])  # start of every line; a final entry = size once complete
        self.scanned = 0  # bytes scanned so far
        self.complete = False
        self._lock = threading.Lock()

    # building
    def build(self, progress: Callable[[int, int], None] | None = None,
              cancelled: Callable[[], bool] = lambda: False) -> "LineIndex":
        """Scan the whole file (call it from a worker thread); safe to read from other threads meanwhile."""
        fd = os.open(self.path, os.O_RDONLY)
        try:
            pos = 0
            while pos < self.size:
                if cancelled():
                    return self
                block = os.pread(fd, WINDOW, pos)
                if not block:
                    break
                # each piece but the last ends with a newline: the next line starts len + 1 further on
                found = list(accumulate(map((1).__add__, map(len, block.split(b"\n")[:-1])), initial=pos))[1:]
                with self._lock:
                    self.offsets.extend(found)
                    pos += len(block)
                    self.scanned = pos
                if progress:
                    progress(pos, self.size)
                time.sleep(0)  # yield the GIL between windows: a UI thread stays responsive
            with self._lock:
                if self.offsets[-1] != self.size:
                    self.offsets.append(self.size)  # the last line has no newline
                self.complete = True
        finally:
            os.close(fd)
        return self

    def build_in_background(self, progress: Callable[[int, int], None] | None = None) -> threading.Thread:
        t = threading.Thread(target=self.build, args=(progress,), daemon=True, name=f"index {self.path.name}")
        t.start()
        return t

    # reading
    @property
    def known_lines(self) -> int:
        """Lines whose extent is known so far (all of them once complete)."""
        with self._lock:
            return len(self.offsets) - 1

    def line_count(self) -> int | None:
        return self.known_lines if self.complete else None

    def lines(self, start: int, count: int) -> list[bytes]:
        """Lines start .. start+count-1 (0-based) among those indexed so far, without line terminators."""
        with self._lock:
            stop = min(start + count, len(self.offsets) - 1)
            if start >= stop:
                return []
            a, b = self.offsets[start], self.offsets[stop]
            ends = self.offsets[start:stop + 1]
        with open(self.path, "rb") as fh:
            data = os.pread(fh.fileno(), b - a, a)
        out = []
        for i in range(len(ends) - 1):
            line = data[ends[i] - a:ends[i + 1] - a]
            out.append(line.rstrip(b"\n").rstrip(b"\r"))
        return out


def head_lines(path: str | os.PathLike, count: int, limit: int = 4 << 20) -> list[bytes]:
    """The first `count` lines of a file, reading at most `limit` bytes (a page before any index)."""
    with open(path, "rb") as fh:
        data = fh.read(limit)
    parts = data.split(b"\n")
    if len(parts) > count:
        parts = parts[:count]
    elif parts and parts[-1] == b"":
        parts.pop()
    return [p.rstrip(b"\r") for p in parts]
