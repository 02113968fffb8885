"""tui/terminal.py: the pieces that make the wizard exit when its terminal goes away (the whole behaviour,
with real processes under a real pty, is tests/e2e/test_terminal_loss.py)."""

from __future__ import annotations

import os
import pty
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest
from textual.app import App
from textual.drivers.linux_driver import LinuxDriver

from tui.terminal import DevtuneDriver, terminal_gone

ROOT = Path(__file__).resolve().parents[2]


def _driver_with_input_thread(cls):
    driver = cls(App())
    driver._key_thread = threading.Thread(target=lambda: driver.exit_event.wait(30), daemon=True)
    driver._key_thread.start()

    def dead_terminal():
        raise OSError(5, "Input/output error")  # what writing to a hung-up TTY gives

    driver._disable_mouse_support = dead_terminal
    return driver


async def test_textual_leaves_its_input_thread_running_when_the_terminal_is_dead():
    """The root cause: LinuxDriver.disable_input swallows the write error before it stops the input thread
    (which, on a hung-up TTY, spins on EOF and keeps the process alive)."""
    driver = _driver_with_input_thread(LinuxDriver)
    driver.disable_input()
    try:
        assert driver._key_thread.is_alive()
    finally:
        driver.exit_event.set()


async def test_devtune_driver_always_stops_the_input_thread():
    driver = _driver_with_input_thread(DevtuneDriver)
    driver.disable_input()
    assert not driver._key_thread.is_alive()


def test_exit_soon_ends_a_process_that_a_thread_would_keep_alive():
    code = ("import threading, time\n"
            "from tui.terminal import exit_soon\n"
            "threading.Thread(target=time.sleep, args=(60,)).start()\n"  # not a daemon: holds the exit
            "exit_soon(3, grace=0.3)\n")
    started = time.monotonic()
    proc = subprocess.run([sys.executable, "-c", code], cwd=ROOT, timeout=20)
    assert proc.returncode == 3 and time.monotonic() - started < 10


def test_a_hung_up_terminal_is_seen():
    master, slave = pty.openpty()
    try:
        assert not terminal_gone(slave)
        os.close(master)
        assert terminal_gone(slave)
    finally:
        os.close(slave)


def test_a_closed_or_non_tty_stdin_is_a_lost_terminal(tmp_path):
    with open(tmp_path / "f", "w") as fh:
        assert terminal_gone(fh.fileno())
    r, w = os.pipe()
    os.close(r)
    os.close(w)
    assert terminal_gone(r)


@pytest.mark.parametrize("helpers", [1, 3])
def test_ending_helpers_ends_their_whole_group(helpers):
    from core.processes.helpers import end_helpers, running_helpers, run_helper

    def run():
        try:
            run_helper([sys.executable, "-c", "import subprocess, sys, time;"
                        "subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(60)']); time.sleep(60)"],
                       timeout=60)
        except Exception:
            pass

    threads = [threading.Thread(target=run, daemon=True) for _ in range(helpers)]
    for t in threads:
        t.start()
    deadline = time.monotonic() + 10
    while len(running_helpers()) < helpers and time.monotonic() < deadline:
        time.sleep(0.05)
    pids = running_helpers()
    assert len(pids) == helpers
    time.sleep(0.3)  # let each helper start its grandchild
    assert end_helpers() == helpers
    for t in threads:
        t.join(10)
    import psutil

    def group_alive(pgid):
        for p in psutil.process_iter(["pid", "status"]):
            try:
                if os.getpgid(p.pid) == pgid and p.info["status"] != psutil.STATUS_ZOMBIE:
                    return True
            except OSError:
                pass
        return False

    deadline = time.monotonic() + 5
    while any(group_alive(pid) for pid in pids) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not any(group_alive(pid) for pid in pids)
