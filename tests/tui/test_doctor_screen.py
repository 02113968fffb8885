"""The Doctor step: the real doctor on this machine fills the tree in live; the details pane shows the
evidence and the fix; copy, re-run one check or all, save the Markdown report. A recorded MI300X box
(replayed) shows its failures first."""

from pathlib import Path

import pytest

from screens import steps as step_registry
from core.doctor.replay import REPLAY_ENV
from screens.doctor import DoctorScreen
from screens.steps import StepInfo
from tests.tui.helpers import wait_until
from tui.app import DevtuneApp
from tui.widgets.check_details import CheckDetails
from tui.widgets.check_tree import CheckTree

MACHINES = Path(__file__).resolve().parents[1] / "fixtures" / "doctor" / "machines"


@pytest.fixture
def doctor_only(monkeypatch):
    monkeypatch.setattr(step_registry, "STEPS", (
        StepInfo("doctor", "Doctor", "screens.doctor:DoctorScreen", "environment checks"),))


def details_text(screen, part: str) -> str:
    return str(screen.query_one(CheckDetails).query_one(f"#check-details-{part}").render())


async def select(pilot, screen, check_id: str) -> None:
    screen.query_one(CheckTree).select_check(check_id)
    await wait_until(pilot, lambda: screen.selected_check_id() == check_id)


async def test_real_doctor_on_this_machine(workspace, doctor_only, monkeypatch, uses_torch):
    monkeypatch.delenv(REPLAY_ENV, raising=False)
    kinds = []  # the doctor's events, in the order the screen received them (on the event loop)
    shown = DoctorScreen._doctor_event

    def received(screen, event):
        kinds.append(type(event).__name__)
        shown(screen, event)

    monkeypatch.setattr(DoctorScreen, "_doctor_event", received)
    app = DevtuneApp(workspace, watch_terminal=False)
    async with app.run_test(size=(120, 40)) as pilot:
        await wait_until(pilot, lambda: isinstance(app.screen, DoctorScreen) and app.screen.is_mounted)
        screen = app.screen
        tree = screen.query_one(CheckTree)
        assert len(tree.check_ids()) >= 30
        await wait_until(pilot, lambda: screen.report is not None, timeout=240)

        # it filled in live: checks were shown before the last probe (vLLM's import) finished
        assert kinds.index("CheckJudged") < max(i for i, k in enumerate(kinds) if k == "ProbeFinished")
        assert all(tree.state(i) in ("ok", "warn", "fail", "skip") for i in tree.check_ids())
        assert screen.report.machine == "cpu" and not screen.report.failed

        # the machine check (a warning on a CPU box) was selected first: evidence and fix are shown
        assert screen.selected_check_id() == "platform.machine"
        assert "tiny demo model" in details_text(screen, "evidence")
        assert details_text(screen, "fix").startswith("devtune demo")
        await pilot.press("c")
        assert app.clipboard == screen.checks["platform.machine"].fix

        await select(pilot, screen, "torch.build")
        assert "2.13.0+cpu" in details_text(screen, "evidence")

        # re-run one check: its probes run again and the verdict comes back
        before = screen.evidence.commands["torch"]
        await pilot.press("f6")
        await wait_until(pilot, lambda: not screen.running_some and tree.state("torch.build") == "ok", timeout=120)
        assert screen.evidence.commands["torch"] is not before
        assert screen.evidence.commands["ds_report"] is not None

        # save: a Markdown report in the workspace, never overwriting
        await pilot.press("ctrl+s")
        await wait_until(pilot, lambda: screen.saved_path is not None)
        first = screen.saved_path
        assert first.parent == workspace.root and first.name.startswith("doctor-report-")
        assert first.read_text().startswith("# devtune doctor report")
        screen.saved_path = None
        await pilot.press("ctrl+s")
        await wait_until(pilot, lambda: screen.saved_path is not None)
        assert screen.saved_path != first and first.exists()

        await wait_until(pilot, lambda: workspace.load_state().step("doctor").status.value == "done")


async def test_replayed_mi300x_without_render_group(workspace, doctor_only, monkeypatch):
    monkeypatch.setenv(REPLAY_ENV, str(MACHINES / "mi300x8-not-in-render-group"))
    app = DevtuneApp(workspace, watch_terminal=False)
    async with app.run_test(size=(120, 40)) as pilot:
        await wait_until(pilot, lambda: isinstance(app.screen, DoctorScreen) and app.screen.report is not None)
        screen = app.screen
        tree = screen.query_one(CheckTree)
        assert screen.selected_check_id() == "access.kfd"  # the first failure is shown first
        assert "Permission denied" in details_text(screen, "evidence")
        assert details_text(screen, "fix").startswith("sudo usermod -aG render alice")
        assert tree.state("nvidia.driver") == "skip"
        await wait_until(pilot, lambda: workspace.load_state().step("doctor").status.value == "attention")

        # a category node summarises its checks
        screen.query_one(CheckTree).move_cursor(tree._leaves["access.kfd"].parent)
        await wait_until(pilot, lambda: screen.selected_check_id() is None)
        assert "3 of 3 checks judged" in details_text(screen, "status")

        # F5 runs everything again (replayed here)
        await pilot.press("f5")
        await wait_until(pilot, lambda: not screen.running_all and screen.report is not None
                         and tree.state("access.kfd") == "fail")


async def test_bindings_have_ids_and_descriptions():
    for binding in DoctorScreen.BINDINGS:
        assert binding.id and binding.id.startswith("doctor.") and binding.description


async def test_a_failed_run_can_be_started_again(workspace, doctor_only, monkeypatch, tmp_path):
    monkeypatch.setenv(REPLAY_ENV, str(tmp_path / "no-such-machine"))
    app = DevtuneApp(workspace, watch_terminal=False)
    async with app.run_test(size=(120, 40)) as pilot:
        await wait_until(pilot, lambda: isinstance(app.screen, DoctorScreen) and app.screen.is_mounted)
        screen = app.screen
        await wait_until(pilot, lambda: not screen.running_all)
        assert "not a recorded machine" in str(screen.query_one("#step-error").render())
        monkeypatch.setenv(REPLAY_ENV, str(MACHINES / "mi250x4"))
        await pilot.press("f5")
        await wait_until(pilot, lambda: screen.report is not None and not screen.running_all)
        assert not screen.report.failed and screen.report.machine == "rocm"


def test_the_details_follow_the_state_by_themselves():
    """What drives the details pane is reactive state (issue 15): the pane is redrawn by the watchers of
    `selected`, `checks`, `running_all`, `running_some` and `report`, never by hand from an action."""
    import ast
    import inspect

    from textual.reactive import Reactive

    import screens.doctor as module

    for name in ("selected", "checks", "running_all", "running_some", "report", "evidence"):
        assert isinstance(DoctorScreen.__dict__.get(name), Reactive), name
    callers = set()
    for fn in ast.walk(ast.parse(inspect.getsource(module))):
        if isinstance(fn, ast.FunctionDef):
            calls = [n for n in ast.walk(fn) if isinstance(n, ast.Attribute) and n.attr == "_show_selected"
                     and isinstance(n.ctx, ast.Load)]
            if calls:
                callers.add(fn.name)
    assert callers and all(name.startswith("watch_") for name in callers), sorted(callers)
    assert {"watch_selected", "watch_checks", "watch_running_some", "watch_report"} <= callers
