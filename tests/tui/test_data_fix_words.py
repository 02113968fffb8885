"""The Data step's fix says what the person does there (issue 29, item 11): the preview names no CLI flag
(`--yes`), and the confirm dialog names every fix it adds, the dropped duplicates among them."""

import shutil
from pathlib import Path

from textual.widgets import Button, Checkbox, Static

from screens.data import DataScreen
from tests.tui.helpers import wait_until
from tui.app import DevtuneApp
from tui.widgets.data_actions import DataActions

DATA = Path(__file__).resolve().parents[2] / "data"


async def test_the_preview_and_the_confirm_say_what_the_wizard_does(workspace):
    shutil.copy(DATA / "support_messy.jsonl", workspace.data_dir / "support_messy.jsonl")
    app = DevtuneApp(workspace, watch_terminal=False)
    async with app.run_test(size=(120, 40)) as pilot:
        await wait_until(pilot, lambda: isinstance(app.screen, DataScreen) and app.screen.is_mounted)
        screen = app.screen
        screen.open_file(workspace.data_dir / "support_messy.jsonl")
        await wait_until(pilot, lambda: screen.report is not None)
        actions = screen.query_one(DataActions)
        result = lambda: str(actions.query_one("#actions-result", Static).render())  # noqa: E731
        await pilot.press("f")
        await wait_until(pilot, lambda: "Preview" in result() and "not applied without" in result())
        assert "--yes" not in result()
        actions.query_one("#fix-yes", Checkbox).value = True
        actions.query_one("#fix-write", Button).press()
        await wait_until(pilot, lambda: app.screen.__class__.__name__ == "ConfirmScreen")
        said = " ".join(str(w.render()) for w in app.screen.query(Static))
        assert "exact duplicates" in said and "mask personal data" in said
