"""A held-out split through to the eval loss, for real on a CPU: the demo's messy sample fixed and registered
with `--holdout`, `config init --preset cpu-demo` wiring the held-out set into the YAML, `devtune train` running
the real LLaMA-Factory on the tiny model, and the eval loss (and, since the preset memorises, the overfitting
warning with the step to stop at) in what the monitor reads."""

import json
import shutil
from pathlib import Path

import yaml

from core.train.watch import RunWatcher

ROOT = Path(__file__).resolve().parents[2]


def test_holdout_eval_loss_is_logged_and_watched(workspace, tiny_model, devtune_cli, lf_env):
    ws = str(workspace.root)
    shutil.copytree(tiny_model, workspace.models_dir / "tiny-llama3")
    shutil.copy(ROOT / "data" / "support_messy.jsonl", workspace.data_dir / "support_messy.jsonl")
    out = devtune_cli("-w", ws, "data", "fix", "data/support_messy.jsonl", "-o", "data/support.jsonl", "--yes",
                      env=lf_env)
    assert out.returncode == 0, out.stderr

    out = devtune_cli("-w", ws, "data", "register", "data/support.jsonl", "--name", "support", "--holdout", "0.2",
                      "--json", env=lf_env)
    assert out.returncode == 0, out.stderr
    split = json.loads(out.stdout)["split"]
    assert (split["train_rows"], split["heldout_rows"], split["rows"]) == (23, 6, 29)
    info = json.loads((workspace.data_dir / "dataset_info.json").read_text())
    assert info["support_eval"] == {"file_name": "support.heldout.jsonl"}

    out = devtune_cli("-w", ws, "config", "init", "--preset", "cpu-demo", "--dataset", "support", env=lf_env)
    assert out.returncode == 0, out.stderr
    assert "eval loss on support_eval every 50 steps" in out.stdout and "[error]" not in out.stdout
    config = workspace.configs_dir / "train.yaml"
    args = yaml.safe_load(config.read_text())
    assert (args["eval_dataset"], args["eval_strategy"], args["eval_steps"]) == ("support_eval", "steps", 50)
    # shorter than the preset's 80 epochs, still past the lowest eval loss: 30 epochs, 180 steps
    config.write_text(config.read_text().replace("num_train_epochs: 80.0", "num_train_epochs: 30.0"))

    out = devtune_cli("-w", ws, "train", env=lf_env, timeout=900)
    assert out.returncode == 0, out.stdout[-3000:] + out.stderr[-3000:]
    log = [json.loads(line) for line in (workspace.root / "saves/cpu-demo/trainer_log.jsonl").read_text().splitlines()]
    evals = [r for r in log if "eval_loss" in r]
    assert [r["current_steps"] for r in evals][:3] == [50, 100, 150]

    out = devtune_cli("-w", ws, "monitor", "--json", env=lf_env)
    assert out.returncode == 0, out.stderr
    report = json.loads(out.stdout.splitlines()[-1])
    assert report["status"] == "finished" and report["eval_loss"] == evals[-1]["eval_loss"]
    overfit = [a for a in report["anomalies"] if a["id"] == "overfitting"]
    assert overfit and overfit[0]["stop_at"] == 50, report["anomalies"]  # memorising: lowest at the first eval

    run_id = report["run"]
    watcher = RunWatcher(workspace, run_id)
    watcher.poll()
    assert watcher.metrics.eval_loss.xs[:3] == [50, 100, 150]  # what the Train chart draws
