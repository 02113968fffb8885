"""The progress line `devtune data lint` and `stats` print on stderr while a big file is read."""

from __future__ import annotations

import sys
import time

from core.i18n import _

PROGRESS_MIN_BYTES = 16 << 20


def _phase_label(phase: str) -> str:
    return {"scan": _("reading rows"), "duplicates": _("finding duplicates"),
            "near-duplicates": _("finding near duplicates"), "tokens": _("counting tokens")}.get(phase, phase)


class LintProgressBar:
    """A one-line progress bar on stderr, for files big enough to wait for."""

    def __init__(self, size: int) -> None:
        self.size = size
        self.show = size >= PROGRESS_MIN_BYTES
        self.tty = sys.stderr.isatty()
        self.last = 0.0
        self.last_pct = -10
        self.phase = ""

    def __call__(self, p) -> None:
        if not self.show:
            return
        from core.data.wording import counted

        now = time.monotonic()
        phase = _phase_label(p.phase)
        if p.phase == "scan" and p.total:
            pct = int(100 * p.done / p.total)
            if self.tty and now - self.last > 0.2:
                print(f"\r  {phase:<16} {pct:3d}%  {p.done >> 20} / {p.total >> 20} MB", end="", file=sys.stderr)
                self.last = now
            elif not self.tty and pct >= self.last_pct + 10:
                print(f"  {phase} {pct}%", file=sys.stderr)
                self.last_pct = pct
        elif p.phase != self.phase:
            print(f"{chr(13) if self.tty else ''}  {phase}…" + " " * 40, end="" if self.tty else "\n",
                  file=sys.stderr)
        elif p.done and now - self.last > 0.5:
            print(f"\r  {phase:<16} {counted('row', p.done)}" + " " * 10, end="" if self.tty else "\n",
                  file=sys.stderr)
            self.last = now
        self.phase = p.phase

    def done(self) -> None:
        if self.show and self.tty:
            print("\r" + " " * 60 + "\r", end="", file=sys.stderr)
