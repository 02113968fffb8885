"""What every step shares (screens/base.py): one way to work in the background (results, progress and
errors come back as Messages, handled on the event loop; a UserError lands in the error box and marks
the step), no widget touched from a thread, one key map for the whole wizard (footer and F1 alike, in both
languages), every input labelled, and the `wait_until` helper saying why it waited in vain."""

from __future__ import annotations

import ast
import json
import threading
from pathlib import Path

import pytest
from textual.app import App
from textual.widgets import Checkbox, Input, Static
from textual.widgets._footer import FooterKey

from core.i18n import LOCALES_DIR
from screens import steps as step_registry
from screens.base import STEP_KEYS, Job, StepScreen, UserError, key_map_rows
from tests.tui.helpers import opened, wait_until
from tui.app import DevtuneApp

ROOT = Path(__file__).resolve().parents[2]
SCREENS = sorted((ROOT / "screens").glob("*.py"))


# ---- wait_until ------------------------------------------------------------------------------------
async def test_wait_until_raises_the_conditions_last_error_with_the_condition():
    async with App().run_test() as pilot:
        with pytest.raises(AssertionError) as caught:
            await wait_until(pilot, lambda: {}["missing"], timeout=0.2)
    text = str(caught.value)
    assert "lambda: {}[\"missing\"]" in text  # which condition, as written in the test
    assert "its last try raised KeyError: 'missing'" in text
    assert isinstance(caught.value.__cause__, KeyError)

    async with App().run_test() as pilot:
        with pytest.raises(AssertionError) as caught:
            await wait_until(pilot, lambda: 1 == 2, timeout=0.2)
    assert "lambda: 1 == 2" in str(caught.value) and caught.value.__cause__ is None


# ---- background work -------------------------------------------------------------------------------
class WorkScreen(StepScreen):
    STEP_ID = "work"

    def compose_body(self):
        yield Static("", id="work-result")

    def on_mount(self) -> None:
        self.seen: list[tuple[str, object, int]] = []  # (what, value, thread id) as the callbacks saw them

    def start(self, fn, *args, **kwargs):
        return self.run_background(fn, *args, group="work", description="Working",
                                   progress=lambda v: self.seen.append(("progress", v, threading.get_ident())),
                                   done=lambda v: self.seen.append(("done", v, threading.get_ident())),
                                   failed=lambda e: self.seen.append(("failed", str(e), threading.get_ident())),
                                   **kwargs)


class WorkApp(DevtuneApp):
    CSS_PATH = str(ROOT / "tui" / "app.tcss")

    def get_default_screen(self):
        return WorkScreen()

    def _load_state(self) -> None:  # the default screen is the step itself here
        from tui.state_writer import StateWriter

        self.state = self.ws.load_state()
        self._state_writer = StateWriter(self.ws, self._state_written, self._state_write_failed)


async def test_results_and_progress_come_back_on_the_event_loop(workspace):
    loop_thread = threading.get_ident()
    workers: list[int] = []

    def count(job: Job, n: int) -> int:
        workers.append(threading.get_ident())
        for i in range(n):
            job.report(i)
        return n * 10

    app = WorkApp(workspace, watch_terminal=False)
    async with app.run_test(size=(100, 30)) as pilot:
        screen = app.screen
        screen.start(count, 3)
        await wait_until(pilot, lambda: [s[0] for s in screen.seen] == ["progress"] * 3 + ["done"])
        assert [s[1] for s in screen.seen] == [0, 1, 2, 30]
        assert workers and workers[0] != loop_thread  # the work ran off the event loop ...
        assert {s[2] for s in screen.seen} == {loop_thread}  # ... and its results came back onto it


async def test_a_user_error_lands_in_the_error_box_and_marks_the_step(workspace):
    def refuse(job: Job) -> None:
        raise UserError("configs/train.yaml: learning_rate must be a number; fix it in the form")

    app = WorkApp(workspace, watch_terminal=False)
    async with app.run_test(size=(100, 30)) as pilot:
        await wait_until(pilot, lambda: app.state_loaded)
        screen = app.screen
        screen.start(refuse)
        await wait_until(pilot, lambda: screen.query_one("#step-error").has_class("-visible"))
        assert "learning_rate must be a number" in str(screen.query_one("#step-error").render())
        assert screen.seen[0][:2] == ("failed", "configs/train.yaml: learning_rate must be a number; fix it in "
                                                "the form")
        assert app.state.step("work").status.value == "attention"


async def test_a_replaced_job_hands_back_nothing(workspace):
    release = threading.Event()

    def slow(job: Job, value: str) -> str:
        release.wait(5)
        return value

    app = WorkApp(workspace, watch_terminal=False)
    async with app.run_test(size=(100, 30)) as pilot:
        screen = app.screen
        screen.start(slow, "old")
        screen.start(lambda job, value: value, "new")  # same group, exclusive: the old job is cancelled
        await wait_until(pilot, lambda: ("done", "new") in [s[:2] for s in screen.seen])
        release.set()
        await pilot.pause(0.3)
        assert [s[1] for s in screen.seen if s[0] == "done"] == ["new"]


async def test_polling_stops_when_its_condition_holds(workspace):
    ticks = iter(range(100))
    app = WorkApp(workspace, watch_terminal=False)
    async with app.run_test(size=(100, 30)) as pilot:
        screen = app.screen
        seen, ended = [], []
        screen.poll(lambda job: next(ticks), every=0.01, group="poll", description="Polling", each=seen.append,
                    until=lambda n: n == 2, then=ended.append)
        await wait_until(pilot, lambda: ended == [2])
        assert seen == [0, 1, 2]


