"""Fault injection: devtune never outlives its terminal.

Each trial starts the real wizard under a real pseudo-terminal (80x24 or 120x40), drives it to a moment
(starting, on a step, F1's help open, a confirm dialog open, or into a long action: a lint the person
starts on a 66 MB file (Data F5), LLaMA-Factory's argument check (Config F6), a merge of a real
two-step run of the tiny model or the merged folder's check (Merge F5 / F6), a vLLM server starting for
the tiny model (Playground F5)), then either closes the terminal at a random moment, as an SSH drop does,
or sends Ctrl+Q and closes it 0-2 s later. It checks within 10 s that:

- the wizard has exited, and every process it had started (its descendants, recorded every 0.1 s while
  it ran and right before the hang-up, whatever session they lead) is gone, except the detached runs and
  servers, which are meant to survive: those are told apart by what devtune records for them (the
  session of a supervisor, trainer or server pid in run.json / server.json);
- it burned no CPU after the hang-up beyond a clean exit (a thread spinning on the dead TTY burns its
  full second per second);
- the workspace state file still parses;
- the run started before the hang-up (a detached run under devtune's supervisor) is still running.

The default run makes one trial per moment (plus the Ctrl+Q-on-Config case found by hand). The soak test
(marker `soak`; 100 trials, random moments, sizes and endings) runs only when selected:

    .venv/bin/python -m pytest -q -m soak tests/e2e/test_terminal_loss.py -s

DEVTUNE_SOAK_TRIALS=N and DEVTUNE_SOAK_SEED=S change the number of trials and the draw; it prints its
figures (trials, leftovers, exit time and CPU after the hang-up, median and max, and what each moment
saw running). `devtune monitor --follow` and an attached `devtune train` get the same checks.
"""

from __future__ import annotations

import os
import random
import shutil
import subprocess
import sys
import time
from pathlib import Path

import psutil
import pytest

from core.setup.demo import seed_demo
from core.train.run_control import stop_run
from core.train.runs import list_runs, refresh, run_dir, start_run
from core.workspace.layout import Workspace
from tests.pty_session import PtySession
from tests.terminal_trials import (
    DEVTUNE,
    ENDINGS,
    MOMENTS,
    SIZES,
    TrialResult,
    Trials,
    describe,
    hang_up_and_check,
    stop_servers,
    term_env,
    trial,
    wait_for,
    write_big_file,
)


@pytest.fixture(scope="module")
def trials(tmp_path_factory):
    from tests.core.config_workspace import register_dataset

    ws = Workspace(tmp_path_factory.mktemp("hangup") / "ws")
    seed_demo(ws)  # with the tiny model: the Config step then checks a real config in the background
    register_dataset(ws, "support")
    write_big_file(ws.data_dir / "big.jsonl")
    init = subprocess.run([DEVTUNE, "-w", str(ws.root), "config", "init", "--preset", "cpu-demo"], env=term_env(),
                          capture_output=True, text=True, timeout=120)
    assert init.returncode == 0, init.stdout + init.stderr
    shutil.copytree(ws.models_dir / "tiny-llama3", ws.exports_dir / "tiny")  # what Playground serves
    record = start_run(ws, [sys.executable, "-c", "import time; time.sleep(3600)"], env={}, label="sleeper")
    assert wait_for(lambda: refresh(run_dir(ws, record.id)).active and refresh(run_dir(ws, record.id)).trainer)
    setup = Trials(ws, record.id)
    yield setup
    for run in list_runs(ws):
        if run.active:
            stop_run(ws, run.id, graceful_timeout=2, term_timeout=2)
    stop_servers(ws)


@pytest.fixture(scope="module")
def trained(trials):
    """A real LoRA run of the tiny model, two steps long (~45 s here): what Merge F5 merges."""
    ws = trials.ws
    if trials.trained is None:
        config = ws.configs_dir / "train.yaml"
        kept = config.read_text()
        config.write_text(kept + "max_steps: 2\n")
        try:
            train = subprocess.run([DEVTUNE, "-w", str(ws.root), "train", "--detach"], env=term_env(),
                                   capture_output=True, text=True, timeout=120)
            assert train.returncode == 0, train.stdout[-2000:] + train.stderr[-2000:]
            run = next(r for r in list_runs(ws) if r.kind == "train" and r.id != trials.sleeper)
            assert wait_for(lambda: not refresh(run_dir(ws, run.id)).active, timeout=600)
        finally:
            config.write_text(kept)
        run = refresh(run_dir(ws, run.id))
        assert run.status.value == "finished", (run_dir(ws, run.id) / "stderr.log").read_text()[-2000:]
        assert (ws.abs(run.output_dir) / "adapter_config.json").exists()
        trials.trained = run.id
    return trials


