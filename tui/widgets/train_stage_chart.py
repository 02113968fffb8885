"""StageChart: a preference run's own metrics over steps (DPO, ORPO, SimPO, KTO), beside the loss chart.

TRL's trainers print rewards/chosen, rewards/rejected, rewards/margins and rewards/accuracies (KTO: and kl) in
their loss dicts (core.train.metrics.STAGE_METRICS, read from stdout): rewards, margin and KL share the left axis,
the accuracy (0 to 100 %) has the right one. What a healthy run looks like: chosen above rejected, the
margin growing, the accuracy rising towards 100 %. The drawing reuses the loss chart's raster helpers
(braille cells, one range per pixel column); a preference run logs a few hundred points, not 100k.
"""

from __future__ import annotations

from rich.segment import Segment
from textual.strip import Strip
from textual.widget import Widget

from core.i18n import _
from tui.widgets.chart_raster import _BRAILLE, ChartRaster, Points, _fmt, _x_axis, column_ranges

# drawing priority, lowest first: (STAGE_METRICS key, layer)
LEFT = (("kl", "kl"), ("rewards/rejected", "rejected"), ("rewards/chosen", "chosen"), ("rewards/margins", "margin"))
RIGHT = ("rewards/accuracies", "accuracy")
LAYERS = ("accuracy", "kl", "rejected", "chosen", "margin")


def _names() -> dict[str, str]:
    return {"chosen": _("chosen"), "rejected": _("rejected"), "margin": _("margin"), "accuracy": _("accuracy"),
            "kl": _("KL")}


