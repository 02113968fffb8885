"""The Train screen re-attaching to runs from their files: history, progress, GPU replay, diagnosis.

Runs are recorded real LLaMA-Factory outputs (tests/fixtures/logs) placed in a workspace as a
finished / failed run would leave them; tests/e2e drives live runs."""

import shutil
import time
from pathlib import Path

import pytest

from core.train.runs import RunStatus
from screens import steps as step_registry
from screens.steps import StepInfo
from tests.recorded_runs import place_recorded_run
from tests.tui.helpers import opened, wait_until
from tui.app import DevtuneApp

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures"


@pytest.fixture
def train_only(monkeypatch):
    monkeypatch.setattr(step_registry, "STEPS", (
        StepInfo("train", "Train", "screens.train:TrainScreen", "train"),))


async def test_reattach_shows_history_and_gpu_replay(workspace, train_only):
    place_recorded_run(workspace, "20260101-000000-normal", "lf_normal", RunStatus.FINISHED, 0, time.time() - 100)
    shutil.copy(FIXTURES / "gpu" / "replay_mi300x_x8.jsonl", workspace.runs_dir / "20260101-000000-normal" / "gpu.jsonl")
    app = DevtuneApp(workspace, watch_terminal=False)
    async with app.run_test(size=(120, 40)) as pilot:
        screen = await opened(pilot, app)
        await wait_until(pilot, lambda: screen.record is not None and screen.record.id.endswith("normal"))
        chart = screen.query_one("LossChart")
        await wait_until(pilot, lambda: len(chart.data.loss[0]) > 0)
        log_lines = [line for line in (FIXTURES / "logs/lf_normal/trainer_log.jsonl").read_text().splitlines()
                     if '"loss"' in line]
        assert len(chart.data.loss[0]) == len(log_lines)
        progress = str(screen.query_one("#train-progress").render())
        assert "step" in progress and "loss" in progress
        panel = screen.query_one("GpuPanel")
        await wait_until(pilot, lambda: len(panel.samples) == 8)
        assert "MI300X" in str(panel.render())
        assert screen.query_one("#train-stop").disabled and not screen.query_one("#train-resume").disabled
        await wait_until(pilot, lambda: workspace.load_state().step("train").status.value == "done")


async def test_failed_run_shows_the_diagnosis_with_its_fix(workspace, train_only):
    place_recorded_run(workspace, "20260101-000000-bad", "lf_no_valid_samples", RunStatus.FAILED, 1, time.time())
    app = DevtuneApp(workspace, watch_terminal=False)
    async with app.run_test(size=(120, 40)) as pilot:
        screen = await opened(pilot, app)
        box = screen.query_one("DiagnosisBox")
        await wait_until(pilot, lambda: box.has_class("-visible"))
        text = str(box.render())
        assert "Cannot find valid samples" in text or "valid samples" in text.lower()
        assert "Fix" in text
        await wait_until(pilot, lambda: workspace.load_state().step("train").status.value == "attention")


async def test_no_config_says_where_to_go(workspace, train_only):
    app = DevtuneApp(workspace, watch_terminal=False)
    async with app.run_test(size=(120, 40)) as pilot:
        status = (await opened(pilot, app)).query_one("#train-status")
        await wait_until(pilot, lambda: "Config" in str(status.render()))
        await pilot.press("f5")
        await wait_until(pilot, lambda: app.screen.query_one("#step-error").has_class("-visible"))
        assert "config" in str(app.screen.query_one("#step-error").render()).lower()


async def test_small_terminal(workspace, train_only):
    place_recorded_run(workspace, "20260101-000000-normal", "lf_normal", RunStatus.FINISHED, 0, time.time())
    app = DevtuneApp(workspace, watch_terminal=False)
    async with app.run_test(size=(80, 24)) as pilot:
        await wait_until(pilot, lambda: app.screen.record is not None)
        assert app.screen.query_one("LossChart").size.height >= 3


async def test_the_chart_keeps_its_points_when_the_run_ends(workspace, train_only):
    """A run seen running, then ended with no new step: its loss stays on the chart."""
    from core.train.runs import read_record, run_dir, write_record

    rec = place_recorded_run(workspace, "20260101-000000-live", "lf_normal", RunStatus.RUNNING, None, time.time())
    app = DevtuneApp(workspace, watch_terminal=False)
    async with app.run_test(size=(120, 40)) as pilot:
        screen = await opened(pilot, app)
        chart = screen.query_one("LossChart")
        await wait_until(pilot, lambda: len(chart.data.loss[0]) > 0)
        n = len(chart.data.loss[0])
        d = run_dir(workspace, rec.id)
        write_record(d, read_record(d).model_copy(update={"status": RunStatus.FINISHED, "exit_code": 0}))
        await wait_until(pilot, lambda: screen.record.status is RunStatus.FINISHED, timeout=30)
        await pilot.pause(0.5)
        assert len(chart.data.loss[0]) == n


async def test_a_finished_run_does_not_wait_for_its_speed(workspace, train_only):
    """Issue 21: the progress line of a finished run said "speed not measurable yet" (the screen called
    progress_line without the run's activity); a run that ended waits for nothing."""
    place_recorded_run(workspace, "20260101-000000-normal", "lf_normal", RunStatus.FINISHED, 0, time.time() - 100)
    app = DevtuneApp(workspace, watch_terminal=False)
    async with app.run_test(size=(120, 40)) as pilot:
        screen = await opened(pilot, app)
        progress = screen.query_one("#train-progress")
        await wait_until(pilot, lambda: "step" in str(progress.render()))
        text = str(progress.render())
        assert "not measurable yet" not in text and "ETA" not in text, text


