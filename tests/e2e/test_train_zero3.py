"""Issue 16, item 2: DeepSpeed ZeRO-3 across two processes (torchrun, gloo on this CPU) through `devtune train`,
as a person runs it: the run is its own, a graceful stop leaves a checkpoint and the adapter, the resume goes
on from the checkpoint's step, the result merges, and the merged model passes devtune's check."""

from __future__ import annotations

import json

from tests.scale_runs import checkpoints, newest_run, scale_workspace, steps_logged, wait_ended, wait_for_step


def test_zero3_on_two_processes_trains_stops_resumes_and_merges(workspace, tiny_model, devtune_cli, lf_env):
    env = {k: lf_env[k] for k in ("HF_HOME", "HF_HUB_OFFLINE", "HF_DATASETS_OFFLINE", "XDG_CACHE_HOME")}
    scale_workspace(workspace, tiny_model, devtune_cli, "--gpus", "2", "--zero", "3", env=env)
    ws = ["-w", str(workspace.root)]
    out = devtune_cli(*ws, "train", "--detach", env=env)
    assert out.returncode == 0, out.stderr
    run = newest_run(devtune_cli, workspace, env)
    assert run["launcher"] == "local" and run["output_dir"] == "saves/cpu-demo"
    copy = (workspace.root / run["config"]).read_text()
    assert "deepspeed: .devtune/runs/" in copy  # the run's own copy of the ZeRO-3 JSON
    wait_for_step(workspace, run["id"], 15)
    out = devtune_cli(*ws, "stop", run["id"], env=env)
    assert out.returncode == 0 and "stopped" in out.stdout, out.stdout + out.stderr
    logs = "".join((workspace.runs_dir / run["id"] / name).read_text(errors="replace")
                   for name in ("stdout.log", "stderr.log"))
    assert "Process rank: 1, world size: 2" in logs  # two ranks really trained
    assert "[devtune] a stop is agreed by every rank" in logs  # core/train/rank_site: both stop at one step
    saved = workspace.root / "saves" / "cpu-demo"
    assert (saved / "adapter_model.safetensors").exists() and checkpoints(saved)
    last = checkpoints(saved)[-1]
    assert (saved / f"checkpoint-{last}" / f"global_step{last}").is_dir()  # DeepSpeed's own shards

    out = devtune_cli(*ws, "resume", run["id"], "--detach", env=env)
    assert out.returncode == 0, out.stderr
    resumed = newest_run(devtune_cli, workspace, env)
    assert resumed["resume_of"] == run["id"] and resumed["output_dir"] == "saves/cpu-demo"
    wait_for_step(workspace, resumed["id"], last + 5)
    assert steps_logged(workspace, resumed["id"])[0] > last  # the count goes on from the checkpoint
    devtune_cli(*ws, "stop", resumed["id"], env=env)
    assert wait_ended(workspace, resumed["id"]).status.value == "stopped"

    out = devtune_cli(*ws, "merge", resumed["id"], "--json", env=env, timeout=600)
    assert out.returncode == 0, out.stdout[-2000:] + out.stderr[-2000:]
    assert json.loads(out.stdout)["verdict"] == "ok"
