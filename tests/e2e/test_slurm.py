"""core.train.slurm on a real two-node Slurm cluster (tests/slurm_cluster.py): the rendered script runs one task
per node with the rendezvous set from the job, `wait` follows the job to its end, a graceful signal reaches each
node's training process, the preflight reads every node, and scancel ends a job as CANCELLED."""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path

import pytest

from core.train.slurm import (SlurmJob, cancel, check_preflight, job_state, render_sbatch, run_preflight,
                              signal_nodes, submit)
from tests.slurm_cluster import missing_reason, start_cluster

ROOT = Path(__file__).resolve().parents[2]
pytestmark = pytest.mark.skipif(missing_reason() is not None, reason=missing_reason() or "")

# A stand-in for the trainer (the LLaMA-Factory runs are in test_train_slurm.py): prints what the node got,
# and on SIGABRT (LLaMA-Factory's graceful stop) writes a file and exits 0, as a graceful stop does.
TRAINER = r"""
import json, os, signal, sys, time
run = sys.argv[1]
def stop(*_):
    open(os.path.join(run, "stopped-%s" % os.environ["NODE_RANK"]), "w").write("ok")
    sys.exit(0)
signal.signal(signal.SIGABRT, stop)
print(json.dumps({k: os.environ.get(k) for k in ("NNODES", "NODE_RANK", "MASTER_ADDR", "MASTER_PORT",
                                                 "FORCE_TORCHRUN")}), flush=True)
rank0 = os.environ["NODE_RANK"] == "0"
time.sleep(float(sys.argv[2]) if rank0 else float(sys.argv[2]) / 2)  # the others end first, and well:
sys.exit(int(sys.argv[3]) if rank0 else 0)  # srun --kill-on-bad-exit would end them otherwise
"""


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    c = start_cluster(tmp_path_factory.mktemp("slurm"))
    yield c
    c.stop()


def _job(tmp_path, sleep: float, code: int) -> tuple[SlurmJob, Path]:
    run = tmp_path / "run"
    run.mkdir()
    (tmp_path / "trainer.py").write_text(TRAINER)
    job = SlurmJob(name="devtune-test", nodes=2, workdir=str(tmp_path), run_dir=str(run),
                   argv=[sys.executable, str(tmp_path / "trainer.py"), str(run), str(sleep), str(code)],
                   env={"FORCE_TORCHRUN": "1"}, master_port=29577)
    script = run / "job.sbatch"
    script.write_text(render_sbatch(job))
    return job, script


def _wait(cluster, job_id: str, state_file: Path, timeout: float = 60) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "core.train.slurm", "wait", job_id, str(state_file)],
                          env=cluster.env, cwd=ROOT, capture_output=True, text=True, timeout=timeout)


def test_one_task_per_node_with_the_rendezvous_from_the_job(cluster, tmp_path, monkeypatch):
    monkeypatch.setenv("SLURM_CONF", cluster.env["SLURM_CONF"])
    job, script = _job(tmp_path, 0.5, 3)
    job_id = submit(script)
    done = _wait(cluster, job_id, Path(job.run_dir) / "slurm.json")
    assert done.returncode == 3, done.stderr  # the job's exit code, as a local trainer's would be
    state = json.loads((Path(job.run_dir) / "slurm.json").read_text())
    assert state["state"] == "FAILED" and state["exit_code"] == 3
    seen = sorted((json.loads(line) for line in (Path(job.run_dir) / "stdout.log").read_text().splitlines()
                   if line.startswith("{")), key=lambda r: r["NODE_RANK"])
    assert [r["NODE_RANK"] for r in seen] == ["0", "1"]
    assert {r["NNODES"] for r in seen} == {"2"} and {r["MASTER_PORT"] for r in seen} == {"29577"}
    assert {r["MASTER_ADDR"] for r in seen} == {"127.0.0.1"}  # the first node's NodeAddr
    assert sorted(p.name for p in (Path(job.run_dir) / "nodes").iterdir()) == ["0.pid", "1.pid"]


