"""Reading append-only files incrementally, by offset: trainer_log.jsonl, stdout.log, stderr.log,
gpu.jsonl.

`FileTail.read_new()` returns the bytes appended since the last call. It copes with what happens to
such files in real life:

- the file does not exist yet (nothing to read; it is picked up when it appears);
- the file was truncated or replaced (LLaMA-Factory deletes trainer_log.jsonl when a run starts
  again with `overwrite_output_dir`): the tail starts over from 0 and says so (`reset` is True);
- a line is still being written: `LineTail` keeps the partial last line until its newline arrives.

No thread, no inotify: the caller polls (the TUI at ~1 Hz, the sidecar at its tick), so a poll that
finds nothing new costs one `os.stat`.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path

CHUNK = 1 << 20  # read at most this much per call: a huge backlog is consumed over several polls


@dataclass
class FileTail:
    path: Path
    offset: int = 0
    reset: bool = False  # the last read_new() started over (truncation or a new file)
    _ident: tuple[int, int] | None = field(default=None, repr=False)

    def __post_init__(self) -> None:
        self.path = Path(self.path)

    def read_new(self, limit: int = CHUNK) -> bytes:
        self.reset = False
        try:
            st = os.stat(self.path)
        except FileNotFoundError:
            if self.offset or self._ident:
                self._start_over()
            return b""
        ident = (st.st_dev, st.st_ino)
        if (self._ident is not None and ident != self._ident) or st.st_size < self.offset:
            self._start_over()
        self._ident = ident
        if st.st_size == self.offset:
            return b""
        with open(self.path, "rb") as fh:
            fh.seek(self.offset)
            data = fh.read(min(limit, st.st_size - self.offset))
        self.offset += len(data)
        return data

    def _start_over(self) -> None:
        self.offset = 0
        self._ident = None
        self.reset = True


@dataclass
class LineTail:
    """Complete lines appended since the last call (bytes, without the newline)."""

    path: Path
    _tail: FileTail = field(init=False, repr=False)
    _partial: bytes = field(default=b"", init=False, repr=False)

    def __post_init__(self) -> None:
        self._tail = FileTail(Path(self.path))

    @property
    def reset(self) -> bool:
        return self._tail.reset

    @property
    def offset(self) -> int:
        """Offset of the first byte not yet returned as part of a complete line."""
        return self._tail.offset - len(self._partial)

    def read_lines(self, limit: int = CHUNK) -> list[bytes]:
        data = self._tail.read_new(limit)
        if self._tail.reset:
            self._partial = b""
        if not data:
            return []
        data = self._partial + data
        lines = data.split(b"\n")
        self._partial = lines.pop()  # b"" when the data ended with a newline
        return lines
