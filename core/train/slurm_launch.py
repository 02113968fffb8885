"""A training run on Slurm, as devtune runs any other: `devtune train` on a config with `launcher: slurm`.

    submit_run(ws, spec, directory, config, output_dir, env)   # preflight, job.sbatch, sbatch -> job id

The run folder holds `job.sbatch` (what was submitted), `slurm_job.json` (the job's settings, so a resume
submits the same job again) and `slurm.json` (the job's state, written by the waiter). The run's supervisor
runs `python -m core.train.slurm wait JOB_ID slurm.json` in place of a local trainer, so the run's status, exit
code and note come out as for a local run; `stop` signals every node's trainer (SIGABRT through `srun`,
LLaMA-Factory saves and stops), then cancels the job.
"""

from __future__ import annotations

import json
import socket
import sys
from dataclasses import asdict
from pathlib import Path

from core.files.atomic import write_atomic
from core.i18n import _
from core.train.slurm import SlurmJob, check_preflight, render_sbatch, run_preflight, submit
from core.workspace.layout import Workspace

JOB_FILE = "slurm_job.json"
STATE_FILE = "slurm.json"
SCRIPT = "job.sbatch"
RENDEZVOUS = ("NNODES", "NODE_RANK", "MASTER_ADDR", "MASTER_PORT")


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("", 0))
        return s.getsockname()[1]


def _srun_options(job: SlurmJob) -> list[str]:
    """What the preflight's srun needs to land where the job will: the same partition and account."""
    return [*([f"--partition={job.partition}"] if job.partition else []),
            *([f"--account={job.account}"] if job.account else [])]


def preflight_files(ws: Workspace, spec, config: str) -> list[str]:
    """The files every node must see the same: the run's config, its DeepSpeed JSON, the dataset files and
    the model's config.json (a local model)."""
    from core.config.spec import value
    from core.config.yaml_out import deepspeed_path
    from core.data.dataset_info import DatasetInfoError, read_dataset_info

    files = [config]
    ds = deepspeed_path(spec)
    if ds:
        files.append(str(ds))
    dataset_dir = str(value(spec, "dataset_dir") or "data")
    try:
        info = read_dataset_info(ws.abs(dataset_dir))
    except DatasetInfoError:  # an unreadable dataset_info.json: LLaMA-Factory will say so itself
        info = {}
    for name in value(spec, "dataset") or []:
        entry = info.get(name) if isinstance(info, dict) else None
        if isinstance(entry, dict) and entry.get("file_name"):
            files.append(ws.rel(ws.abs(dataset_dir) / str(entry["file_name"])))
    model = str(value(spec, "model_name_or_path") or "")
    if model and ws.abs(model).is_dir():
        files.append(ws.rel(ws.abs(model) / "config.json"))
    return files


def slurm_job(ws: Workspace, spec, directory: Path, argv: list[str], env: dict[str, str]) -> SlurmJob:
    from core.config.spec import value

    launch = spec.launch
    output_dir = value(spec, "output_dir")
    return SlurmJob(name=f"devtune-{directory.name}"[:60], nodes=launch.nnodes, workdir=str(ws.root),
                    run_dir=str(directory), argv=argv,
                    env={k: v for k, v in env.items() if k not in RENDEZVOUS},
                    gpus_per_node=launch.gpus_per_node if launch.device == "gpu" else 0,
                    partition=launch.partition, account=launch.account, time_limit=launch.time_limit,
                    extra=list(launch.sbatch_extra), master_port=_free_port(), recorder_python=sys.executable,
                    requeue=launch.requeue, output_dir=str(ws.abs(str(output_dir))) if output_dir else None)


def submit_job(job: SlurmJob, directory: Path, files: list[str], *, say=None) -> tuple[str, list[str]]:
    """Preflight on every node, write the script, sbatch it. Returns the job id and the waiter's argv (what
    the run's supervisor runs).
    Raises core.train.slurm.SlurmError (PreflightMismatch when the nodes differ)."""
    say = say or (lambda _m: None)
    python = job.argv[0] if job.argv and Path(job.argv[0]).name.startswith("python") else sys.executable
    say(_n_nodes(job.nodes))
    check_preflight(run_preflight(job.nodes, python, files, cwd=job.workdir, extra_srun=_srun_options(job)))
    write_atomic(directory / JOB_FILE, json.dumps(asdict(job), indent=1) + "\n")
    write_atomic(directory / SCRIPT, render_sbatch(job))
    job_id = submit(directory / SCRIPT)
    say(_("submitted Slurm job {id} ({nodes} nodes)", id=job_id, nodes=job.nodes))
    return job_id, [sys.executable, "-m", "core.train.slurm", "wait", job_id, str(directory / STATE_FILE)]


def _n_nodes(n: int) -> str:
    from core.i18n import _n

    return _n("checking that {n} node has the same software and data (srun preflight)",
              "checking that the {n} nodes have the same software and data (srun preflight)", n)


def resubmit(old_directory: Path, directory: Path, extra_args: list[str], files: list[str], *, say=None,
             config: str | None = None, nodes: int | None = None, env: dict[str, str] | None = None,
             gpus_per_node: int | None = None):
    """The job of an earlier run again (for a resume), into a new run folder, with `extra_args` appended to
    the trainer's command line; `config` (the resume's own YAML), `nodes`, `env` and `gpus_per_node` replace the
    old job's. Returns (SlurmJob, job id, the waiter's argv)."""
    data = json.loads((old_directory / JOB_FILE).read_text(encoding="utf-8"))
    job = SlurmJob(**data)
    job.run_dir = str(directory)
    job.name = f"devtune-{directory.name}"[:60]
    job.argv = [a for a in job.argv if not a.startswith(("resume_from_checkpoint=", "overwrite_output_dir="))]
    if config is not None and len(job.argv) >= 3 and job.argv[1] == "train":
        job.argv = [job.argv[0], "train", config, *job.argv[3:]]
    job.argv += extra_args
    if nodes is not None:
        job.nodes = nodes
    if env is not None:
        job.env = {k: v for k, v in env.items() if k not in RENDEZVOUS}
    if gpus_per_node is not None:
        job.gpus_per_node = gpus_per_node
    job.master_port = _free_port()
    return (job, *submit_job(job, directory, files, say=say))


def job_of(directory: Path) -> dict | None:
    """The state the waiter last wrote (core.train.slurm.JobState as a dict), None before the first."""
    try:
        return json.loads((directory / STATE_FILE).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