# ---- no widget from a thread -----------------------------------------------------------------------
def _methods(tree: ast.Module) -> dict[str, ast.FunctionDef | ast.AsyncFunctionDef]:
    return {n.name: n for n in ast.walk(tree) if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef))}


def _uses_self(fn: ast.AST) -> bool:
    return any(isinstance(n, ast.Name) and n.id == "self" for n in ast.walk(fn))


@pytest.mark.parametrize("path", SCREENS, ids=lambda p: p.name)
def test_work_in_a_thread_cannot_reach_a_widget(path):
    """Every function a screen runs in a thread (run_background / poll) is a staticmethod, or a local
    function that does not use `self`: it gets plain values and returns plain values. Only an async
    function (which runs on the event loop) may use the screen. No call_from_thread, no @work."""
    source = path.read_text(encoding="utf-8")
    assert "call_from_thread" not in source and "@work" not in source
    tree = ast.parse(source)
    methods = _methods(tree)
    calls = [n for n in ast.walk(tree) if isinstance(n, ast.Call) and isinstance(n.func, ast.Attribute)
             and n.func.attr in ("run_background", "poll") and isinstance(n.func.value, ast.Name)
             and n.func.value.id == "self"]
    if path.name == "base.py":
        return
    assert calls or path.name == "steps.py" or path.name == "__init__.py"
    for call in calls:
        target = call.args[0]
        if isinstance(target, ast.Attribute):  # self._something
            fn = methods[target.attr]
            static = any(isinstance(d, ast.Name) and d.id == "staticmethod" for d in fn.decorator_list)
            assert static or isinstance(fn, ast.AsyncFunctionDef), f"{path.name}: {target.attr} can reach self"
        else:
            assert isinstance(target, ast.Name), ast.dump(target)
            fn = methods[target.id]
            assert not _uses_self(fn), f"{path.name}: {target.id} uses self in a thread"


# ---- one key map -----------------------------------------------------------------------------------
STEP_CLASSES = [step.load() for step in step_registry.STEPS]
KIND_OF_KEY = {key: kind for kind, (key, _display) in STEP_KEYS.items()}


@pytest.mark.parametrize("screen", STEP_CLASSES, ids=lambda c: c.STEP_ID)
def test_one_key_map_across_the_steps(screen):
    zh = json.loads((LOCALES_DIR / "zh.json").read_text(encoding="utf-8"))
    kinds = set()
    for binding in screen.BINDINGS:
        assert binding.id and binding.id.startswith(screen.STEP_ID + ".") and binding.description
        assert zh.get(binding.description), f"no Chinese for the key label {binding.description!r}"
        kind = KIND_OF_KEY.get(binding.key)
        if kind is not None:  # F5, F6, F8, ctrl+r, ctrl+s mean the same kind of thing on every step
            assert binding.id.split(".", 1)[1].split("-")[0] == kind, (binding.key, binding.id)
            kinds.add(kind)
        else:
            assert binding.key.startswith("ctrl+") or len(binding.key) == 1, binding.key
    assert "run" in kinds, f"{screen.STEP_ID}: no main action on {STEP_KEYS['run'][1]}"


def test_the_key_map_reads_the_same_in_both_languages():
    zh = json.loads((LOCALES_DIR / "zh.json").read_text(encoding="utf-8"))
    for _key, meaning in key_map_rows():
        assert zh.get(meaning), meaning
    assert zh.get("The same key on every step")


@pytest.mark.parametrize("step", ["data", "doctor", "config", "train", "merge", "playground"])
async def test_the_footer_and_f1_show_the_key_map(workspace, step):
    workspace.update_state(lambda s: setattr(s, "current_step", step))
    app = DevtuneApp(workspace, watch_terminal=False)
    async with app.run_test(size=(160, 40)) as pilot:
        screen = await opened(pilot, app)
        await wait_until(pilot, lambda: any(k.key_display == "F5" for k in screen.query(FooterKey)))
        main = next(k for k in screen.query(FooterKey) if k.key_display == "F5")
        assert main.description == next(b.description for b in type(screen).BINDINGS if b.key == "f5")
        await pilot.press("f1")
        await wait_until(pilot, lambda: app.screen.__class__.__name__ == "HelpScreen")
        text = str(app.screen.query_one("#help-text").render())
        assert "The same key on every step" in text
        for display, _meaning in key_map_rows():
            assert f"\n  {display}" in text
        assert f"F5" in text.split("The same key on every step")[0]  # this step's own F5 row


# ---- every input labelled --------------------------------------------------------------------------
@pytest.mark.parametrize("step", ["data", "merge", "playground"])
async def test_every_input_has_a_visible_label(workspace, step):
    workspace.update_state(lambda s: setattr(s, "current_step", step))
    app = DevtuneApp(workspace, watch_terminal=False)
    async with app.run_test(size=(120, 40)) as pilot:
        screen = await opened(pilot, app)
        await pilot.pause()
        inputs = list(screen.query(Input))
        assert inputs
        for field in inputs:
            assert field.border_title, f"#{field.id} says only its value"
            assert field.styles.border_top[0] not in ("", "none", "hidden"), f"#{field.id}: its title has no border"
        for box in screen.query(Checkbox):
            assert str(box.label).strip() and not str(box.label).startswith("--"), f"#{box.id}: {box.label}"