async def test_p_switches_between_the_charts_and_the_gpus_on_a_narrow_terminal(workspace, train_only):
    """One key, one meaning: `g` registers on the Data step, so the Train step's Chart / GPUs toggle is `p`."""
    place_recorded_run(workspace, "20260101-000000-normal", "lf_normal", RunStatus.FINISHED, 0, time.time())
    app = DevtuneApp(workspace, watch_terminal=False)
    async with app.run_test(size=(80, 24)) as pilot:
        screen = await opened(pilot, app)
        await wait_until(pilot, lambda: screen.record is not None)
        charts, gpus = screen.query_one("#train-charts"), screen.query_one("GpuPanel")
        assert charts.display and not gpus.display
        await pilot.press("g")
        await pilot.pause()
        assert charts.display and not gpus.display  # not Train's key
        await pilot.press("p")
        await wait_until(pilot, lambda: gpus.display and not charts.display)
        await pilot.press("p")
        await wait_until(pilot, lambda: charts.display and not gpus.display)


async def test_a_dpo_run_charts_its_rewards_over_its_steps(workspace, train_only):
    """The recorded DPO run of the tiny model: its rewards, margin and accuracy are series over the steps the
    loss has, not only the latest values."""
    import shutil as sh

    from core.train.runs import RunRecord, write_record

    src = FIXTURES / "runs" / "lf_dpo"
    (workspace.root / "saves" / "dpo").mkdir(parents=True)
    sh.copy(src / "trainer_log.jsonl", workspace.root / "saves" / "dpo" / "trainer_log.jsonl")
    d = workspace.runs_dir / "20260101-000000-dpo"
    d.mkdir(parents=True)
    for name in ("stdout.log", "stderr.log"):
        sh.copy(src / name, d / name)
    from core.config.files import save_config
    from core.config.presets import preset_spec

    save_config(workspace, preset_spec("cpu-demo", ["dpo"]))  # a CPU run: MFU means nothing there, and says so
    write_record(d, RunRecord(id=d.name, argv=["llamafactory-cli", "train", "x.yaml"], cwd=str(workspace.root),
                              config="configs/train.yaml", output_dir="saves/dpo", status=RunStatus.FINISHED,
                              exit_code=0, started=time.time()))
    app = DevtuneApp(workspace, watch_terminal=False)
    async with app.run_test(size=(120, 40)) as pilot:
        screen = await opened(pilot, app)
        chart = screen.query_one("StageChart")
        await wait_until(pilot, lambda: chart.has_class("-visible"))
        xs, ys = chart.series["rewards/margins"]
        assert len(xs) == 50 and xs[0] == 2 and xs[-1] == 100 and ys[-1] > ys[0]  # every logged step, in order
        chosen, rejected = chart.series["rewards/chosen"][1], chart.series["rewards/rejected"][1]
        assert chosen[-1] > 0 > rejected[-1]
        assert chart.series["rewards/accuracies"][1][-1] == 1.0
        text = "\n".join("".join(t for t, _ in row) for row in chart._rows())
        assert "chosen 4.58" in text and "accuracy 100%" in text and "100%" in text
        progress = str(screen.query_one("#train-progress").render())
        assert "tokens/s" in progress and "MFU not applicable (CPU run)" in progress, progress


@pytest.mark.parametrize("fixture", ["lf_sft_cpu_demo", "lf_dpo"])
async def test_the_screen_shows_the_snapshot_monitor_prints(workspace, train_only, capsys, fixture):
    """Issue 26: the Train step and `devtune monitor` render one snapshot (core.train.snapshot): a finished
    run's speed is its record's (the demo's SFT run is too short for the live window), a DPO run's rewards
    are the ones monitor --json has, and the progress line is monitor's, word for word."""
    import json

    from cli.main import main
    from core.train.watch import run_snapshot

    rec = place_recorded_run(workspace, f"20261201-000000-{fixture}", fixture, RunStatus.FINISHED, 0, time.time(),
                             ended_by_supervisor=True)
    assert main(["monitor", rec.id, "--json", "-w", str(workspace.root)]) == 0
    printed = json.loads(capsys.readouterr().out)
    app = DevtuneApp(workspace, watch_terminal=False)
    async with app.run_test(size=(120, 40)) as pilot:
        screen = await opened(pilot, app)
        await wait_until(pilot, lambda: screen.snapshot is not None and screen.snapshot.run == rec.id)
        shown = screen.snapshot
        assert json.loads(json.dumps(shown.to_json())) == printed == \
            json.loads(json.dumps(run_snapshot(workspace, rec.id).to_json()))
        progress = str(screen.query_one("#train-progress").render())
        assert progress == shown.progress_line()
        assert f"{printed['throughput']['tokens_per_s']:.0f} tokens/s" in progress, progress
        assert f"{printed['throughput']['steps_per_s']:.2f} steps/s" in progress, progress
        chart = screen.query_one("StageChart")
        if printed["stage_metrics"]:
            await wait_until(pilot, lambda: chart.has_class("-visible"))
            legend = "".join(t for t, _ in chart._rows()[0])
            stage = printed["stage_metrics"]
            assert f"chosen {stage['rewards/chosen']:.3g}" in legend and \
                f"rejected {stage['rewards/rejected']:.3g}" in legend and \
                f"accuracy {stage['rewards/accuracies']:.0%}" in legend, legend
        else:
            assert not chart.has_class("-visible")
