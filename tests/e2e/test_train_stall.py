"""Issue 19, items 3 and 4, with the real trainer: the tiny model trained on two gloo processes through
`devtune train`; tokens/s measured from LLaMA-Factory's own count (include_num_input_tokens_seen), MFU not
applicable on a CPU; then rank 1 is frozen (SIGSTOP) after some steps, as a rank stuck in a driver or a
kernel would be, and the watcher (what `devtune monitor --json` prints) reports the stall with rank 0's
Python stack waiting in the collective."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time

import pytest

from tests.scale_runs import newest_run, scale_workspace, wait_ended, wait_for_step

# where a DDP rank's main thread waits when its peer stops answering: the gradient all-reduce in backward
# (seen here: _engine_run_backward under Trainer.training_step), or a collective of the next step
COLLECTIVE_FRAMES = ("all_reduce", "allreduce", "_engine_run_backward", "barrier", "broadcast", "all_gather")


def main_thread(stack: str) -> str:
    """The MainThread section of a py-spy dump."""
    part = stack.split('"MainThread"', 1)[-1]
    return part.split("\nThread ", 1)[0]


def _require_ptrace() -> None:
    """py-spy reads another process only with ptrace rights: fail (not skip) when this machine lacks them."""
    from core.train.stalls import dump_stack, py_spy

    if py_spy() is None:
        pytest.fail("py-spy is not installed in .venv (it comes with devtune's dependencies: make envs)")
    child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    try:
        time.sleep(0.5)
        text = dump_stack(child.pid)
    finally:
        child.kill()
        child.wait()
    if "sleep" not in text and "<module>" not in text:
        scope = "/proc/sys/kernel/yama/ptrace_scope"
        value = open(scope).read().strip() if os.path.exists(scope) else "absent (no Yama)"
        pytest.fail(f"py-spy cannot read a child process here ({text!r}); ptrace_scope: {value}. Run as root, "
                    "with CAP_SYS_PTRACE (docker run --cap-add SYS_PTRACE), or kernel.yama.ptrace_scope=0")


def test_a_frozen_rank_is_a_stall_with_the_other_ranks_stack_and_tokens_per_s_is_measured(
        workspace, tiny_model, devtune_cli, lf_env, monkeypatch):
    import psutil

    import core.train.stalls as stalls
    import core.train.watch as watch
    from core.train.runs import read_record, run_dir
    from core.train.watch import RunWatcher, monitor_report

    _require_ptrace()
    env = {k: lf_env[k] for k in ("HF_HOME", "HF_HUB_OFFLINE", "HF_DATASETS_OFFLINE", "XDG_CACHE_HOME")}
    # long by construction: the tiny model trains hundreds of steps a second here, so a run of 60 epochs could
    # end before 10 s of the trainer's clock gave a live tokens/s (seen in make test); this one ends only when
    # the test stops it
    scale_workspace(workspace, tiny_model, devtune_cli, "--gpus", "2", env=env, epochs=100_000)
    assert "include_num_input_tokens_seen: true" in (workspace.configs_dir / "train.yaml").read_text()
    ws = ["-w", str(workspace.root)]
    out = devtune_cli(*ws, "train", "--detach", env=env)
    assert out.returncode == 0, out.stderr
    run = newest_run(devtune_cli, workspace, env)
    frozen = None
    try:
        wait_for_step(workspace, run["id"], 5)
        watcher = RunWatcher(workspace, run["id"])
        deadline = time.monotonic() + 180
        while (update := watcher.poll()).snapshot.tokens_per_s is None:  # 10 s of the trainer's clock
            assert time.monotonic() < deadline and update.record.active, "tokens/s never measurable"
            time.sleep(1)
        report = monitor_report(update)
        js = report.to_json()["throughput"]
        assert js["tokens_per_s"] > 0 and js["tokens_estimated"] is False and js["mfu_applicable"] is False
        assert js["mfu"] is None and js["advice"] == []
        text = report.progress_text()
        assert "tokens/s" in text and "MFU not applicable (CPU run)" in text, text

        ranks = stalls.training_processes(update.record.trainer.pid)
        assert len(ranks) == 2, [psutil.Process(p).cmdline() for p in ranks]
        by_rank = {psutil.Process(p).environ().get("RANK"): p for p in ranks}
        assert set(by_rank) == {"0", "1"}, by_rank
        frozen = by_rank["1"]
        os.kill(frozen, signal.SIGSTOP)

        monkeypatch.setattr(stalls, "MIN_STALL_SECONDS", 10.0)  # 2 minutes in real life; the logic is the same
        monkeypatch.setattr(watch, "STALL_CHECK_SECONDS", 0.0)
        deadline = time.monotonic() + 120
        while (update := watcher.poll()).stall is None:
            assert time.monotonic() < deadline and update.record.active, "the stall was never reported"
            time.sleep(1)
        stall = monitor_report(update).to_json()["stall"]
        assert stall["kind"] == "no-step" and stall["step"] >= 5, stall
        assert set(stall["stacks"]) == {str(p) for p in ranks}  # each rank, neither torchrun nor a launcher
        waiting = main_thread(stall["stacks"][str(by_rank["0"])])
        assert any(frame in waiting for frame in COLLECTIVE_FRAMES) and "_inner_training_loop" in waiting, waiting
        assert f"process {frozen} is stopped" in stall["stacks"][str(frozen)]  # and why it answers no more
        lines = "\n".join(monitor_report(update).anomaly_lines())
        assert "stalled" in lines and f"process {by_rank['0']} is here now" in lines
    finally:
        if frozen is not None:
            os.kill(frozen, signal.SIGCONT)
        devtune_cli(*ws, "stop", run["id"], env=env)
    wait_ended(workspace, run["id"])
    kept = read_record(run_dir(workspace, run["id"])).throughput  # the run's record keeps its figures
    assert kept is not None and kept["tokens_per_s"] > 0 and kept["tokens_estimated"] is False, kept
    assert kept["mfu_applicable"] is False
    listed = newest_run(devtune_cli, workspace, env)["throughput"]  # devtune runs --json says it too (monitor's)
    assert {k: listed[k] for k in kept} == kept and listed["over"] == "run"
