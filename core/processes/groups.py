"""Process groups of detached children (training runs, model servers): signal one, see whether any
member is still alive, end one with SIGTERM then SIGKILL, and reap our own child so no zombie stays.

Every detached process devtune starts leads its own session (`start_new_session=True`), so its
process group ID is its PID and the group holds everything it spawned (torchrun workers, vLLM's
engine core)."""

from __future__ import annotations

import os
import signal
import time


def reap(pid: int) -> None:
    """Collect the exit status of a child this process started, if it has ended."""
    try:
        os.waitpid(pid, os.WNOHANG)
    except (ChildProcessError, OSError):
        pass


def signal_group(pgid: int | None, sig: int) -> None:
    """Send `sig` to the group; a group that is gone or not ours to signal is left alone."""
    if not pgid or pgid <= 1:
        return
    try:
        os.killpg(pgid, sig)
    except (ProcessLookupError, PermissionError):
        pass


def group_alive(pgid: int) -> bool:
    """Any live (non-zombie) process still in the group."""
    import psutil

    for proc in psutil.process_iter(["pid", "status"]):
        try:
            if os.getpgid(proc.info["pid"]) == pgid and proc.info["status"] != psutil.STATUS_ZOMBIE:
                return True
        except (ProcessLookupError, PermissionError, OSError):
            continue
    return False


def leader_is(pgid: int, create_time: float) -> bool:
    """The group still belongs to the process started at `create_time`: its leader is that process, or
    the leader is gone (Linux does not reuse a PID while a group with that ID has members, so the
    members left are the leader's)."""
    import psutil

    try:
        leader = psutil.Process(pgid)
    except psutil.NoSuchProcess:
        return True
    return abs(leader.create_time() - create_time) < 0.05


def end_group(pgid: int, leader_pid: int, grace: float = 15.0) -> None:
    """SIGTERM to the group, SIGKILL after `grace` seconds, and up to 10 s more for the kill to land;
    reaps `leader_pid` along the way when it is our child."""
    if group_alive(pgid):
        signal_group(pgid, signal.SIGTERM)
        _wait_gone(pgid, leader_pid, grace, 0.2)
    if group_alive(pgid):
        signal_group(pgid, signal.SIGKILL)
        _wait_gone(pgid, leader_pid, 10.0, 0.1)
    reap(leader_pid)


def _wait_gone(pgid: int, leader_pid: int, timeout: float, interval: float) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline and group_alive(pgid):
        reap(leader_pid)
        time.sleep(interval)
