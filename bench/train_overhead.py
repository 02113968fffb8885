"""A devtune-launched run against the same YAML run directly with `llamafactory-cli` (issue 6).

Both train the tiny model on CPU with the same config and environment; the figure is the ratio of
LLaMA-Factory's own `train_runtime` (train_results.json), devtune / direct. Target <= 1.05.
Runs are interleaved (direct, devtune, direct, devtune, ...) and the medians compared.

    .venv/bin/python bench/train_overhead.py [--pairs 3] [--steps 300]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from core.train.runs import refresh, run_dir, start_run  # noqa: E402
from core.setup.tinymodel import build_tiny_model  # noqa: E402
from core.train.launch import training_env  # noqa: E402
from core.workspace.layout import Workspace  # noqa: E402

LF = str(Path(sys.executable).parent / "llamafactory-cli")


def write_workspace(ws: Workspace, model: Path, steps: int) -> None:
    rows = [{"instruction": f"问题{i}：怎么办理第{i}项业务？", "input": "", "output": f"请在App中选择业务{i}并提交。"}
            for i in range(32)]
    (ws.data_dir / "rows.jsonl").write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in rows))
    (ws.data_dir / "dataset_info.json").write_text(json.dumps({"rows": {"file_name": "rows.jsonl"}}))
    import yaml

    for name in ("direct", "devtune"):
        cfg = {"model_name_or_path": str(model), "stage": "sft", "do_train": True, "finetuning_type": "lora",
               "lora_rank": 8, "lora_target": "all", "dataset": "rows", "dataset_dir": "data", "template": "llama3",
               "cutoff_len": 128, "preprocessing_num_workers": 1, "output_dir": f"saves/{name}",
               "logging_steps": 5, "save_steps": 100000, "max_steps": steps, "plot_loss": False, "report_to": "none",
               "per_device_train_batch_size": 2, "learning_rate": 1e-3, "bf16": False, "overwrite_output_dir": True}
        (ws.configs_dir / f"{name}.yaml").write_text(yaml.safe_dump(cfg))


def runtime(ws: Workspace, name: str) -> float:
    return float(json.loads((ws.root / "saves" / name / "train_results.json").read_text())["train_runtime"])


def run_direct(ws: Workspace, env: dict) -> float:
    subprocess.run([LF, "train", "configs/direct.yaml"], cwd=ws.root, env={**os.environ, **env}, check=True,
                   stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    return runtime(ws, "direct")


def run_devtune(ws: Workspace, env: dict) -> float:
    rec = start_run(ws, [LF, "train", "configs/devtune.yaml"], env=env, label="bench", config="configs/devtune.yaml",
                    output_dir="saves/devtune")
    while refresh(run_dir(ws, rec.id)).active:
        time.sleep(0.2)
    final = refresh(run_dir(ws, rec.id))
    if final.exit_code != 0:
        raise SystemExit(f"devtune run failed: {final.note}")
    return runtime(ws, "devtune")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--pairs", type=int, default=3)
    parser.add_argument("--steps", type=int, default=300)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        model = build_tiny_model(Path(tmp) / "tiny", ROOT / "data")
        ws = Workspace(Path(tmp) / "ws").ensure()
        write_workspace(ws, model, args.steps)
        env = training_env(ws, {"OMP_NUM_THREADS": "1"}, "saves/devtune")
        env.update(HF_HUB_OFFLINE="1", HF_DATASETS_OFFLINE="1")
        direct, launched = [], []
        for _ in range(args.pairs):
            direct.append(run_direct(ws, env))
            launched.append(run_devtune(ws, env))
    d, v = statistics.median(direct), statistics.median(launched)
    print(f"train_runtime over {args.pairs} interleaved pairs, {args.steps} steps of the tiny model (medians)")
    print(f"  llamafactory-cli directly : {d:6.2f} s   {[round(x, 2) for x in direct]}")
    print(f"  launched by devtune       : {v:6.2f} s   {[round(x, 2) for x in launched]}")
    print(f"  devtune / direct          = {v / d:5.3f}x   (target <= 1.05)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
