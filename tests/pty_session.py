"""A real pseudo-terminal for a real devtune process, and a way to take it away as an SSH drop does.

    with PtySession([devtune, "-w", ws], cols=120, rows=40) as term:
        term.wait_for_output()
        term.send(b"3")
        term.hang_up()              # close the terminal: the kernel sends SIGHUP, reads see the hang-up

devtune leads its own session with the pty as its controlling terminal, as under sshd or tmux, so
closing the master side is exactly what a dropped connection does to it.

While devtune runs (and after the hang-up, until it has exited), a thread records its descendants every
SAMPLE_SECONDS (psutil's children(recursive=True)), and once more right before the hang-up: helpers
lead their own sessions, so only the family tree finds them all. `seen` holds every one recorded, and
`still_alive()` those of them still running afterwards (the same pid *and* start time, zombies aside).
"""

from __future__ import annotations

import fcntl
import os
import pty
import select
import struct
import subprocess
import termios
import threading
import time
from dataclasses import dataclass
from pathlib import Path

import psutil

CLK_TCK = os.sysconf("SC_CLK_TCK")
SAMPLE_SECONDS = 0.1


@dataclass(frozen=True)
class Descendant:
    pid: int
    created: float
    cmdline: str
    session: int  # when it was seen

    def process(self) -> psutil.Process | None:
        """The process, while it still runs (the same pid and start time, not a zombie), else None."""
        try:
            proc = psutil.Process(self.pid)
            if abs(proc.create_time() - self.created) > 0.01 or proc.status() == psutil.STATUS_ZOMBIE:
                return None
            return proc
        except psutil.Error:
            return None


def cpu_seconds(pid: int) -> float | None:
    """utime + stime of a process (its threads included), or None once it is gone."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return None
    return (int(fields[11]) + int(fields[12])) / CLK_TCK


class PtySession:
    def __init__(self, argv: list[str], *, cols: int, rows: int, env: dict[str, str] | None = None,
                 cwd: str | os.PathLike | None = None) -> None:
        master, slave = pty.openpty()
        fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", rows, cols, 0, 0))
        self.master = master
        self.output = bytearray()
        self._lock = threading.Lock()
        self.proc = subprocess.Popen(
            argv, stdin=slave, stdout=slave, stderr=slave, env=env, cwd=cwd, close_fds=True,
            start_new_session=True,  # then, in the child: this pty becomes its controlling terminal
            preexec_fn=lambda: fcntl.ioctl(0, termios.TIOCSCTTY, 0),
        )
        os.close(slave)
        self._closing = threading.Event()
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()
        self.hung_up_at: float | None = None
        self.seen: dict[tuple[int, float], Descendant] = {}
        self._seen_lock = threading.Lock()
        self._sampler = threading.Thread(target=self._sample_until_exit, daemon=True)
        self._sampler.start()

    def sample_descendants(self) -> None:
        """Record devtune's descendants now (whatever session they lead)."""
        try:
            children = psutil.Process(self.proc.pid).children(recursive=True)
        except psutil.Error:
            return
        for child in children:
            try:
                key = (child.pid, child.create_time())
                if key not in self.seen:
                    found = Descendant(child.pid, key[1], " ".join(child.cmdline()[:4])[:200], os.getsid(child.pid))
                    with self._seen_lock:
                        self.seen.setdefault(key, found)
            except (psutil.Error, OSError):
                pass

    def _sample_until_exit(self) -> None:
        while self.proc.poll() is None:
            self.sample_descendants()
            time.sleep(SAMPLE_SECONDS)

    def still_alive(self) -> list[tuple[Descendant, psutil.Process]]:
        """Every descendant recorded that still runs."""
        with self._seen_lock:
            seen = list(self.seen.values())
        return [(d, p) for d in seen if (p := d.process()) is not None]

    def _read(self) -> None:
        # select() with a timeout, never a read that blocks: a thread blocked in read() would keep the master
        # side open after close() (Linux closes the file only when that read returns), so the hang-up would
        # come late, or never for an idle program.
        while not self._closing.is_set():
            try:
                ready, _, _ = select.select([self.master], [], [], 0.05)
                data = os.read(self.master, 65536) if ready else b""
            except OSError:
                return
            if ready and not data:
                return
            with self._lock:
                self.output += data

    def text(self) -> str:
        with self._lock:
            return self.output.decode("utf-8", errors="replace")

    def painted(self) -> bool:
        """The app switched to the alternate screen and drew a good part of a screen since."""
        text = self.text()
        return "\x1b[?1049h" in text and len(text.rsplit("\x1b[?1049h", 1)[1]) > 4000

    def wait_for_output(self, needle: str | None = None, timeout: float = 30.0) -> bool:
        """Until `needle` was printed (a plain CLI's output), or, without one, the first screen painted."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if (needle in self.text()) if needle else self.painted():
                return True
            if self.proc.poll() is not None:
                return False
            time.sleep(0.05)
        return False

    def send(self, data: bytes) -> None:
        os.write(self.master, data)

    def session_processes(self) -> list[psutil.Process]:
        """devtune and every process still in its session (its helpers; detached runs have their own)."""
        out = []
        for p in psutil.process_iter(["pid"]):
            try:
                if os.getsid(p.pid) == self.proc.pid:
                    out.append(p)
            except OSError:
                pass
        return out

    def hang_up(self) -> None:
        """Close the master side: the terminal is gone (the reader stops first, so the close takes effect now)."""
        self._closing.set()
        self._reader.join(2)
        self.sample_descendants()
        self.hung_up_at = time.monotonic()
        try:
            os.close(self.master)
        except OSError:
            pass

    def __enter__(self) -> "PtySession":
        return self

    def __exit__(self, *exc) -> None:
        if self.hung_up_at is None:
            self.hang_up()
        for p in [self.proc, *[q for q in self.session_processes() if q.pid != self.proc.pid]]:
            try:
                p.kill()
            except (OSError, psutil.Error):
                pass
        try:
            self.proc.wait(5)
        except subprocess.TimeoutExpired:
            pass
