"""The help screen: every key binding of the wizard and of the current step, with what it does."""

from __future__ import annotations

from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import VerticalScroll
from textual.screen import ModalScreen
from textual.widgets import Static

from core.i18n import _


class HelpScreen(ModalScreen[None]):
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
            lines += [f"  [b]{_literal(f'{key:<14}')}[/b] {_literal(desc)}" for key, desc in rows]
            lines.append("")
        lines.append(_("The mouse works too: click a step in the top bar to go there."))
        lines.append(_("Ctrl+P opens the command palette: every action is there.  Esc closes this."))
        with VerticalScroll():
            yield Static("\n".join(lines), id="help-text")


def binding_rows(bindings: list[Binding]) -> list[tuple[str, str]]:
    """(keys, description) per action: an action on two keys (F5 and l) is one row, "F5 l"."""
    keys: dict[str, list[str]] = {}
    described: dict[str, str] = {}
    for b in bindings:
        if not b.description:
            continue
        described.setdefault(b.action, b.description)
        shown = b.key_display or b.key
        if shown not in keys.setdefault(b.action, []):
            keys[b.action].append(shown)
    return [(" ".join(keys[action]), description) for action, description in described.items()]


def _literal(text: str) -> str:
    """`text` shown as it is in markup: the `[` key is a key, not the start of a tag."""
    return text.replace("[", "\\[")
