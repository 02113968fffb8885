"""Save before the end, on a real two-node Slurm cluster (tests/slurm_cluster.py): a job with a one-minute time
limit gets Slurm's SIGUSR1 ahead of it (`--signal=B:USR1@N` in devtune's batch script), and a preemption's SIGTERM
to the batch shell is handled the same way: the shell records why (stop_reason) and gives every node devtune's
graceful stop (SIGABRT to the trainers, as `devtune stop`), then waits for the trainers to save and exit, so the
job ends well before Slurm would kill it. The trainer is a stand-in that saves on SIGABRT (the real ranks'
save-on-stop is tests/core/test_synced_stop.py and the ZeRO-3 runs)."""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path

import pytest

from core.train.slurm import SlurmJob, job_state, render_sbatch, stop_reason, submit
from tests.slurm_cluster import missing_reason, start_cluster

ROOT = Path(__file__).resolve().parents[2]
pytestmark = pytest.mark.skipif(missing_reason() is not None, reason=missing_reason() or "")

# trains "forever"; on SIGABRT writes its checkpoint (the step it reached) and exits 0, as the ranks do
TRAINER = r"""
import os, signal, sys, time
run, step = sys.argv[1], [0]
def save_and_stop(*_):
    open(os.path.join(run, "checkpoint-node%s" % os.environ["NODE_RANK"]), "w").write(str(step[0]))
    sys.exit(0)
signal.signal(signal.SIGABRT, save_and_stop)
while True:
    time.sleep(0.2)
    step[0] += 1
"""


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    c = start_cluster(tmp_path_factory.mktemp("slurm"))
    yield c
    c.stop()


def _submit(tmp_path, **kw) -> tuple[str, Path]:
    run = tmp_path / "run"
    run.mkdir()
    (tmp_path / "trainer.py").write_text(TRAINER)
    job = SlurmJob(name="devtune-notice", nodes=2, workdir=str(tmp_path), run_dir=str(run),
                   argv=[sys.executable, str(tmp_path / "trainer.py"), str(run)], master_port=29578, **kw)
    (run / "job.sbatch").write_text(render_sbatch(job))
    return submit(run / "job.sbatch"), run


def _wait(cluster, job_id: str, run: Path, timeout: float = 150) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "core.train.slurm", "wait", job_id, str(run / "slurm.json")],
                          env=cluster.env, cwd=ROOT, capture_output=True, text=True, timeout=timeout)


def _running(job_id: str, run: Path) -> None:
    deadline = time.monotonic() + 60
    while len(list((run / "nodes").glob("*.pid")) if (run / "nodes").exists() else []) < 2:
        assert time.monotonic() < deadline, (run / "stderr.log").read_text() if (run / "stderr.log").exists() else ""
        time.sleep(0.2)
    assert job_state(job_id).state == "RUNNING"


def test_a_job_near_its_time_limit_saves_on_every_node_and_ends_well(cluster, tmp_path, monkeypatch):
    monkeypatch.setenv("SLURM_CONF", cluster.env["SLURM_CONF"])
    job_id, run = _submit(tmp_path, time_limit="1", save_before=30)
    _running(job_id, run)
    done = _wait(cluster, job_id, run)
    state = json.loads((run / "slurm.json").read_text())
    log = (run / "stderr.log").read_text()
    assert state["state"] == "COMPLETED" and done.returncode == 0, (state, log[-2000:])  # not TIMEOUT
    assert stop_reason(run) == "time-limit"
    assert "the cluster asked it to stop (time-limit)" in log
    saved = {p.name: int(p.read_text()) for p in run.glob("checkpoint-node*")}
    assert sorted(saved) == ["checkpoint-node0", "checkpoint-node1"] and min(saved.values()) > 0


def test_a_preemptions_sigterm_to_the_batch_shell_saves_the_same_way(cluster, tmp_path, monkeypatch):
    monkeypatch.setenv("SLURM_CONF", cluster.env["SLURM_CONF"])
    job_id, run = _submit(tmp_path)
    _running(job_id, run)
    # what a preemption sends the batch shell (PreemptMode=REQUEUE/CANCEL with a GraceTime)
    cluster.run("scancel", "--batch", "--signal=TERM", job_id).check_returncode()
    done = _wait(cluster, job_id, run)
    state = json.loads((run / "slurm.json").read_text())
    assert state["state"] == "COMPLETED" and done.returncode == 0, (state, (run / "stderr.log").read_text()[-2000:])
    assert stop_reason(run) == "preempted"
    assert sorted(p.name for p in run.glob("checkpoint-node*")) == ["checkpoint-node0", "checkpoint-node1"]
