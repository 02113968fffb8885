"""The Train step's table of runs and its comparison view, on two real recorded runs of the demo that differ in
their learning rate (tests/compared_runs.py): sorting, marking, the comparison's curves, parameter diff and axis."""

from __future__ import annotations

import pytest

from screens import steps as step_registry
from screens.steps import StepInfo
from tests.compared_runs import FAST, SLOW, place_compared_runs
from tests.tui.helpers import opened, wait_until
from tui.app import DevtuneApp


@pytest.fixture
def train_only(monkeypatch):
    monkeypatch.setattr(step_registry, "STEPS", (
        StepInfo("train", "Train", "screens.train:TrainScreen", "train"),))


def column(table, key: str) -> list[str]:
    return [str(table.get_cell(row, key)) for row in table.rows]


async def test_the_runs_table_sorts_marks_and_compares(workspace, train_only):
    place_compared_runs(workspace)
    app = DevtuneApp(workspace, watch_terminal=False)
    async with app.run_test(size=(120, 40)) as pilot:
        screen = await opened(pilot, app)
        table = screen.query_one("RunTable")
        await wait_until(pilot, lambda: table.row_count == 2 and screen.record is not None)
        assert screen.record.id == SLOW  # the newest is shown
        assert "learning_rate" in [c.value for c in table.columns] and column(table, "learning_rate") == ["0.001", "0.01"]
        table.sort_by("best_eval_loss")
        await pilot.pause()
        assert [r.value for r in table.rows] == [FAST, SLOW]  # lowest best eval loss first
        table.sort_by("best_eval_loss")
        assert [r.value for r in table.rows] == [SLOW, FAST]  # again: the other way
        table.focus()
        table.move_cursor(row=table.get_row_index(FAST))
        await pilot.press("enter")
        await wait_until(pilot, lambda: screen.record is not None and screen.record.id == FAST)
        await pilot.press("space")
        assert table.marked == [FAST]
        await pilot.press("m")  # one marked: with the cursor's own, still one run
        await wait_until(pilot, lambda: screen.query_one("#step-error").has_class("-visible"))
        assert "two or more" in str(screen.query_one("#step-error").render())
        await pilot.press("up", "space", "m")
        await wait_until(pilot, lambda: type(app.screen).__name__ == "TrainCompareScreen")
        compare = app.screen
        chart = compare.query_one("RunCompareChart")
        assert set(chart.series) == {f"{FAST} loss", f"{FAST} eval loss", f"{SLOW} loss", f"{SLOW} eval loss"}
        assert chart.series[f"{FAST} eval loss"][0][0] == 50.0
        params = compare.query_one("#compare-params")
        rows = {str(params.get_row_at(i)[0]): [str(v) for v in params.get_row_at(i)[1:]] for i in range(params.row_count)}
        assert rows["learning_rate"] == ["0.01", "0.001"]  # in the order the runs were marked
        await pilot.press("b")
        assert compare.comparison.align == "tokens" and "total_tokens" in str(compare.query_one("#compare-notes").render())
        await pilot.press("b")
        assert compare.comparison.align == "epoch" and chart.series[f"{SLOW} loss"][0][-1] == 6.0
        await pilot.press("escape")
        await wait_until(pilot, lambda: app.screen is screen)
