"""The wizard never outlives its terminal.

devtune runs over SSH, where the terminal can go away at any moment: while the wizard starts, on any step,
in the middle of a worker, with a modal open, or half-way through quitting. Three things make sure it
then exits, promptly and completely:

- `TerminalWatch`: SIGHUP (installed with `signal.signal`, so it stays in force after the event loop has
  closed), and a daemon thread blocked in poll() on stdin that wakes on the hang-up itself (POLLHUP) or,
  once a second, finds stdin no longer a TTY or the parent gone. It does not need the event loop, which
  may be busy mounting a screen. Either way it stops the input thread at once (a hung-up TTY reads as
  endless EOF: Textual's input thread would spin on it), arms `exit_soon`, ends the helper processes
  and refuses new ones (core.processes.helpers: a worker starting one in the grace period gets an
  error, not an orphan), ends the processes devtune started in its own session (a lint's worker
  processes), and asks the app to exit. The SIGHUP handler only wakes the watch thread (a byte down a
  pipe), which does this: the signal may arrive while the main thread holds a lock that this takes.
- `exit_soon`: a daemon thread that ends the process with os._exit after half a second (ending the
  helpers and own-session children again first, for a second at most), whatever the main thread is
  doing then (mounting a screen nobody will see, a thread worker still linting, the interpreter's join
  of non-daemon threads). The workspace state is written atomically (temp file +
  os.replace) after each change, so at most the change in flight is not saved and nothing is left
  half-written; runs and servers are detached and untouched.
- `DevtuneDriver`: Textual's Linux driver, except that stopping input always stops the input thread,
  even when restoring the dead terminal fails (Textual swallows that error before it tells the input
  thread to stop, which left a thread spinning and the process alive after Ctrl+Q then a hang-up).
"""

from __future__ import annotations

import os
import select
import signal
import sys
import threading
from typing import Callable

from textual.drivers.linux_driver import LinuxDriver

from core.processes.helpers import close_helpers, end_children

CHECK_SECONDS = 1.0
GRACE_SECONDS = 0.5
ENDING_SECONDS = 1.0  # at most this long to end the helpers and children on the way out
# On the way out the GIL changes hands every 20 µs instead of 5 ms: each system call of the exit path (a
# /proc read to find the children, a kill) gives the GIL up, and a thread still linting or indexing kept
# it a whole interval each time, which made ending the helpers take seconds.
EXIT_SWITCH_INTERVAL = 20e-6

_exit_armed = threading.Event()


def exit_soon(code: int = 0, grace: float = GRACE_SECONDS) -> None:
    """End the process after `grace` seconds unless it has ended by then (once; later calls do nothing)."""
    if _exit_armed.is_set():
        return
    _exit_armed.set()

    def reaper() -> None:
        threading.Event().wait(grace)
        exit_now(code)

    threading.Thread(target=reaper, name="devtune-exit", daemon=True).start()


_PARENT_AT_START = os.getppid()


def end_started_processes() -> None:
    """End the helpers (and refuse new ones) and the children in devtune's own session; detached runs and
    servers lead their own sessions and are left alone."""
    sys.setswitchinterval(EXIT_SWITCH_INTERVAL)
    close_helpers()
    end_children()


def exit_now(code: int) -> None:
    """End what devtune started (bar runs and servers), flush what is printed and end the process at once,
    whatever threads are still running. The ending gets ENDING_SECONDS at most: nothing may hold the exit."""
    ending = threading.Thread(target=end_started_processes, name="devtune-ending", daemon=True)
    ending.start()
    ending.join(ENDING_SECONDS)
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except (OSError, ValueError):
            pass
    os._exit(code)


def terminal_gone(fd: int | None = None) -> bool:
    """True when the terminal on `fd` (stdin) has hung up or is gone, or devtune's parent (the shell, sshd,
    tmux) has died and it was handed to init (a parent that was PID 1 from the start, as in a container, is
    not a loss)."""
    try:
        fd = sys.__stdin__.fileno() if fd is None else fd
        if not os.isatty(fd) or (os.getppid() != _PARENT_AT_START and os.getppid() == 1):
            return True
        poller = select.poll()
        poller.register(fd, select.POLLIN | select.POLLPRI)
        for _fd, events in poller.poll(0):
            if events & (select.POLLHUP | select.POLLERR | select.POLLNVAL):
                return True
    except (OSError, ValueError, AttributeError):
        return True
    return False


def stop_input_thread(driver: object) -> None:
    """Tell Textual's input thread to stop reading (it checks this event every 0.1 s)."""
    event = getattr(driver, "exit_event", None)
    if event is not None:
        event.set()


class TerminalWatch:
    """Installed by the app on mount (from the event loop's thread, the main thread)."""

    def __init__(self, app, on_lost: Callable[[], None]) -> None:
        self.app = app
        self.on_lost = on_lost
        self.lost = False
        self._loop = None
        self._lock = threading.Lock()
        self._woken, self._wake = os.pipe()  # the SIGHUP handler's byte wakes the watch thread
        os.set_blocking(self._wake, False)

    def install(self) -> None:
        import asyncio

        self._loop = asyncio.get_running_loop()
        if threading.current_thread() is threading.main_thread():
            signal.signal(signal.SIGHUP, self._on_sighup)
        threading.Thread(target=self._watch, name="devtune-terminal-watch", daemon=True).start()

    def _on_sighup(self, signum, frame) -> None:
        # Only a byte down a pipe: the handler runs in the main thread wherever it was, maybe holding a
        # lock that ending the helpers (or starting a thread) takes; waiting on it would hang for good.
        try:
            os.write(self._wake, b"h")
        except OSError:  # the pipe is full: the watch thread is being woken already
            pass

    def _watch(self) -> None:
        """Wait, in poll() and without a CPU cost, for the hang-up or SIGHUP; check the parent every second."""
        try:
            fd = sys.__stdin__.fileno()
            poller = select.poll()
            poller.register(fd, 0)  # no events asked: poll() still reports POLLHUP, POLLERR and POLLNVAL
            poller.register(self._woken, select.POLLIN)
        except (OSError, ValueError, AttributeError):
            self.terminal_lost()
            return
        while not self.lost:
            try:
                hung_up = bool(poller.poll(CHECK_SECONDS * 1000))
            except InterruptedError:
                continue
            if hung_up or terminal_gone(fd):
                self.terminal_lost()
                return

    def terminal_lost(self) -> None:
        """From any thread but the SIGHUP handler: stop reading, end the helpers, exit now."""
        with self._lock:
            if self.lost:
                return
            self.lost = True
        sys.setswitchinterval(EXIT_SWITCH_INTERVAL)
        stop_input_thread(getattr(self.app, "_driver", None))
        exit_soon(0)
        end_started_processes()
        loop = self._loop
        if loop is not None and not loop.is_closed():
            try:
                loop.call_soon_threadsafe(self.on_lost)
            except RuntimeError:  # the loop closed meanwhile: exit_soon ends the process
                pass


class DevtuneDriver(LinuxDriver):
    def disable_input(self) -> None:
        try:
            super().disable_input()
        finally:
            thread = self._key_thread
            if thread is not None and thread.is_alive() and thread is not threading.current_thread():
                self.exit_event.set()
                thread.join(1.0)
                if not thread.is_alive():
                    self.exit_event.clear()