def test_a_graceful_signal_reaches_every_nodes_trainer(cluster, tmp_path, monkeypatch):
    monkeypatch.setenv("SLURM_CONF", cluster.env["SLURM_CONF"])
    job, script = _job(tmp_path, 120, 0)
    job_id = submit(script)
    run = Path(job.run_dir)
    deadline = time.monotonic() + 30
    while len(list((run / "nodes").glob("*.pid")) if (run / "nodes").exists() else []) < 2:
        assert time.monotonic() < deadline, (run / "stderr.log").read_text()
        time.sleep(0.2)
    time.sleep(0.5)
    assert job_state(job_id).state == "RUNNING"
    signal_nodes(job_id, 2, run, "ABRT")
    done = _wait(cluster, job_id, run / "slurm.json")
    assert done.returncode == 0, done.stderr
    assert sorted(p.name for p in run.glob("stopped-*")) == ["stopped-0", "stopped-1"]


def test_scancel_ends_the_job_as_cancelled(cluster, tmp_path, monkeypatch):
    monkeypatch.setenv("SLURM_CONF", cluster.env["SLURM_CONF"])
    job, script = _job(tmp_path, 120, 0)
    job_id = submit(script)
    deadline = time.monotonic() + 30
    while job_state(job_id).state != "RUNNING":
        assert time.monotonic() < deadline
        time.sleep(0.2)
    cancel(job_id)
    done = _wait(cluster, job_id, Path(job.run_dir) / "slurm.json")
    assert json.loads((Path(job.run_dir) / "slurm.json").read_text())["state"] == "CANCELLED"
    assert done.returncode != 0


def test_the_preflight_reads_every_node(cluster, tmp_path, monkeypatch):
    monkeypatch.setenv("SLURM_CONF", cluster.env["SLURM_CONF"])
    data = tmp_path / "rows.jsonl"
    data.write_text('{"instruction": "q", "output": "a"}\n')
    records = run_preflight(2, sys.executable, [str(data), str(tmp_path / "missing.jsonl")], cwd=str(tmp_path))
    assert [r["node"] for r in records] == ["n1", "n2"]
    assert records[0]["python"] == records[1]["python"] and records[0]["torch"]
    with pytest.raises(Exception) as info:
        check_preflight(records)
    assert "missing.jsonl on n1: unreadable" in str(info.value)
    check_preflight(run_preflight(2, sys.executable, [str(data)], cwd=str(tmp_path)))


# ---- LLaMA-Factory ZeRO-3 across the two nodes, through `devtune train` (issue 16, items 3 and 4) -----------

def _slurm_env(cluster, lf_env) -> dict:
    return {"SLURM_CONF": cluster.env["SLURM_CONF"],
            **{k: lf_env[k] for k in ("HF_HOME", "HF_HUB_OFFLINE", "HF_DATASETS_OFFLINE", "XDG_CACHE_HOME")}}


