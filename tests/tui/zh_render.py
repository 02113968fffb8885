"""Render parts of the wizard that speak in sentences, in a fresh interpreter
(`python -m tests.tui.zh_render WS`), so the screens are imported in the language DEVTUNE_LANG names; prints
JSON {part: [text, ...]}: the Data step's statistics of a file, the Config form's choices, the Merge step's plan
for a stopped run. tests/tui/test_zh_wizard.py reads it for English left in the Chinese UI."""

from __future__ import annotations

import asyncio
import json
import shutil
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


async def render(root: Path) -> dict:
    from textual.widgets import Select, Static

    from core.train.runs import RunStatus
    from core.workspace.layout import Workspace
    from tests.core.config_workspace import fake_model, register_dataset
    from tests.recorded_runs import place_recorded_run
    from tests.tui.helpers import opened, wait_until
    from tui.app import DevtuneApp
    from tui.widgets.field_form import FieldForm

    ws = Workspace(root).ensure()
    fake_model(ws)
    register_dataset(ws)
    shutil.copy(ROOT / "data" / "support_messy.jsonl", ws.data_dir / "support_messy.jsonl")
    from cli.main import main

    main(["config", "init", "--preset", "cpu-demo", "-w", str(ws.root)])  # the run's training YAML
    place_recorded_run(ws, "20260102-000000-r1", "lf_nan_loss", RunStatus.STOPPED, 0, time.time() - 60)
    (ws.root / "saves" / "20260102-000000-r1" / "adapter_config.json").write_text("{}")  # it saved an adapter
    seen: dict[str, list[str]] = {}
    app = DevtuneApp(ws, watch_terminal=False)
    async with app.run_test(size=(120, 40)) as pilot:
        screen = await opened(pilot, app)
        screen.open_file(ws.data_dir / "support_messy.jsonl")
        await wait_until(pilot, lambda: screen.report is not None)
        await pilot.pause()
        seen["data stats"] = str(screen.query_one("#data-stats-text", Static).render()).splitlines()[:3]

        app.action_goto_step("config")
        await wait_until(pilot, lambda: app.current_mode == "config" and app.screen.is_mounted
                         and app.screen.spec is not None)
        form = app.screen.query_one(FieldForm)
        names = {"field-template", "field-lr-scheduler-type", "field-precision", "field-flash-attn",
                 "field-launch-gpu-model"}  # lists of identifiers and hardware names
        # each choice as shown, less its own value (the identifier it names: sft, sigmoid)
        seen["config choices"] = [str(prompt).replace(str(value), "{value}") for select in form.query(Select)
                                  if select.id not in names for prompt, value in select._options
                                  if str(prompt) not in ("", "-")]

        app.action_goto_step("merge")
        await wait_until(pilot, lambda: app.current_mode == "merge" and app.screen.is_mounted
                         and app.screen.query_one("#merge-run", Select).value == "20260102-000000-r1")
        await pilot.pause(2.0)
        seen["merge plan"] = str(app.screen.query_one("#merge-plan", Static).render()).splitlines()
    return seen


if __name__ == "__main__":
    print(json.dumps(asyncio.run(render(Path(sys.argv[1]))), ensure_ascii=False))