def stage_rows(series: dict[str, Points], width: int, height: int,
               latest: dict[str, float] | None = None) -> list[list[tuple[str, str]]]:
    """The chart as rows of (text, layer) runs, as ChartRaster draws the loss chart's. `latest`: the values
    the legend says (the run's snapshot, as `devtune monitor` prints them); by default each series' last."""
    if width < 24 or height < 5:
        return [[(_("enlarge the chart")[:width], "axis")]] + [[("", "axis")] for _ in range(max(0, height - 1))]
    present = {key: pts for key, pts in series.items() if pts[0]}
    if not present:
        return [[("", "axis")] for _ in range(height)]
    left, right = 8, 9 if RIGHT[0] in present else 0  # as the loss chart's: their steps line up
    pw, ph = width - left - right, height - 2
    px, py = pw * 2, ph * 4
    x0 = min(pts[0][0] for pts in present.values())
    x1 = max(pts[0][-1] for pts in present.values())
    ranges = {layer: column_ranges(*present[key], x0, x1, px) for key, layer in LEFT if key in present}
    bounds = [(r[0], r[1]) for rs in ranges.values() for r in rs if r is not None]
    lo, hi = (min(b[0] for b in bounds), max(b[1] for b in bounds)) if bounds else (0.0, 1.0)
    pad = (hi - lo) * 0.05 if hi != lo else (abs(hi) * 0.05 or 1.0)
    lo, hi = lo - pad, hi + pad  # rewards go below 0: no floor at 0 as the loss has
    cells = {name: bytearray(pw * ph) for name in LAYERS}
    for layer, rs in ranges.items():
        ChartRaster._plot(cells[layer], rs, lo, hi, pw, ph, py)
    if right:
        acc = column_ranges(*present[RIGHT[0]], x0, x1, px)
        ChartRaster._plot(cells["accuracy"], acc, 0.0, 1.0, pw, ph, py)
    zero = None
    if lo < 0 < hi:  # where rewards cross 0 (chosen above it, rejected below it, in a run that learns)
        zero = min(ph - 1, int((hi - 0.0) / (hi - lo) * (ph - 1) + 0.5))
    body = _compose(cells, pw, ph)
    rows = [_legend(present, width, latest or {})]
    for r in range(ph):
        label = _fmt(hi - (hi - lo) * r / max(1, ph - 1)) if r in (0, ph // 2, ph - 1) else ""
        if r == zero:
            label = "0"
        row = [(label.rjust(left - 1)[: left - 1] + ("┼" if r == zero else "┤"), "axis")] + body[r]
        if right:
            row.append(("├" + ({0: "100%", ph - 1: "0%"}.get(r, "")), "accuracy"))
        rows.append(row)
    rows.append([(_x_axis(x0, x1, left, pw), "axis")])
    return rows


def _compose(cells: dict[str, bytearray], pw: int, ph: int) -> list[list[tuple[str, str]]]:
    rows = []
    for r in range(ph):
        runs: list[tuple[str, str]] = []
        for c in range(pw):
            i = r * pw + c
            bits, owner = 0, "axis"
            for name in LAYERS:
                if cells[name][i]:
                    bits |= cells[name][i]
                    owner = name
            ch = _BRAILLE[bits]
            if runs and runs[-1][1] == owner:
                runs[-1] = (runs[-1][0] + ch, owner)
            else:
                runs.append((ch, owner))
        rows.append(runs)
    return rows


def _legend(present: dict[str, Points], width: int, latest: dict[str, float]) -> list[tuple[str, str]]:
    names = _names()
    parts = [(_("rewards:") + " ", "axis")]
    for key, layer in (("rewards/chosen", "chosen"), ("rewards/rejected", "rejected"), ("rewards/margins", "margin"),
                       ("kl", "kl"), RIGHT):
        if key in present:
            value = latest.get(key, present[key][1][-1])
            text = f"{value:.0%}" if layer == "accuracy" else f"{value:.3g}"
            parts.append((f"━ {names[layer]} {text} ", layer))
    if sum(len(text) for text, _layer in parts) > width:
        parts = parts[1:]  # the series' names say enough
    out, used = [], 0
    for text, layer in parts:
        if used + len(text) > width:
            break
        out.append((text, layer))
        used += len(text)
    return out


class StageChart(Widget):
    """Rewards chosen / rejected, margin and accuracy over steps; hidden until the run logs them."""

    DEFAULT_CSS = """
    StageChart {
        height: 1fr;
        min-height: 7;
        background: $surface;
        display: none;
    }
    StageChart.-visible { display: block; }
    StageChart > .stage-chart--axis { color: $text-muted; }
    StageChart > .stage-chart--chosen { color: $success; text-style: bold; }
    StageChart > .stage-chart--rejected { color: $error; }
    StageChart > .stage-chart--margin { color: $primary; }
    StageChart > .stage-chart--accuracy { color: $accent; }
    StageChart > .stage-chart--kl { color: $warning; }
    """
    COMPONENT_CLASSES = {f"stage-chart--{name}" for name in ("axis", *LAYERS)}

    def __init__(self, *, name: str | None = None, id: str | None = None, classes: str | None = None) -> None:
        super().__init__(name=name, id=id, classes=classes)
        self.series: dict[str, Points] = {}
        self.latest: dict[str, float] = {}  # what the legend says: the run snapshot's stage metrics

    def set_series(self, series: dict[str, Points], latest: dict[str, float] | None = None) -> None:
        """STAGE_METRICS key -> (steps, values), copied (the caller's thread keeps appending to its lists);
        `latest`: the run snapshot's latest values, for the legend (core.train.snapshot.RunSnapshot)."""
        copied = {}
        for key, (xs, ys) in series.items():
            xs, ys = list(xs), list(ys)
            n = min(len(xs), len(ys))
            copied[key] = (xs[:n], ys[:n])
        self.series = copied
        self.latest = dict(latest or {})
        self.set_class(any(pts[0] for pts in copied.values()), "-visible")
        self.refresh()

    def clear(self) -> None:
        self.set_series({})

    def render_line(self, y: int) -> Strip:
        rows = self._rows()
        if y >= len(rows):
            return Strip.blank(self.size.width, self.rich_style)
        base = self.rich_style
        segments = [Segment(text, base + self.get_component_rich_style(f"stage-chart--{layer}", partial=True))
                    for text, layer in rows[y]]
        used = sum(len(text) for text, _layer in rows[y])
        if used < self.size.width:
            segments.append(Segment(" " * (self.size.width - used), base))
        return Strip(segments).crop(0, self.size.width)

    def _rows(self) -> list[list[tuple[str, str]]]:
        key = (self.size.width, self.size.height, id(self.series))
        if getattr(self, "_cache_key", None) != key:
            self._cache_key = key
            self._cache = stage_rows(self.series, self.size.width, self.size.height, self.latest)
        return self._cache


__all__ = ["StageChart", "stage_rows"]
