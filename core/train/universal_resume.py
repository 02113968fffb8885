"""The resumed run's own config when a resume may change the number of ranks (core.train.run_control.resume_run):
the old run's YAML copied into the new run folder with the new launch settings, the gradient accumulation that
keeps the global batch, and a DeepSpeed JSON that loads the universal checkpoint when the ZeRO checkpoint was
saved by another number of ranks (core.train.universal holds the rules and says why)."""

from __future__ import annotations

import re
import sys
from dataclasses import dataclass
from pathlib import Path

from core.files.atomic import write_atomic
from core.i18n import _
from core.train.runs import RunError, RunRecord
from core.train.universal import WorldChange, convert, deepspeed_json, plan_world_change
from core.workspace.layout import Workspace

LAUNCH_KEYS = ("FORCE_TORCHRUN", "NPROC_PER_NODE", "NNODES", "NODE_RANK", "MASTER_ADDR", "MASTER_PORT")


@dataclass(frozen=True)
class ResumeSetup:
    spec: object  # the TrainSpec the resume trains with
    config: str  # its YAML in the new run folder, workspace-relative
    env: dict[str, str]  # the old run's env with the new launch variables
    change: WorldChange


def training_python(old: RunRecord) -> str:
    """The python of the environment that trained the run (beside its llamafactory-cli), else devtune's own."""
    beside = Path(old.argv[0]).parent / "python" if old.argv else None
    return str(beside) if beside is not None and beside.is_file() else sys.executable


def new_launch(spec, old: RunRecord, gpus: int | None, nodes: int | None):
    """The launch of the resume: the run's own, with --gpus / --nodes applied (refused where they cannot apply)."""
    launch = spec.launch
    if gpus is not None and gpus < 1 or nodes is not None and nodes < 1:
        raise RunError(_("--gpus and --nodes take a number of 1 or more"))
    if nodes is not None and nodes > 1 and launch.launcher != "slurm":
        raise RunError(_("--nodes {n}: run {id} was started on this machine (launcher local), and a resume starts only "
                         "this machine's ranks; a run over several nodes resumes on more than one node through Slurm "
                         "(launcher: slurm)", n=nodes, id=old.id))
    return launch.model_copy(update={"gpus_per_node": gpus or launch.gpus_per_node,
                                     "nnodes": nodes or launch.nnodes})


def prepare(ws: Workspace, old: RunRecord, spec, checkpoint: Path, directory: Path, *, gpus: int | None,
            nodes: int | None, saved_ranks: int | None, say) -> ResumeSetup:
    """Write the resumed run's YAML (+ DeepSpeed JSON) into `directory`, converting the checkpoint to DeepSpeed's
    universal checkpoint first when the number of ranks changes under ZeRO."""
    from core.config.files import launch_env, record_sidecar
    from core.config.spec import value
    from core.config.yaml_out import deepspeed_path

    launch = new_launch(spec, old, gpus, nodes)
    per_device = value(spec, "per_device_train_batch_size") or 1
    accumulation = value(spec, "gradient_accumulation_steps") or 1
    change = plan_world_change(saved_ranks or spec.launch.world_size, launch.world_size, spec.zero_stage,
                               int(per_device), int(accumulation))
    if change.saved != change.now:
        say(change.describe())
    update: dict[str, object] = {"launch": launch, "output_dir": old.output_dir}
    if change.accumulation != accumulation:
        update["gradient_accumulation_steps"] = change.accumulation
    ds = deepspeed_path(spec)
    if spec.zero_stage is not None:
        if not ds or not ws.abs(ds).is_file():
            raise RunError(_("run {id}'s DeepSpeed config {path} is missing; it is needed to resume the run",
                             id=old.id, path=ds or "-"))
        if change.universal:
            say(_("converting {ck} to DeepSpeed's universal checkpoint (ds_to_universal; output in {log})",
                  ck=ws.rel(checkpoint), log=ws.rel(directory / "ds_to_universal.log")))
            convert(checkpoint, training_python(old), directory / "ds_to_universal.log")
        update["deepspeed"] = ws.rel(deepspeed_json(ws.abs(ds), directory / "ds_config.json",
                                                    universal=change.universal))
    text = ws.abs(old.config).read_text(encoding="utf-8")
    for key in ("output_dir", "deepspeed", "gradient_accumulation_steps"):
        if key in update:
            line = f"{key}: {update[key]}"
            text, found = re.subn(rf"^{key}:.*$", lambda _m, line=line: line, text, count=1, flags=re.M)
            if not found:
                text = text.rstrip("\n") + f"\n{line}\n"
    copy = directory / "train.yaml"
    write_atomic(copy, text)
    resumed = spec.model_copy(update=update)
    record_sidecar(ws, resumed, ws.rel(copy))
    env = {k: v for k, v in old.env.items() if k not in LAUNCH_KEYS}
    env.update({k: v for k, v in launch_env(resumed).items() if k in LAUNCH_KEYS})
    if launch.launcher == "slurm":
        env = {k: v for k, v in env.items() if k not in ("NNODES", "NODE_RANK", "MASTER_ADDR", "MASTER_PORT")}
    return ResumeSetup(resumed, ws.rel(copy), env, change)
