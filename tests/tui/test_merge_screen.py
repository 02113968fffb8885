"""The Merge step with the real LLaMA-Factory: a short real training run of the tiny model, merged from
the screen (F5), followed, checked, and refused a second time into the same folder."""

import json
import shutil
import sys
import time
from pathlib import Path

import pytest
import yaml

from core.train.runs import refresh, run_dir, start_run
from core.workspace.layout import Workspace
from tests.tui.helpers import opened, stepper_text, wait_until
from tui.app import DevtuneApp

ROWS = [{"instruction": "How long does a refund take?", "input": "", "output": "3 to 5 business days."},
        {"instruction": "Do you ship internationally?", "input": "", "output": "Yes, to 40 countries."}]


def open_on(ws: Workspace, step: str) -> DevtuneApp:
    ws.update_state(lambda s: setattr(s, "current_step", step))
    return DevtuneApp(ws, watch_terminal=False)


@pytest.fixture(scope="module")
def trained_ws(tmp_path_factory, tiny_model):
    ws = Workspace(tmp_path_factory.mktemp("merge_screen") / "ws").ensure()
    shutil.copytree(tiny_model, ws.models_dir / "tiny-llama3")
    (ws.data_dir / "qa.jsonl").write_text("".join(json.dumps(r) + "\n" for r in ROWS))
    (ws.data_dir / "dataset_info.json").write_text(json.dumps({"qa": {"file_name": "qa.jsonl"}}))
    (ws.configs_dir / "train.yaml").write_text(yaml.safe_dump({
        "model_name_or_path": "models/tiny-llama3", "stage": "sft", "do_train": True, "finetuning_type": "lora",
        "lora_target": "all", "dataset": "qa", "dataset_dir": "data", "template": "llama3", "cutoff_len": 128,
        "preprocessing_num_workers": 1, "output_dir": "saves/qa", "max_steps": 2, "logging_steps": 1,
        "save_steps": 100, "report_to": "none", "per_device_train_batch_size": 2, "bf16": False,
        "overwrite_output_dir": True}))
    record = start_run(ws, [str(Path(sys.executable).parent / "llamafactory-cli"), "train", "configs/train.yaml"],
                       env={"OMP_NUM_THREADS": "1", "PYTHONUNBUFFERED": "1"}, label="qa",
                       config="configs/train.yaml", output_dir="saves/qa")
    deadline = time.time() + 600
    while refresh(run_dir(ws, record.id)).active and time.time() < deadline:
        time.sleep(0.5)
    assert refresh(run_dir(ws, record.id)).status.value == "finished"
    return ws, record.id


async def test_merge_from_the_screen_then_refuse_the_same_folder(trained_ws):
    ws, run_id = trained_ws
    app = open_on(ws, "merge")
    async with app.run_test(size=(120, 40)) as pilot:
        screen = await opened(pilot, app)
        await wait_until(pilot, lambda: screen.query_one("#merge-run").value == run_id)
        await wait_until(pilot, lambda: "configs/merge.yaml" in str(screen.query_one("#merge-plan").render()))
        assert "template llama3" in str(screen.query_one("#merge-plan").render())
        await pilot.press("f5")
        await wait_until(pilot, lambda: screen.query_one("#merge-report").verdict is not None, timeout=300)
        report = screen.query_one("#merge-report")
        text = str(report.render())
        assert report.verdict == "ok", text
        assert "renders exactly what training saw" in text and "max |Δlogit|" in text
        assert screen.query_one("#merge-log").line_count > 0
        await wait_until(pilot, lambda: "Merge ✓" in stepper_text(app))
        await wait_until(pilot, lambda: ws.load_state().export_dir == f"exports/{run_id}")
        assert (ws.exports_dir / run_id / "model.safetensors").is_file()

        await pilot.press("f5")  # the folder is not empty now, and "replace" is not ticked
        await wait_until(pilot, lambda: "is not empty" in str(screen.query_one("#step-error").render()))
        assert "Merge !" in stepper_text(app)


async def test_the_step_says_when_there_is_nothing_to_merge(workspace):
    app = open_on(workspace, "merge")
    async with app.run_test(size=(120, 40)) as pilot:
        await wait_until(pilot, lambda: "No training run yet" in str(app.screen.query_one("#merge-plan").render()))
        await pilot.press("f5")
        await wait_until(pilot, lambda: "choose a training run" in str(app.screen.query_one("#step-error").render()))
