"""New complete lines of a few log files since the last look: a server's stdout/stderr while it
loads, an export's while it runs. tqdm's carriage returns count as line ends; a partial last line
waits for its end. Polled by the caller; nothing here blocks. Reading by offset (and starting over
when a file is truncated or replaced) is core.files.tail's."""

from __future__ import annotations

import re
from pathlib import Path

from core.files.tail import FileTail

LINE_END = re.compile(rb"\r\n|\r|\n")


class LogFollower:
    def __init__(self, paths: list[Path]):
        self.tails = [FileTail(Path(p)) for p in paths]
        self.partial = [b"" for _ in self.tails]

    def new_lines(self) -> list[str]:
        lines: list[str] = []
        for i, tail in enumerate(self.tails):
            data = tail.read_new()
            if tail.reset:
                self.partial[i] = b""
            if not data:
                continue
            *complete, self.partial[i] = LINE_END.split(self.partial[i] + data)
            lines += [c.decode("utf-8", errors="replace") for c in complete if c.strip()]
        return lines