def test_zero3_across_two_slurm_nodes_trains_stops_resumes_and_merges(cluster, workspace, tiny_model, devtune_cli,
                                                                       lf_env):
    from tests.scale_runs import checkpoints, newest_run, scale_workspace, steps_logged, wait_ended, wait_for_step

    env = _slurm_env(cluster, lf_env)
    scale_workspace(workspace, tiny_model, devtune_cli, "--gpus", "1", "--nodes", "2", "--zero", "3",
                    "--launcher", "slurm", env=env)
    ws = ["-w", str(workspace.root)]
    out = devtune_cli(*ws, "train", "--detach", env=env)
    assert out.returncode == 0, out.stderr
    assert "srun preflight" in out.stderr and "submitted Slurm job" in out.stderr
    run = newest_run(devtune_cli, workspace, env)
    assert run["launcher"] == "slurm" and run["job_id"] and run["nodes"] == 2
    script = (workspace.runs_dir / run["id"] / "job.sbatch").read_text()
    assert "#SBATCH --nodes=2" in script and 'NODE_RANK="$SLURM_NODEID"' in script
    wait_for_step(workspace, run["id"], 15)
    for node in (0, 1):  # each node samples its own GPUs (none on this CPU machine: it says so)
        status = json.loads((workspace.runs_dir / run["id"] / f"gpu-node{node}.status").read_text())
        assert status["state"] == "no-gpu", status
    logs = "".join((workspace.runs_dir / run["id"] / name).read_text(errors="replace")
                   for name in ("stdout.log", "stderr.log"))
    assert "Process rank: 1, world size: 2" in logs
    out = devtune_cli(*ws, "stop", run["id"], env=env, timeout=200)
    assert out.returncode == 0 and "SIGABRT through srun" in out.stderr, out.stdout + out.stderr
    assert "[devtune] a stop is agreed by every rank" in logs  # core/train/rank_site: both nodes stop at one step
    state = json.loads((workspace.runs_dir / run["id"] / "slurm.json").read_text())
    assert state["state"] == "COMPLETED", state  # LLaMA-Factory stopped and saved on both nodes
    saved = workspace.root / "saves" / "cpu-demo"
    assert (saved / "adapter_model.safetensors").exists() and checkpoints(saved)
    last = checkpoints(saved)[-1]

    out = devtune_cli(*ws, "resume", run["id"], "--detach", env=env)
    assert out.returncode == 0, out.stderr
    resumed = newest_run(devtune_cli, workspace, env)
    assert resumed["launcher"] == "slurm" and resumed["job_id"] != run["job_id"]
    wait_for_step(workspace, resumed["id"], last + 5)
    assert steps_logged(workspace, resumed["id"])[0] > last
    devtune_cli(*ws, "stop", resumed["id"], env=env, timeout=200)
    assert wait_ended(workspace, resumed["id"]).status.value == "stopped"

    out = devtune_cli(*ws, "merge", resumed["id"], "--json", env=env, timeout=600)
    assert out.returncode == 0, out.stdout[-2000:] + out.stderr[-2000:]
    assert json.loads(out.stdout)["verdict"] == "ok"


def _leaves(task) -> list:
    """The processes under `task` that have no children of their own; a short-lived child (a compiler probe, a
    helper) that ends between listing it and reading its children is skipped, not an error."""
    import psutil

    out = []
    for p in task.children(recursive=True):
        try:
            if not p.children():
                out.append(p)
        except psutil.NoSuchProcess:
            continue
    return out


def test_a_rank_killed_mid_run_ends_the_run_as_failed_with_that_rank_named(cluster, workspace, tiny_model,
                                                                            devtune_cli, lf_env):
    import psutil

    from tests.scale_runs import newest_run, scale_workspace, wait_ended, wait_for_step

    env = _slurm_env(cluster, lf_env)
    scale_workspace(workspace, tiny_model, devtune_cli, "--gpus", "1", "--nodes", "2", "--zero", "3",
                    "--launcher", "slurm", env=env)
    ws = ["-w", str(workspace.root)]
    assert devtune_cli(*ws, "train", "--detach", env=env).returncode == 0
    run = newest_run(devtune_cli, workspace, env)
    wait_for_step(workspace, run["id"], 5)
    task = psutil.Process(int((workspace.runs_dir / run["id"] / "nodes" / "1.pid").read_text()))
    deadline = time.monotonic() + 60
    while not (workers := _leaves(task)):
        assert time.monotonic() < deadline, f"no training process under node 1's task {task.pid}: {task.cmdline()}"
        time.sleep(0.5)
    workers[0].kill()  # the second node's training process, as the OOM killer would
    record = wait_ended(workspace, run["id"], timeout=240)
    assert record.status.value == "failed", record.note
    out = devtune_cli(*ws, "diagnose", run["id"], env=env)
    assert "rank 1" in out.stdout.lower() and "SIGKILL" in out.stdout, out.stdout
