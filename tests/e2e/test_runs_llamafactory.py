"""Runs of the real LLaMA-Factory on the tiny model: a graceful stop leaves a loadable adapter and a full
checkpoint at the step it stopped at (devtune's rank hook, core/train/rank_site, as every devtune run has it), and
resume continues the step count from there."""

import json
import sys
from pathlib import Path

import pytest

from core.train.launch import RANK_SITE
from core.train.run_control import resume_run, stop_run
from core.train.runs import RunStatus, refresh, run_dir, start_run
from tests.processes import wait

LF = str(Path(sys.executable).parent / "llamafactory-cli")
ROWS = [{"instruction": f"问题 {i}：如何办理业务 {i}？", "input": "", "output": f"请在App里点击业务{i}并按提示操作。"}
        for i in range(16)]


def logged_steps(path: Path) -> list[int]:
    if not path.exists():
        return []
    return [json.loads(line)["current_steps"] for line in path.read_text().splitlines() if line.strip()]


@pytest.fixture
def long_run_ws(long_sft_workspace):
    return long_sft_workspace(ROWS, output_dir="saves/long", save_steps=10, max_steps=5000)


def launch(ws):
    env = {"OMP_NUM_THREADS": "1", "PYTHONUNBUFFERED": "1", "LLAMABOARD_ENABLED": "1",
           "LLAMABOARD_WORKDIR": "saves/long", "PYTHONPATH": str(RANK_SITE), "DEVTUNE_SYNCED_STOP": "1"}
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
    assert checkpoint_step == stopped_at  # saved where it stopped, not at the last save_steps (10, 20, ...)
    before = len(logged_steps(log))
    assert wait(lambda: len(logged_steps(log)) >= before + 3)
    new_steps = logged_steps(log)[before:]
    assert new_steps[0] == checkpoint_step + 1, (new_steps, checkpoint_step, stopped_at)
    final = stop_run(ws, resumed.id, graceful_timeout=60)
    assert final.status is RunStatus.STOPPED
    assert refresh(run_dir(ws, rec.id)).status is RunStatus.STOPPED
