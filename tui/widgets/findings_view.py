"""FindingsView: a short list of checks' findings (error / warning / info), each with its fix.

Fed (severity, message, fix) tuples; errors first, as the caller orders them.
"""

from __future__ import annotations

from textual.content import Content
from textual.widgets import Static

from tui.widgets import status_marks



class FindingsView(Static):
    # styled in tui/styles/config.tcss (the one step that shows it)

    def __init__(self, **kwargs) -> None:
        super().__init__("", **kwargs)
        self.items: list[tuple[str, str, str | None]] = []

    def show(self, items: list[tuple[str, str, str | None]], *, empty: str = "") -> None:
        self.items = list(items)
        self.set_class(any(s == "error" for s, _, _ in items), "-errors")
        if not items:
            self.update(Content.styled(empty, "$text-muted"))
            return
        lines: list[Content] = []
        for severity, message, fix in items:
            level = severity if severity in ("error", "warning") else "info"
            text_style = "$text" if level != "info" else "$text-muted"
            mark = Content.styled(status_marks.mark(level) + " ", status_marks.style(level, bold=level != "info"))
            lines.append(mark + Content.styled(message, text_style))
            if fix:
                lines.append(Content.styled(f"  → {fix}", "$text-muted italic"))
        self.update(Content("\n").join(lines))
