"""Requeue without a person, on a real two-node Slurm cluster (tests/slurm_cluster.py): a job with a one-minute
time limit and requeue on gets Slurm's SIGUSR1 ahead of the limit, every node saves and stops, the batch script
asks Slurm to requeue the job, Slurm runs the same script again (SLURM_RESTART_COUNT=1) and every node's trainer
resumes from the checkpoint the first segment saved, then finishes. The run's supervisor watches the whole job as
one run, and its record has the two segments with why each ended. The trainer is a stand-in that saves on
SIGABRT and reads the checkpoint it is given (the real ranks' save and resume: tests/core/test_synced_stop.py and
the ZeRO-3 runs). Slurm holds a requeued job about two minutes (Reason=BeginTime): this test takes four or five."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from core.train.runs import RunRecord, RunStatus, read_record, update_record, write_record
from core.train.slurm import SlurmJob, render_sbatch, submit
from tests.slurm_cluster import missing_reason, start_cluster

ROOT = Path(__file__).resolve().parents[2]
pytestmark = pytest.mark.skipif(missing_reason() is not None, reason=missing_reason() or "")

# trains "forever"; on SIGABRT node 0 saves checkpoint-<step> and every node exits 0, as the ranks do; started
# with resume_from_checkpoint=PATH it reads the step saved there, trains a few more steps and finishes
TRAINER = r"""
import os, signal, sys, time
out, node, step = sys.argv[1], os.environ["NODE_RANK"], [0]
resume = [a.split("=", 1)[1] for a in sys.argv[2:] if a.startswith("resume_from_checkpoint=")]
if resume:
    saved = int(open(os.path.join(resume[0], "step")).read())
    open(os.path.join(out, "resumed-node" + node), "w").write("%s %d" % (os.path.basename(resume[0]), saved))
    time.sleep(2)
    sys.exit(0)
def save_and_stop(*_):
    if node == "0":
        os.makedirs(os.path.join(out, "checkpoint-%d" % step[0]))
        open(os.path.join(out, "checkpoint-%d" % step[0], "step"), "w").write(str(step[0]))
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


def test_a_job_stopped_by_its_time_limit_requeues_itself_and_resumes_its_checkpoint(cluster, tmp_path, monkeypatch):
    monkeypatch.setenv("SLURM_CONF", cluster.env["SLURM_CONF"])
    run, saves = tmp_path / "run", tmp_path / "saves"
    run.mkdir()
    saves.mkdir()
    (tmp_path / "trainer.py").write_text(TRAINER)
    job = SlurmJob(name="devtune-requeue", nodes=2, workdir=str(tmp_path), run_dir=str(run),
                   argv=[sys.executable, str(tmp_path / "trainer.py"), str(saves)], master_port=29579,
                   time_limit="1", save_before=30, requeue=True, output_dir=str(saves))
    (run / "job.sbatch").write_text(render_sbatch(job))
    # the record exists before the job starts (as start_run writes it): the batch script adds its segments
    write_record(run, RunRecord(id="requeue", argv=["x"], cwd=str(ROOT), launcher="slurm", nodes=2,
                                status=RunStatus.STARTING))
    job_id = submit(run / "job.sbatch")
    update_record(run, job_id=job_id,
                  argv=[sys.executable, "-m", "core.train.slurm", "wait", job_id, str(run / "slurm.json")])
    supervised = subprocess.run([sys.executable, "-m", "core.train.supervisor", str(run)], env=cluster.env, cwd=ROOT,
                                capture_output=True, text=True, timeout=480)
    log = (run / "stderr.log").read_text() + (run / "stdout.log").read_text()
    record = read_record(run)
    assert supervised.returncode == 0 and record.status is RunStatus.FINISHED and record.exit_code == 0, (
        record, supervised.stderr[-2000:], log[-3000:])
    first, second = record.segments
    assert (first.restart, first.nodes, first.reason, first.requeued) == (0, 2, "time-limit", True), record.segments
    assert (second.restart, second.nodes, second.reason, second.requeued) == (1, 2, "completed", False)
    assert first.start < first.end <= second.start < second.end
    assert "requeued, it resumes from that checkpoint" in log
    (checkpoint,) = saves.glob("checkpoint-*")
    saved = int((checkpoint / "step").read_text())
    # every node of the second segment resumed from the checkpoint the first one saved
    assert saved > 0 and {p.name: p.read_text() for p in saves.glob("resumed-node*")} == {
        "resumed-node0": f"{checkpoint.name} {saved}", "resumed-node1": f"{checkpoint.name} {saved}"}
    assert record.stop_reason is None and "segments: " in record.note
