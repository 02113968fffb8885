"""The wizard shell: stepper, navigation, help, command palette, state restored, worker errors.

Two small step screens stand in for the real steps so the shell is tested on its own."""

import pytest
from textual import work
from textual.binding import Binding
from textual.widgets import Static

from screens import steps as step_registry
from screens.base import StepScreen
from screens.steps import StepInfo
from tests.tui.helpers import stepper_text, wait_until
from tui.app import DevtuneApp


class FirstScreen(StepScreen):
    STEP_ID = "first"
    INTRO = "The first step needs nothing."
    BINDINGS = [Binding("x", "explode", "Fail in a worker", id="first.explode")]

    def compose_body(self):
        yield Static("first body", id="first-body")

    def action_explode(self) -> None:
        self.explode()

    @work(thread=True, exclusive=True, exit_on_error=False, group="boom", description="Exploding")
    def explode(self) -> None:
        raise RuntimeError("kaboom")


class SecondScreen(StepScreen):
    STEP_ID = "second"

    def compose_body(self):
        yield Static("second body", id="second-body")


@pytest.fixture
def two_steps(monkeypatch):
    monkeypatch.setattr(step_registry, "STEPS", (
        StepInfo("first", "First", "tests.tui.test_app_shell:FirstScreen", "the first"),
        StepInfo("second", "Second", "tests.tui.test_app_shell:SecondScreen", "the second"),
    ))


async def test_navigation_and_state_restored(workspace, two_steps):
    app = DevtuneApp(workspace, watch_terminal=False)
    async with app.run_test(size=(120, 40)) as pilot:
        await wait_until(pilot, lambda: app.screen.query_one("#first-body"))
        assert "1 First" in stepper_text(app) and "2 Second" in stepper_text(app)
        await pilot.press("right_square_bracket")
        await wait_until(pilot, lambda: app.current_mode == "second")
        await pilot.press("left_square_bracket")
        await wait_until(pilot, lambda: app.current_mode == "first")
        await pilot.press("2")
        await wait_until(pilot, lambda: app.current_mode == "second")
        await wait_until(pilot, lambda: workspace.load_state().current_step == "second")
    again = DevtuneApp(workspace, watch_terminal=False)
    async with again.run_test(size=(120, 40)) as pilot:
        await wait_until(pilot, lambda: again.current_mode == "second")


async def test_step_status_shows_in_the_stepper_and_is_saved(workspace, two_steps):
    app = DevtuneApp(workspace, watch_terminal=False)
    async with app.run_test(size=(120, 40)) as pilot:
        await wait_until(pilot, lambda: app.screen.query_one("#first-body"))
        assert "First ·" in stepper_text(app)
        app.screen.set_status("done", "all good")
        await wait_until(pilot, lambda: "First ✓" in stepper_text(app))
        app.set_step_status("second", "attention", "look here")
        await wait_until(pilot, lambda: "Second !" in stepper_text(app))
        await wait_until(pilot, lambda: workspace.load_state().step("second").summary == "look here")
    assert workspace.load_state().step("first").status.value == "done"


async def test_clicking_a_step_goes_there(workspace, two_steps):
    app = DevtuneApp(workspace, watch_terminal=False)
    async with app.run_test(size=(120, 40)) as pilot:
        await wait_until(pilot, lambda: app.screen.query_one("#first-body"))
        text = stepper_text(app)
        await pilot.click("#stepper", offset=(text.index("Second") + 1 + 1, 0))
        await wait_until(pilot, lambda: app.current_mode == "second")


async def test_help_lists_bindings(workspace, two_steps):
    from tui.help import HelpScreen

    app = DevtuneApp(workspace, watch_terminal=False)
    async with app.run_test(size=(120, 40)) as pilot:
        await wait_until(pilot, lambda: app.screen.query_one("#first-body"))
        await pilot.press("f1")
        await wait_until(pilot, lambda: isinstance(app.screen, HelpScreen))
        text = str(app.screen.query_one("#help-text").render())
        for expected in ("Fail in a worker", "Next step", "Previous step", "Quit", "Help"):
            assert expected in text
        await pilot.press("escape")
        await wait_until(pilot, lambda: not isinstance(app.screen, HelpScreen))


async def test_every_action_is_in_the_command_palette(workspace, two_steps):
    app = DevtuneApp(workspace, watch_terminal=False)
    async with app.run_test(size=(120, 40)) as pilot:
        await wait_until(pilot, lambda: app.screen.query_one("#first-body"))
        titles = [c.title for c in app.get_system_commands(app.screen)]
        for expected in ("Go to step 1: First", "Go to step 2: Second", "Fail in a worker", "Help: keys"):
            assert expected in titles


async def test_worker_error_is_shown_not_a_crash(workspace, two_steps):
    app = DevtuneApp(workspace, watch_terminal=False)
    async with app.run_test(size=(120, 40)) as pilot:
        await wait_until(pilot, lambda: app.screen.query_one("#first-body"))
        await pilot.press("x")
        box = app.screen.query_one("#step-error")
        await wait_until(pilot, lambda: box.has_class("-visible"))
        assert "kaboom" in str(box.render()) and "Exploding" in str(box.render())
        assert app.is_running


