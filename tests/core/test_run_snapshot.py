"""Issue 26: what devtune says about a run comes from one snapshot (core.train.snapshot.RunSnapshot).

Real recorded runs (tests/fixtures/runs): the demo's SFT run, 480 steps in 8 s of the trainer's clock (its
sliding window never measures a speed, so only its record knows it), and a DPO run of the tiny model (its
rewards on stdout). `devtune monitor` is called in-process; its JSON and its text are checked against the
snapshot the core function returns."""

from __future__ import annotations

import json
import time

import pytest

from cli.main import main
from core.train.runs import RunStatus, read_record, run_dir
from core.train.watch import run_snapshot
from tests.recorded_runs import place_recorded_run


def monitor(capsys, ws, *args: str) -> str:
    capsys.readouterr()
    assert main(["monitor", *args, "-w", str(ws.root)]) == 0
    return capsys.readouterr().out


def test_a_finished_run_reports_the_speed_its_record_keeps(workspace, capsys):
    rec = place_recorded_run(workspace, "20261201-000000-sft", "lf_sft_cpu_demo", RunStatus.FINISHED, 0,
                             time.time(), ended_by_supervisor=True)
    kept = read_record(run_dir(workspace, rec.id)).throughput
    assert kept is not None and kept["tokens_per_s"] > 1000 and kept["steps_per_s"] > 10, kept
    snap = run_snapshot(workspace, rec.id)
    assert (snap.tokens_per_s, snap.steps_per_s) == (kept["tokens_per_s"], kept["steps_per_s"])
    assert snap.speed.over == "run" and not snap.speed.rate.estimated
    assert (snap.speed.applicable, snap.speed.mfu) == (kept["mfu_applicable"], kept["mfu"])

    js = json.loads(monitor(capsys, workspace, rec.id, "--json"))
    assert js == json.loads(json.dumps(snap.to_json()))
    assert js["throughput"]["tokens_per_s"] == kept["tokens_per_s"] and js["throughput"]["over"] == "run"
    assert js["throughput"]["steps_per_s"] == kept["steps_per_s"] and js["eta_s"] == 0.0

    text = monitor(capsys, workspace, rec.id)
    assert f"{kept['tokens_per_s']:.0f} tokens/s" in text and f"{kept['steps_per_s']:.2f} steps/s" in text, text
    assert text.splitlines()[0] == snap.progress_text() and "ETA" not in text


def test_devtune_runs_says_the_same_speed(workspace, capsys):
    rec = place_recorded_run(workspace, "20261201-000000-sft", "lf_sft_cpu_demo", RunStatus.FINISHED, 0,
                             time.time(), ended_by_supervisor=True)
    capsys.readouterr()
    assert main(["runs", "--json", "-w", str(workspace.root)]) == 0
    listed = json.loads(capsys.readouterr().out)["runs"][0]["throughput"]
    shown = run_snapshot(workspace, rec.id).to_json()["throughput"]
    assert {k: shown[k] for k in listed} == listed


def test_a_finished_dpo_run_reports_its_rewards(workspace, capsys):
    rec = place_recorded_run(workspace, "20261201-000000-dpo", "lf_dpo", RunStatus.FINISHED, 0, time.time(),
                             ended_by_supervisor=True)
    snap = run_snapshot(workspace, rec.id)
    stage = dict(snap.stage_metrics)
    assert set(stage) == {"rewards/chosen", "rewards/rejected", "rewards/margins", "rewards/accuracies"}
    assert stage["rewards/chosen"] > 0 > stage["rewards/rejected"] and stage["rewards/accuracies"] == 1.0

    js = json.loads(monitor(capsys, workspace, rec.id, "--json"))
    assert js["stage_metrics"] == stage
    assert js["throughput"]["tokens_per_s"] == read_record(run_dir(workspace, rec.id)).throughput["tokens_per_s"]
    text = monitor(capsys, workspace, rec.id)
    assert "tokens/s" in text and f"rewards chosen {stage['rewards/chosen']:.3g}" in text and "accuracy 100%" in text


def test_an_ended_run_without_a_kept_speed_shows_its_last_window(workspace):
    """A record written before devtune kept the speed (or by a supervisor that was killed): the last minute's
    figure, said to be that, and no advice (the run goes no further)."""
    rec = place_recorded_run(workspace, "20261201-000000-dpo", "lf_dpo", RunStatus.FINISHED, 0, time.time())
    snap = run_snapshot(workspace, rec.id)
    assert snap.record.throughput is None
    assert snap.speed.over == "window" and snap.tokens_per_s is not None and snap.speed.advice == ()
    assert snap.to_json()["throughput"]["over"] == "window"


