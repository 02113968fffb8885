"""Issue 29 in the wizard: the Train step's F5 asks before training a config whose check has errors, the
Data step's fix asks before replacing an existing file, and Merge's F6 checks an export against the run it
came from. Core decides each (tests/core/test_newcomer_state.py); the screens ask and render."""

from __future__ import annotations

import shutil
import time
from pathlib import Path

from screens import steps as step_registry
from screens.steps import StepInfo
from tests.core.config_workspace import fake_model, register_dataset
from tests.tui.helpers import opened, wait_until
from tui.app import DevtuneApp

DATA = Path(__file__).resolve().parents[2] / "data"


def _only(monkeypatch, step: str, title: str, target: str) -> None:
    monkeypatch.setattr(step_registry, "STEPS", (StepInfo(step, title, target, step),))


async def test_f5_on_a_config_with_errors_asks_naming_them_and_starts_nothing(workspace, devtune_cli, monkeypatch):
    _only(monkeypatch, "train", "Train", "screens.train:TrainScreen")
    fake_model(workspace)
    register_dataset(workspace, "kefu")
    assert devtune_cli("-w", str(workspace.root), "config", "init", "--stage", "dpo", "--dataset",
                       "kefu").returncode == 1
    app = DevtuneApp(workspace, watch_terminal=False)
    async with app.run_test(size=(120, 40)) as pilot:
        await opened(pilot, app)
        await pilot.press("f5")
        await wait_until(pilot, lambda: app.screen.__class__.__name__ == "ConfirmScreen")
        question = str(app.screen.query_one("#confirm-question").render())
        assert "supervised rows" in question and "Train it anyway?" in question
        await pilot.press("n")
        await wait_until(pilot, lambda: app.screen.__class__.__name__ == "TrainScreen")
        assert "so it is not trained" in str(app.screen.query_one("#step-error").render())
    assert not workspace.runs_dir.is_dir() or not any(workspace.runs_dir.iterdir())


async def test_fix_with_confirmed_fixes_still_asks_before_replacing_a_file(workspace, monkeypatch):
    from tui.widgets.data_actions import DataActions
    from textual.widgets import Button, Checkbox, Input, Static

    _only(monkeypatch, "data", "Data", "screens.data:DataScreen")
    shutil.copy(DATA / "support_messy.jsonl", workspace.data_dir / "support_messy.jsonl")
    mine = workspace.data_dir / "mine.jsonl"
    mine.write_text('{"instruction": "mine", "input": "", "output": "keep me"}\n')
    app = DevtuneApp(workspace, watch_terminal=False)
    async with app.run_test(size=(120, 40)) as pilot:
        screen = await opened(pilot, app)
        screen.open_file(workspace.data_dir / "support_messy.jsonl")
        await wait_until(pilot, lambda: screen.report is not None)
        actions = screen.query_one(DataActions)
        result = lambda: str(actions.query_one("#actions-result", Static).render())  # noqa: E731
        actions.query_one("#fix-output", Input).value = "data/mine.jsonl"
        actions.query_one("#fix-yes", Checkbox).value = True
        actions.query_one("#fix-write", Button).press()
        await wait_until(pilot, lambda: app.screen.__class__.__name__ == "ConfirmScreen")
        await pilot.press("y")  # yes to the fixes that need a confirmation ...
        await wait_until(pilot, lambda: app.screen.__class__.__name__ == "ConfirmScreen"
                         and "already exists" in str(app.screen.query_one("#confirm-question").render()))
        assert "mine.jsonl already exists. Replace it" in str(app.screen.query_one("#confirm-question").render())
        await pilot.press("n")  # ... which is not a yes to replacing the file
        await wait_until(pilot, lambda: app.screen is screen and "nothing written" in result())
        assert "keep me" in mine.read_text()
        actions.query_one("#fix-write", Button).press()
        await wait_until(pilot, lambda: app.screen.__class__.__name__ == "ConfirmScreen")
        await pilot.press("y")
        await wait_until(pilot, lambda: "already exists" in str(app.screen.query_one("#confirm-question").render()))
        await pilot.press("y")
        await wait_until(pilot, lambda: "keep me" not in mine.read_text() and "Written." in result())


async def test_f6_checks_the_export_against_its_recorded_run_not_the_newest(workspace, monkeypatch):
    from core.merge.export import plan_export, save_export_record
    from core.merge.export_check import load_report
    from core.train.runs import RunStatus
    from tests.core.test_newcomer_state import _run_with_own_config

    _only(monkeypatch, "merge", "Merge", "screens.merge:MergeScreen")
    fake_model(workspace)
    fake_model(workspace, "other-model")
    now = time.time()
    source = "20260101-000000-kefu-w"
    _run_with_own_config(workspace, source, now - 300, "models/tiny-llama3")
    save_export_record(workspace, plan_export(workspace, source, name="kefu-w"))
    export = workspace.root / "exports" / "kefu-w"
    export.mkdir(parents=True)
    (export / "config.json").write_text("{}")
    workspace.update_state(lambda s: setattr(s, "export_dir", "exports/kefu-w"))
    _run_with_own_config(workspace, "20260102-000000-other", now - 200, "models/other-model", RunStatus.STOPPED)
    _run_with_own_config(workspace, "20260103-000000-other-r", now - 100, "models/other-model",
                         resume_of="20260102-000000-other")
    app = DevtuneApp(workspace, watch_terminal=False)
    async with app.run_test(size=(120, 40)) as pilot:
        screen = await opened(pilot, app)
        await wait_until(pilot, lambda: screen.query_one("#merge-run").value == "20260103-000000-other-r")
        await pilot.press("f6")
        await wait_until(pilot, lambda: screen.query_one("#merge-report").verdict is not None)
    report = load_report(workspace, "exports/kefu-w")
    assert report is not None and report.run_id == source

