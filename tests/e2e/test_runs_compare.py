"""Two real CPU runs of the tiny model that differ only in their learning rate (1e-2 and 1e-3), trained through
`devtune train`, then `devtune runs compare --json`: learning_rate is the one hyperparameter that differs, and
both loss curves are there, step by step as each run's trainer_log.jsonl logged them."""

from __future__ import annotations

import json
import re

import pytest

from tests.scale_runs import newest_run, scale_workspace, wait_ended

pytestmark = pytest.mark.e2e


def loss_steps(workspace, run_id: str) -> list[float]:
    """The steps of the loss lines in the run's own (frozen) trainer_log.jsonl."""
    from core.train.runs import read_record, run_dir, trainer_log_source

    directory = run_dir(workspace, run_id)
    path, start = trainer_log_source(directory, read_record(directory))
    rows = [json.loads(line) for line in path.read_bytes()[start:].decode().splitlines() if line.startswith("{")]
    return [float(r["current_steps"]) for r in rows if "loss" in r]


def test_two_runs_with_different_learning_rates_compare(workspace, tiny_model, devtune_cli, lf_env):
    env = {k: lf_env[k] for k in ("HF_HOME", "HF_HUB_OFFLINE", "HF_DATASETS_OFFLINE", "XDG_CACHE_HOME")}
    scale_workspace(workspace, tiny_model, devtune_cli, env=env, epochs=3, save_steps=100)
    ws = ["-w", str(workspace.root)]
    config = workspace.configs_dir / "train.yaml"
    ids = []
    for lr in ("1.0e-2", "1.0e-3"):
        text = re.sub(r"^learning_rate: .*$", f"learning_rate: {lr}", config.read_text(), flags=re.M)
        config.write_text(re.sub(r"^output_dir: .*$", f"output_dir: saves/lr-{lr}", text, flags=re.M))
        out = devtune_cli(*ws, "train", "--detach", env=env)
        assert out.returncode == 0, out.stderr
        run = newest_run(devtune_cli, workspace, env)
        assert wait_ended(workspace, run["id"]).exit_code == 0
        ids.append(run["id"])
    out = devtune_cli(*ws, "runs", "compare", *ids, "--json", env=env)
    assert out.returncode == 0, out.stderr
    data = json.loads(out.stdout)
    assert data["params"] == {"learning_rate": {ids[0]: 0.01, ids[1]: 0.001}}  # each output_dir is its run's own
    for run_id in ids:
        xs, ys = data["curves"][run_id]["loss"]["x"], data["curves"][run_id]["loss"]["y"]
        assert xs == loss_steps(workspace, run_id) and len(xs) >= 2 and all(y > 0 for y in ys)
    assert data["at"] and {run["id"] for run in data["runs"]} == set(ids)
    assert data["curves"][ids[0]]["loss"]["y"] != data["curves"][ids[1]]["loss"]["y"]  # the learning rate told
    tokens = json.loads(devtune_cli(*ws, "runs", "compare", *ids, "--json", "--align", "tokens", env=env).stdout)
    assert tokens["curves"][ids[0]]["loss"]["x"][0] > 0  # the preset counts the tokens seen
    text = devtune_cli(*ws, "runs", "compare", *ids, env=env).stdout
    assert "learning_rate" in text and "0.01" in text and "0.001" in text
