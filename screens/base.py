"""StepScreen: what every step screen shares — the stepper, a title line that says what the step
needs, a footer with the keys, the workspace and state — and the one way to work in the background.

Background work: `run_background(fn, *args, ...)` runs `fn(job, *args)` off the event loop (a thread, or
the loop itself for an `async def`), and what it produces comes back as a Message handled here, on the
event loop: `progress(value)` for each `job.report(value)`, `done(result)` when it returns. A devtune
error it raises (core/errors.py's DevtuneError, or a screen's own UserError: a problem the person can fix,
saying which file or field and what to do) lands in the step's
error box and marks the step; any other exception is shown as "<what> failed: <kind>: <error>" — never a
crash. A function in the background never touches a widget: it gets plain values and returns plain values.

Polling: `poll(fetch, *args, every=...)` calls `fetch(job, *args)` at a human rate (about once a second,
never faster than HUMAN_RATE) and hands each value to `each(value)` on the event loop, until `until(value)`
holds; `job.report_soon(item)` batches fast output (log lines, streamed text) to at most 4 updates a second.

Keys: one key map for the whole wizard (`STEP_KEYS`): the same key does the same kind of thing on every
step. `step_binding(...)` makes a step's binding for one of those kinds.
"""

from __future__ import annotations

import inspect
import threading
import time
from dataclasses import dataclass
from typing import Any, Callable

from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Vertical
from textual.message import Message
from textual.screen import Screen
from textual.widgets import Footer, Static
from textual.worker import Worker, WorkerState, get_current_worker

from core.errors import BadInput, DevtuneError
from core.i18n import _
from tui.widgets.step_guide import StepGuide
from tui.widgets.stepper import Stepper

HUMAN_RATE = 0.25  # seconds: fast output reaches the screen at most 4 times a second

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


class Job:
    """What a function in the background gets: report progress, see whether it was cancelled, wait."""

    def __init__(self, screen: StepScreen, description: str) -> None:
        self.screen = screen
        self.description = description
        self.worker: Worker | None = None
        self.on_progress: Callable[[Any], None] | None = None
        self.on_done: Callable[[Any], None] | None = None
        self.on_failed: Callable[[DevtuneError], None] | None = None
        self._batch: list = []
        self._batch_sent = 0.0
        self._lock = threading.Lock()

    @property
    def cancelled(self) -> bool:
        return self.worker is not None and self.worker.is_cancelled

    def report(self, value: Any) -> None:
        """Hand `value` to the screen's progress callback (on the event loop). Safe from any thread."""
        self.screen.post_message(StepScreen.WorkProgress(self, value))

    def report_soon(self, item: Any) -> None:
        """Queue `item`; the queue goes to the progress callback as a list, at most every HUMAN_RATE s."""
        with self._lock:
            self._batch.append(item)
            due = time.monotonic() - self._batch_sent >= HUMAN_RATE
        if due:
            self.flush()

    def flush(self) -> None:
        with self._lock:
            batch, self._batch = self._batch, []
            self._batch_sent = time.monotonic()
        if batch:
            self.report(batch)

    def wait(self, seconds: float) -> bool:
        """Sleep up to `seconds` in a thread; False as soon as the job is cancelled."""
        deadline = time.monotonic() + seconds
        while not self.cancelled:
            left = deadline - time.monotonic()
            if left <= 0:
                return True
            time.sleep(min(0.1, left))
        return False


