"""Fault injection: devtune never outlives its terminal.

Each trial starts the real wizard under a real pseudo-terminal (80x24 or 120x40), drives it to a moment
(starting, on a step, a modal open, quitting with Ctrl+Q), then closes the terminal as an SSH drop does,
and checks within 10 s that:

- no devtune process remains, nor any helper in its session;
- it burned no CPU after the hang-up beyond a clean exit (a thread spinning on the dead TTY burns its
  full second per second);
- the workspace state file still parses;
- the run started before the hang-up (a detached run under devtune's supervisor) is still running.

The default run makes a few trials; DEVTUNE_SOAK=1 runs the soak test (100 trials by default,
DEVTUNE_SOAK_TRIALS=N) and prints its figures. `devtune monitor --follow` and an attached `devtune train`
get the same treatment.
"""

from __future__ import annotations

import os
import random
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from core.setup.demo import seed_demo
from core.train.run_control import stop_run
from core.train.runs import list_runs, refresh, run_dir, start_run
from core.workspace.layout import Workspace
from core.workspace.state import WizardState
from tests.pty_session import PtySession, cpu_seconds

DEVTUNE = str(Path(sys.executable).parent / "devtune")
SIZES = ((80, 24), (120, 40))
MOMENTS = ("starting", "step", "modal", "quitting")
EXIT_WITHIN = 10.0
CPU_AFTER_HANGUP_MAX = 1.0  # seconds of CPU between the hang-up and the exit
F1 = b"\x1bOP"
CTRL_Q = b"\x11"


@dataclass
class TrialResult:
    moment: str
    size: tuple[int, int]
    exit_seconds: float | None = None
    cpu_after: float = 0.0
    leftovers: list[str] = field(default_factory=list)
    state_ok: bool = True
    run_alive: bool = True
    detail: str = ""

    @property
    def ok(self) -> bool:
        return (self.exit_seconds is not None and self.exit_seconds <= EXIT_WITHIN and not self.leftovers
                and self.cpu_after <= CPU_AFTER_HANGUP_MAX and self.state_ok and self.run_alive)


@pytest.fixture(scope="module")
def workspace(tmp_path_factory):
    ws = Workspace(tmp_path_factory.mktemp("hangup") / "ws")
    seed_demo(ws)  # with the tiny model: the Config step then checks a real config in the background
    record = start_run(ws, [sys.executable, "-c", "import time; time.sleep(3600)"], env={}, label="sleeper")
    assert wait_for(lambda: refresh(run_dir(ws, record.id)).active and refresh(run_dir(ws, record.id)).trainer)
    yield ws, record.id
    stop_run(ws, record.id, graceful_timeout=2, term_timeout=2)


def wait_for(predicate, timeout: float = 20.0) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return True
        time.sleep(0.1)
    return False


def term_env() -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PYTEST", "TEXTUAL"))}
    env.update(TERM="xterm-256color", LANG="C.UTF-8", DEVTUNE_LANG="en")
    return env


def hang_up_and_check(term: PtySession, ws: Workspace, run_id: str, result: TrialResult) -> TrialResult:
    pid = term.proc.pid
    term._closing.set()
    term._reader.join(2)
    before = cpu_seconds(pid)
    term.hang_up()
    last = before
    while time.monotonic() - term.hung_up_at < EXIT_WITHIN:
        if term.proc.poll() is not None:
            break
        now = cpu_seconds(pid)
        if now is not None:
            last = now
        time.sleep(0.05)
    if term.proc.poll() is not None:
        result.exit_seconds = round(time.monotonic() - term.hung_up_at, 2)
    else:
        result.detail = f"still running {EXIT_WITHIN:.0f} s after the hang-up"
    result.cpu_after = round((last or 0.0) - (before or 0.0), 2) if before is not None else 0.0
    wait_for(lambda: not [p for p in term.session_processes() if p.pid != pid], timeout=3)
    result.leftovers = [f"{p.pid} {' '.join(p.cmdline()[:3])}" for p in term.session_processes()
                        if p.is_running() and p.status() != "zombie"]
    if ws.state_file.exists():
        try:
            WizardState.model_validate_json(ws.state_file.read_bytes())
        except ValueError as exc:
            result.state_ok, result.detail = False, f"state.json: {exc}"
    result.run_alive = refresh(run_dir(ws, run_id)).active
    return result


