"""What the Data step found in the file it opened (core.data.opened): a chat export's detection ("chat export
(`TIME NAME` header lines): 2 conversations, 1 agent (售后-小林), 2 customers") with a form to correct who answers,
or a workbook to convert. The choice becomes the request the CLI makes with `--agent` / `--customer`; the step
runs the convert preview with it."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from textual.app import ComposeResult
from textual.containers import Vertical
from textual.message import Message
from textual.widgets import Button, Static

from core.i18n import _
from screens.base import Job
from tui.widgets.background import BackgroundWork
from tui.widgets.terms import with_terms


class OpenedNote(BackgroundWork, Vertical):
    """Under the file's facts: what detection said, and "Speaker roles" for a chat export."""

    @dataclass
    class RolesChosen(Message):
        """The person said who answers: convert with exactly these (agents, customers)."""

        agents: tuple[str, ...]
        customers: tuple[str, ...]

    @dataclass
    class Detected(Message):
        """The open file was found to be a chat export or a workbook (`opened`: core.data.opened.Opened)."""

        opened: object

    def __init__(self, *args, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        self.opened = None  # core.data.opened.Opened of the open file, once detected
        self.line = ""  # what the note says of it
        self.path: Path | None = None

    def compose(self) -> ComposeResult:
        yield Static("", id="data-detected", markup=False)
        yield Button(_("Speaker roles… (a)"), id="data-roles")

    def on_mount(self) -> None:
        self.show(None)

    def detect(self, path: Path) -> None:
        """Read what `path` is, off the event loop (a chat export is read whole to find its speakers)."""
        self.path = path
        self.show(None)
        self.run_background(self._detect, path, group="data-detect", description=_("Reading the file's speakers"),
                            done=lambda found: self._detected(path, found))

    @staticmethod
    def _detect(job: Job, path: Path):
        from core.data.opened import detect_opened

        return detect_opened(path)

    def _detected(self, path: Path, opened) -> None:
        if path != self.path:
            return
        self.show(opened)
        if opened is not None:
            self.post_message(self.Detected(opened))

    def show(self, opened, line: str | None = None) -> None:
        """Show `opened` (None: nothing to say); `line` replaces its detection line (after a conversion with
        the person's roles, the convert report's own)."""
        from core.data.opened import TRANSCRIPT

        self.opened = opened
        self.display = opened is not None
        if opened is None:
            return
        self.line = line or opened.line
        self.query_one("#data-detected", Static).update(with_terms(_("detected: {summary}", summary=self.line)))
        self.query_one("#data-roles", Button).display = opened.kind == TRANSCRIPT and bool(opened.speakers)

    def ask_roles(self) -> bool:
        """Open the speakers' form; False when the open file is no chat export."""
        from core.data.opened import TRANSCRIPT
        from tui.widgets.speaker_roles import SpeakerRolesScreen

        opened = self.opened
        if opened is None or opened.kind != TRANSCRIPT or not opened.speakers:
            return False
        self.app.push_screen(SpeakerRolesScreen(self.line, opened.speakers), self._chosen)
        return True

    def _chosen(self, agents: list[str] | None) -> None:
        from core.data.opened import roles_request

        if agents is None or self.opened is None:
            return
        self.post_message(self.RolesChosen(*roles_request([s.name for s in self.opened.speakers], agents)))

    def on_button_pressed(self, event: Button.Pressed) -> None:
        if event.button.id == "data-roles":
            event.stop()
            self.ask_roles()
