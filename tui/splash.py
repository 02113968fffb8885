"""The wizard's first frame: the step bar with each step's state and the step being opened.

It is painted before the heavier parts load (the full state model, the step's screen), so the person
sees where they stand at once, even on a slow machine or link; the step replaces it a moment later.
"""

from __future__ import annotations

from textual.app import ComposeResult
from textual.screen import Screen
from textual.widgets import Footer, Static

from core.i18n import _
from tui.widgets.step_guide import StepGuide
from tui.widgets.stepper import Stepper


class SplashScreen(Screen):

    def __init__(self, step_id: str | None) -> None:
        super().__init__()
        self.step_id = step_id

    def compose(self) -> ComposeResult:
        step = self.app.get_step(self.step_id) if self.step_id else None
        yield Stepper(self.step_id or "", id="stepper")
        if step is not None:
            yield StepGuide(step.id, id="step-guide")
            yield Static(_("opening {title}: {blurb}", title=step.title, blurb=step.blurb), id="splash-note")
        yield Footer()
