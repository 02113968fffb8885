"""The wizard's state changes are written in order and never adopted back out of order."""

import threading

from core.workspace.layout import StepStatus
from tests.tui.helpers import wait_until
from tui.state_writer import StateWriter


def test_changes_are_written_in_order_and_only_the_last_is_adopted(workspace):
    written, errors = [], []
    done = threading.Event()

    def on_written(state):
        written.append(state)
        done.set()

    writer = StateWriter(workspace, on_written, errors.append)
    for i in range(50):
        writer.submit(lambda s, i=i: s.settings.__setitem__("n", str(i)))
    writer.submit(lambda s: s.set_step("data", StepStatus.DONE, "ok"))
    writer.close()
    assert not errors
    final = workspace.load_state()
    assert final.settings["n"] == "49" and final.step("data").status is StepStatus.DONE
    assert written and written[-1].settings["n"] == "49" and written[-1].step("data").status is StepStatus.DONE


def test_a_cli_change_made_meanwhile_is_kept(workspace):
    workspace.update_state(lambda s: setattr(s, "dataset_name", "from-cli"))
    writer = StateWriter(workspace, lambda s: None, lambda e: None)
    writer.submit(lambda s: setattr(s, "current_step", "train"))
    writer.close()
    state = workspace.load_state()
    assert state.dataset_name == "from-cli" and state.current_step == "train"


async def test_quick_changes_in_the_app_stay_in_memory_and_on_disk(workspace, monkeypatch):
    from screens import steps as step_registry
    from screens.steps import StepInfo
    from tui.app import DevtuneApp

    monkeypatch.setattr(step_registry, "STEPS",
                        (StepInfo("first", "First", "tests.tui.test_app_shell:FirstScreen", "the first"),))
    app = DevtuneApp(workspace, watch_terminal=False)
    async with app.run_test(size=(80, 24)) as pilot:
        await wait_until(pilot, lambda: app.screen.query_one("#first-body"))
        app.set_step_status("first", "attention", "lint errors")
        for _ in range(20):
            app.remember(dataset_name="support", dataset_file="data/support_clean.jsonl")
            app.set_step_status("first", "done", "registered")
        await wait_until(pilot, lambda: app._state_writer.pending == 0)
        await pilot.pause()
        assert app.state.step("first").status is StepStatus.DONE and app.state.dataset_name == "support"
    disk = workspace.load_state()
    assert disk.step("first").status is StepStatus.DONE and disk.dataset_name == "support"
