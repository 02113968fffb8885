"""Requeue without a person (issue 34, item 3), without a cluster: the batch script's requeue lines, the run's
segments (core.train.slurm_segments), the decision to requeue, the resume point, `runs --json` and the note.
The requeue itself on the two-node cluster: tests/e2e/test_slurm_requeue.py."""

from __future__ import annotations

import json
import sys

from core.train.runs import RunRecord, RunStatus, ending_note, read_record, run_dir, write_record
from core.train.slurm import SlurmJob, render_sbatch
from core.train.slurm_segments import finish, main, resume_args, start_segment

RUN = "/work/ws/.devtune/runs/r1"


def job(**kw) -> SlurmJob:
    return SlurmJob(name="devtune-r1", nodes=2, workdir="/work/ws", run_dir=RUN,
                    argv=["llamafactory-cli", "train", "configs/train.yaml"], time_limit="60", **kw)


def test_a_requeue_job_asks_slurm_to_requeue_and_resumes_its_last_checkpoint_on_a_restart():
    lines = render_sbatch(job(requeue=True, output_dir="/work/ws/saves/big")).splitlines()
    assert "#SBATCH --requeue" in lines
    start = next(i for i, x in enumerate(lines) if x.endswith(f"-m core.train.slurm_segments start {RUN} || true"))
    restart = next(x for x in lines if "SLURM_RESTART_COUNT" in x)
    assert "resume-args /work/ws/saves/big" in restart and restart.startswith('if [ "${SLURM_RESTART_COUNT:-0}" -gt 0 ]')
    srun = next(x for x in lines if x.startswith("srun "))
    # the restart's arguments reach every node's trainer after its own
    assert srun.endswith('devtune-node "${resume[@]}" &') and 'exec llamafactory-cli train configs/train.yaml "$@"' in srun
    end = lines[-2]
    assert end.endswith(f'-m core.train.slurm_segments end {RUN} "$code" "$SLURM_JOB_ID" --requeue || true')
    assert lines[-3] == "trap '' USR1 TERM" and lines[-1] == 'exit "$code"'
    assert start < lines.index(srun)


def test_without_requeue_the_job_records_its_segment_and_is_not_requeued():
    lines = render_sbatch(job()).splitlines()
    assert "#SBATCH --requeue" not in lines and not any("SLURM_RESTART_COUNT" in x for x in lines)
    assert lines[-2].endswith('"$code" "$SLURM_JOB_ID" || true')


def _record(tmp_path):
    directory = tmp_path / "run"
    (directory / "nodes").mkdir(parents=True)
    write_record(directory, RunRecord(id="r1", argv=["x"], cwd=str(tmp_path), launcher="slurm", job_id="7",
                                      nodes=2, status=RunStatus.RUNNING))
    return directory


def test_each_start_of_the_job_is_one_segment_of_the_same_record(tmp_path):
    directory = _record(tmp_path)
    (directory / "nodes" / "0.pid").write_text("123")
    start_segment(directory, {"SLURM_NNODES": "2", "SLURM_JOB_NODELIST": "n[1-2]"}, now=100.0)
    (directory / "stop_reason").write_text("time-limit\n")
    assert finish(directory, 0, "7", requeue=False) == 0  # requeue off: recorded, not requeued
    start_segment(directory, {"SLURM_NNODES": "2", "SLURM_JOB_NODELIST": "n[1-2]", "SLURM_RESTART_COUNT": "1"},
                  now=200.0)
    # the earlier segment's stop and pid files are not this one's
    assert not (directory / "stop_reason").exists() and not (directory / "nodes" / "0.pid").exists()
    assert finish(directory, 1, "7", requeue=True) == 0  # failed: not requeued, whatever the setting
    segments = read_record(directory).segments
    assert [(s.restart, s.nodes, s.nodelist, s.start) for s in segments] == [(0, 2, "n[1-2]", 100.0),
                                                                             (1, 2, "n[1-2]", 200.0)]
    assert [(s.reason, s.requeued) for s in segments] == [("time-limit", False), ("exit 1", False)]
    assert all(s.end is not None and s.end >= s.start for s in segments)


def test_a_requeue_slurm_refuses_leaves_the_run_stopped_with_its_segment(tmp_path, monkeypatch):
    directory = _record(tmp_path)
    monkeypatch.setenv("PATH", str(tmp_path))  # no scontrol here: the requeue fails
    start_segment(directory, {"SLURM_NNODES": "2"}, now=100.0)
    (directory / "stop_reason").write_text("preempted\n")
    assert finish(directory, 0, "7", requeue=True) == 1
    (segment,) = read_record(directory).segments
    assert segment.reason == "preempted" and segment.requeued is False
    assert (directory / "stop_reason").exists()  # the supervisor records a stopped run: `devtune resume` goes on


def test_a_restart_resumes_the_highest_checkpoint(tmp_path, capsys):
    out = tmp_path / "saves"
    assert resume_args(out) == []
    for step in (5, 40, 12):
        (out / f"checkpoint-{step}").mkdir(parents=True)
    assert resume_args(out) == [f"resume_from_checkpoint={out / 'checkpoint-40'}", "overwrite_output_dir=false"]
    assert main(["resume-args", str(out)]) == 0
    assert capsys.readouterr().out.splitlines() == resume_args(out)
    assert main(["end", "x"]) == 2


def test_runs_json_and_the_note_show_the_segments(workspace, capsys):
    from cli.main import main as devtune

    segments = [{"restart": 0, "nodes": 2, "nodelist": "n[1-2]", "start": 100.0, "end": 160.0,
                 "reason": "time-limit", "requeued": True},
                {"restart": 1, "nodes": 2, "nodelist": "n[1-2]", "start": 300.0, "end": 330.0,
                 "reason": "completed"}]
    record = RunRecord.model_validate({"id": "20261201-120000-big", "argv": [sys.executable], "launcher": "slurm",
                                       "cwd": str(workspace.root), "job_id": "7", "nodes": 2, "exit_code": 0,
                                       "status": "finished", "ended": 330.0, "segments": segments})
    directory = run_dir(workspace, record.id)
    directory.mkdir(parents=True)
    write_record(directory, record)
    note = ending_note(record)
    assert note.startswith("segments: n[1-2] ") and " time-limit, n[1-2] " in note and note.endswith(" completed")
    capsys.readouterr()
    assert devtune(["runs", "--json", "-w", str(workspace.root)]) == 0
    (shown,) = json.loads(capsys.readouterr().out)["runs"]
    assert [(s["start"], s["end"], s["reason"], s["requeued"]) for s in shown["segments"]] == [
        (100.0, 160.0, "time-limit", True), (300.0, 330.0, "completed", False)]
    assert ending_note(record.model_copy(update={"segments": segments[:1]})) == ""  # one segment: nothing to say


def test_config_init_and_edit_set_requeue(workspace, devtune_cli):
    from tests.core.config_workspace import fake_model, register_dataset

    fake_model(workspace)
    register_dataset(workspace, "kefu")
    ws = str(workspace.root)
    made = devtune_cli("-w", ws, "config", "init", "--dataset", "kefu", "--launcher", "slurm", "--requeue")
    assert made.returncode == 0, made.stdout + made.stderr
    assert _requeue(workspace) is True
    edited = devtune_cli("-w", ws, "config", "edit", "--no-requeue")
    assert edited.returncode == 0, edited.stdout + edited.stderr
    assert _requeue(workspace) is False


def _requeue(workspace) -> bool:
    from core.config.files import load_spec

    return load_spec(workspace).launch.requeue
