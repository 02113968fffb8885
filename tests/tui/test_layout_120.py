"""At 120×40 (issue 29, item 14) each field has the room its content needs: the Data step's "fixed file" name,
every entry of the Train chart's legend, the Merge step's run selector on one line."""

import time

from textual.widgets import Input

from core.train.runs import RunStatus
from screens.data import DataScreen
from tests.recorded_runs import place_recorded_run
from tests.tui.helpers import opened, wait_until
from tests.tui.test_data_screen import ws  # noqa: F401
from tui.app import DevtuneApp
from tui.widgets.chart_raster import ChartData, ChartRaster
from tui.widgets.data_actions import DataActions


async def test_the_fixed_file_name_has_room_at_120_columns(ws):  # noqa: F811
    app = DevtuneApp(ws, watch_terminal=False)
    async with app.run_test(size=(120, 40)) as pilot:
        await wait_until(pilot, lambda: isinstance(app.screen, DataScreen) and app.screen.is_mounted)
        screen = app.screen
        screen.open_file(ws.data_dir / "support_messy.jsonl")
        await wait_until(pilot, lambda: screen.report is not None)
        await pilot.press("f")  # the Fix form, as a person opens it
        field = screen.query_one(DataActions).query_one("#fix-output", Input)
        await wait_until(pilot, lambda: field.region.width > 0)
        assert field.region.width >= len("data/support_clean.jsonl") + 4, field.region


def _legend_text(data: ChartData, width: int) -> str:
    return "".join(text for text, _layer in ChartRaster(data, width, 12).draw()[0])


def test_the_chart_legend_keeps_the_eval_loss_at_the_width_it_has_at_120_columns():
    xs = list(range(10, 410, 10))
    data = ChartData(loss=(xs, [2.0 - i / 50 for i in range(40)]), smoothed=(xs, [2.0 - i / 50 for i in range(40)]),
                     eval_loss=(xs[::4], [1.9, 1.5, 1.2, 1.1, 1.0, 0.95, 0.97, 1.0, 1.1, 1.2]),
                     lr=(xs, [1e-4] * 40))
    for width in (60, 80, 200):
        text = _legend_text(data, width)
        assert "eval loss 1.2" in text and "loss 1.22" in text, (width, text)
        assert len(text) <= width
    assert "lowest" in _legend_text(data, 200)


async def test_the_merge_run_selector_shows_a_run_id_on_one_line(workspace, monkeypatch):
    from screens import steps as step_registry
    from screens.steps import StepInfo

    monkeypatch.setattr(step_registry, "STEPS", (
        StepInfo("merge", "Merge", "screens.merge:MergeScreen", "merge"),))
    rec = place_recorded_run(workspace, "20261202-010225-kefu-long", "lf_normal", RunStatus.FINISHED, 0,
                             time.time() - 100)
    app = DevtuneApp(workspace, watch_terminal=False)
    async with app.run_test(size=(120, 40)) as pilot:
        screen = await opened(pilot, app)
        select = screen.query_one("#merge-run")
        await wait_until(pilot, lambda: select.value == rec.id)
        await pilot.pause()
        assert select.region.height <= 3, select.region  # a border above and below one line
        assert rec.id in str(select.query_one("SelectCurrent #label").render())
