"""Short-lived helper processes (LLaMA-Factory's argument check, a probe, a GPU tool): each leads its own
process group and is tracked while it runs, so that devtune, when its terminal goes away, ends them with
everything they spawned instead of leaving them behind.

    proc = run_helper([python, "-m", "core.config.lf_argcheck"], input=payload, timeout=120)
    end_helpers()      # SIGKILL to the group of every helper still running
    close_helpers()    # the same, and no helper starts any more: devtune is exiting (its terminal went away)
    end_children()     # SIGKILL what devtune started in its own session (a lint's worker processes)

A helper is started under the same lock that `close_helpers` takes, so one being started while the
terminal goes away is either refused or ended: none slips through between the two.

Detached runs and servers (core.train.runs, core.serve.servers) are not helpers: they lead their own
sessions, outlive devtune on purpose and are never tracked or ended here.
"""

from __future__ import annotations

import os
import signal
import subprocess
import threading
from typing import Any

from core.i18n import _

_LOCK = threading.Lock()
_RUNNING: set[subprocess.Popen] = set()
_CLOSED = threading.Event()


class HelpersClosed(OSError):
    """devtune is exiting (its terminal went away): no helper starts any more."""


def track(proc: subprocess.Popen) -> None:
    """Track a helper started by its caller (in its own session). After `close_helpers` it is ended at once
    and HelpersClosed raised: it was started while devtune was exiting."""
    with _LOCK:
        if not _CLOSED.is_set():
            _RUNNING.add(proc)
            return
    kill_group(proc)
    raise HelpersClosed(_("devtune is exiting: {cmd} was not started", cmd=os.path.basename(str(proc.args[0]))))


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


def close_helpers() -> int:
    """End every helper still running, and refuse new ones from now on (HelpersClosed): for a process
    that is about to exit. Returns how many were ended."""
    with _LOCK:
        _CLOSED.set()
    return end_helpers()


def start_helper(argv: list[str], **popen: Any) -> subprocess.Popen:
    """`subprocess.Popen(argv, **popen)` leading its own session, tracked until `untrack`. Refused with
    HelpersClosed after `close_helpers`."""
    with _LOCK:
        if _CLOSED.is_set():
            raise HelpersClosed(_("devtune is exiting: {cmd} was not started", cmd=os.path.basename(argv[0])))
        proc = subprocess.Popen(argv, start_new_session=True, **popen)
        _RUNNING.add(proc)
    return proc


def end_children() -> int:
    """SIGKILL this process's descendants that are still in its own session: worker processes (a lint's
    process pool, multiprocessing's resource tracker) that would otherwise outlive it. Helpers (their own
    sessions: `close_helpers` ends them by group) and detached runs and servers (their own sessions, meant
    to outlive devtune) are never touched. Returns how many were signalled."""
    try:
        import psutil

        own = os.getsid(0)
        children = psutil.Process().children(recursive=True)
    except Exception:  # on the way out: nothing here may stop the exit
        return 0
    ended = 0
    for child in children:
        try:
            if os.getsid(child.pid) == own:
                child.kill()
                ended += 1
        except (OSError, psutil.Error):
            pass
    return ended


def run_helper(argv: list[str], *, input: str | bytes | None = None, timeout: float,
               text: bool = True, **popen: Any) -> subprocess.CompletedProcess:
    """Like `subprocess.run(argv, capture_output=True, timeout=...)`, in its own tracked process group.

    On a timeout the whole group is killed and `subprocess.TimeoutExpired` raised, as subprocess.run does.
    """
    proc = start_helper(argv, stdin=subprocess.PIPE if input is not None else subprocess.DEVNULL,
                        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=text, **popen)
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
