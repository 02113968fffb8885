"""The Train step's issue-19/20 parts, pinned as SVG snapshots: a DPO run's rewards, margin and accuracy charted
over its steps (a real recorded run of the tiny model), and a live run that stalled, with the stall box (a
rank's recorded py-spy stack), the throughput line (tokens/s, MFU against the catalogue's MI300X) and the
advice. Review a changed snapshot in the HTML report, then `pytest tests/snapshots --snapshot-update`."""

from __future__ import annotations

import shutil
import time
from pathlib import Path

from core.train.runs import RunStatus
from tests.snapshots.conftest import FIXTURES
from tests.snapshots.test_snapshots import SIZE, app_on
from tests.tui.helpers import opened, wait_until

DPO = FIXTURES / "runs" / "lf_dpo"
STACK = (FIXTURES / "stacks" / "ddp_rank0_in_backward.txt").read_text()


def place_dpo_run(ws, name: str, status: RunStatus, started: float):
    """The recorded DPO run (tests/fixtures/runs/lf_dpo) as devtune leaves a run in a workspace."""
    from core.train.runs import RunRecord, write_record

    out = ws.root / "saves" / name
    out.mkdir(parents=True)
    shutil.copy(DPO / "trainer_log.jsonl", out / "trainer_log.jsonl")
    d = ws.runs_dir / name
    d.mkdir(parents=True)
    for log in ("stdout.log", "stderr.log"):
        shutil.copy(DPO / log, d / log)
    record = RunRecord(id=name, argv=["llamafactory-cli", "train", "configs/train.yaml"], cwd=str(ws.root),
                       config="configs/train.yaml", output_dir=f"saves/{name}", status=status,
                       exit_code=0 if status is RunStatus.FINISHED else None, started=started,
                       ended=started + 60 if status is RunStatus.FINISHED else None, host="gpu-box")
    write_record(d, record)
    return record


def test_train_step_charts_a_dpo_runs_rewards(snap_ws, snap_compare):
    place_dpo_run(snap_ws, "20260101-000000-cpu-demo-dpo", RunStatus.FINISHED, 1767225600.0)

    async def run_before(pilot):
        screen = await opened(pilot, pilot.app)
        chart = screen.query_one("StageChart")
        await wait_until(pilot, lambda: chart.has_class("-visible") and screen.snapshot is not None)
        await pilot.pause(0.6)  # the loss chart redraws at most 4 times a second

    assert snap_compare(app_on(snap_ws, "train"), terminal_size=SIZE, run_before=run_before)


def test_train_step_shows_a_live_stall_with_the_ranks_stack_and_the_throughput(snap_ws, snap_compare,
                                                                                monkeypatch):
    """A live run (its trainer: this test's process) on a config for one MI300X; the stall is the recorded one
    of tests/e2e/test_train_stall.py (the check itself is tested there and in tests/core/test_stalls.py: here
    its seconds would change the picture at each run)."""
    import os

    import psutil

    from core.config.files import save_config
    from core.config.presets import preset_spec
    from core.train.runs import ProcessRef, read_record, run_dir, write_record
    from core.train.stalls import Stall
    from core.train.watch import RunWatcher

    save_config(snap_ws, preset_spec("lora-1gpu", ["dpo_sharegpt"]))
    rec = place_dpo_run(snap_ws, "20260101-000000-lora-dpo", RunStatus.RUNNING, time.time() - 120)
    d = run_dir(snap_ws, rec.id)
    me = psutil.Process(os.getpid())
    write_record(d, read_record(d).model_copy(update={"trainer": ProcessRef(pid=me.pid,
                                                                            create_time=me.create_time())}))
    stall = Stall("no-step", 600.0, "no new step for 600 s after step 60 (the steps before took 1.0 s between "
                  "logs)", 60, {4965: STACK})
    monkeypatch.setattr(RunWatcher, "_check_stall", lambda self, samples: stall)

    async def run_before(pilot):
        screen = await opened(pilot, pilot.app)
        box = screen.query_one("DiagnosisBox")
        await wait_until(pilot, lambda: box.has_class("-visible") and "MFU" in str(
            screen.query_one("#train-progress").render()))
        await pilot.pause(0.6)

    assert snap_compare(app_on(snap_ws, "train"), terminal_size=SIZE, run_before=run_before)


def test_the_stall_box_and_the_throughput_line_say_what_they_must(snap_ws, monkeypatch):
    """What the snapshot above shows, in words (a snapshot diff does not say which part changed)."""
    import asyncio
    import os

    import psutil

    from core.config.files import save_config
    from core.config.presets import preset_spec
    from core.train.runs import ProcessRef, read_record, run_dir, write_record
    from core.train.stalls import Stall
    from core.train.watch import RunWatcher

    save_config(snap_ws, preset_spec("lora-1gpu", ["dpo_sharegpt"]))
    rec = place_dpo_run(snap_ws, "20260101-000000-lora-dpo", RunStatus.RUNNING, time.time() - 120)
    d = run_dir(snap_ws, rec.id)
    me = psutil.Process(os.getpid())
    write_record(d, read_record(d).model_copy(update={"trainer": ProcessRef(pid=me.pid,
                                                                            create_time=me.create_time())}))
    stall = Stall("no-step", 600.0, "no new step for 600 s after step 60", 60, {4965: STACK})
    monkeypatch.setattr(RunWatcher, "_check_stall", lambda self, samples: stall)

    async def go():
        app = app_on(snap_ws, "train")
        async with app.run_test(size=SIZE) as pilot:
            screen = await opened(pilot, app)
            box = screen.query_one("DiagnosisBox")
            progress = screen.query_one("#train-progress")
            await wait_until(pilot, lambda: box.has_class("-visible") and "MFU" in str(progress.render()))
            text = str(box.render())
            assert "stalled: no new step for 600 s" in text and "process 4965 is here now" in text
            assert "_engine_run_backward" in text
            line = str(progress.render())
            assert "tokens/s" in line and "MFU" in line and "(estimate)" not in line, line  # LLaMA-Factory's count
            advice = str(screen.query_one("#train-advice").render())
            assert "packing" in advice and screen.query_one("#train-advice").display
            chart = screen.query_one("StageChart")
            assert chart.has_class("-visible") and set(chart.series) >= {"rewards/chosen", "rewards/accuracies"}

    asyncio.run(go())


def test_the_dpo_fixture_is_a_real_dpo_run():
    assert Path(DPO / "train.yaml").read_text().count("stage: dpo") == 1
    assert "rewards/chosen" in (DPO / "stdout.log").read_text()
    assert '"total_tokens"' in (DPO / "trainer_log.jsonl").read_text()