def test_a_failed_run_waits_for_no_eta(workspace, capsys):
    """Stopped halfway: its ETA is no longer a time left (null, and no ETA in the line)."""
    rec = place_recorded_run(workspace, "20261201-000000-dpo", "lf_dpo", RunStatus.FAILED, 1, time.time())
    log = workspace.root / "saves" / rec.id / "trainer_log.jsonl"
    log.write_text("\n".join(log.read_text().splitlines()[:30]) + "\n")
    (run_dir(workspace, rec.id) / "stderr.log").write_text("")  # tqdm's bar went on to step 100
    snap = run_snapshot(workspace, rec.id)
    assert snap.step < snap.total and snap.eta_s is None and "ETA" not in snap.progress_line()
    assert json.loads(monitor(capsys, workspace, rec.id, "--json"))["eta_s"] is None


def test_a_live_run_is_the_window_and_says_its_eta(workspace):
    rec = place_recorded_run(workspace, "20261201-000000-live", "lf_dpo", RunStatus.RUNNING, None, time.time())
    snap = run_snapshot(workspace, rec.id)
    assert snap.active and snap.speed.over == "window" and "ETA" in snap.progress_line()


def _runs_json(capsys, ws) -> dict:
    capsys.readouterr()
    assert main(["runs", "--json", "-w", str(ws.root)]) == 0
    return {r["id"]: r["throughput"] for r in json.loads(capsys.readouterr().out)["runs"]}


def _resumed(ws, status: RunStatus):
    """Run a stopped at its 25th logged step; run b resumes it in the same output folder (its lines after a's,
    the trainer's clock restarted, the step and token counts going on from the checkpoint)."""
    from core.train.runs import freeze_trainer_log, write_record
    from core.train.throughput import run_throughput

    a = place_recorded_run(ws, "20261201-000000-a", "lf_dpo", RunStatus.STOPPED, 0, time.time() - 100)
    log = ws.root / a.output_dir / "trainer_log.jsonl"
    lines = log.read_text().splitlines()
    clock = lambda row: sum(int(x) * m for x, m in zip(row["elapsed_time"].split(":"), (3600, 60, 1)))  # noqa: E731
    restart = clock(json.loads(lines[25])) - 1
    resumed = []
    for line in lines[25:]:
        row = json.loads(line)
        row["elapsed_time"] = "0:{:02d}:{:02d}".format(*divmod(clock(row) - restart, 60))
        resumed.append(json.dumps(row))
    log.write_text("\n".join(lines[:25]) + "\n")
    start = log.stat().st_size
    log.write_text("\n".join(lines[:25] + resumed) + "\n")
    d = ws.runs_dir / "20261201-000100-b"
    d.mkdir(parents=True)
    for name in ("stdout.log", "stderr.log"):
        (d / name).write_bytes((run_dir(ws, a.id) / name).read_bytes())
    b = read_record(run_dir(ws, a.id)).model_copy(update={"id": d.name, "resume_of": a.id, "log_start": start,
                                                          "status": status, "started": time.time() - 30})
    if not b.active:  # as the supervisor leaves it
        b.log_frozen = freeze_trainer_log(d, b)
        b.throughput = run_throughput(ws, d, b)
    write_record(d, b)
    return b


def test_runs_and_monitor_say_one_speed_for_a_live_run(workspace, capsys):
    """Issue 29, item 11: `runs --json` said nothing of a run that still goes (its record keeps a speed only
    once it ends) while monitor said the last minute's; now both say the run's snapshot."""
    rec = place_recorded_run(workspace, "20261201-000000-live", "lf_dpo", RunStatus.RUNNING, None, time.time())
    listed = _runs_json(capsys, workspace)[rec.id]
    shown = json.loads(monitor(capsys, workspace, rec.id, "--json"))["throughput"]
    assert listed == shown and listed["over"] == "window" and listed["tokens_per_s"] > 0


@pytest.mark.parametrize("status", [RunStatus.RUNNING, RunStatus.FINISHED])
def test_runs_and_monitor_say_one_speed_for_a_resumed_run(workspace, capsys, status):
    b = _resumed(workspace, status)
    listed = _runs_json(capsys, workspace)[b.id]
    shown = json.loads(monitor(capsys, workspace, b.id, "--json"))
    assert listed == shown["throughput"] and listed["tokens_per_s"] > 0
    assert shown["resume_of"] == "20261201-000000-a" and shown["step"] == 100
    assert listed["over"] == ("window" if status is RunStatus.RUNNING else "run")
