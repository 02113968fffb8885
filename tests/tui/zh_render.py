"""Render parts of the wizard that speak in sentences, in a fresh interpreter
(`python -m tests.tui.zh_render WS`), so the screens are imported in the language DEVTUNE_LANG names; prints
JSON {part: [text, ...]}: the Data step's statistics of a file, the Config form's choices, the Merge step's plan
for a stopped run; what a workspace saved in English says when opened in Chinese (the steps' saved summaries,
the export's check, the GPU sampler's no-GPU reason); each step's intro and its footer's bottom row at
120×40. tests/tui/test_zh_wizard.py reads it for English left in the Chinese UI."""

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
    from tui.app import DevtuneApp  # the screens imported in the interpreter's language (zh)
    from tui.widgets.export_report_view import ExportReportView
    from tui.widgets.field_form import FieldForm
    from tui.widgets.gpu_panel import GpuPanel
    from tui.widgets.step_guide import StepGuide

    ws = Workspace(root).ensure()
    fake_model(ws)
    register_dataset(ws)
    shutil.copy(ROOT / "data" / "support_messy.jsonl", ws.data_dir / "support_messy.jsonl")
    from cli.main import main

    main(["config", "init", "--preset", "cpu-demo", "-w", str(ws.root)])  # the run's training YAML
    place_recorded_run(ws, "20260102-000000-r1", "lf_nan_loss", RunStatus.STOPPED, 0, time.time() - 60)
    (ws.root / "saves" / "20260102-000000-r1" / "adapter_config.json").write_text("{}")  # it saved an adapter
    saved_in_english(ws, ws.runs_dir / "20260102-000000-r1")
    seen: dict[str, list[str]] = {}
    seen["footer"], seen["intro"] = [], []
    app = DevtuneApp(ws, watch_terminal=False)
    async with app.run_test(size=(120, 40)) as pilot:
        screen = await opened(pilot, app)
        await wait_until(pilot, lambda: screen.query_one(StepGuide).has_class("-visible"))
        seen["saved summaries"] = [str(screen.query_one(StepGuide).render())]
        await read_frame(pilot, app, seen)
        screen.open_file(ws.data_dir / "support_messy.jsonl")
        await wait_until(pilot, lambda: screen.report is not None)
        await pilot.pause()
        seen["data stats"] = str(screen.query_one("#data-stats-text", Static).render()).splitlines()[:3]

        app.action_goto_step("config")
        await wait_until(pilot, lambda: app.current_mode == "config" and app.screen.is_mounted
                         and app.screen.spec is not None)
        await read_frame(pilot, app, seen)
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
        await wait_until(pilot, lambda: app.screen.report is not None)
        await pilot.pause()
        seen["merge checks"] = str(app.screen.query_one(ExportReportView).render()).splitlines()
        seen["saved summaries"].append(str(app.screen.query_one(StepGuide).render()))
        await read_frame(pilot, app, seen)

        app.action_goto_step("train")
        await wait_until(pilot, lambda: app.current_mode == "train" and app.screen.is_mounted
                         and app.screen.query_one(GpuPanel).no_gpu)
        seen["gpu reason"] = [app.screen.query_one(GpuPanel).reason]
        await read_frame(pilot, app, seen)
        for step in ("doctor", "playground"):
            app.action_goto_step(step)
            await wait_until(pilot, lambda: app.current_mode == step and app.screen.is_mounted)
            await read_frame(pilot, app, seen)
    return seen


def saved_in_english(ws, run_dir: Path) -> None:
    """What an English session leaves: the Data and Merge steps' summaries, the export's check, the run's GPU
    sampler status (on this machine: no GPU, and why)."""
    from core.data.lint import lint_file
    from core.data.register import registered
    from core.i18n import set_language
    from core.merge.export_check import ExportReport, check_files, save_report
    from core.train.gpu.record import record_until

    set_language("en")
    try:
        dataset = ws.data_dir / "support_clean.jsonl"  # tests.core.config_workspace.register_dataset's
        (ws.root / "exports" / "m").mkdir(parents=True)
        report = ExportReport(export_dir="exports/m", run_id="20260102-000000-r1",
                              findings=check_files(ws.root / "exports" / "m"))
        save_report(ws, report)

        def english(state) -> None:
            registered(ws.rel(dataset), "support", lint_file(dataset)).apply(state)
            report.state_change().apply(state)

        ws.update_state(english)
        record_until(run_dir / "gpu.jsonl", None, run_dir / "gpu.status", prefer="auto")
    finally:
        set_language("zh")


async def read_frame(pilot, app, seen: dict) -> None:
    """The step's intro as drawn, and its footer's bottom row beside the labels of the keys it shows."""
    from textual.widgets._footer import FooterKey

    await pilot.pause()
    seen["intro"].append(str(app.screen.query_one("#step-intro").render()))
    row = app.screen._compositor.render_strips()[-1].text
    shown = [f"{k.key_display} {k.description}" for k in app.screen.query(FooterKey) if k.display]
    seen["footer"].append({"row": row, "keys": shown})


if __name__ == "__main__":
    print(json.dumps(asyncio.run(render(Path(sys.argv[1]))), ensure_ascii=False))
