"""Issue 26: what devtune says about a run comes from one snapshot (core.train.snapshot.RunSnapshot).

Real recorded runs (tests/fixtures/runs): the demo's SFT run, 480 steps in 8 s of the trainer's clock (its
sliding window never measures a speed, so only its record knows it), and a DPO run of the tiny model (its
rewards on stdout). `devtune monitor` is called in-process; its JSON and its text are checked against the
snapshot the core function returns."""

from __future__ import annotations

import json
import time

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
