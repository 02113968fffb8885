"""The devtune wizard: one Textual mode per step, a stepper, help, the command palette, and the
workspace state restored when the same workspace is opened again.

The app is a viewer of the workspace: training, export and serving run in their own detached
processes, so quitting (or losing the SSH connection) stops none of them.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Callable, Iterable

from textual import events
from textual.app import App, SystemCommand
from textual.binding import Binding
from textual.screen import Screen

from core.i18n import _
from core.workspace.step_status import StatePeek, StepStatus, peek_state
from core.workspace.layout import Workspace
from screens import steps as step_registry

if TYPE_CHECKING:
    from core.workspace.state import WizardState

THEME_ALIASES = {"light": "textual-light", "dark": "textual-dark"}


class DevtuneApp(App[int]):
    TITLE = "devtune"
    CSS_PATH = "app.tcss"
    ENABLE_COMMAND_PALETTE = True
    BINDINGS = [
        Binding("f1", "help", _("Help"), id="app.help"),
        Binding("ctrl+q", "quit", _("Quit"), priority=True, id="app.quit"),
        Binding("right_square_bracket", "next_step", _("Next step"), key_display="]", id="app.next_step"),
        Binding("left_square_bracket", "prev_step", _("Previous step"), key_display="[", id="app.prev_step"),
        *[
            Binding(str(n), f"goto_step_number({n})", _("Go to step {n}", n=n), show=False, id=f"app.step_{n}")
            for n in range(1, 7)
        ],
        # Textual's own palette binding, with its footer label in the wizard's language
        Binding("ctrl+p", "command_palette", _("Palette"), show=False, priority=True,
                tooltip=_("Open the command palette: every action of this step"), id="app.palette"),
    ]

    def __init__(self, ws: Workspace, *, watch_terminal: bool = True, steps=None) -> None:
        super().__init__()
        # the steps this wizard shows and the screen of each (widgets read them here, not from screens/)
        self.steps = tuple(step_registry.STEPS if steps is None else steps)
        # Slow SSH links: no animations, and no blinking cursor (each blink is a screen update).
        self.animation_level = "none"
        self.ws = ws
        self.watch_terminal = watch_terminal
        self.state_problem: str | None = None
        # The first frame is painted from a quick look at state.json (standard library only); the full
        # WizardState (pydantic) is loaded in a worker right after, then the step opens.
        self.state: WizardState | StatePeek = peek_state(ws.state_file)
        self._wanted_step: str | None = None  # a step chosen before the state was read
        self._state_writer = None
        for step in self.steps:
            self.add_mode(step.id, self._screen_factory(step.id))
        from core.settings import peek

        # the first frame, before pydantic: DEVTUNE_THEME as set, else the workspace's (core/settings.py)
        theme = peek("theme") or self.state.settings.get("theme")
        self._initial_theme = THEME_ALIASES.get(theme or "", theme)

    def get_default_screen(self) -> Screen:
        from tui.splash import SplashScreen

        return SplashScreen(self._start_step())

    def _start_step(self) -> str | None:
        ids = self.step_ids()
        if not ids:
            return None
        return self.state.current_step if self.state.current_step in ids else ids[0]

    @property
    def state_loaded(self) -> bool:
        return self._state_writer is not None

    def step_ids(self) -> tuple[str, ...]:
        return tuple(s.id for s in self.steps)

    def get_step(self, step_id: str):
        return next((s for s in self.steps if s.id == step_id), None)

    def _screen_factory(self, step_id: str) -> Callable[[], Screen]:
        def make() -> Screen:
            return self.get_step(step_id).load()()

        return make

    # lifecycle
    def on_mount(self) -> None:
        if self._initial_theme in self.available_themes:
            self.theme = self._initial_theme
        self.sub_title = str(self.ws.root)
        if self.watch_terminal:
            self._watch_terminal()
        self.call_after_refresh(self._load_state)

    def _load_state(self) -> None:
        self.run_worker(self._read_state, thread=True, exclusive=True, group="state-load", exit_on_error=False,
                        description=_("reading the workspace state"))

    def _read_state(self) -> None:
        from core.workspace.state import WizardState
        from core.workspace.layout import StateError

        self.ws.ensure()
        problem = None
        try:
            state = self.ws.load_state()
        except StateError as exc:
            state, problem = WizardState(), str(exc)
        from core.errors import BadInput
        from core.settings import current

        try:
            current()  # the DEVTUNE_* variables, checked once here (the first frame only peeked)
        except BadInput as exc:
            problem = "\n".join(filter(None, (problem, str(exc))))
        self.call_from_thread(self._state_ready, state, problem)

    def _state_ready(self, state: WizardState, problem: str | None) -> None:
        from tui.state_writer import StateWriter

        self.state, self.state_problem = state, problem
        self._state_writer = StateWriter(self.ws, self._state_written, self._state_write_failed)
        wanted, self._wanted_step = self._wanted_step, None
        start = wanted or self._start_step()
        if start:
            self.switch_mode(start)
            if wanted and state.current_step != wanted:
                self._update_state(lambda s: setattr(s, "current_step", wanted))
        if problem:
            self.notify(problem, severity="warning", timeout=10)

    def on_descendant_focus(self, event: events.DescendantFocus) -> None:
        if getattr(event.widget, "cursor_blink", False):
            event.widget.cursor_blink = False

    def watch_theme(self, theme: str) -> None:
        """Remember a theme chosen in the command palette for the next time this workspace opens."""
        if self.is_mounted and self.state_loaded and self.state.settings.get("theme") != theme:
            self._update_state(lambda s: s.settings.__setitem__("theme", theme))

    def _watch_terminal(self) -> None:
        """Quit when the terminal goes away (SSH drop): no orphan UI spinning on a dead TTY (tui/terminal.py)."""
        from tui.terminal import TerminalWatch

        self._terminal_watch = TerminalWatch(self, self._terminal_lost)
        self._terminal_watch.install()

    def _terminal_lost(self) -> None:
        self.exit(0)

    def get_driver_class(self):
        """Textual's Linux driver, with an input thread that always stops (tui/terminal.py)."""
        driver = super().get_driver_class()
        from textual.drivers.linux_driver import LinuxDriver

        if driver is LinuxDriver:
            from tui.terminal import DevtuneDriver

            return DevtuneDriver
        return driver

    # state
    def set_step_status(self, step_id: str, status: str, summary: str = "") -> None:
        self._update_state(lambda s: s.set_step(step_id, StepStatus(status), summary))

    def apply_change(self, change) -> None:
        """A core action's StateChange (core.workspace.changes), applied as the CLI applies it."""
        if change:
            self._update_state(change.apply)

    def remember(self, **fields) -> None:
        """Store chosen things (dataset_file=..., config_file=...) in the workspace state."""

        def apply(s: WizardState) -> None:
            for key, value in fields.items():
                setattr(s, key, value)

        self._update_state(apply)

    def _update_state(self, mutate: Callable[[WizardState], None]) -> None:
        if self._state_writer is None:
            return  # the state is still loading: nothing can change it yet (no step is open)
        mutate(self.state)
        self._refresh_stepper()
        self._state_writer.submit(mutate)

    def _state_written(self, fresh: WizardState) -> None:
        """In the writer thread, after the last queued change was written (it may hold CLI changes too)."""
        try:
            self.call_from_thread(self._adopt_state, fresh)
        except RuntimeError:  # the app is closing
            pass

    def _adopt_state(self, fresh: WizardState) -> None:
        if self._state_writer.pending:  # a newer change is on its way: adopting now would undo it
            return
        self.state = fresh
        self._refresh_stepper()

    def _state_write_failed(self, exc: Exception) -> None:
        try:
            self.call_from_thread(self.notify, _("could not save the workspace state: {error}", error=str(exc)),
                                  severity="error", timeout=10)
        except RuntimeError:
            pass

    def on_unmount(self) -> None:
        if self._state_writer is not None:
            self._state_writer.close()

    def _refresh_stepper(self) -> None:
        from tui.widgets.step_guide import StepGuide
        from tui.widgets.stepper import Stepper

        if not self.screen_stack:  # the app is closing (a state write can finish after the last screen went)
            return

        for stepper in self.screen.query(Stepper):
            stepper.refresh_steps()
        for guide in self.screen.query(StepGuide):
            guide.refresh_guide()

    # navigation
    def action_goto_step(self, step_id: str) -> None:
        if self.get_step(step_id) is None:
            return
        if not self.state_loaded:  # a key pressed on the splash: the step opens once the state is read
            self._wanted_step = step_id
            return
        self.switch_mode(step_id)
        if self.state.current_step != step_id:
            self._update_state(lambda s: setattr(s, "current_step", step_id))

    def action_goto_step_number(self, number: int) -> None:
        steps = self.steps
        if 1 <= number <= len(steps):
            self.action_goto_step(steps[number - 1].id)

    def _move(self, delta: int) -> None:
        ids = self.step_ids()
        if not ids:
            return
        here = ids.index(self.current_mode) if self.current_mode in ids else 0
        self.action_goto_step(ids[max(0, min(len(ids) - 1, here + delta))])

    def action_next_step(self) -> None:
        self._move(+1)

    def action_prev_step(self) -> None:
        self._move(-1)

    def get_key_display(self, binding: Binding) -> str:
        """The footer writes keys as F1 does (F1, F5, ^r): one style for the wizard's keys and Textual's."""
        from tui.help import key_label

        return key_label(binding)

    def action_help(self) -> None:
        from tui.help import HelpScreen, binding_rows, key_label

        from screens.base import key_map_rows

        # the step's own keys (a focused widget's editing and scrolling keys are the usual ones)
        here = [a.binding for a in self.screen.active_bindings.values() if a.node is self.screen and a.binding.id]
        palette = next(b for b in self.BINDINGS if b.action == "command_palette")
        order = [display for display, _meaning in key_map_rows()]  # the key map's keys first, in its order
        rows = sorted(binding_rows(here), key=lambda row: order.index(row[0].split()[0])
                      if row[0].split()[0] in order else len(order))
        self.push_screen(HelpScreen([
            (_("This step"), rows),
            (_("The same key on every step"), key_map_rows()),
            (_("Everywhere"), binding_rows(list(self.BINDINGS))
             + [("1-6", _("Go to step 1-6")), (key_label(palette), palette.tooltip)]),
        ]))

    def get_system_commands(self, screen: Screen) -> Iterable[SystemCommand]:
        from tui.help import key_label

        yield from super().get_system_commands(screen)
        for n, step in enumerate(self.steps, 1):
            yield SystemCommand(_("Go to step {n}: {title}", n=n, title=step.title), step.blurb,
                                lambda sid=step.id: self.action_goto_step(sid))
        yield SystemCommand(_("Help: keys"), _("Show every key binding"), self.action_help)
        # every action bound on the current step, so nothing is reachable by key only
        seen = set()
        for active in screen.active_bindings.values():
            binding = active.binding
            if not binding.description or active.node is self or binding.action in seen:
                continue
            seen.add(binding.action)
            yield SystemCommand(
                binding.description,
                binding.tooltip or _("key: {key}", key=key_label(binding)),
                lambda node=active.node, action=binding.action: self.run_action(action, node),
            )
