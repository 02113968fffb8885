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
from textual.widgets import Checkbox, Input, Label, Select, Static
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
    # self.run_background(...) in a step, or screen.run_background(...) in a module a step calls with itself
    calls = [n for n in ast.walk(tree) if isinstance(n, ast.Call) and isinstance(n.func, ast.Attribute)
             and n.func.attr in ("run_background", "poll") and isinstance(n.func.value, ast.Name)
             and n.func.value.id in ("self", "screen")]
    if path.name == "base.py":
        return
    # a module with no step screen in it and no background work (a pushed view of results already computed) has
    # nothing to check; a step screen always runs something in the background
    assert calls or path.name in ("steps.py", "__init__.py") or "(StepScreen)" not in source, path.name
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
        assert "F5" in text.split("The same key on every step")[0]  # this step's own F5 row


def _help_sections(text: str) -> dict[str, list[tuple[list[str], str]]]:
    """The help text as {section title: [(keys, label), ...]} (rows are "  KEYS<pad to 14> LABEL")."""
    sections: dict[str, list[tuple[list[str], str]]] = {}
    title = None
    for line in text.splitlines():
        if line.startswith("  "):
            if title is not None:
                sections[title].append((line[2:16].split(), line[17:].strip()))
        elif line.strip():  # a section's title (or the heading, or a closing sentence: no rows)
            title = line.strip()
            sections.setdefault(title, [])
        else:
            title = None
    return {t: rows for t, rows in sections.items() if rows}


def test_f1_and_the_footer_in_chinese_list_each_key_once_in_chinese(tmp_path):
    """F1 on every step under zh: each key once per section (the step numbers one row, a step's keys and
    the wizard's never twice), the step's shown keys all there, and no English word in a label except key
    names; the footer's labels (Textual's palette key included) are Chinese too."""
    import os
    import subprocess
    import sys

    from tests.core.test_zh_text import english_left
    from tui.help import binding_rows

    env = {**os.environ, "DEVTUNE_LANG": "zh"}
    out = subprocess.run([sys.executable, "-m", "tests.tui.help_render", str(tmp_path / "ws")], cwd=ROOT,
                         env=env, capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr[-3000:]
    seen = json.loads(out.stdout)
    assert list(seen) == list(step_registry.step_ids())
    for step, cls in zip(seen, STEP_CLASSES):
        sections = _help_sections(seen[step]["help"])
        assert list(sections) == ["当前步骤", "每一步都相同的按键", "全局"], (step, list(sections))
        here, key_map, everywhere = sections.values()
        for rows in (here, key_map, here + everywhere):
            keys = [k for ks, _label in rows for k in ks]
            assert len(keys) == len(set(keys)), f"{step}: a key listed twice: {keys}"
        assert [ks for ks, _label in key_map] == [[display] for display, _m in key_map_rows()]
        shown = {k for ks, _label in binding_rows(list(cls.BINDINGS)) for k in ks.split()}
        assert {k for ks, _label in here for k in ks} == shown, step
        everywhere_keys = [k for ks, _label in everywhere for k in ks]
        assert "1-6" in everywhere_keys and not [k for k in everywhere_keys if k.isdigit()], everywhere_keys
        assert everywhere_keys[0] == "F1" and "^q" in everywhere_keys, everywhere_keys  # F1, not f1
        labels = [label for _ks, label in here + key_map + everywhere]
        labels += [label for _key, label in seen[step]["footer"]]
        english = [(label, english_left(label)) for label in labels if english_left(label)]
        assert not english, f"{step}: English in Chinese labels: {english}"


# ---- every input labelled --------------------------------------------------------------------------
def _visible_label(field) -> str:
    """What says what a field is once it is filled in: its border title (on a drawn border; a Select's box
    is its SelectCurrent), the Label beside it in a FieldForm row, or a choice that names itself
    ("backend: vLLM")."""
    from textual.widgets._select import SelectCurrent

    box = field.query_one(SelectCurrent) if isinstance(field, Select) else field
    if box.border_title and box.styles.border_top[0] not in ("", "none", "hidden"):
        return str(box.border_title)
    row = field.parent
    if row is not None and row.has_class("form-row"):
        return " ".join(str(label.render()) for label in row.query(Label) if label.display).strip()
    if isinstance(field, Select):
        shown = str(box.query_one("#label").render())
        return shown if ": " in shown else ""
    return ""


@pytest.mark.parametrize("step", ["data", "config", "train", "merge", "playground"])
async def test_every_input_has_a_visible_label(workspace, step):
    """Every text field of each step says what it is (through a border title, or the Label of its Config
    form row), so do the form's choices, every picker and checkboxes, and no checkbox reads as a CLI flag."""
    from tests.core.config_workspace import fake_model, register_dataset
    from tui.widgets.field_form import FieldForm

    fake_model(workspace)
    register_dataset(workspace)
    workspace.update_state(lambda s: setattr(s, "current_step", step))
    app = DevtuneApp(workspace, watch_terminal=False)
    async with app.run_test(size=(120, 40)) as pilot:
        screen = await opened(pilot, app)
        await pilot.pause()
        fields = list(screen.query(Input))
        forms = list(screen.query(FieldForm))
        for form in forms:
            fields += [w for w in form.query("Select, Checkbox") if w not in fields]
        fields += [w for w in screen.query(Select) if w not in fields]
        fields += list(screen.query("RunTable"))  # a picker too (the Train step's runs): its border title says what
        assert fields, f"{step}: no field found"
        assert forms or step != "config", "the Config step's form is not there"
        for field in fields:
            assert _visible_label(field), f"{step}: #{field.id} says only its value"
        for box in screen.query(Checkbox):
            label = str(box.label).strip() or _visible_label(box)
            assert label and not label.startswith("--"), f"{step}: #{box.id}: {label!r}"
