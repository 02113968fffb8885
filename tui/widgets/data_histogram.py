"""DataHistogram: horizontal bars of (low, high, count) bins, e.g. tokens per row, with the cutoff marked."""

from __future__ import annotations

from textual.content import Content
from textual.widgets import Static

BAR = 40


class DataHistogram(Static):
    DEFAULT_CSS = """
    DataHistogram {
        height: auto;
        padding: 0 1;
        border: round $panel-lighten-2;
        border-title-color: $text-muted;
    }
    """

    def show(self, bins: list, *, title: str = "", cutoff: int | None = None) -> None:
        self.border_title = title
        if not bins:
            self.update(Content.styled("—", "$text-muted"))
            return
        top = max(c for _lo, _hi, c in bins) or 1
        lines = []
        for lo, hi, count in bins:
            over = cutoff is not None and hi > cutoff
            bar = "█" * max(1 if count else 0, round(BAR * count / top))
            label = Content.styled(f"{lo:>7}-{hi:<7}", "$text-muted")
            lines.append(label + Content.styled(f"{bar:<{BAR}}", "$warning" if over else "$accent")
                         + Content(f" {count:,}"))
        self.update(Content("\n").join(lines))
