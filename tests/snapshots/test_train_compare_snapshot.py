"""The Train step's runs side by side, pinned as an SVG snapshot: two real recorded runs of the demo at learning
rates 1e-2 and 1e-3 (tests/compared_runs.py), marked in the runs table and compared: both loss curves and eval-loss
points on one chart, the hyperparameters that differ. The second test reads the SVG's text, what a person sees.
Review a changed snapshot in the HTML report, then `pytest tests/snapshots --snapshot-update`."""

from __future__ import annotations

import asyncio
import html
import re

from tests.compared_runs import FAST, SLOW, place_compared_runs
from tests.snapshots.test_snapshots import SIZE, app_on
from tests.tui.helpers import opened, wait_until


async def compare_both(pilot) -> None:
    screen = await opened(pilot, pilot.app)
    table = screen.query_one("RunTable")
    await wait_until(pilot, lambda: table.row_count == 2 and screen.snapshot is not None)
    table.focus()
    await pilot.press("space", "down", "space", "m")
    await wait_until(pilot, lambda: type(pilot.app.screen).__name__ == "TrainCompareScreen")
    await pilot.pause(0.3)


def test_two_runs_compared_in_the_train_step(snap_ws, snap_compare):
    place_compared_runs(snap_ws)
    assert snap_compare(app_on(snap_ws, "train"), terminal_size=SIZE, run_before=compare_both)


def svg_lines(svg: str) -> list[str]:
    rows: dict[float, list[tuple[float, str]]] = {}
    for m in re.finditer(r'<text class="[^"]*" x="([\d.]+)" y="([\d.]+)"[^>]*>(.*?)</text>', svg):
        rows.setdefault(float(m.group(2)), []).append((float(m.group(1)), html.unescape(m.group(3))))
    return ["".join(t for _x, t in sorted(parts)).replace("\xa0", " ") for _y, parts in sorted(rows.items())]


def test_what_the_comparison_shows_in_words(snap_ws):
    place_compared_runs(snap_ws)

    async def go() -> list[str]:
        app = app_on(snap_ws, "train")
        async with app.run_test(size=SIZE) as pilot:
            await compare_both(pilot)
            return svg_lines(app.export_screenshot())

    lines = asyncio.run(go())
    text = "\n".join(lines)
    assert "2 runs side by side · curves by step" in text
    assert f"{SLOW} loss" in text and f"{FAST} eval loss" in text  # the legend: a series per run
    lr = next(line for line in lines if "learning_rate" in line)
    assert "0.001" in lr and "0.01" in lr
    assert "no eval of two of these runs yet" in text and "b Align by" in text
