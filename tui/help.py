"""The help screen: every key binding of the wizard and of the current step, with what it does."""

from __future__ import annotations

from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import VerticalScroll
from textual.screen import ModalScreen
from textual.widgets import Static

from core.i18n import _


class HelpScreen(ModalScreen[None]):
    DEFAULT_CSS = """
    HelpScreen {
        align: center middle;
    }
    HelpScreen > VerticalScroll {
        width: 76;
        max-width: 100%;
        height: auto;
        max-height: 90%;
        border: round $primary;
        background: $surface;
        padding: 0 1;
    }
    """
    BINDINGS = [
        Binding("escape", "dismiss", _("Close"), id="help.close"),
        Binding("f1", "dismiss", _("Close"), show=False, id="help.close_f1"),
        Binding("q", "dismiss", _("Close"), show=False, id="help.close_q"),
    ]

    def __init__(self, sections: list[tuple[str, list[tuple[str, str]]]]) -> None:
        super().__init__()
        self.sections = sections

    def compose(self) -> ComposeResult:
        lines: list[str] = ["[b]" + _("devtune — keys") + "[/b]", ""]
        for title, rows in self.sections:
            if not rows:
                continue
            lines.append(f"[b $accent]{title}[/]")
            lines += [f"  [b]{key:<14}[/b] {desc}" for key, desc in rows]
            lines.append("")
        lines.append(_("The mouse works too: click a step in the top bar to go there."))
        lines.append(_("Ctrl+P opens the command palette: every action is there.  Esc closes this."))
        with VerticalScroll():
            yield Static("\n".join(lines), id="help-text")


def binding_rows(bindings: list[Binding]) -> list[tuple[str, str]]:
    rows = []
    seen = set()
    for b in bindings:
        if not b.description or b.action in seen:
            continue
        seen.add(b.action)
        rows.append((b.key_display or b.key, b.description))
    return rows
