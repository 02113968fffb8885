"""Process checks shared by the tests that start real servers and runs."""

from __future__ import annotations

import os
import time

import psutil


def group_members(pgid: int) -> list[int]:
    """Live (non-zombie) processes of a process group: what a stop must leave empty."""
    out = []
    for p in psutil.process_iter(["pid", "status"]):
        try:
            if os.getpgid(p.pid) == pgid and p.info["status"] != psutil.STATUS_ZOMBIE:
                out.append(p.pid)
        except OSError:
            pass
    return out


def wait(predicate, timeout=240, interval=0.2) -> bool:
    """Poll `predicate` every `interval` seconds until it holds or `timeout` seconds pass."""
    deadline = time.time() + timeout
    while time.time() < deadline:
        if predicate():
            return True
        time.sleep(interval)
    return False
