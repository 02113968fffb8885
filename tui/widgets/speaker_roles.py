"""SpeakerRolesScreen: a chat export's speakers, each ticked when it answers (an agent); dismisses with the names
ticked, or None when cancelled. Given what detection decided (core.data.opened.SpeakerRole); it only collects the
choice."""

from __future__ import annotations

from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Horizontal, Vertical
from textual.content import Content
from textual.screen import ModalScreen
from textual.widgets import Button, SelectionList, Static
from textual.widgets.selection_list import Selection

from core.i18n import _
from tui.widgets.terms import with_terms


class SpeakerRolesScreen(ModalScreen[list[str] | None]):
    DEFAULT_CSS = """
    SpeakerRolesScreen {
        align: center middle;
    }
    SpeakerRolesScreen > Vertical {
        width: 84;
        max-width: 100%;
        height: auto;
        max-height: 90%;
        border: round $accent;
        background: $surface;
        padding: 1 2;
    }
    SpeakerRolesScreen #roles-detected {
        color: $text-muted;
        margin-bottom: 1;
    }
    SpeakerRolesScreen SelectionList {
        height: auto;
        max-height: 16;
    }
    SpeakerRolesScreen .roles--buttons {
        height: auto;
        margin-top: 1;
        align-horizontal: right;
    }
    SpeakerRolesScreen Button {
        margin-left: 2;
    }
    """
    BINDINGS = [Binding("escape", "cancel", _("Cancel"), id="roles.cancel")]

    def __init__(self, detected: str, speakers: list) -> None:
        super().__init__()
        self.detected = detected
        self.speakers = speakers  # core.data.opened.SpeakerRole, in the order detection listed them

    def compose(self) -> ComposeResult:
        with Vertical():
            yield Static(_("Who answers? Tick the agents (space); the speakers left unticked are customers, who ask."),
                         id="roles-question")
            yield Static(with_terms(_("detected: {summary}", summary=self.detected)), id="roles-detected")
            yield SelectionList[str](*(Selection(self._label(s), s.name, s.agent) for s in self.speakers),
                                     id="roles-list")
            with Horizontal(classes="roles--buttons"):
                yield Button(_("Cancel"), id="roles-cancel")
                yield Button(_("Convert with these roles"), variant="primary", id="roles-ok")

    @staticmethod
    def _label(speaker) -> Content:
        said = _("{name}  (found to answer: {why})", name=speaker.name, why=speaker.why) if speaker.agent else _(
            "{name}  (found to ask: {why})", name=speaker.name, why=speaker.why)
        return Content(said)  # names are text, never markup

    def on_mount(self) -> None:
        self.query_one("#roles-list", SelectionList).focus()

    def on_button_pressed(self, event: Button.Pressed) -> None:
        event.stop()
        if event.button.id == "roles-ok":
            self.dismiss(list(self.query_one("#roles-list", SelectionList).selected))
        else:
            self.dismiss(None)

    def action_cancel(self) -> None:
        self.dismiss(None)