@pytest.mark.parametrize("moment", [m for m in MOMENTS if m != "merge"])
def test_the_wizard_exits_when_its_terminal_goes_away(trials, moment):
    rng = random.Random(f"default-{moment}")
    n = MOMENTS.index(moment)
    result = trial(trials, rng, SIZES[n % 2], moment, ENDINGS[(n // 2) % 2], gated=True)
    assert result.ok, describe([result])


def test_the_wizard_exits_during_a_merge(trained):
    rng = random.Random("default-merge")
    results = [trial(trained, rng, size, "merge", ending, gated=True) for size, ending in zip(SIZES, ENDINGS)]
    assert all(r.ok for r in results), describe(results)


def test_ctrl_q_on_the_config_step_then_a_hang_up(trials):
    """The case found by hand: step 3, Ctrl+Q, the terminal closed half a second later (left a process
    spinning a core, reparented to init, in 3 of 3 tries)."""
    rng = random.Random("config-quit")
    results = [trial(trials, rng, size, "step", "ctrl+q", step=3) for size in SIZES for _ in range(2)]
    assert all(r.ok for r in results), describe(results)


ROOT = Path(__file__).resolve().parents[2]

EXITING = """
import multiprocessing, subprocess, sys, time
from core.processes import helpers

def main():
    worker = multiprocessing.get_context("spawn").Process(target=time.sleep, args=(60,))
    worker.start()  # in this process's session, like a lint's worker processes
    quiet = dict(stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    detached = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"], start_new_session=True,
                                **quiet)
    helper = helpers.start_helper([sys.executable, "-c", "import time; time.sleep(60)"], **quiet)
    print(worker.pid, detached.pid, helper.pid, flush=True)
    print(helpers.close_helpers(), helpers.end_children(), flush=True)
    try:
        helpers.run_helper([sys.executable, "-c", "print('started')"], timeout=10)
    except helpers.HelpersClosed as exc:
        print("refused:", exc, flush=True)
    late = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"], start_new_session=True, **quiet)
    try:
        helpers.track(late)  # started by its caller while devtune exits (the doctor's tools)
    except helpers.HelpersClosed:
        print("late ended:", late.wait(5), flush=True)
    worker.join(5)
    print(worker.exitcode, flush=True)

if __name__ == "__main__":
    main()
"""


def test_exiting_ends_helpers_and_own_children_refuses_new_helpers_and_spares_other_sessions(tmp_path):
    """What the wizard does on the way out (tui/terminal.py), in a process of its own: the helper (its own
    session) and the worker process (this session) are ended, a helper asked for afterwards is refused and
    one started by its caller is ended at once, and a process leading its own session (a run, a server)
    lives on."""
    script = tmp_path / "exiting.py"
    script.write_text(EXITING)
    proc = subprocess.run([sys.executable, str(script)], cwd=ROOT, capture_output=True, text=True, timeout=60,
                          env={**os.environ, "PYTHONPATH": str(ROOT), "DEVTUNE_LANG": "en"})
    lines = proc.stdout.splitlines()
    assert proc.returncode == 0 and len(lines) == 5, proc.stdout + proc.stderr
    _worker, detached, helper = (int(x) for x in lines[0].split())
    ended_helpers, ended_children = (int(x) for x in lines[1].split())
    try:
        assert ended_helpers == 1 and ended_children >= 1  # the worker (and the spawn's resource tracker)
        assert lines[2].startswith("refused: devtune is exiting")
        assert lines[3] == "late ended: -9"
        assert lines[4] == "-9"  # the worker, killed
        assert not psutil.pid_exists(helper) or psutil.Process(helper).status() == psutil.STATUS_ZOMBIE
        assert psutil.Process(detached).is_running()
    finally:
        for pid in (detached, helper):
            try:
                psutil.Process(pid).kill()
            except psutil.Error:
                pass


def test_monitor_follow_exits_when_its_terminal_goes_away(trials):
    result = TrialResult("monitor --follow", (100, 30))
    argv = [DEVTUNE, "-w", str(trials.ws.root), "monitor", trials.sleeper, "--follow"]
    with PtySession(argv, cols=100, rows=30, env=term_env(), cwd=trials.ws.root) as term:
        assert term.wait_for_output("[running]"), term.text()[-2000:]
        time.sleep(0.5)
        hang_up_and_check(term, trials, result)
    assert result.ok, describe([result])


def test_attached_train_exits_when_its_terminal_goes_away_and_the_run_goes_on(tmp_path, lf_env):
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
        result = hang_up_and_check(term, Trials(ws, run_id), TrialResult("train (attached)", (100, 30)))
    try:
        assert result.ok and result.detached, describe([result])
    finally:
        stop_run(ws, run_id, graceful_timeout=5, term_timeout=5)


def soak_selected(config) -> bool:
    expr = config.getoption("markexpr") or ""
    return "soak" in expr and "not soak" not in expr


@pytest.mark.soak
@pytest.mark.timeout(0)
def test_soak_no_process_outlives_its_terminal(request, trained):
    if not soak_selected(request.config):
        pytest.skip("the soak test runs when selected: pytest -m soak tests/e2e/test_terminal_loss.py")
    n = int(os.environ.get("DEVTUNE_SOAK_TRIALS", "100"))
    rng = random.Random(int(os.environ.get("DEVTUNE_SOAK_SEED", "1")))
    results = []
    for i in range(n):
        r = trial(trained, rng, rng.choice(SIZES), rng.choice(MOMENTS), rng.choice(ENDINGS),
                  gated=rng.random() < 0.5)  # half the long actions: a random moment once under way
        results.append(r)
        print(f"[{i + 1}/{n}] {r.moment} {r.size[0]}x{r.size[1]} {r.ending}: exit {r.exit_seconds} s, cpu {r.cpu_after} s, "
              f"helpers {r.helpers}, children {r.children}, detached {r.detached}, under way {r.started}, "
              f"{'ok' if r.ok else 'FAILED ' + str(r.leftovers) + ' ' + r.detail}", flush=True)
    print("\n" + describe(results))
    assert all(r.ok for r in results), describe(results)