def trial(ws: Workspace, run_id: str, rng: random.Random, size: tuple[int, int], moment: str,
          step: int | None = None) -> TrialResult:
    cols, rows = size
    result = TrialResult(moment, size)
    with PtySession([DEVTUNE, "-w", str(ws.root)], cols=cols, rows=rows, env=term_env(), cwd=ws.root) as term:
        if moment == "starting":
            time.sleep(rng.uniform(0.0, 1.5))
        else:
            assert term.wait_for_output(), term.text()[-2000:]
            time.sleep(0.3)
            term.send(str(step or rng.randint(1, 6)).encode())
            if moment == "step":
                time.sleep(rng.uniform(0.0, 3.0))
            elif moment == "modal":
                time.sleep(rng.uniform(0.2, 1.0))
                term.send(F1)
                time.sleep(rng.uniform(0.0, 1.0))
            else:  # quitting
                time.sleep(rng.uniform(0.3, 3.0))
                term.send(CTRL_Q)
                time.sleep(rng.uniform(0.0, 2.0) if step is None else rng.uniform(0.0, 0.15))
        return hang_up_and_check(term, ws, run_id, result)


def describe(results: list[TrialResult]) -> str:
    bad = [r for r in results if not r.ok]
    exits = sorted(r.exit_seconds for r in results if r.exit_seconds is not None)
    cpu = sorted(r.cpu_after for r in results)
    lines = [f"{len(results) - len(bad)} of {len(results)} trials left nothing behind"]
    if exits:
        lines.append(f"exit after hang-up: median {exits[len(exits) // 2]:.2f} s, max {exits[-1]:.2f} s")
    lines.append(f"CPU after hang-up: median {cpu[len(cpu) // 2]:.2f} s, max {cpu[-1]:.2f} s")
    lines += [f"FAILED {r.moment} {r.size}: exit={r.exit_seconds} cpu={r.cpu_after} leftovers={r.leftovers} "
              f"state_ok={r.state_ok} run_alive={r.run_alive} {r.detail}" for r in bad]
    return "\n".join(lines)


@pytest.mark.parametrize("moment", MOMENTS)
def test_the_wizard_exits_when_its_terminal_goes_away(workspace, moment):
    ws, run_id = workspace
    rng = random.Random(f"default-{moment}")
    results = [trial(ws, run_id, rng, size, moment) for size in SIZES]
    assert all(r.ok for r in results), describe(results)


def test_ctrl_q_on_the_config_step_then_a_hang_up(workspace):
    """The case found by hand: step 3, Ctrl+Q, the terminal closed half a second later (left a process
    spinning a core, reparented to init, in 3 of 3 tries)."""
    ws, run_id = workspace
    rng = random.Random("config-quit")
    results = [trial(ws, run_id, rng, size, "quitting", step=3) for size in SIZES for _ in range(2)]
    assert all(r.ok for r in results), describe(results)


def test_monitor_follow_exits_when_its_terminal_goes_away(workspace):
    ws, run_id = workspace
    result = TrialResult("monitor --follow", (100, 30))
    argv = [DEVTUNE, "-w", str(ws.root), "monitor", run_id, "--follow"]
    with PtySession(argv, cols=100, rows=30, env=term_env(), cwd=ws.root) as term:
        assert term.wait_for_output("[running]"), term.text()[-2000:]
        time.sleep(0.5)
        hang_up_and_check(term, ws, run_id, result)
    assert result.ok, describe([result])


def test_attached_train_exits_when_its_terminal_goes_away_and_the_run_goes_on(tmp_path, lf_env, monkeypatch):
    from tests.core.config_workspace import register_dataset

    ws = Workspace(tmp_path / "ws")
    seed_demo(ws)
    register_dataset(ws, "support")
    env = {**term_env(), **lf_env, "TERM": "xterm-256color"}
    init = subprocess.run([DEVTUNE, "-w", str(ws.root), "config", "init", "--preset", "cpu-demo"], env=env,
                          capture_output=True, text=True, timeout=120)
    assert init.returncode == 0, init.stdout + init.stderr
    with PtySession([DEVTUNE, "-w", str(ws.root), "train"], cols=100, rows=30, env=env, cwd=ws.root) as term:
        assert term.wait_for_output("[", timeout=120), term.text()[-2000:]
        assert wait_for(lambda: bool(list_runs(ws)), timeout=30)
        run_id = list_runs(ws)[0].id
        result = hang_up_and_check(term, ws, run_id, TrialResult("train (attached)", (100, 30)))
    try:
        assert result.ok, describe([result])
    finally:
        stop_run(ws, run_id, graceful_timeout=5, term_timeout=5)


@pytest.mark.skipif(os.environ.get("DEVTUNE_SOAK") != "1", reason="the soak test runs with DEVTUNE_SOAK=1")
def test_soak_no_process_outlives_its_terminal(workspace, capsys):
    ws, run_id = workspace
    n = int(os.environ.get("DEVTUNE_SOAK_TRIALS", "100"))
    rng = random.Random(int(os.environ.get("DEVTUNE_SOAK_SEED", "1")))
    results = [trial(ws, run_id, rng, rng.choice(SIZES), rng.choice(MOMENTS)) for _ in range(n)]
    with capsys.disabled():
        print("\n" + describe(results))
    assert all(r.ok for r in results), describe(results)
