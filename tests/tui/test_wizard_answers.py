"""What the wizard shows while it works (issue 29, items 5 and 15): a question asked over a step leaves the
step in view, and the top status line follows what is current."""

import html
import re
import time

from core.train.runs import RunStatus
from tests.recorded_runs import place_recorded_run
from tests.tui.helpers import opened, stepper_text, wait_until
from tests.tui.test_data_screen import ws  # noqa: F401
from tests.tui.test_train_screen import train_only  # noqa: F401
from tui.app import DevtuneApp
from tui.widgets.confirm import ConfirmScreen


def screen_text(app) -> str:
    """The characters on the terminal as the person sees them (the screenshot's text)."""
    return html.unescape(re.sub(r"<[^>]+>", "", app.export_screenshot())).replace("\xa0", " ")


async def test_f8_asks_over_the_train_step_which_stays_in_view(workspace, train_only):  # noqa: F811
    place_recorded_run(workspace, "20260101-000000-live", "lf_normal", RunStatus.RUNNING, None, time.time())
    app = DevtuneApp(workspace, watch_terminal=False)
    async with app.run_test(size=(120, 40)) as pilot:
        screen = await opened(pilot, app)
        await wait_until(pilot, lambda: screen.record is not None and screen.record.active)
        await pilot.press("f8")
        await wait_until(pilot, lambda: isinstance(app.screen, ConfirmScreen))
        await pilot.pause()
        shown = screen_text(app)
        assert "Stop run" in shown
        assert "Resume" in shown and "Start" in shown  # the step's buttons behind the dialog, not a blank screen


def guide_text(screen) -> str:
    from tui.widgets.step_guide import StepGuide

    guide = screen.query_one(StepGuide)
    return str(guide.render()) if guide.has_class("-visible") else ""


async def test_the_status_line_speaks_of_the_open_file_not_an_earlier_one(ws):  # noqa: F811
    from screens.data import DataScreen

    clean = ws.data_dir / "kefu_clean.jsonl"
    clean.write_text('{"instruction": "退货怎么办", "input": "", "output": "七天内可以退货。"}\n'
                     '{"instruction": "How do I return it?", "input": "", "output": "Within 7 days."}\n',
                     encoding="utf-8")
    app = DevtuneApp(ws, watch_terminal=False)
    async with app.run_test(size=(120, 40)) as pilot:
        await wait_until(pilot, lambda: isinstance(app.screen, DataScreen) and app.screen.is_mounted)
        screen = app.screen
        screen.open_file(ws.data_dir / "support_messy.jsonl")
        await wait_until(pilot, lambda: screen.report is not None and screen.report.errors > 0)
        await wait_until(pilot, lambda: "support_messy.jsonl" in guide_text(screen) and "1 Data !" in stepper_text(app))
        screen.open_file(clean)
        await wait_until(pilot, lambda: screen.report is not None and screen.report.file.endswith("kefu_clean.jsonl"))
        await pilot.pause()
        assert "support_messy" not in guide_text(screen) and "lint error" not in guide_text(screen)
        assert "1 Data !" not in stepper_text(app)  # nor is the step marked for the other file's errors


async def test_the_status_line_names_the_run_that_is_going_not_an_older_one(workspace, train_only):  # noqa: F811
    old = place_recorded_run(workspace, "20260101-000000-old", "lf_normal", RunStatus.FAILED, 1, time.time() - 900)
    workspace.update_state(lambda s: s.set_step("train", s.step("train").status.__class__("attention"),
                                                 f"run {old.id} failed: exit code 1"))
    new = place_recorded_run(workspace, "20260101-000100-new", "lf_normal", RunStatus.RUNNING, None, time.time())
    workspace.update_state(lambda s: setattr(s, "active_run", new.id))
    app = DevtuneApp(workspace, watch_terminal=False)
    async with app.run_test(size=(120, 40)) as pilot:
        screen = await opened(pilot, app)
        await wait_until(pilot, lambda: screen.record is not None and screen.record.id == new.id
                         and screen.record.active)
        assert new.id in guide_text(screen) and old.id not in guide_text(screen), guide_text(screen)
