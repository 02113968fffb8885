"""Short-lived helper processes (LLaMA-Factory's argument check, a probe, a GPU tool): each leads its own
process group and is tracked while it runs, so that devtune, when its terminal goes away, ends them with
everything they spawned instead of leaving them behind.

    proc = run_helper([python, "-m", "core.config.lf_argcheck"], input=payload, timeout=120)
    end_helpers()      # SIGKILL to the group of every helper still running

Detached runs and servers (core.train.runs, core.serve.servers) are not helpers: they outlive devtune
on purpose and are never tracked here.
"""

from __future__ import annotations

import os
import signal
import subprocess
import threading
from typing import Any

_LOCK = threading.Lock()
_RUNNING: set[subprocess.Popen] = set()


def track(proc: subprocess.Popen) -> None:
    with _LOCK:
        _RUNNING.add(proc)


def untrack(proc: subprocess.Popen) -> None:
    with _LOCK:
        _RUNNING.discard(proc)


def running_helpers() -> list[int]:
    """PIDs of the helpers still tracked."""
    with _LOCK:
        return [p.pid for p in _RUNNING]


def kill_group(proc: subprocess.Popen) -> None:
    """SIGKILL the helper's process group (its pid: it leads the group); the helper alone if that fails."""
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        try:
            proc.kill()
        except (ProcessLookupError, OSError):
            pass


def end_helpers() -> int:
    """End every helper still running (its whole group); returns how many there were."""
    with _LOCK:
        procs = list(_RUNNING)
        _RUNNING.clear()
    for proc in procs:
        if proc.poll() is None:
            kill_group(proc)
    return len(procs)


def run_helper(argv: list[str], *, input: str | bytes | None = None, timeout: float,
               text: bool = True, **popen: Any) -> subprocess.CompletedProcess:
    """Like `subprocess.run(argv, capture_output=True, timeout=...)`, in its own tracked process group.

    On a timeout the whole group is killed and `subprocess.TimeoutExpired` raised, as subprocess.run does.
    """
    proc = subprocess.Popen(argv, stdin=subprocess.PIPE if input is not None else subprocess.DEVNULL,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=text,
                            start_new_session=True, **popen)
    track(proc)
    try:
        try:
            out, err = proc.communicate(input=input, timeout=timeout)
        except subprocess.TimeoutExpired:
            kill_group(proc)
            try:
                proc.communicate(timeout=2)
            except subprocess.TimeoutExpired:  # a grandchild escaped the group and holds the pipes
                pass
            raise
        except BaseException:
            kill_group(proc)
            proc.wait()
            raise
    finally:
        untrack(proc)
    return subprocess.CompletedProcess(argv, proc.returncode, out, err)
