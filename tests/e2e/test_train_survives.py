"""A training run started by `devtune train` survives a hang-up of devtune's terminal (what an SSH
drop does) and a `kill -9` of devtune; a new devtune re-attaches and shows the whole history."""

import fcntl
import json
import os
import signal
import subprocess
import sys
import termios
from pathlib import Path

import pytest

from core.train.run_control import stop_run
from core.train.runs import RunStatus, find_run, list_runs
from tests.processes import wait

DEVTUNE = str(Path(sys.executable).parent / "devtune")
ROWS = [{"instruction": f"第{i}个问题怎么处理？", "input": "", "output": f"请联系客服处理第{i}个问题。"} for i in range(12)]


def _controlling_tty(slave_fd: int):
    def setup():
        os.setsid()
        fcntl.ioctl(slave_fd, termios.TIOCSCTTY, 0)
    return setup


def spawn_in_terminal(argv, cwd, env):
    """Start argv as the controlling process of a new pseudo-terminal, as an SSH session would."""
    master, slave = os.openpty()
    proc = subprocess.Popen(argv, cwd=cwd, env=env, stdin=slave, stdout=slave, stderr=slave,
                            preexec_fn=_controlling_tty(slave), close_fds=True)
    os.close(slave)
    return proc, master


@pytest.fixture
def ws(long_sft_workspace):
    ws = long_sft_workspace(ROWS, output_dir="saves/survivor", save_steps=50, max_steps=4000)
    yield ws
    for run in (r for r in list_runs(ws) if r.active):
        stop_run(ws, run.id, graceful_timeout=30, term_timeout=5)


def steps_logged(ws) -> int:
    log = ws.root / "saves" / "survivor" / "trainer_log.jsonl"
    return len(log.read_text().splitlines()) if log.exists() else 0


@pytest.mark.parametrize("how", ["hangup", "kill-9"])
def test_run_outlives_devtune(ws, how):
    env = {**os.environ, "TERM": "xterm-256color"}
    proc, master = spawn_in_terminal([DEVTUNE, "-w", str(ws.root), "train"], ws.root, env)
    try:
        assert wait(lambda: steps_logged(ws) >= 3, 180), "training did not start"
        run = find_run(ws, None)
        assert run.status is RunStatus.RUNNING
        if how == "hangup":
            os.close(master)  # the terminal goes away: the kernel sends SIGHUP to devtune
            master = None
        else:
            os.kill(proc.pid, signal.SIGKILL)
        proc.wait(timeout=30)
        before = steps_logged(ws)
        assert wait(lambda: steps_logged(ws) > before + 3, 180), "the run stopped with devtune"
        assert find_run(ws, run.id).status is RunStatus.RUNNING

        # a new devtune re-attaches and sees the whole history
        out = subprocess.run([DEVTUNE, "-w", str(ws.root), "monitor", run.id, "--json"], capture_output=True,
                             text=True, timeout=120)
        assert out.returncode == 0, out.stderr
        seen = json.loads(out.stdout.splitlines()[-1])
        assert seen["status"] == "running" and seen["step"] >= before and seen["total"] == 4000
        final = stop_run(ws, run.id, graceful_timeout=60)
        assert final.status is RunStatus.STOPPED and final.exit_code == 0
    finally:
        if master is not None:
            os.close(master)
        if proc.poll() is None:
            proc.kill()
            proc.wait()
