"""Starting a `devtune data synth` that a test interrupts with SIGINT (Ctrl-C), whatever SIGINT is in the test
process: a process started with SIGINT ignored — any job a non-interactive shell starts with `&`
(`make test > log &`, a CI script) — passes that on to its children, and a Python child then never raises
KeyboardInterrupt, so the test's SIGINT would be ignored and the run would go on to its end."""

from __future__ import annotations

import signal
import subprocess


def popen_taking_ctrl_c(argv: list[str], **kw) -> subprocess.Popen:
    """`subprocess.Popen(argv, **kw)` whose child starts with SIGINT at its default (Python's Ctrl-C): a signal
    handled here is reset to its default in the child at exec, an ignored one would stay ignored."""
    previous = signal.signal(signal.SIGINT, signal.default_int_handler)
    try:
        return subprocess.Popen(argv, **kw)
    finally:
        signal.signal(signal.SIGINT, previous)
