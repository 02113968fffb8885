"""A Slurm run as `runs` and `monitor` read it (core.train.runs with core.train.slurm_launch): a job in the
queue is a starting run with Slurm's reason, and a job the cluster ended says so, with the way to resume."""

from __future__ import annotations

import json

from core.train.runs import RunRecord, RunStatus, ending_note, refresh, run_dir, write_record


def _slurm_record(ws, **kw) -> RunRecord:
    record = RunRecord(id="20261201-120000-big", argv=["python", "-m", "core.train.slurm", "wait", "42", "x"],
                       cwd=str(ws.root), launcher="slurm", job_id="42", nodes=2, **kw)
    directory = run_dir(ws, record.id)
    directory.mkdir(parents=True)
    write_record(directory, record)
    return record


def test_a_job_waiting_in_the_queue_is_a_starting_run_with_the_reason(workspace):
    record = _slurm_record(workspace, status=RunStatus.RUNNING)
    (run_dir(workspace, record.id) / "slurm.json").write_text(json.dumps(
        {"job_id": "42", "state": "PENDING", "reason": "Resources", "exit_code": None, "signal": None, "nodes": ""}))
    seen = refresh(run_dir(workspace, record.id))
    assert seen.status is RunStatus.STARTING and "waiting in the queue (Resources)" in seen.note
    assert "Slurm job 42" in seen.note


def test_a_job_the_cluster_ended_says_how_and_how_to_resume(workspace):
    record = _slurm_record(workspace, status=RunStatus.FAILED, exit_code=143, cluster_state="TIMEOUT")
    note = ending_note(record)
    assert "time limit" in note and f"devtune resume {record.id}" in note
    stopped = record.model_copy(update={"cluster_state": None, "stop_requested": 1.0, "exit_code": 0})
    assert "stopped on request" in ending_note(stopped)
