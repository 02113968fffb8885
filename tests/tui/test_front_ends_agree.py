"""The same request from the CLI and from the wizard gives the same outcome and the same saved state: each
front-end only turns its input into the request and renders what core decided (DESIGN.md, "Actions and
outcomes"). Each case is one the two front-ends once answered differently (issue 26)."""

from __future__ import annotations

import json

import pytest
from textual.widgets import Button, Input, Static

from cli.main import main
from core.workspace.layout import Workspace
from screens.config import ConfigScreen
from screens.data import DataScreen
from tests.core.config_workspace import fake_model
from tests.tui.helpers import wait_until
from tui.app import DevtuneApp
from tui.widgets.data_actions import DataActions
from tui.widgets.field_form import FieldForm
from tui.widgets.files_preview import FilesPreview

ROWS = [{"instruction": f"How do I reset password number {i}?", "input": "",
         "output": f"Open Settings, then Security, then Reset ({i})."} for i in range(8)]


def seeded(root) -> Workspace:
    ws = Workspace(root).ensure()
    fake_model(ws)
    (ws.data_dir / "clean.jsonl").write_text("".join(json.dumps(r) + "\n" for r in ROWS), encoding="utf-8")
    return ws


def state_facts(ws: Workspace) -> dict:
    state = ws.load_state()
    data, config = state.step("data"), state.step("config")
    return {"dataset_file": state.dataset_file, "dataset_name": state.dataset_name,
            "data_step": (data.status.value, data.summary), "config_file": state.config_file,
            "config_step": (config.status.value, config.summary)}


def yaml_of(screen) -> str:
    return screen.query_one(FilesPreview).text_of("preview-yaml")


async def test_a_registered_dataset_is_the_one_the_config_trains_from_either_front_end(tmp_path, capsys):
    cli_ws, tui_ws = seeded(tmp_path / "cli"), seeded(tmp_path / "tui")

    assert main(["-w", str(cli_ws.root), "data", "register", "data/clean.jsonl", "--name", "mydata"]) == 0
    assert main(["-w", str(cli_ws.root), "config", "init", "--preset", "cpu-demo"]) == 0
    capsys.readouterr()
    cli_yaml = (cli_ws.configs_dir / "train.yaml").read_text(encoding="utf-8")
    assert "dataset: mydata" in cli_yaml

    app = DevtuneApp(tui_ws, watch_terminal=False)
    async with app.run_test(size=(120, 40)) as pilot:
        await wait_until(pilot, lambda: isinstance(app.screen, DataScreen) and app.screen.is_mounted)
        screen = app.screen
        screen.open_file(tui_ws.data_dir / "clean.jsonl")
        await wait_until(pilot, lambda: screen.report is not None)
        actions = screen.query_one(DataActions)
        actions.query_one("#register-name", Input).value = "mydata"
        actions.query_one("#register-write", Button).press()
        await wait_until(pilot, lambda: "Registered" in str(actions.query_one("#actions-result", Static).render()))
        await wait_until(pilot, lambda: tui_ws.load_state().dataset_name == "mydata")
        await pilot.press("3")
        await wait_until(pilot, lambda: isinstance(app.screen, ConfigScreen) and "lora_rank:" in yaml_of(app.screen))
        tui_yaml = yaml_of(app.screen)
        await pilot.press("ctrl+s")  # the Config step's save: config init's counterpart
        await wait_until(pilot, lambda: tui_ws.load_state().config_file is not None)

    assert state_facts(tui_ws) == state_facts(cli_ws)
    assert state_facts(cli_ws)["config_file"] == "configs/train.yaml"
    assert (tui_ws.configs_dir / "train.yaml").read_text() == cli_yaml
    assert state_facts(cli_ws)["dataset_name"] == "mydata"
    assert state_facts(cli_ws)["data_step"][0] == "done"
    assert json.loads((tui_ws.data_dir / "dataset_info.json").read_text()) == \
        json.loads((cli_ws.data_dir / "dataset_info.json").read_text())
    assert "dataset: mydata" in tui_yaml


@pytest.mark.parametrize("method", ["lora", "full"])
async def test_leaving_qlora_drops_the_4_bit_setting_either_front_end(tmp_path, capsys, method):
    cli_ws, tui_ws = seeded(tmp_path / "cli"), seeded(tmp_path / "tui")
    # written, with errors (a 70B model does not fit, no dataset registered): exit 1, as the issue 29 asks
    assert main(["-w", str(cli_ws.root), "config", "init", "--preset", "qlora-70b", "--method", method]) == 1
    capsys.readouterr()
    cli_yaml = (cli_ws.configs_dir / "train.yaml").read_text(encoding="utf-8")

    app = DevtuneApp(tui_ws, watch_terminal=False)
    async with app.run_test(size=(120, 40)) as pilot:
        await pilot.press("3")
        await wait_until(pilot, lambda: isinstance(app.screen, ConfigScreen) and "lora_rank:" in yaml_of(app.screen))
        screen = app.screen
        form = screen.query_one(FieldForm)
        form.query_one("#field-preset").value = "qlora-70b"
        await wait_until(pilot, lambda: "quantization_bit: 4" in yaml_of(screen))
        before = yaml_of(screen)  # QLoRA is written `finetuning_type: lora` + `quantization_bit: 4`
        form.query_one("#field-finetuning-type").value = method
        await wait_until(pilot, lambda: screen.spec.finetuning_type == method and yaml_of(screen) != before)
        tui_yaml = yaml_of(screen)

    for yaml in (cli_yaml, tui_yaml):
        assert f"finetuning_type: {method}" in yaml
        assert "quantization_bit" not in yaml and "quantization_method" not in yaml
