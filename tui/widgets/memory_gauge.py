"""MemoryGauge: the memory-fit verdict as a bar of what fills one device (weights, optimizer state,
activations, ...) against its capacity, with a legend and what to change when it does not fit.

Fed plain values by the screen (`show(...)`), so it draws any breakdown of bytes against a capacity.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from textual.content import Content
from textual.widgets import Static

from tui.widgets import status_marks

GIB = 1024 ** 3
BAR_WIDTH = 48
PART_STYLES = ("$primary", "$secondary", "$accent", "$warning", "$success", "$error", "$foreground",
               "$text-muted")
VERDICT_STYLES = {v: status_marks.style(v, bold=True) for v in ("fits", "tight", "does_not_fit", "unknown")}


@dataclass
class GaugeData:
    verdict: str  # fits | tight | does_not_fit | unknown
    headline: str  # e.g. "fits: 14.4 GiB of 192.0 GiB per device"
    parts: list[tuple[str, int]]  # (label, bytes)
    capacity: int | None
    advice: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)


def human_bytes(size: int) -> str:
    return f"{size / GIB:.1f} GiB" if size >= GIB else f"{size / 1024 ** 2:.0f} MiB"


class MemoryGauge(Static):
    # styled in tui/styles/config.tcss (the one step that shows it)

    def __init__(self, **kwargs) -> None:
        super().__init__("", **kwargs)
        self.data: GaugeData | None = None

    def show(self, data: GaugeData | None) -> None:
        self.data = data
        for verdict in VERDICT_STYLES:
            self.remove_class(f"-{verdict}")
        if data is None:
            self.update("")
            return
        self.add_class(f"-{data.verdict}")
        self.update(self.render_gauge(data))

    @staticmethod
    def render_gauge(data: GaugeData) -> Content:
        lines: list[Content] = [Content.styled(data.headline, VERDICT_STYLES.get(data.verdict, "bold"))]
        total = sum(b for _, b in data.parts)
        scale = max(total, data.capacity or 0, 1)
        bar: list[Content] = []
        used_cells = 0
        for i, (_, size) in enumerate(data.parts):
            cells = round(size / scale * BAR_WIDTH)
            if cells == 0 and size > 0 and size / scale > 0.004:
                cells = 1
            cells = min(cells, BAR_WIDTH - used_cells)
            used_cells += cells
            bar.append(Content.styled("█" * cells, PART_STYLES[i % len(PART_STYLES)]))
        if data.capacity:
            bar.append(Content.styled("░" * (BAR_WIDTH - used_cells), "$text-muted"))
        lines.append(Content("").join(bar))
        legend: list[Content] = []
        for i, (label, size) in enumerate(data.parts):
            legend.append(Content.styled("█ ", PART_STYLES[i % len(PART_STYLES)])
                          + Content(f"{label} {human_bytes(size)}  "))
        row: list[Content] = []
        width = 0
        for item in legend:
            if width + len(item.plain) > BAR_WIDTH + 12 and row:
                lines.append(Content("").join(row))
                row, width = [], 0
            row.append(item)
            width += len(item.plain)
        if row:
            lines.append(Content("").join(row))
        for line in data.advice:
            lines.append(Content.styled(f"→ {line}", "$warning"))
        for note in data.notes:
            lines.append(Content.styled(note, "$text-muted"))
        return Content("\n").join(lines)
