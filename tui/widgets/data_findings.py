"""DataFindings: lint findings as a list; choosing one asks to jump to its row (`JumpToLine`)."""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass

from textual.content import Content
from textual.message import Message
from textual.widgets import OptionList
from textual.widgets.option_list import Option

from core.i18n import _
from tui.widgets import status_marks

MAX_SHOWN = 2000


class DataFindings(OptionList):
    DEFAULT_CSS = """
    DataFindings {
        height: 1fr;
        border: round $panel-lighten-2;
        border-title-color: $text-muted;
        border-subtitle-color: $text-muted;
    }
    DataFindings:focus {
        border: round $accent;
    }
    """

    @dataclass
    class JumpToLine(Message):
        line: int

    def __init__(self, **kwargs) -> None:
        super().__init__(**kwargs)
        self.lines: list[int] = []

    def show(self, findings: list) -> None:
        self.clear_options()
        shown = findings[:MAX_SHOWN]
        self.lines = [f.line for f in shown]
        options = []
        for i, f in enumerate(shown):
            mark = Content.styled(f"{status_marks.mark(f.severity)} ",
                                  status_marks.style(f.severity, bold=f.severity != "info"))
            rule = Content.styled(f"{f.rule:<17} ", "$text-muted")
            fix = Content.styled(f"  [{f.fix}]" if f.fix != "none" else "", "$text-muted italic")
            options.append(Option(mark + rule + Content(f.message) + fix, id=f"finding-{i}"))
        self.add_options(options)
        counts = Counter(f.severity for f in findings)
        from core.data.wording import counted

        self.border_subtitle = " · ".join(counted(s, counts[s]) for s in ("error", "warning", "info"))
        if len(findings) > MAX_SHOWN:
            self.border_subtitle += " · " + _("first {n} shown", n=MAX_SHOWN)

    def on_option_list_option_selected(self, event: OptionList.OptionSelected) -> None:
        event.stop()
        if event.option_index < len(self.lines):
            self.post_message(self.JumpToLine(self.lines[event.option_index]))
