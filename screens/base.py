"""StepScreen: what every step screen shares — the stepper, a title line that says what the step
needs, a footer with the keys, the workspace and state, and one handler that turns worker errors
into a visible error instead of a crash."""

from __future__ import annotations

from textual.app import ComposeResult
from textual.containers import Vertical
from textual.screen import Screen
from textual.widgets import Footer, Static
from textual.worker import Worker, WorkerState

from core.i18n import _
from tui.widgets.step_guide import StepGuide
from tui.widgets.stepper import Stepper


class StepScreen(Screen):
    STEP_ID: str = ""
    DEFAULT_CSS = """
    StepScreen .step-intro {
        height: auto;
        padding: 0 1;
        color: $text-muted;
    }
    StepScreen .step-error {
        height: auto;
        max-height: 8;
        padding: 0 1;
        background: $error 20%;
        color: $text;
        display: none;
    }
    StepScreen .step-error.-visible {
        display: block;
    }
    StepScreen.-short .step-intro {
        display: none;
    }
    """

    INTRO: str = ""  # what the step needs and what to do, shown under the stepper

    @property
    def ws(self):
        return self.app.ws

    @property
    def state(self):
        return self.app.state

    def compose(self) -> ComposeResult:
        yield Stepper(self.STEP_ID, id="stepper")
        yield StepGuide(self.STEP_ID, id="step-guide")
        if self.INTRO:
            yield Static(self.INTRO, classes="step-intro", id="step-intro")
        yield Static("", classes="step-error", id="step-error")
        with Vertical(id="step-body"):
            yield from self.compose_body()
        yield Footer()

    def compose_body(self) -> ComposeResult:
        yield from ()

    def on_screen_resume(self) -> None:
        self.query_one(Stepper).refresh_steps()
        self.query_one(StepGuide).refresh_guide()

    def on_resize(self, event) -> None:
        """On a short terminal (80x24 over SSH) the intro line gives its room to the step itself."""
        self.set_class(event.size.height < 30, "-short")
        self.set_class(event.size.width < 100, "-narrow")

    def set_status(self, status: str, summary: str = "") -> None:
        """Record this step's state (not_started / attention / done) and redraw the stepper."""
        self.app.set_step_status(self.STEP_ID, status, summary)

    def show_error(self, message: str) -> None:
        box = self.query_one("#step-error", Static)
        box.update(message)
        box.add_class("-visible")

    def clear_error(self) -> None:
        self.query_one("#step-error", Static).remove_class("-visible")

    def on_worker_state_changed(self, event: Worker.StateChanged) -> None:
        if event.state == WorkerState.ERROR:
            error = event.worker.error
            what = event.worker.description or event.worker.name or _("background work")
            self.show_error(_("{what} failed: {kind}: {error}", what=what, kind=type(error).__name__, error=error))
            self.app.notify(_("{what} failed: {error}", what=what, error=error), severity="error", timeout=8)
