import json
import os
import sys
from pathlib import Path

import pytest
import yaml

from core.workspace.layout import Workspace

VENV_BIN = Path(sys.executable).parent


def pytest_collection_modifyitems(items):
    for item in items:
        if "/e2e/" in str(item.fspath):
            item.add_marker(pytest.mark.e2e)


@pytest.fixture
def lf_env(tmp_path):
    """The environment devtune gives LLaMA-Factory on a CPU: one thread, caches kept local, offline."""
    cache = tmp_path / "cache"
    return {
        **os.environ,
        "PATH": f"{VENV_BIN}{os.pathsep}{os.environ.get('PATH', '')}",
        "OMP_NUM_THREADS": "1",
        "PYTHONUNBUFFERED": "1",
        "HF_HOME": str(cache / "hf"),
        "XDG_CACHE_HOME": str(cache),
        "TORCH_EXTENSIONS_DIR": str(cache / "torch_extensions"),
        "HF_HUB_OFFLINE": "1",
        "HF_DATASETS_OFFLINE": "1",
    }


@pytest.fixture
def long_sft_workspace(tmp_path, tiny_model, lf_env, monkeypatch):
    """Build a workspace whose configs/train.yaml is a LoRA SFT of the tiny model on `rows`, long enough
    (max_steps in the thousands) that a test stops it rather than waits for it to end."""
    for key, value in lf_env.items():
        monkeypatch.setenv(key, value)

    def build(rows, *, output_dir: str, save_steps: int, max_steps: int) -> Workspace:
        ws = Workspace(tmp_path / "ws").ensure()
        (ws.data_dir / "rows.jsonl").write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in rows))
        (ws.data_dir / "dataset_info.json").write_text(json.dumps({"rows": {"file_name": "rows.jsonl"}}))
        cfg = {"model_name_or_path": str(tiny_model), "stage": "sft", "do_train": True, "finetuning_type": "lora",
               "lora_rank": 8, "lora_target": "all", "dataset": "rows", "dataset_dir": "data",
               "template": "llama3", "cutoff_len": 128, "preprocessing_num_workers": 1, "output_dir": output_dir,
               "logging_steps": 1, "save_steps": save_steps, "max_steps": max_steps, "plot_loss": False,
               "report_to": "none", "per_device_train_batch_size": 2, "learning_rate": 1e-3, "bf16": False,
               "overwrite_output_dir": False}
        (ws.configs_dir / "train.yaml").write_text(yaml.safe_dump(cfg))
        return ws

    return build
