"""core.train.runs with real detached processes (a small Python program stands in for the trainer; the
real LLaMA-Factory runs in tests/e2e/test_runs_llamafactory.py)."""

import os
import signal
import sys

import psutil
import pytest

from core.train.run_control import stop_run
from core.train.runs import (ProcessRef, RunError, RunStatus, find_run, last_checkpoint, list_runs, refresh, run_dir,
                             start_run)
from tests import processes

TRAINER = r"""
import signal, sys, time, os
stop = False
def on_abort(sig, frame):
    global stop
    stop = True
mode = sys.argv[1]
if mode == "graceful":
    signal.signal(signal.SIGABRT, on_abort)
if mode == "stubborn":
    signal.signal(signal.SIGABRT, signal.SIG_IGN)
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
print("env", os.environ.get("DEVTUNE_TEST_VAR"), flush=True)
for step in range(int(sys.argv[2])):
    print(f"step {step}", flush=True)
    print(f"progress {step}", file=sys.stderr, flush=True)
    if stop:
        print("saving adapter", flush=True)
        sys.exit(0)
    time.sleep(0.1)
sys.exit(int(sys.argv[3]) if len(sys.argv) > 3 else 0)
"""


def wait(predicate, timeout=30):
    return processes.wait(predicate, timeout, interval=0.1)


def launch(ws, mode="plain", steps=5, code=0, label="t"):
    return start_run(ws, [sys.executable, "-c", TRAINER, mode, str(steps), str(code)],
                     env={"DEVTUNE_TEST_VAR": "yes", "PYTHONUNBUFFERED": "1"}, label=label,
                     output_dir="saves/t")


def test_run_finishes_and_its_files_tell_everything(workspace):
    rec = launch(workspace)
    assert rec.status in (RunStatus.STARTING, RunStatus.RUNNING) and rec.supervisor.pid > 0
    d = run_dir(workspace, rec.id)
    assert wait(lambda: refresh(d).status is RunStatus.FINISHED)
    final = refresh(d)
    assert final.exit_code == 0 and final.ended and final.trainer.pid != final.supervisor.pid
    out = (d / "stdout.log").read_text()
    assert "env yes" in out and "step 4" in out
    assert "progress 4" in (d / "stderr.log").read_text()
    assert final.env == {"DEVTUNE_TEST_VAR": "yes", "PYTHONUNBUFFERED": "1"}


def test_failure_is_recorded_with_its_exit_code(workspace):
    rec = launch(workspace, steps=1, code=3)
    d = run_dir(workspace, rec.id)
    assert wait(lambda: refresh(d).status is RunStatus.FAILED)
    assert refresh(d).exit_code == 3 and "3" in refresh(d).note


def test_missing_program_fails_clearly(workspace):
    rec = start_run(workspace, ["/nonexistent/llamafactory-cli", "train"], env={}, label="x")
    d = run_dir(workspace, rec.id)
    assert wait(lambda: refresh(d).status is RunStatus.FAILED)
    assert refresh(d).exit_code == 127 and "nonexistent" in refresh(d).note


def test_graceful_stop(workspace):
    rec = launch(workspace, mode="graceful", steps=400)
    d = run_dir(workspace, rec.id)
    assert wait(lambda: "step 2" in (d / "stdout.log").read_text())
    final = stop_run(workspace, rec.id, graceful_timeout=10)
    assert final.status is RunStatus.STOPPED and final.exit_code == 0 and final.stop_stage == "graceful"
    assert "saving adapter" in (d / "stdout.log").read_text()


def test_stop_escalates_to_kill_of_the_process_group(workspace):
    rec = launch(workspace, mode="stubborn", steps=4000)
    d = run_dir(workspace, rec.id)
    assert wait(lambda: refresh(d).status is RunStatus.RUNNING and "step 1" in (d / "stdout.log").read_text())
    messages = []
    final = stop_run(workspace, rec.id, graceful_timeout=0.5, term_timeout=0.5, progress=messages.append)
    assert final.status is RunStatus.STOPPED and final.stop_stage == "kill"
    assert final.exit_code == -signal.SIGKILL
    assert len(messages) == 3
    assert not psutil.pid_exists(final.trainer.pid) or psutil.Process(final.trainer.pid).status() == "zombie"


def test_run_survives_its_launcher_and_the_supervisor_loss_is_detected(workspace):
    rec = launch(workspace, steps=30)
    d = run_dir(workspace, rec.id)
    assert wait(lambda: refresh(d).trainer is not None)
    trainer = refresh(d).trainer
    os.kill(rec.supervisor.pid, signal.SIGKILL)
    # the trainer is in its own process group: it goes on
    assert refresh(d).status is RunStatus.RUNNING and trainer.alive()
    assert wait(lambda: not trainer.alive(), 30)
    final = refresh(d)
    assert final.status is RunStatus.FAILED and "supervisor" in final.note


def test_pid_reuse_guard():
    me = psutil.Process()
    assert ProcessRef(pid=me.pid, create_time=me.create_time()).alive()
    assert not ProcessRef(pid=me.pid, create_time=me.create_time() - 1000).alive()
    assert not ProcessRef(pid=2 ** 22 + 12345, create_time=0).alive()


def test_find_run_and_list(workspace):
    with pytest.raises(RunError):
        find_run(workspace, None)
    a = launch(workspace, steps=1, label="alpha")
    b = launch(workspace, steps=1, label="beta")
    assert wait(lambda: all(not r.active for r in list_runs(workspace)))
    assert {r.id for r in list_runs(workspace)} == {a.id, b.id}
    assert find_run(workspace, "alpha").id == a.id
    assert find_run(workspace, b.id).id == b.id
    with pytest.raises(RunError):
        find_run(workspace, "nomatch")


def test_last_checkpoint(tmp_path):
    for n in (5, 10, 100, 20):
        (tmp_path / f"checkpoint-{n}").mkdir()
    (tmp_path / "checkpoint-x").mkdir()
    assert last_checkpoint(tmp_path).name == "checkpoint-100"
    assert last_checkpoint(tmp_path / "none") is None


def test_a_runs_facts_come_from_its_own_train_yaml(workspace):
    """core.train.run_facts (merge, serve and eval read them): the YAML the run trained with, its copy in the
    run folder; a copy that names no model is refused with its path, as a RunError their callers handle."""
    import time

    from core.train.run_facts import TrainFactsError, find_train_run, read_train_facts
    from tests.recorded_runs import place_recorded_run

    rec = place_recorded_run(workspace, "20261201-000000-dpo", "lf_dpo", RunStatus.FINISHED, 0, time.time())
    facts = read_train_facts(workspace, find_train_run(workspace))
    assert (facts.config, facts.model_name_or_path, facts.finetuning_type, facts.template) == (
        f".devtune/runs/{rec.id}/train.yaml", "models/tiny-llama3", "lora", "llama3")
    assert facts.dataset == ["dpo_sharegpt"] and facts.output_dir == f"saves/{rec.id}"
    workspace.abs(rec.config).write_text("stage: dpo\n")
    with pytest.raises(TrainFactsError, match=f"runs/{rec.id}/train.yaml has no model_name_or_path") as raised:
        read_train_facts(workspace, rec)
    assert isinstance(raised.value, RunError)
