"""Runs of the real LLaMA-Factory on the tiny model: a graceful stop leaves a loadable adapter, and
resume continues the step count from the last checkpoint."""

import json
import sys
import time
from pathlib import Path

import pytest
import yaml

from core.runs import RunStatus, refresh, resume_run, run_dir, start_run, stop_run
from core.workspace import Workspace

LF = str(Path(sys.executable).parent / "llamafactory-cli")
ROWS = [{"instruction": f"问题 {i}：如何办理业务 {i}？", "input": "", "output": f"请在App里点击业务{i}并按提示操作。"}
        for i in range(16)]


def wait(predicate, timeout=240):
    deadline = time.time() + timeout
    while time.time() < deadline:
        if predicate():
            return True
        time.sleep(0.2)
    return False


def logged_steps(path: Path) -> list[int]:
    if not path.exists():
        return []
    return [json.loads(line)["current_steps"] for line in path.read_text().splitlines() if line.strip()]


@pytest.fixture
def long_run_ws(tmp_path, tiny_model, lf_env, monkeypatch):
    for key, value in lf_env.items():
        monkeypatch.setenv(key, value)
    ws = Workspace(tmp_path / "ws").ensure()
    (ws.data_dir / "rows.jsonl").write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in ROWS))
    (ws.data_dir / "dataset_info.json").write_text(json.dumps({"rows": {"file_name": "rows.jsonl"}}))
    cfg = {"model_name_or_path": str(tiny_model), "stage": "sft", "do_train": True, "finetuning_type": "lora",
           "lora_rank": 8, "lora_target": "all", "dataset": "rows", "dataset_dir": "data", "template": "llama3",
           "cutoff_len": 128, "preprocessing_num_workers": 1, "output_dir": "saves/long", "logging_steps": 1,
           "save_steps": 10, "max_steps": 5000, "plot_loss": False, "report_to": "none",
           "per_device_train_batch_size": 2, "learning_rate": 1e-3, "bf16": False, "overwrite_output_dir": False}
    (ws.configs_dir / "train.yaml").write_text(yaml.safe_dump(cfg))
    return ws


def launch(ws):
    env = {"OMP_NUM_THREADS": "1", "PYTHONUNBUFFERED": "1", "LLAMABOARD_ENABLED": "1",
           "LLAMABOARD_WORKDIR": "saves/long"}
    return start_run(ws, [LF, "train", "configs/train.yaml"], env=env, label="long", config="configs/train.yaml",
                     output_dir="saves/long")


def test_graceful_stop_saves_a_loadable_adapter_and_resume_continues(long_run_ws, tiny_model):
    ws = long_run_ws
    log = ws.root / "saves" / "long" / "trainer_log.jsonl"
    rec = launch(ws)
    assert wait(lambda: len(logged_steps(log)) >= 12), (run_dir(ws, rec.id) / "stderr.log").read_text()[-3000:]
    final = stop_run(ws, rec.id, graceful_timeout=60)
    assert final.status is RunStatus.STOPPED and final.exit_code == 0 and final.stop_stage == "graceful"
    stopped_at = max(logged_steps(log))
    adapter = ws.root / "saves" / "long" / "adapter_model.safetensors"
    assert adapter.exists()

    from peft import PeftModel
    from transformers import AutoModelForCausalLM

    model = PeftModel.from_pretrained(AutoModelForCausalLM.from_pretrained(tiny_model), ws.root / "saves" / "long")
    assert any("lora_A" in name for name, _ in model.named_parameters())

    resumed = resume_run(ws, rec.id)
    assert resumed.resume_of == rec.id and resumed.resume_checkpoint.startswith("saves/long/checkpoint-")
    checkpoint_step = int(resumed.resume_checkpoint.rsplit("-", 1)[1])
    assert checkpoint_step >= 10
    before = len(logged_steps(log))
    assert wait(lambda: len(logged_steps(log)) >= before + 3)
    new_steps = logged_steps(log)[before:]
    assert new_steps[0] == checkpoint_step + 1, (new_steps, checkpoint_step, stopped_at)
    final = stop_run(ws, resumed.id, graceful_timeout=60)
    assert final.status is RunStatus.STOPPED
    assert refresh(run_dir(ws, rec.id)).status is RunStatus.STOPPED
