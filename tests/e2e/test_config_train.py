"""The YAML `devtune config init --preset cpu-demo` writes is what the real `llamafactory-cli train` runs:
two steps on the tiny model, launched the way the Train step will (cwd = workspace root, launch_env);
and the whole preset makes the random tiny model memorise the answers."""

import json
import shutil
import subprocess
import sys
from pathlib import Path

from core.config.files import launch_argv, launch_env, load_spec
from tests.core.config_workspace import register_dataset

LF_BIN = Path(sys.executable).parent


def _support_rows(root: Path) -> list[dict]:
    """The well-formed rows of the demo's messy file (what the Data step keeps), deduplicated."""
    rows, seen = [], set()
    for line in (root / "data" / "support_messy.jsonl").read_text(encoding="utf-8-sig").splitlines():
        try:
            row = json.loads(line)
        except ValueError:
            continue
        if isinstance(row, dict) and all(isinstance(row.get(k), str) for k in ("instruction", "input", "output")) \
                and row["instruction"].strip() and row["output"].strip() and row["instruction"] not in seen:
            seen.add(row["instruction"])
            rows.append({k: row[k] for k in ("instruction", "input", "output")})
    return rows


def _demo_workspace(workspace, tiny_model, devtune_cli) -> Path:
    shutil.copytree(tiny_model, workspace.models_dir / "tiny-llama3")
    register_dataset(workspace, "support", _support_rows(Path(__file__).resolve().parents[2]))
    out = devtune_cli("-w", str(workspace.root), "config", "init", "--preset", "cpu-demo")
    assert out.returncode == 0, out.stderr
    return workspace.configs_dir / "train.yaml"


def _train(workspace, lf_env, *overrides: str) -> subprocess.CompletedProcess:
    spec = load_spec(workspace)
    argv = launch_argv(spec, "configs/train.yaml")
    argv[0] = str(LF_BIN / argv[0])
    env = {**lf_env, **launch_env(spec)}
    return subprocess.run([*argv, *overrides], cwd=workspace.root, env=env, capture_output=True, text=True,
                          timeout=900)


def test_cpu_demo_yaml_trains_two_steps(workspace, tiny_model, devtune_cli, lf_env):
    _demo_workspace(workspace, tiny_model, devtune_cli)
    proc = _train(workspace, lf_env, "max_steps=2")
    assert proc.returncode == 0, proc.stderr[-3000:]
    out = workspace.root / "saves" / "cpu-demo"
    log = [json.loads(line) for line in (out / "trainer_log.jsonl").read_text().splitlines()]
    assert log[-1]["current_steps"] == 2 and log[-1]["total_steps"] == 2
    assert (out / "adapter_model.safetensors").exists()
    adapter = json.loads((out / "adapter_config.json").read_text())
    assert adapter["r"] == 16 and adapter["lora_alpha"] == 32
    assert set(adapter["modules_to_save"]) == {"embed_tokens", "lm_head"}


def test_cpu_demo_preset_memorises_the_demo_answers(workspace, tiny_model, devtune_cli, lf_env):
    _demo_workspace(workspace, tiny_model, devtune_cli)
    proc = _train(workspace, lf_env)
    assert proc.returncode == 0, proc.stderr[-3000:]
    log = [json.loads(line) for line in (workspace.root / "saves" / "cpu-demo" / "trainer_log.jsonl")
           .read_text().splitlines()]
    losses = [r["loss"] for r in log if "loss" in r]
    assert losses[0] > 5 and losses[-1] < 0.1, (losses[0], losses[-1])
