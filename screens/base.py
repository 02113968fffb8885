"""StepScreen: what every step screen shares — the stepper, a title line that says what the step
needs, a footer with the keys, the workspace and state — and the background API (tui/widgets/background.py's
BackgroundWork, which any widget of a step can use as well).

Background work: `run_background(fn, *args, ...)` runs `fn(job, *args)` off the event loop, and what it hands
back comes home on the event loop: `done(result)` (a dataclass), `progress(item)` for each typed progress item
(`job.report(item)`, coalesced by its kind's declared rule), `failed(error)` for a devtune error. A devtune error
(core/errors.py's DevtuneError, or a screen's own UserError: a problem the person can fix, saying which file or
field and what to do) raised by the step's work or by any of its widgets' lands in the step's error box and
marks the step; any other exception is shown as "<what> failed: <kind>: <error>" — never a crash. A function in
the background never touches a widget: it gets plain values and returns plain values. `poll(fetch, ...)` calls
`fetch` at a human rate (never faster than HUMAN_RATE) until `until(value)` holds.

Keys: one key map for the whole wizard (`STEP_KEYS`): the same key does the same kind of thing on every
step. `step_binding(...)` makes a step's binding for one of those kinds.
"""

from __future__ import annotations

from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Vertical
from textual.screen import Screen
from textual.widgets import Static
from textual.worker import Worker

from core.errors import BadInput, DevtuneError
from core.i18n import _
from tui.widgets.background import HUMAN_RATE, BackgroundWork, Coalesce, Job, Progress
from tui.widgets.step_footer import StepFooter
from tui.widgets.step_guide import StepGuide
from tui.widgets.stepper import Stepper
from tui.widgets.terms import with_terms

__all__ = ["HUMAN_RATE", "STEP_KEYS", "Coalesce", "Job", "Progress", "StepScreen", "UserError", "key_map_rows",
           "step_binding"]

# The wizard's key map: kind -> (key, what that kind of key does on every step).
STEP_KEYS: dict[str, tuple[str, str]] = {
    "run": ("f5", "F5"),
    "check": ("f6", "F6"),
    "stop": ("f8", "F8"),
    "refresh": ("ctrl+r", "^r"),
    "save": ("ctrl+s", "^s"),
}


def key_map_rows() -> list[tuple[str, str]]:
    """(key, meaning) of each kind of step key, for the help screen."""
    meaning = {
        "run": _("main action (lint, checks, save, train, merge, serve)"),
        "check": _("check (re-check, LLaMA-Factory, diagnose, merge, eval)"),
        "stop": _("stop what the step started (generating, a run, a server)"),
        "refresh": _("reload from disk (files, config, runs, servers)"),
        "save": _("save (the config, the doctor's report)"),
    }
    return [(display, meaning[kind]) for kind, (_key, display) in STEP_KEYS.items()]


def step_binding(step: str, kind: str, action: str, description: str, *, tooltip: str | None = None,
                 show: bool = True, alias: str = "") -> Binding:
    """A step's binding of one kind of the wizard's key map; its id is `<step>.<kind>[-alias]`."""
    key, display = STEP_KEYS[kind]
    return Binding(key, action, description, key_display=display, show=show, tooltip=tooltip,
                   id=f"{step}.{kind}" + (f"-{alias}" if alias else ""))


class UserError(BadInput):
    """A problem the person can fix that a screen finds itself (a form field); the message names the file or
    field and says what to do. Core's errors need no wrapping: any DevtuneError (core/errors.py) raised in
    the background lands in the step's error box the same way."""


class StepScreen(BackgroundWork, Screen):
    STEP_ID: str = ""
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
            yield Static(with_terms(self.INTRO), classes="step-intro", id="step-intro")  # `terms` styled
        yield Static("", classes="step-error", id="step-error")
        with Vertical(id="step-body"):
            yield from self.compose_body()
        yield StepFooter()  # the keys that fit beside ^p, never one run under it

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
        box.update(with_terms(message))  # commands in backticks drawn as terms; `[rank0]` is never markup
        box.add_class("-visible")

    def clear_error(self) -> None:
        self.query_one("#step-error", Static).remove_class("-visible")

    # ---- background work (BackgroundWork's errors, of this screen's work or any of its widgets') ----------
    def show_background_error(self, failed: BackgroundWork.Failed) -> bool:
        error = failed.error
        if isinstance(error, DevtuneError):
            text = str(error)
            self.show_error(text)
            self.set_status("attention", text.splitlines()[0][:120] if text else failed.what)
            return True
        what = failed.what or _("background work")
        self.show_error(_("{what} failed: {kind}: {error}", what=what, kind=type(error).__name__, error=error))
        self.app.notify(_("{what} failed: {error}", what=what, error=error), severity="error", timeout=8)
        return True

    def on_worker_state_changed(self, event: Worker.StateChanged) -> None:
        """A step's own reaction to a worker's end (its error is shown by `show_background_error`)."""
