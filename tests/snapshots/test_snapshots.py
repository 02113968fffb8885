"""What a person sees on each step, pinned as SVG snapshots (pytest-textual-snapshot).

Review a changed snapshot in the HTML report pytest writes, then accept it with
`pytest tests/snapshots --snapshot-update`. Inputs are recorded, never live: the doctor replays the
recorded CPU-only machine, the Train step shows a recorded real run."""


import pytest

from core.train.runs import RunStatus
from tests.recorded_runs import place_recorded_run
from tests.snapshots.conftest import FIXTURES, cache_templates
from tests.tui.helpers import opened, wait_until
from tui.app import DevtuneApp

SIZE = (120, 40)


def app_on(ws, step: str) -> DevtuneApp:
    ws.update_state(lambda s: setattr(s, "current_step", step))
    return DevtuneApp(ws, watch_terminal=False)


def test_data_step_with_the_messy_sample(snap_ws, snap_compare):
    async def run_before(pilot):
        screen = await opened(pilot, pilot.app)
        screen.open_file(snap_ws.data_dir / "support_messy.jsonl")
        await wait_until(pilot, lambda: screen.report is not None)
        await pilot.pause()

    assert snap_compare(app_on(snap_ws, "data"), terminal_size=SIZE, run_before=run_before)


def test_doctor_step_on_a_recorded_cpu_machine(snap_ws, snap_compare, monkeypatch):
    monkeypatch.setenv("DEVTUNE_DOCTOR_REPLAY", str(FIXTURES / "doctor" / "machines" / "cpu-only"))

    async def run_before(pilot):
        await opened(pilot, pilot.app)
        await wait_until(pilot, lambda: pilot.app.screen.report is not None)
        await pilot.pause()

    assert snap_compare(app_on(snap_ws, "doctor"), terminal_size=SIZE, run_before=run_before)


def test_doctor_step_on_a_recorded_mi300x_box_not_in_render_group(snap_ws, snap_compare, monkeypatch):
    monkeypatch.setenv("DEVTUNE_DOCTOR_REPLAY",
                       str(FIXTURES / "doctor" / "machines" / "mi300x8-not-in-render-group"))

    async def run_before(pilot):
        await opened(pilot, pilot.app)
        await wait_until(pilot, lambda: pilot.app.screen.report is not None)
        await pilot.pause()

    assert snap_compare(app_on(snap_ws, "doctor"), terminal_size=SIZE, run_before=run_before)


def test_config_step_cpu_demo(snap_ws, snap_compare, monkeypatch):
    import psutil

    from tests.core.config_workspace import fake_model, register_dataset

    real = psutil.virtual_memory()  # the CPU's "device" is the host's memory: the same on every machine here
    monkeypatch.setattr(psutil, "virtual_memory", lambda: real._replace(total=24 * 1024 ** 3))

    fake_model(snap_ws)
    register_dataset(snap_ws)
    cache_templates(snap_ws)

    async def run_before(pilot):
        await opened(pilot, pilot.app)
        await wait_until(pilot, lambda: "lora_rank:" in pilot.app.screen.query_one("FilesPreview")
                         .text_of("preview-yaml"))
        await pilot.pause()

    assert snap_compare(app_on(snap_ws, "config"), terminal_size=SIZE, run_before=run_before)


@pytest.mark.parametrize("size", [(120, 40), (80, 24)])
def test_train_step_reattached_to_a_finished_run(snap_ws, snap_compare, size):
    import shutil

    place_recorded_run(snap_ws, "20260101-000000-cpu-demo", "lf_normal", RunStatus.FINISHED, 0, 1767225600.0,
                       host="gpu-box")
    shutil.copy(FIXTURES / "gpu" / "replay_mi300x_x8.jsonl", snap_ws.runs_dir / "20260101-000000-cpu-demo" / "gpu.jsonl")

    async def run_before(pilot):
        screen = await opened(pilot, pilot.app)
        await wait_until(pilot, lambda: screen.snapshot is not None and len(screen.query_one("GpuPanel").samples) == 8)
        await pilot.pause(0.6)  # the chart redraws at most 4 times a second

    assert snap_compare(app_on(snap_ws, "train"), terminal_size=size, run_before=run_before)


def test_train_step_shows_the_diagnosis_of_a_failed_run(snap_ws, snap_compare):
    place_recorded_run(snap_ws, "20260101-000000-bad", "lf_no_valid_samples", RunStatus.FAILED, 1, 1767225600.0,
                       host="gpu-box")

    async def run_before(pilot):
        await opened(pilot, pilot.app)
        await wait_until(pilot, lambda: pilot.app.screen.query_one("DiagnosisBox").has_class("-visible"))
        await pilot.pause(0.6)

    assert snap_compare(app_on(snap_ws, "train"), terminal_size=SIZE, run_before=run_before)


def test_merge_step_with_nothing_to_merge(snap_ws, snap_compare):
    async def run_before(pilot):
        await opened(pilot, pilot.app)
        await wait_until(pilot, lambda: "No training run yet" in str(pilot.app.screen.query_one("#merge-plan").render()))

    assert snap_compare(app_on(snap_ws, "merge"), terminal_size=SIZE, run_before=run_before)


def test_playground_step_before_a_server(snap_ws, snap_compare):
    async def run_before(pilot):
        await opened(pilot, pilot.app)
        await pilot.pause(0.5)

    assert snap_compare(app_on(snap_ws, "playground"), terminal_size=SIZE, run_before=run_before)


def test_help_in_the_light_theme(snap_ws, snap_compare, monkeypatch):
    monkeypatch.setenv("DEVTUNE_THEME", "light")

    async def run_before(pilot):
        await opened(pilot, pilot.app)
        await pilot.press("f1")
        await pilot.pause()

    assert snap_compare(app_on(snap_ws, "data"), terminal_size=(80, 24), run_before=run_before)


def test_playground_eval_tab_with_a_saved_eval(snap_ws, snap_compare):
    from tests.eval_fixture import write_recorded_eval

    write_recorded_eval(snap_ws)

    async def run_before(pilot):
        screen = await opened(pilot, pilot.app)
        screen.query_one("#pg-tabs").active = "pg-tab-eval"
        await wait_until(pilot, lambda: screen.query_one("#pg-eval-table").row_count > 0)
        await pilot.pause(0.5)

    assert snap_compare(app_on(snap_ws, "playground"), terminal_size=SIZE, run_before=run_before)
