"""Issue 34, item 1: a run resumed on another number of ranks (`devtune resume RUN --gpus N`), for real on this CPU:
a ZeRO-3 run on 2 ranks stopped, resumed on 1 rank (DeepSpeed's universal checkpoint, the global batch kept by
gradient accumulation), then on 3 ranks (a global batch 3 ranks do not divide); the step count and the loss go on
from the checkpoint, never back to the start."""

from __future__ import annotations

import json

from tests.scale_runs import checkpoints, newest_run, scale_workspace, wait_ended, wait_for_step


def _losses(workspace, run_id: str) -> dict[int, float]:
    """step -> loss of this run's own trainer_log.jsonl lines."""
    from core.train.runs import read_record, run_dir, trainer_log_source

    directory = run_dir(workspace, run_id)
    path, start = trainer_log_source(directory, read_record(directory))
    rows = [json.loads(line) for line in path.read_bytes()[start:].decode().splitlines() if line.startswith("{")]
    return {r["current_steps"]: r["loss"] for r in rows if "loss" in r}


def _logs(workspace, run_id: str) -> str:
    return "".join((workspace.runs_dir / run_id / name).read_text(errors="replace")
                   for name in ("stdout.log", "stderr.log"))


def test_zero3_resumes_on_one_rank_then_three_and_the_loss_goes_on(workspace, tiny_model, devtune_cli, lf_env):
    env = {k: lf_env[k] for k in ("HF_HOME", "HF_HUB_OFFLINE", "HF_DATASETS_OFFLINE", "XDG_CACHE_HOME")}
    scale_workspace(workspace, tiny_model, devtune_cli, "--gpus", "2", "--zero", "3", env=env)
    ws = ["-w", str(workspace.root)]
    assert devtune_cli(*ws, "train", "--detach", env=env).returncode == 0
    first = newest_run(devtune_cli, workspace, env)
    wait_for_step(workspace, first["id"], 25)
    assert devtune_cli(*ws, "stop", first["id"], env=env).returncode == 0
    assert "Process rank: 1, world size: 2" in _logs(workspace, first["id"])
    saved = workspace.root / "saves" / "cpu-demo"
    last = checkpoints(saved)[-1]
    before = _losses(workspace, first["id"])

    # 2 -> 1 rank: converted by DeepSpeed's ds_to_universal, loaded with checkpoint.load_universal
    out = devtune_cli(*ws, "resume", first["id"], "--gpus", "1", "--detach", env=env)
    assert out.returncode == 0, out.stdout + out.stderr
    assert "from 2 to 1 ranks" in out.stderr and "global batch 8 kept (gradient_accumulation_steps 2)" in out.stderr
    one = newest_run(devtune_cli, workspace, env)
    assert one["resume_of"] == first["id"]
    folder = workspace.runs_dir / one["id"]
    assert json.loads((folder / "ds_config.json").read_text())["checkpoint"] == {"load_universal": True}
    assert (saved / f"checkpoint-{last}" / "latest_universal").read_text().strip() == f"global_step{last}_universal"
    wait_for_step(workspace, one["id"], last + 12)
    assert devtune_cli(*ws, "stop", one["id"], env=env).returncode == 0
    logs = _logs(workspace, one["id"])
    assert "world size: 1" in logs and "world size: 2" not in logs
    assert f"global step {last}" in logs  # HF Trainer: "Resuming training from checkpoint with epoch E and global step N"
    after = _losses(workspace, one["id"])
    assert min(after) > last  # the count goes on from the checkpoint
    start_loss = before[min(before)]
    # a stop saves a full checkpoint at the step it stopped (core/train/rank_site): nothing is trained twice, and
    # the loss goes on from where it was, not from the start's
    assert last >= max(before), (last, before)
    resumed_at, stopped_at = min(after), max(before)
    print(f"2 ranks: step {min(before)} loss {start_loss:.4f} ... step {stopped_at} {before[stopped_at]:.4f}, "
          f"checkpoint at {last}; 1 rank: step {resumed_at} {after[resumed_at]:.4f}")
    assert after[resumed_at] <= 1.5 * before[stopped_at], (before, after)
    assert max(after.values()) < start_loss / 3

    # 1 -> 3 ranks: 3 x 4 rows per device do not divide the global batch of 8: it becomes 12, the steps go on
    last = checkpoints(saved)[-1]
    out = devtune_cli(*ws, "resume", one["id"], "--gpus", "3", "--detach", env=env)
    assert out.returncode == 0, out.stdout + out.stderr
    assert "from 1 to 3 ranks" in out.stderr and "from 8 to 12 rows" in out.stderr
    three = newest_run(devtune_cli, workspace, env)
    wait_for_step(workspace, three["id"], last + 5)
    assert devtune_cli(*ws, "stop", three["id"], env=env).returncode == 0
    assert wait_ended(workspace, three["id"]).status.value == "stopped"
    logs = _logs(workspace, three["id"])
    assert "Process rank: 2, world size: 3" in logs
    later = _losses(workspace, three["id"])
    print(f"3 ranks from checkpoint-{last}: " + ", ".join(f"step {s} {v:.4f}" for s, v in sorted(later.items())))
    assert min(later) > last and max(later.values()) < start_loss / 3
