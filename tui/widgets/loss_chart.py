"""LossChart: training loss (raw and smoothed), eval loss and learning rate, drawn in braille cells.

It stays fast at 100k points: tui/widgets/chart_raster.py reduces each series to the chart's pixel
columns (min/max per column, so spikes stay visible) before drawing. plotext (textual-plotext) took
~35 ms for three 320-point series on this machine, over the 20 ms budget, hence our own raster.

The widget takes arrays of (step, value) through `set_data()` and redraws at most `max_fps` times a
second from a timer, never per point. Learning rate uses its own axis on the right; resumed runs show a
dotted line at the step they resumed from.
"""

from __future__ import annotations

from typing import Sequence

from rich.segment import Segment
from textual.strip import Strip
from textual.widget import Widget

from tui.widgets.chart_raster import LAYERS, BlockIndex, ChartData, ChartRaster, Points, column_ranges

INDEX_BLOCKS_PER_DRAW = 256  # 16k points indexed per redraw at most


class LossChart(Widget):
    """Loss / smoothed loss / eval loss / learning rate over steps; redraws at most `max_fps` per second."""

    DEFAULT_CSS = """
    LossChart {
        height: 1fr;
        min-height: 8;
        background: $surface;
    }
    LossChart > .loss-chart--axis { color: $text-muted; }
    LossChart > .loss-chart--raw { color: $primary 50%; }
    LossChart > .loss-chart--smooth { color: $primary; text-style: bold; }
    LossChart > .loss-chart--eval { color: $warning; }
    LossChart > .loss-chart--lr { color: $secondary; }
    LossChart > .loss-chart--resume { color: $accent; }
    """
    COMPONENT_CLASSES = {f"loss-chart--{name}" for name in ("axis", *LAYERS)}

    def __init__(self, *, max_fps: float = 4.0, name: str | None = None, id: str | None = None,
                 classes: str | None = None) -> None:
        super().__init__(name=name, id=id, classes=classes)
        self.max_fps = max_fps
        self.data = ChartData()
        self.draws = 0  # how many times the raster was rebuilt (tests, bench)
        self.empty_text: str | None = None  # what the chart says while it has no point
        self._dirty = False
        self._strips: list[Strip] | None = None
        self._built_for: tuple[int, int] = (0, 0)
        self._loss_index = BlockIndex()
        self._own: dict[str, tuple[list, list]] = {}

    def on_mount(self) -> None:
        self.set_interval(1 / self.max_fps, self._flush, name="loss-chart-redraw")

    def set_data(self, *, loss: Points | None = None, smoothed: Points | None = None,
                 eval_loss: Points | None = None, lr: Points | None = None,
                 resumes: Sequence[float] | None = None) -> None:
        """New values of the series (x and y sequences). Drawn on the next redraw tick, not now.

        The chart keeps its own lists: when the new series extend what it has (the usual case while a run
        trains), only the new points are appended, so an update costs O(new points) and allocates no big
        list; anything else (a resume that replaced steps) is copied whole. The caller may keep appending
        to its own lists, from another thread too.
        """
        given = {"loss": loss, "smoothed": smoothed, "eval_loss": eval_loss, "lr": lr}
        for name, points in given.items():
            if points is not None and not self._merge(name, points) and name == "loss":
                self._loss_index = BlockIndex()
        d = self.data
        self.data = ChartData(
            **{name: self._own[name] if name in self._own else getattr(d, name) for name in given},
            resumes=tuple(resumes) if resumes is not None else d.resumes,
        )
        self._dirty = True

    def clear(self) -> None:
        """Forget every series (another run is shown)."""
        self._own.clear()
        self._loss_index = BlockIndex()
        self.data = ChartData()
        self._dirty = True

    def _merge(self, name: str, points: Points) -> bool:
        """Bring our copy of a series up to date; True when only new points were appended."""
        xs, ys = points
        own = self._own.get(name)
        if own is not None:
            ox, oy = own
            n = len(ox)
            # the same objects at the ends and the middle: the caller appended (a cut makes new values there)
            if n and len(xs) >= n and len(ys) >= n and xs[n - 1] is ox[n - 1] and ys[n - 1] is oy[n - 1] \
                    and ys[0] is oy[0] and ys[n // 2] is oy[n // 2]:
                ox.extend(xs[n:])
                oy.extend(ys[n:])
                if len(ox) != len(oy):  # the caller's thread appended between our two reads
                    del ox[min(len(ox), len(oy)):], oy[min(len(ox), len(oy)):]
                return True
        self._own[name] = _copy(points)
        return False

    def _flush(self) -> None:
        if self._dirty:
            self._dirty = False
            self._strips = None
            self.refresh()

    def on_resize(self) -> None:
        self._strips = None

    def _build(self) -> list[Strip]:
        width, height = self.size.width, self.size.height
        self._loss_index.update(self.data.loss[1], max_blocks=INDEX_BLOCKS_PER_DRAW)
        if len(self._loss_index.mins) * BlockIndex.SIZE + BlockIndex.SIZE <= len(self.data.loss[1]):
            self._dirty = True  # more to index: the next redraw tick continues
        rows = ChartRaster(self.data, width, height, self._loss_index, self.empty_text).draw()
        base = self.rich_style
        styles = {name: base + self.get_component_rich_style(f"loss-chart--{name}", partial=True)
                  for name in ("axis", *LAYERS)}
        strips = []
        for row in rows:  # braille and box-drawing characters are one cell wide: no cell measuring needed
            segments = [Segment(text, styles.get(layer, base)) for text, layer in row]
            used = sum(len(text) for text, _layer in row)
            if used < width:
                segments.append(Segment(" " * (width - used), base))
            strips.append(Strip(segments, width) if used <= width else Strip(segments).crop(0, width))
        self.draws += 1
        self._built_for = (width, height)
        return strips

    def render_line(self, y: int) -> Strip:
        if self._strips is None or self._built_for != (self.size.width, self.size.height):
            self._strips = self._build()
        if y < len(self._strips):
            return self._strips[y]
        return Strip.blank(self.size.width, self.rich_style)


def _copy(points: Points) -> tuple[list, list]:
    """A copy of equal lengths, even when another thread appended or cut between the two copies."""
    xs, ys = list(points[0]), list(points[1])
    n = min(len(xs), len(ys))
    return (xs, ys) if len(xs) == len(ys) else (xs[:n], ys[:n])


__all__ = ["BlockIndex", "ChartData", "ChartRaster", "LossChart", "column_ranges"]
