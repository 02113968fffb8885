"""Running a tool for the doctor: argv only, its own process group, a hard timeout.

A tool that hangs (rocminfo on a wedged GPU, amd-smi waiting on the driver) is killed with its
whole process group when its time is up, so nothing it spawned keeps the pipes open.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import time
from typing import Mapping

from core.doctor.evidence import CommandResult
from core.processes.helpers import kill_group, track, untrack

MAX_OUTPUT = 400_000  # characters kept per stream: enough for amd-smi static on 8 GPUs


def run_command(argv: list[str], *, timeout: float, env: Mapping[str, str] | None = None,
                cwd: str | None = None) -> CommandResult:
    """Run `argv`; never raises for the tool's own failures, never waits past `timeout`."""
    exe = argv[0]
    if os.sep not in exe and shutil.which(exe, path=(env or os.environ).get("PATH")) is None:
        return CommandResult(argv=list(argv), missing=True)
    if os.sep in exe and not os.path.exists(exe):
        return CommandResult(argv=list(argv), missing=True)
    started = time.monotonic()
    try:
        proc = subprocess.Popen(
            argv, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
            env=dict(env) if env is not None else None, cwd=cwd, start_new_session=True,
        )
    except OSError as exc:
        return CommandResult(argv=list(argv), error=f"{type(exc).__name__}: {exc.strerror or exc}")
    timed_out = False
    track(proc)
    try:
        out, err = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        timed_out = True
        kill_group(proc)
        try:
            out, err = proc.communicate(timeout=2)
        except subprocess.TimeoutExpired:  # a grandchild escaped the group and holds the pipes
            out, err = b"", b""
    finally:
        untrack(proc)
    return CommandResult(
        argv=list(argv),
        returncode=None if timed_out else proc.returncode,
        stdout=_decode(out),
        stderr=_decode(err),
        timed_out=timed_out,
        seconds=round(time.monotonic() - started, 3),
    )


def _decode(data: bytes | None) -> str:
    text = (data or b"").decode("utf-8", errors="replace")
    return text if len(text) <= MAX_OUTPUT else text[:MAX_OUTPUT] + "\n[... cut by devtune ...]\n"
