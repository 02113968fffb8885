"""Stopping and resuming a run (core.train.runs holds the run itself): a graceful stop that escalates, on this
machine or on every node of a Slurm job, and a resume that starts a new run from the last checkpoint once the
checkpoint fits the run's config."""

from __future__ import annotations

import signal
import time
from pathlib import Path

from core.config.resume_point import last_checkpoint_of as last_checkpoint
from core.i18n import _
from core.processes.groups import signal_group
from core.train.stalls import signal_ranks
from core.train.runs import (GRACEFUL_SIGNAL, RunError, RunRecord, refresh, reserve_run_dir, run_dir, start_run,
                             status_label, update_record)
from core.workspace.layout import Workspace


def stop_run(ws: Workspace, run_id: str, *, graceful_timeout: float = 120.0, term_timeout: float = 15.0,
             progress=None) -> RunRecord:
    """Stop gracefully (SIGABRT: LLaMA-Factory finishes the step and saves the adapter), then SIGTERM,
    then SIGKILL of the trainer's process group, each after its timeout. Returns the final record."""
    say = progress or (lambda _m: None)
    directory = run_dir(ws, run_id)
    record = refresh(directory)
    if not record.active:
        return record
    record = update_record(directory, stop_requested=time.time(), stop_stage="graceful")
    if record.launcher == "slurm" and record.job_id:
        return _stop_slurm(directory, record, graceful_timeout, term_timeout, say)
    if record.trainer is None:
        _wait_for(lambda: refresh(directory).trainer is not None or not refresh(directory).active, 10)
        record = refresh(directory)
    if record.trainer is not None and record.trainer.alive():
        say(_("asking the trainer to stop after this step and save the adapter (SIGABRT)"))
        signal_ranks(record.trainer.pid, GRACEFUL_SIGNAL)
        if _wait_for(lambda: not refresh(directory).active, graceful_timeout):
            return refresh(directory)
        say(_("no graceful stop after {s:.0f} s; sending SIGTERM to its process group", s=graceful_timeout))
        update_record(directory, stop_stage="term")
        signal_group(record.pgid, signal.SIGTERM)
        if _wait_for(lambda: not refresh(directory).active, term_timeout):
            return refresh(directory)
        say(_("still running; sending SIGKILL"))
        update_record(directory, stop_stage="kill")
        signal_group(record.pgid, signal.SIGKILL)
        _wait_for(lambda: not refresh(directory).active, 10)
    return refresh(directory)


def _stop_slurm(directory: Path, record: RunRecord, graceful_timeout: float, term_timeout: float,
                say) -> RunRecord:
    """SIGABRT to every node's trainer through srun (LLaMA-Factory saves and stops), then scancel."""
    from core.train.slurm import SlurmError, cancel, job_state, signal_nodes

    state = job_state(record.job_id)
    if state is not None and state.state == "RUNNING":
        say(_("asking the trainer on each of the {n} nodes to stop after this step and save (SIGABRT through srun)",
              n=record.nodes))
        try:
            signal_nodes(record.job_id, record.nodes, directory, "ABRT")
        except SlurmError as exc:
            say(str(exc))
        if _wait_for(lambda: not refresh(directory).active, graceful_timeout, interval=1.0):
            return refresh(directory)
        say(_("no graceful stop after {s:.0f} s; cancelling Slurm job {job}", s=graceful_timeout, job=record.job_id))
    else:
        say(_("cancelling Slurm job {job}", job=record.job_id))
    update_record(directory, stop_stage="term")
    try:
        cancel(record.job_id)
    except SlurmError as exc:
        say(str(exc))
    _wait_for(lambda: not refresh(directory).active, term_timeout + 30, interval=1.0)
    return refresh(directory)


def _wait_for(predicate, timeout: float, interval: float = 0.25) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return True
        time.sleep(interval)
    return predicate()


