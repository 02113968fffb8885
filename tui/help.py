"""The help screen: every key binding of the wizard and of the current step, with what it does."""

from __future__ import annotations

import re

from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import VerticalScroll
from textual.keys import format_key
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
        lines.append(_("Esc closes this."))
        with VerticalScroll():
            yield Static("\n".join(lines), id="help-text")


def key_label(binding: Binding) -> str:
    """How a key is written in the footer and in F1, one style for every key: F1, F5, ^r, ^q, ], l."""
    if binding.key_display:
        return binding.key_display
    modifiers, key = binding.parse_key()
    key = format_key(key)
    if re.fullmatch(r"f\d{1,2}", key):
        key = key.upper()
    if "ctrl" in modifiers:
        modifiers.remove("ctrl")
        key = f"^{key}"
    return "+".join([*modifiers, key])


def binding_rows(bindings: list[Binding]) -> list[tuple[str, str]]:
    """(keys, description) per action shown in the footer: an action on two keys (F5 and l) is one row,
    "F5 l". A hidden binding is listed only as another key of a shown one (the help lists each key once:
    the step numbers 1-6 are one row of their own, not six)."""
    shown = {b.action for b in bindings if b.show and b.description}
    keys: dict[str, list[str]] = {}
    described: dict[str, str] = {}
    for b in sorted(bindings, key=lambda b: not b.show):  # a shown binding's key and words come first
        if not b.description or b.action not in shown:
            continue
        described.setdefault(b.action, b.description)
        label = key_label(b)
        if label not in keys.setdefault(b.action, []):
            keys[b.action].append(label)
    return [(" ".join(keys[action]), description) for action, description in described.items()]


def _literal(text: str) -> str:
    """`text` shown as it is in markup: the `[` key is a key, not the start of a tag."""
    return text.replace("[", "\\[")