class StepScreen(Screen):
    STEP_ID: str = ""
    INTRO: str = ""  # what the step needs and what to do, shown under the stepper

    @dataclass
    class WorkProgress(Message):
        job: Job
        value: Any

    @dataclass
    class WorkDone(Message):
        job: Job
        result: Any

    @dataclass
    class WorkFailed(Message):
        job: Job
        error: DevtuneError

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

    # ---- background work -----------------------------------------------------------------------
    def run_background(self, fn: Callable, *args, group: str, description: str,
                       done: Callable[[Any], None] | None = None, progress: Callable[[Any], None] | None = None,
                       failed: Callable[[DevtuneError], None] | None = None, exclusive: bool = True) -> Worker:
        """Run `fn(job, *args)` off the event loop (an `async def` runs as an async worker on it).

        `done(result)`, `progress(value)` and `failed(user_error)` are called on the event loop, and only
        while the job is current: a job replaced by a newer one of its `group` (exclusive) is cancelled and
        its late messages are dropped. A DevtuneError (a UserError, or any of core's) is shown in the error box
        and marks the step after
        `failed`; other exceptions are shown by `on_worker_state_changed`."""
        job = Job(self, description)
        job.on_done, job.on_progress, job.on_failed = done, progress, failed

        if inspect.iscoroutinefunction(fn):
            async def work():
                job.worker = get_current_worker()
                try:
                    result = await fn(job, *args)
                except DevtuneError as exc:
                    job.flush()
                    self.post_message(self.WorkFailed(job, exc))
                    return None
                job.flush()
                self.post_message(self.WorkDone(job, result))
                return result

            return self.run_worker(work(), group=group, description=description, exclusive=exclusive,
                                   exit_on_error=False)

        def work_in_thread():
            job.worker = get_current_worker()
            try:
                result = fn(job, *args)
            except DevtuneError as exc:
                job.flush()
                self.post_message(self.WorkFailed(job, exc))
                return None
            job.flush()
            self.post_message(self.WorkDone(job, result))
            return result

        return self.run_worker(work_in_thread, thread=True, group=group, description=description,
                               exclusive=exclusive, exit_on_error=False)

    def poll(self, fetch: Callable, *args, every: float | Callable[[Any], float], group: str, description: str,
             each: Callable[[Any], None], until: Callable[[Any], bool] | None = None,
             then: Callable[[Any], None] | None = None) -> Worker:
        """Call `fetch(job, *args)` in a thread, then every `every` seconds (or `every(value)`: slower for a
        finished run), handing each value to `each` on the event loop; stop when `until(value)` holds
        (`then(value)` follows on the event loop) or the job is cancelled. `until` and `every` run in the
        thread: they look at the value only."""

        def loop(job: Job, *fetch_args):
            while not job.cancelled:
                value = fetch(job, *fetch_args)
                job.flush()
                job.report(value)
                if until is not None and until(value):
                    return value
                if not job.wait(max(HUMAN_RATE, every(value) if callable(every) else every)):
                    break
            return None

        def finished(value) -> None:
            if value is not None and then is not None:
                then(value)

        return self.run_background(loop, *args, group=group, description=description, progress=each,
                                   done=finished)

    @staticmethod
    def _current(job: Job) -> bool:
        return job.worker is not None and not job.worker.is_cancelled

    def on_step_screen_work_progress(self, message: WorkProgress) -> None:
        message.stop()
        if self._current(message.job) and message.job.on_progress is not None:
            message.job.on_progress(message.value)

    def on_step_screen_work_done(self, message: WorkDone) -> None:
        message.stop()
        if self._current(message.job) and message.job.on_done is not None:
            message.job.on_done(message.result)

    def on_step_screen_work_failed(self, message: WorkFailed) -> None:
        message.stop()
        if not self._current(message.job):
            return
        if message.job.on_failed is not None:
            message.job.on_failed(message.error)
        text = str(message.error)
        self.show_error(text)
        self.set_status("attention", text.splitlines()[0][:120] if text else message.job.description)

    def on_worker_state_changed(self, event: Worker.StateChanged) -> None:
        if event.state == WorkerState.ERROR:
            error = event.worker.error
            what = event.worker.description or event.worker.name or _("background work")
            self.show_error(_("{what} failed: {kind}: {error}", what=what, kind=type(error).__name__, error=error))
            self.app.notify(_("{what} failed: {error}", what=what, error=error), severity="error", timeout=8)