async def test_unreadable_state_is_reported(workspace, two_steps):
    workspace.state_file.write_text("{broken")
    app = DevtuneApp(workspace, watch_terminal=False)
    async with app.run_test(size=(120, 40)) as pilot:
        await wait_until(pilot, lambda: app.screen.query_one("#first-body"))
        assert app.state_problem and "kept" in app.state_problem
    assert list(workspace.state_dir.glob("state.json.unreadable-*"))


async def test_light_theme_and_no_animation_or_blink(workspace, two_steps, monkeypatch):
    from textual.widgets import Input

    monkeypatch.setenv("DEVTUNE_THEME", "light")
    app = DevtuneApp(workspace, watch_terminal=False)
    assert app.animation_level == "none"
    async with app.run_test(size=(80, 24)) as pilot:
        await wait_until(pilot, lambda: app.screen.query_one("#first-body"))
        assert app.theme == "textual-light"
        field = Input()
        await app.screen.query_one("#step-body").mount(field)
        field.focus()
        await wait_until(pilot, lambda: field.has_focus and field.cursor_blink is False)


async def test_a_wrong_devtune_variable_is_said_once_the_state_is_read(workspace, two_steps, monkeypatch):
    monkeypatch.setenv("DEVTUNE_GPU_BACKEND", "cuda")
    app = DevtuneApp(workspace, watch_terminal=False)
    async with app.run_test(size=(80, 24)) as pilot:
        await wait_until(pilot, lambda: app.screen.query_one("#first-body"))
        assert app.state_problem and "DEVTUNE_GPU_BACKEND=cuda" in app.state_problem
        await wait_until(pilot, lambda: any("DEVTUNE_GPU_BACKEND" in n.message for n in app._notifications))


async def test_a_theme_chosen_in_the_palette_is_remembered(workspace, two_steps):
    app = DevtuneApp(workspace, watch_terminal=False)
    async with app.run_test(size=(80, 24)) as pilot:
        await wait_until(pilot, lambda: app.screen.query_one("#first-body"))
        app.theme = "textual-light"
        await wait_until(pilot, lambda: workspace.load_state().settings.get("theme") == "textual-light")
    again = DevtuneApp(workspace, watch_terminal=False)
    async with again.run_test(size=(80, 24)) as pilot:
        await wait_until(pilot, lambda: again.theme == "textual-light")


async def test_the_first_frame_shows_the_step_bar_before_the_step_opens(workspace, two_steps):
    from tui.splash import SplashScreen

    from core.workspace.layout import StepStatus

    workspace.update_state(lambda s: (setattr(s, "current_step", "second"),
                                      s.set_step("first", StepStatus.DONE, "all fine")))
    app = DevtuneApp(workspace, watch_terminal=False)
    assert app.state.current_step == "second" and app.state.step("first").status.value == "done"
    async with app.run_test(size=(80, 24)) as pilot:
        # the splash is the default screen: drawn from the quick look at state.json
        assert isinstance(app.screen_stack[0], SplashScreen)
        await wait_until(pilot, lambda: app.current_mode == "second" and app.screen.query_one("#second-body"))
        assert "First ✓" in stepper_text(app) and app.state_loaded


async def test_the_guide_line_says_what_was_found_and_what_is_next(workspace, two_steps):
    from tui.widgets.step_guide import StepGuide

    app = DevtuneApp(workspace, watch_terminal=False)
    async with app.run_test(size=(120, 40)) as pilot:
        await wait_until(pilot, lambda: app.screen.query_one("#first-body"))
        guide = app.screen.query_one(StepGuide)
        assert not guide.has_class("-visible")
        app.screen.set_status("attention", "3 errors in data.jsonl")
        await wait_until(pilot, lambda: guide.has_class("-visible") and "3 errors" in str(guide.render()))
        app.screen.set_status("done", "24 rows registered as support")
        await wait_until(pilot, lambda: "next: ] 2 Second" in str(guide.render()))
        assert "24 rows registered" in str(guide.render())
        await pilot.press("right_square_bracket")
        await wait_until(pilot, lambda: app.current_mode == "second")
        app.screen.set_status("done", "all answered")
        await wait_until(pilot, lambda: "journey is complete" in str(app.screen.query_one(StepGuide).render()))


async def test_a_step_key_pressed_on_the_splash_opens_that_step_once_the_state_is_read(workspace, two_steps,
                                                                                       monkeypatch):
    """A digit typed before the state is read does not open a step on the quick look at state.json (the
    Playground once crashed on it: the look has no servers); the step opens once the state is there."""
    from tui.splash import SplashScreen

    read_state = DevtuneApp._load_state
    monkeypatch.setattr(DevtuneApp, "_load_state", lambda self: None)  # the state read waits for the test
    app = DevtuneApp(workspace, watch_terminal=False)
    async with app.run_test(size=(80, 24)) as pilot:
        await pilot.press("2")
        await pilot.pause()
        assert isinstance(app.screen, SplashScreen) and not app.state_loaded
        read_state(app)
        await wait_until(pilot, lambda: app.current_mode == "second" and app.screen.query_one("#second-body"))
        await wait_until(pilot, lambda: workspace.load_state().current_step == "second")