def resume_run(ws: Workspace, run_id: str, *, gpus: int | None = None, nodes: int | None = None,
               progress=None) -> RunRecord:
    """Start a new run that continues `run_id` from its last checkpoint (same output_dir), once the checkpoint fits
    (core.train.checkpoint_fit: method, ZeRO stage, world size). `gpus` / `nodes`: resume on another number of ranks
    per node / of nodes (core.train.universal: a ZeRO checkpoint goes through DeepSpeed's universal checkpoint; one
    saved without DeepSpeed loads as it is). The resumed run trains with its own copy of the config."""
    say = progress or (lambda _m: None)
    old = refresh(run_dir(ws, run_id))
    if old.active:
        raise RunError(_("run {id} is still {status}; stop it first", id=old.id, status=status_label(old.status)))
    if not old.output_dir:
        raise RunError(_("run {id} has no output_dir to resume from", id=old.id))
    checkpoint = last_checkpoint(ws.abs(old.output_dir))
    if checkpoint is None:
        raise RunError(_("no checkpoint-* in {dir} to resume from; lower save_steps, or start a new run with "
                         "`devtune train`",
                         dir=old.output_dir))
    from core.config.resume_point import nothing_left_to_train

    done = nothing_left_to_train(ws.abs(old.output_dir))
    if done:
        raise RunError(_("run {id} has nothing left to train: {reason}. Merge it (`devtune merge {id}`), or train "
                         "for longer with a new run", id=old.id, reason=done))
    extra = [f"resume_from_checkpoint={ws.rel(checkpoint)}", "overwrite_output_dir=false"]
    base = old.id.split("-resume")[0]
    label = f"{base[16:] or 'run'}-resume"
    if not old.config:
        if gpus is not None or nodes is not None:
            raise RunError(_("run {id} has no config on record, so its number of ranks cannot be changed; resume it "
                             "without --gpus/--nodes", id=old.id))
        argv = [a for a in old.argv if not a.startswith(("resume_from_checkpoint=", "overwrite_output_dir="))]
        return start_run(ws, argv + extra, env=old.env, label=label, output_dir=old.output_dir, kind=old.kind,
                         resume_of=old.id, resume_checkpoint=ws.rel(checkpoint))
    import shutil

    from core.config.files import load_spec
    from core.train.checkpoint_fit import checkpoint_shape, fit_problems
    from core.train.universal import UniversalError
    from core.train.universal_resume import prepare

    try:
        spec = load_spec(ws, old.config)
    except Exception as exc:  # noqa: BLE001 - any unreadable config is the same answer
        raise RunError(_("cannot read run {id}'s config {path}: {error}", id=old.id, path=old.config,
                         error=str(exc))) from exc
    shape = checkpoint_shape(checkpoint)
    directory = reserve_run_dir(ws, label)
    try:
        setup = prepare(ws, old, spec, checkpoint, directory, gpus=gpus, nodes=nodes, saved_ranks=shape.world_size,
                        say=say)
        from core.config.yaml_out import deepspeed_path
        from core.train.universal import loads_universal

        ds = deepspeed_path(setup.spec)
        problems = fit_problems(checkpoint, setup.spec, loads_universal=loads_universal(ws.abs(ds) if ds else None))
        if problems:
            raise RunError(_("{ck} cannot be resumed by run {id}'s config: {why}", ck=ws.rel(checkpoint), id=old.id,
                             why="; ".join(problems)))
    except (RunError, UniversalError):
        shutil.rmtree(directory, ignore_errors=True)
        raise
    except (OSError, ValueError) as exc:
        shutil.rmtree(directory, ignore_errors=True)
        raise RunError(str(exc)) from exc
    if old.launcher == "slurm":
        return _resume_on_slurm(ws, old, directory, extra, checkpoint, setup)
    return start_run(ws, [old.argv[0], "train", setup.config, *extra], env=setup.env,
                     directory=directory, config=setup.config, source_config=old.source_config,
                     output_dir=old.output_dir, kind=old.kind, resume_of=old.id, resume_checkpoint=ws.rel(checkpoint))


def _resume_on_slurm(ws: Workspace, old: RunRecord, directory: Path, extra: list[str], checkpoint: Path,
                     setup) -> RunRecord:
    """The old run's Slurm job submitted again (preflight included) on the resume's nodes, continuing from
    `checkpoint` with the resume's own config."""
    import shutil

    from core.train.slurm import SlurmError
    from core.train.slurm_launch import preflight_files, resubmit

    launch = setup.spec.launch
    try:
        files = preflight_files(ws, setup.spec, setup.config)
        job, job_id, waiter = resubmit(run_dir(ws, old.id), directory, extra, files, config=setup.config,
                                       nodes=launch.nnodes, env=setup.env,
                                       gpus_per_node=launch.gpus_per_node if launch.device == "gpu" else 0)
    except (SlurmError, OSError, ValueError) as exc:
        shutil.rmtree(directory, ignore_errors=True)
        raise RunError(str(exc)) from exc
    return start_run(ws, waiter, env=setup.env, directory=directory, config=setup.config,
                     source_config=old.source_config, output_dir=old.output_dir, kind=old.kind, resume_of=old.id,
                     resume_checkpoint=ws.rel(checkpoint), launcher="slurm", job_id=job_id, nodes=job.nodes)
