"""Start `llamafactory-cli train` for the workspace's config as a detached run (core.train.runs).

The environment devtune adds (and records in run.json) is the config's launch environment
(core.config.files.launch_env: FORCE_TORCHRUN, NPROC_PER_NODE, NNODES..., OMP_NUM_THREADS), plus:

- LLAMABOARD_ENABLED=1 and LLAMABOARD_WORKDIR=<output_dir>, so a graceful stop (SIGABRT) makes
  LLaMA-Factory stop after the step and save the adapter;
- PYTHONUNBUFFERED=1, so stdout reaches the log as it happens;
- DEVTUNE_SYNCED_STOP=1 and core/train/rank_site first on PYTHONPATH: its sitecustomize makes the ranks agree on
  that stop, so every rank ends at the same step (one rank saving while another began the next step hung
  ZeRO-3 and DDP runs);
- PATH with the environment's bin first, so DeepSpeed's launcher finds `torchrun`;
- HF_DATASETS_CACHE and TORCH_EXTENSIONS_DIR inside the workspace, unless already set;
- DS_ACCELERATOR=cpu on a machine without a GPU.

Secrets such as HF_TOKEN are inherited by the trainer but never recorded.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

from core.errors import BadInput, Refused
from core.i18n import _
from core.setup.torch_build import detect_hardware
from core.files.atomic import write_atomic
from core.train.runs import RunRecord, list_runs, reserve_run_dir, start_run
from core.workspace.layout import Workspace


class LaunchError(BadInput):
    pass


class ConfigHasErrors(Refused):
    """The config's own check reports errors: it is not trained unless the person overrides that
    (`devtune train --force`, the Train step's confirmation). `question` is what the wizard asks."""

    def __init__(self, path: str, errors: list) -> None:
        from core.data.wording import counted

        self.path, self.errors = path, list(errors)
        listed = "\n".join(f"  - {f.message}" + (f" → {f.fix}" if f.fix else "") for f in self.errors)
        self.listed = listed
        self.question = _("{path} has {errors}:\n{listed}\nTrain it anyway? It will most likely fail.", path=path,
                          errors=counted("error", len(self.errors)), listed=listed)
        super().__init__(_("{path} has {errors}, so it is not trained:\n{listed}\nfix the config (step 3, Config; "
                           "devtune config check says the same), or train it anyway: devtune train --force (the Train "
                           "step asks first)", path=path,
                           errors=counted("error", len(self.errors)), listed=listed))


def config_errors(ws: Workspace, spec, path: str) -> list:
    """The errors of the config's own check (core.config.files.preview: devtune's rules, no LLaMA-Factory)."""
    from core.config.files import preview

    return preview(ws, spec, path).errors


RANK_SITE = Path(__file__).resolve().parent / "rank_site"


def venv_bin() -> Path:
    return Path(sys.executable).parent


def training_env(ws: Workspace, spec_env: dict[str, str], output_dir: str, *,
                 on_this_machine: bool = True) -> dict[str, str]:
    """`on_this_machine` False: the trainer runs on cluster nodes, whose hardware this machine cannot see."""
    env = dict(spec_env)
    env["LLAMABOARD_ENABLED"] = "1"
    env["LLAMABOARD_WORKDIR"] = output_dir
    env["PYTHONUNBUFFERED"] = "1"
    env["DEVTUNE_SYNCED_STOP"] = "1"  # every rank stops at the same step (core/train/rank_site/sitecustomize.py)
    env["PYTHONPATH"] = os.pathsep.join([str(RANK_SITE)] + [p for p in os.environ.get("PYTHONPATH", "").split(
        os.pathsep) if p and p != str(RANK_SITE)])
    path = os.environ.get("PATH", "")
    if str(venv_bin()) not in path.split(os.pathsep):
        env["PATH"] = f"{venv_bin()}{os.pathsep}{path}"
    if "HF_DATASETS_CACHE" not in os.environ:
        env["HF_DATASETS_CACHE"] = str(ws.cache_dir / "datasets")
    if "TORCH_EXTENSIONS_DIR" not in os.environ:
        env["TORCH_EXTENSIONS_DIR"] = str(ws.cache_dir / "torch_extensions")
    if on_this_machine and "DS_ACCELERATOR" not in os.environ and detect_hardware().kind == "cpu":
        env["DS_ACCELERATOR"] = "cpu"  # said up front, instead of DeepSpeed warning about it in the log
    return env


def tracker_env(ws: Workspace, spec, run_id: str) -> dict[str, str]:
    """Where the run's trackers write (core.config.trackers: in the workspace, no account), their folders made."""
    from core.config.trackers import chosen, launch_env as trackers_env, prepare

    trackers = chosen(spec.report_to, spec.extra)
    prepare(ws.root, trackers)
    return trackers_env(ws.root, trackers, run_id)


def claimed_output_dirs(ws: Workspace) -> dict[str, str]:
    """output_dir -> the id of the newest run that wrote there."""
    claimed: dict[str, str] = {}
    for r in reversed(list_runs(ws)):  # oldest first: the newest claim wins
        if r.output_dir and r.kind == "train":
            claimed[r.output_dir.rstrip("/")] = r.id
    return claimed


def own_output_dir(ws: Workspace, wanted: str) -> tuple[str, str | None]:
    """The folder a new run writes to: `wanted` while no run has written there and it is empty, else the
    first free `wanted-N`. Returns (folder, why it is not `wanted`: None when it is)."""
    claimed = claimed_output_dirs(ws)
    wanted = wanted.rstrip("/")

    def free(rel: str) -> bool:
        folder = ws.abs(rel)
        return rel not in claimed and not (folder.exists() and (not folder.is_dir() or any(folder.iterdir())))

    if free(wanted):
        return wanted, None
    owner = claimed.get(wanted)
    why = (_("{dir} holds the results of run {id}", dir=wanted, id=owner) if owner else
           _("{dir} is not empty (files from outside devtune)", dir=wanted))
    import re

    numbered = re.fullmatch(r"(.+)-(\d+)", wanted)  # saves/x-2 taken: saves/x-3, not saves/x-2-2
    base, n = (numbered.group(1), int(numbered.group(2)) + 1) if numbered else (wanted, 2)
    while not free(f"{base}-{n}"):
        n += 1
    return f"{base}-{n}", why


def snapshot_config(ws: Workspace, spec, source: str, directory: Path, output_dir: str) -> str:
    """Copy the YAML (and its DeepSpeed JSON) into the run folder, with the run's own output_dir: what the run
    trains with stays on record however the workspace's config changes later (merge and resume read it).
    Returns the copy's workspace-relative path."""
    import re
    import shutil

    from core.config.files import record_sidecar
    from core.config.yaml_out import deepspeed_path

    text = ws.abs(source).read_text(encoding="utf-8")
    update = {"output_dir": output_dir}
    ds = deepspeed_path(spec)
    if ds and ws.abs(ds).is_file():
        shutil.copyfile(ws.abs(ds), directory / "ds_config.json")
        update["deepspeed"] = ws.rel(directory / "ds_config.json")
    for key, value in update.items():
        line = f"{key}: {value}"
        text, found = re.subn(rf"^{key}:.*$", lambda _m, line=line: line, text, count=1, flags=re.M)
        if not found:
            text = text.rstrip("\n") + f"\n{line}\n"
    copy = directory / "train.yaml"
    write_atomic(copy, text)
    record_sidecar(ws, spec.model_copy(update=update), ws.rel(copy))
    return ws.rel(copy)


def launch_training(ws: Workspace, config_path: str | None = None, *, say=None, force: bool = False) -> RunRecord:
    """Start the training run for `config_path` (default: the wizard's config) and return at once.

    A config whose check reports errors is refused (ConfigHasErrors) unless `force`: the person overrode it.

    The run gets an output_dir of its own (core.train.launch.own_output_dir): it never writes into another
    run's folder, so it never resumes a checkpoint it was not asked to (that is `devtune resume`)."""
    from core.config.files import ConfigMissing, current_config_path, launch_env, load_spec

    say = say or (lambda _m: None)
    rel = ws.rel(config_path) if config_path else current_config_path(ws)
    try:
        spec = load_spec(ws, rel)
    except ConfigMissing as exc:
        raise LaunchError(str(exc)) from exc
    except (OSError, ValueError) as exc:
        raise LaunchError(_("cannot read the training config {path}: {error}", path=rel, error=str(exc))) from exc
    if not spec.output_dir:
        raise LaunchError(_("{path} has no output_dir; set one (e.g. saves/my-run)", path=rel))
    say(_("training {path}", path=rel) if config_path else _("training {path} (the workspace's config)", path=rel))
    if not force:
        errors = config_errors(ws, spec, rel)
        if errors:
            raise ConfigHasErrors(rel, errors)
    output_dir, why = own_output_dir(ws, spec.output_dir)
    if why:
        from core.config.resume_point import last_checkpoint_of

        owner = claimed_output_dirs(ws).get(spec.output_dir.rstrip("/"))
        owner = owner if last_checkpoint_of(ws.abs(spec.output_dir)) is not None else None
        say(_("{why}: this run writes to {dir}", why=why, dir=output_dir)
            + ("; " + _("`devtune resume {id}` continues that run instead", id=owner) if owner else ""))
    directory = reserve_run_dir(ws, Path(output_dir).name or "train")
    trackers = tracker_env(ws, spec, directory.name)
    try:
        config = snapshot_config(ws, spec, rel, directory, output_dir)
    except OSError as exc:
        shutil_rmtree(directory)
        raise LaunchError(_("cannot copy the training config {path}: {error}", path=rel, error=str(exc))) from exc
    argv = ["llamafactory-cli", "train", config]
    argv[0] = str(venv_bin() / argv[0]) if (venv_bin() / argv[0]).exists() else argv[0]
    env = training_env(ws, launch_env(spec), output_dir, on_this_machine=spec.launch.launcher != "slurm"
                       or spec.launch.device == "cpu")
    env.update(trackers)
    if spec.launch.launcher == "slurm":
        return _submit(ws, spec, directory, argv, env, config, rel, output_dir, say)
    return start_run(ws, argv, env=env, directory=directory, config=config, source_config=rel,
                     output_dir=output_dir, kind="train")


def _submit(ws: Workspace, spec, directory: Path, argv: list[str], env: dict[str, str], config: str, source: str,
            output_dir: str, say) -> RunRecord:
    """The run as a Slurm job: preflight on every node, job.sbatch, sbatch; the supervisor waits on the job."""
    from core.config.files import load_spec
    from core.train.slurm import SlurmError
    from core.train.slurm_launch import preflight_files, slurm_job, submit_job

    job = slurm_job(ws, spec, directory, argv, env)
    try:
        job_id, waiter = submit_job(job, directory, preflight_files(ws, load_spec(ws, config), config), say=say)
    except SlurmError as exc:
        shutil_rmtree(directory)
        raise LaunchError(_("not submitted: {error}", error=str(exc))) from exc
    return start_run(ws, waiter, env=env, directory=directory, config=config, source_config=source,
                     output_dir=output_dir, kind="train", launcher="slurm", job_id=job_id, nodes=job.nodes)


def shutil_rmtree(directory: Path) -> None:
    import shutil

    shutil.rmtree(directory, ignore_errors=True)
