"""core.train.slurm without a cluster: the sbatch script, `scontrol show job` read back, the preflight's verdict.

scontrol_job_failed.txt was printed by Slurm 22.05 (Debian 12) on the test cluster of tests/slurm_cluster.py;
the pending and timeout lines keep Slurm's field names and order, trimmed to the fields devtune reads."""

from __future__ import annotations

from pathlib import Path

import pytest

from core.train.slurm import (JobState, PreflightMismatch, SlurmJob, check_preflight, parse_scontrol_job,
                              render_sbatch)

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "slurm"


def job(**kw) -> SlurmJob:
    base = dict(name="devtune-r1", nodes=2, workdir="/work/ws", run_dir="/work/ws/.devtune/runs/r1",
                argv=["llamafactory-cli", "train", "configs/train.yaml"],
                env={"FORCE_TORCHRUN": "1", "NPROC_PER_NODE": "8", "NODE_RANK": "0", "MASTER_ADDR": "x"},
                gpus_per_node=8, partition="gpu", account="ml", time_limit="2-00:00:00",
                extra=["--exclusive", "#SBATCH --qos=high"], master_port=29577)
    base.update(kw)
    return SlurmJob(**base)


def test_the_script_starts_one_torchrun_per_node():
    text = render_sbatch(job())
    lines = text.splitlines()
    assert lines[0] == "#!/bin/bash"
    for want in ("#SBATCH --nodes=2", "#SBATCH --ntasks-per-node=1", "#SBATCH --gpus-per-node=8",
                 "#SBATCH --partition=gpu", "#SBATCH --account=ml", "#SBATCH --time=2-00:00:00",
                 "#SBATCH --exclusive", "#SBATCH --qos=high", "#SBATCH --output=/work/ws/.devtune/runs/r1/stdout.log",
                 "export MASTER_PORT=29577", 'export NNODES="$SLURM_NNODES"', "export NPROC_PER_NODE=8"):
        assert want in lines, want
    # the node's rank and the master come from the job, never from the config's single-node values
    assert "export NODE_RANK=0" not in text and "export MASTER_ADDR=x" not in text
    srun = next(line for line in lines if line.startswith("srun "))
    assert srun.startswith("srun --kill-on-bad-exit=1") and "NODE_RANK=\"$SLURM_NODEID\"" in srun
    assert "exec llamafactory-cli train configs/train.yaml" in srun and 'nodes/"$SLURM_NODEID".pid' in srun


def test_the_job_saves_before_its_time_limit_and_on_preemption():
    """USR1 to the batch shell 120 s before the limit; the shell traps it and TERM (a preemption) as devtune's
    graceful stop of every node, and waits for the trainers (srun in the background, so the trap runs at once)."""
    lines = render_sbatch(job()).splitlines()
    assert "#SBATCH --signal=B:USR1@120" in lines
    assert "trap 'graceful_stop time-limit' USR1" in lines and "trap 'graceful_stop preempted' TERM" in lines
    stop = next(line for line in lines if line.startswith("graceful_stop()"))
    assert "interrupted=1" in stop  # the wait loop waits again after a trap
    assert '-m core.train.slurm stop-job "$SLURM_JOB_ID" "$SLURM_NNODES" /work/ws/.devtune/runs/r1 "$1"' in stop
    assert lines.index("trainers=$!") == lines.index(next(x for x in lines if x.startswith("srun "))) + 1
    assert next(x for x in lines if x.startswith("srun ")).endswith(" &") and lines[-1] == 'exit "$code"'
    assert "--signal" not in render_sbatch(job(save_before=0))


def test_a_cpu_cluster_asks_for_no_gpu():
    assert "--gpus-per-node" not in render_sbatch(job(gpus_per_node=0, partition=None, account=None, time_limit=None))


def test_paths_with_spaces_are_quoted():
    text = render_sbatch(job(workdir="/work/my ws"))
    assert "cd '/work/my ws'" in text


@pytest.mark.parametrize("name, state, ended, exit_, by_cluster", [
    ("scontrol_job_failed.txt", "FAILED", True, 3, False),
    ("scontrol_job_pending.txt", "PENDING", False, 0, False),
    ("scontrol_job_timeout.txt", "TIMEOUT", True, 128 + 15, True),
])
def test_job_states_read_back(name, state, ended, exit_, by_cluster):
    js = parse_scontrol_job((FIXTURES / name).read_text())
    assert js.state == state and js.ended is ended and js.process_exit == exit_
    assert js.ended_by_cluster is by_cluster
    assert js.describe()


def test_pending_says_why_and_running_says_where():
    pending = parse_scontrol_job((FIXTURES / "scontrol_job_pending.txt").read_text())
    assert pending.reason == "Resources" and "Resources" in pending.describe() and pending.nodes == ""
    assert "gpu[07-08]" in JobState("9", "RUNNING", nodes="gpu[07-08]").describe()
    assert parse_scontrol_job("slurm_load_jobs error: Invalid job id specified") is None


def test_the_preflight_names_the_node_and_the_versions_that_differ():
    a = {"node": "n1", "python": "3.11.7", "transformers": "5.6.0", "file:data/s.jsonl": "ab12"}
    check_preflight([a, dict(a, node="n2")])
    with pytest.raises(PreflightMismatch) as info:
        check_preflight([a, dict(a, node="n2", transformers="4.57.1")])
    assert "transformers: 5.6.0 on n1, 4.57.1 on n2" in str(info.value)
    with pytest.raises(PreflightMismatch) as info:
        check_preflight([a, dict(a, node="n2", **{"file:data/s.jsonl": "unreadable: No such file or directory"})])
    assert "data/s.jsonl on n2: unreadable" in str(info.value)
