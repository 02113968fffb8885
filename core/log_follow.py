"""New complete lines of a few log files since the last look: a server's stdout/stderr while it
loads, an export's while it runs. tqdm's carriage returns count as line ends; a partial last line
waits for its end. Polled by the caller; nothing here blocks."""

from __future__ import annotations

from pathlib import Path

CHUNK = 1 << 20


class LogFollower:
    def __init__(self, paths: list[Path], *, from_end: bool = False):
        self.paths = [Path(p) for p in paths]
        self.offsets = [self._size(p) if from_end else 0 for p in self.paths]
        self.partial = [b"" for _ in self.paths]

    @staticmethod
    def _size(path: Path) -> int:
        try:
            return path.stat().st_size
        except OSError:
            return 0

    def new_lines(self) -> list[str]:
        lines: list[str] = []
        for i, path in enumerate(self.paths):
            try:
                with open(path, "rb") as fh:
                    fh.seek(self.offsets[i])
                    data = fh.read(CHUNK)
            except OSError:
                continue
            self.offsets[i] += len(data)
            *complete, self.partial[i] = (self.partial[i] + data).replace(b"\r", b"\n").split(b"\n")
            lines += [c.decode("utf-8", errors="replace") for c in complete if c.strip()]
        return lines
