"""Start-up benchmark (issue 2): prints ratios against baselines measured in the same run.

1. `devtune --help` wall time / `python -c pass` wall time            target <= 3.0
2. the wizard's first paint / a minimal Textual app's first paint       target <= 1.3

First paint is measured as a person sees it: each app runs in a real pseudo-terminal (120x40), and
the time is taken from launching the process until the terminal has received the first frame's text
(the minimal app's "hello"; the wizard's step bar, "1 Data"). Interleaved runs, medians. For
information it also prints when the Data step itself has been drawn (its intro line): the wizard's
first frame is the step bar, drawn before the full state model and the step's screen are loaded.

    .venv/bin/python bench/startup.py [--runs N] [--workspace DIR]
"""

from __future__ import annotations

import argparse
import fcntl
import os
import select
import signal
import statistics
import struct
import subprocess
import sys
import tempfile
import termios
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PY = sys.executable
DEVTUNE = str(Path(PY).parent / "devtune")

MINIMAL_APP = """
from textual.app import App
from textual.widgets import Static, Footer
class Minimal(App):
    def compose(self):
        yield Static("hello")
        yield Footer()
Minimal().run()
"""


def timed(argv: list[str]) -> float:
    t0 = time.perf_counter()
    proc = subprocess.run(argv, cwd=ROOT, capture_output=True, text=True)
    elapsed = time.perf_counter() - t0
    if proc.returncode != 0:
        raise SystemExit(f"{argv[:3]} failed:\n{proc.stderr[-2000:]}")
    return elapsed


def first_paint(argv: list[str], marker: bytes, timeout: float = 60.0) -> float:
    """Seconds from launch until `marker` has been written to the app's terminal."""
    master, slave = os.openpty()
    fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", 40, 120, 0, 0))
    env = {**os.environ, "TERM": "xterm-256color", "DEVTUNE_LANG": "en"}
    t0 = time.perf_counter()
    proc = subprocess.Popen(argv, stdin=slave, stdout=slave, stderr=slave, env=env, start_new_session=True)
    os.close(slave)
    seen = b""
    try:
        while time.perf_counter() - t0 < timeout:
            ready, _, _ = select.select([master], [], [], 0.02)
            if ready:
                try:
                    seen += os.read(master, 1 << 16)
                except OSError:
                    break
                if marker in seen:
                    return time.perf_counter() - t0
        raise SystemExit(f"{argv[:3]} never painted {marker!r}")
    finally:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()
        os.close(master)


def measure(runs: int, jobs: dict) -> dict[str, float]:
    samples: dict[str, list[float]] = {k: [] for k in jobs}
    for job in jobs.values():  # warm the page cache
        job()
    for _ in range(runs):
        for name, job in jobs.items():
            samples[name].append(job())
    return {k: statistics.median(v) for k, v in samples.items()}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=15)
    parser.add_argument("--workspace", help="workspace for the wizard (default: a fresh folder)")
    args = parser.parse_args()

    help_times = measure(args.runs, {"python -c pass": lambda: timed([PY, "-c", "pass"]),
                                     "devtune --help": lambda: timed([DEVTUNE, "--help"])})
    with tempfile.TemporaryDirectory() as tmp:
        ws = args.workspace or tmp
        paint = measure(max(5, args.runs // 2), {
            "minimal Textual app": lambda: first_paint([PY, "-c", MINIMAL_APP], b"hello"),
            "devtune wizard": lambda: first_paint([DEVTUNE, ws], b"1 Data"),
            "  (Data step open)": lambda: first_paint([DEVTUNE, ws], b"Pick your data file"),
        })
    ratio_help = help_times["devtune --help"] / help_times["python -c pass"]
    ratio_paint = paint["devtune wizard"] / paint["minimal Textual app"]
    print("startup benchmark (medians; ratios against baselines measured in this run)")
    for name, t in {**help_times, **paint}.items():
        print(f"  {name:<22} {t * 1000:8.1f} ms")
    print(f"  devtune --help / python -c pass          = {ratio_help:5.2f}x   (target <= 3.0)")
    print(f"  wizard first paint / minimal Textual app = {ratio_paint:5.2f}x   (target <= 1.3)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
