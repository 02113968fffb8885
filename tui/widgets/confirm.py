"""ConfirmScreen: a yes/no question as a modal; dismisses with True or False."""

from __future__ import annotations

from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Horizontal, Vertical
from textual.screen import ModalScreen
from textual.widgets import Button, Static

from core.i18n import _


class ConfirmScreen(ModalScreen[bool]):
    DEFAULT_CSS = """
    ConfirmScreen {
        align: center middle;
    }
    ConfirmScreen > Vertical {
        width: 64;
        max-width: 100%;
        height: auto;
        border: round $warning;
        background: $surface;
        padding: 1 2;
    }
    ConfirmScreen .confirm--buttons {
        height: auto;
        margin-top: 1;
        align-horizontal: right;
    }
    ConfirmScreen Button {
        margin-left: 2;
    }
    """
    BINDINGS = [
        Binding("escape", "answer(False)", _("Cancel"), id="confirm.cancel"),
        Binding("y", "answer(True)", _("Yes"), id="confirm.yes"),
        Binding("n", "answer(False)", _("No"), id="confirm.no"),
    ]

    def __init__(self, question: str, *, yes: str | None = None, no: str | None = None) -> None:
        super().__init__()
        self.question = question
        self.yes_label = yes or _("Yes")
        self.no_label = no or _("No")

    def compose(self) -> ComposeResult:
        with Vertical():
            yield Static(self.question, id="confirm-question")
            with Horizontal(classes="confirm--buttons"):
                yield Button(self.no_label, id="confirm-no")
                yield Button(self.yes_label, variant="warning", id="confirm-yes")

    def on_mount(self) -> None:
        self.query_one("#confirm-no", Button).focus()

    def on_button_pressed(self, event: Button.Pressed) -> None:
        self.dismiss(event.button.id == "confirm-yes")

    def action_answer(self, answer: bool) -> None:
        self.dismiss(answer)
