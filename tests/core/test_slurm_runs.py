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


def test_every_nodes_gpu_samples_reach_the_run_with_devices_renumbered(workspace):
    """Each node of a Slurm job records its own GPUs (gpu-node<N>.jsonl); the run shows them all."""
    from core.train.gpu.history import RunGpuTail, read_run_history
    from core.train.gpu.sample import GpuSample

    record = _slurm_record(workspace, status=RunStatus.RUNNING)
    directory = run_dir(workspace, record.id)
    for node in (0, 1):
        with open(directory / f"gpu-node{node}.jsonl", "w") as fh:
            for index in (0, 1):
                sample = GpuSample(ts=100.0 + node, backend="nvml", index=index, name="H200", util_pct=50.0 + node)
                fh.write(json.dumps(sample.to_record()) + "\n")
    seen = read_run_history(directory)
    assert sorted(s.index for s in seen) == [0, 1, 64, 65]
    assert {s.name for s in seen if s.index >= 64} == {"node 1 · H200"}
    tail = RunGpuTail(directory)
    assert len(tail.poll()) == 4 and tail.poll() == []


def test_a_job_the_cluster_asked_to_save_and_stop_is_a_stopped_run_with_the_reason(workspace):
    """The batch shell's trap (core.train.slurm.stop_job) left stop_reason; the job ended well (the trainers
    saved and exited 0): the supervisor records a stopped run, why, and the way on."""
    import sys

    from core.train.supervisor import supervise

    record = _slurm_record(workspace, status=RunStatus.RUNNING)
    directory = run_dir(workspace, record.id)
    write_record(directory, record.model_copy(update={"argv": [sys.executable, "-c", "pass"]}))
    (directory / "stop_reason").write_text("time-limit\n")
    supervise(directory)
    ended = refresh(directory)
    assert ended.status is RunStatus.STOPPED and ended.exit_code == 0 and ended.stop_reason == "time-limit"
    assert "saved a checkpoint and stopped: its time limit was near" in ended.note
    assert f"devtune resume {record.id}" in ended.note
    (directory / "stop_reason").unlink()
    write_record(directory, record.model_copy(update={"argv": [sys.executable, "-c", "pass"]}))
    supervise(directory)
    assert refresh(directory).status is RunStatus.FINISHED and refresh(directory).stop_reason is None
