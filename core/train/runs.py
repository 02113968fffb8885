"""Detached training runs that survive SSH drops, and everything devtune knows about them.

A run lives in `.devtune/runs/<id>/`:

    run.json        RunRecord: argv, cwd, the env devtune set, pids (+ start times against PID
                    reuse), status, exit code, stop requests
    stdout.log      the trainer's stdout     stderr.log   its stderr (tqdm)
    supervisor.log  the supervisor's own notes           gpu.jsonl    GPU samples (when a GPU exists)

`start_run` launches `python -m core.train.supervisor <run dir>` in a new session and returns at once.
The supervisor starts the trainer (argv list, its own process group, output to files), waits for it
and records how it ended — so the outcome is known even when no devtune was running at the time.
devtune (TUI or CLI) only reads these files: quitting it, losing the terminal or `kill -9` of it
stops nothing, and the next devtune re-attaches.
"""

from __future__ import annotations

import fcntl
import signal
import socket
import subprocess
import sys
import time
from contextlib import contextmanager
from enum import Enum
from pathlib import Path
from typing import Iterator

from pydantic import BaseModel, Field

from core.config.resume_point import last_checkpoint_of as last_checkpoint  # noqa: F401 (the one definition)
from core.files.atomic import write_atomic
from core.i18n import _
from core.processes.groups import signal_group, signal_leaves
from core.workspace.layout import Workspace


class RunStatus(str, Enum):
    STARTING = "starting"
    RUNNING = "running"
    FINISHED = "finished"
    FAILED = "failed"
    STOPPED = "stopped"


ACTIVE = (RunStatus.STARTING, RunStatus.RUNNING)


def status_label(status: RunStatus | str) -> str:
    """A run's status in words for people (the value itself stays in JSON and in the CLI's tables)."""
    value = status.value if isinstance(status, RunStatus) else str(status)
    return {"starting": _("starting"), "running": _("running"), "finished": _("finished"),
            "failed": _("failed"), "stopped": _("stopped")}.get(value, value)
GRACEFUL_SIGNAL = signal.SIGABRT  # LLaMA-Factory's LogCallback stops after the step and saves (LLAMABOARD_ENABLED)


class ProcessRef(BaseModel):
    pid: int
    create_time: float  # psutil's process start time: a recycled PID has another one

    def alive(self) -> bool:
        import psutil

        try:
            proc = psutil.Process(self.pid)
            return abs(proc.create_time() - self.create_time) < 0.05 and proc.status() != psutil.STATUS_ZOMBIE
        except (psutil.NoSuchProcess, psutil.AccessDenied):
            return False


class RunRecord(BaseModel):
    id: str
    kind: str = "train"
    argv: list[str]
    cwd: str
    env: dict[str, str] = Field(default_factory=dict)  # only what devtune set: never the whole env (secrets)
    config: str | None = None  # the YAML the run trains with (its copy in the run folder), workspace-relative
    source_config: str | None = None  # the workspace's YAML it was copied from, when it was
    output_dir: str | None = None  # LLaMA-Factory's output_dir, workspace-relative
    host: str = Field(default_factory=socket.gethostname)
    started: float = Field(default_factory=time.time)
    status: RunStatus = RunStatus.STARTING
    supervisor: ProcessRef | None = None
    trainer: ProcessRef | None = None
    pgid: int | None = None
    exit_code: int | None = None  # the trainer's; negative = killed by that signal
    ended: float | None = None
    stop_requested: float | None = None
    stop_stage: str | None = None  # graceful | term | kill
    resume_of: str | None = None  # the run this one resumes
    launcher: str = "local"  # "local" (a process here) | "slurm" (the supervisor waits on a Slurm job)
    job_id: str | None = None  # the Slurm job
    nodes: int = 1
    cluster_state: str | None = None  # how Slurm ended the job (TIMEOUT, PREEMPTED, NODE_FAIL, ...)
    resume_checkpoint: str | None = None
    note: str = ""  # why it ended, in words
    # This run's own lines of output_dir/trainer_log.jsonl: a resume appends to the same file, so a run
    # starts reading at the size the file had when it started, and when it ends its lines are copied
    # into its run folder (trainer_log.jsonl there): its record is frozen, whatever a resume adds later.
    log_start: int = 0
    log_frozen: bool = False

    @property
    def active(self) -> bool:
        return self.status in ACTIVE


class RunError(Exception):
    pass


# ---------------------------------------------------------------- files

def run_dir(ws: Workspace, run_id: str) -> Path:
    return ws.runs_dir / run_id


def _record_path(directory: Path) -> Path:
    return directory / "run.json"


@contextmanager
def record_lock(directory: Path) -> Iterator[None]:
    with open(directory / "run.lock", "a") as fh:
        fcntl.flock(fh.fileno(), fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(fh.fileno(), fcntl.LOCK_UN)


def ending_note(record: RunRecord) -> str:
    """Why a run ended, in words, in the reader's language (run.json keeps the words of whoever wrote
    them; readers get these, made from the record's facts)."""
    code = record.exit_code
    if record.active:
        return record.note
    if code == 127 and record.note:
        return record.note  # could not start: the system's reason, as the supervisor recorded it
    if code is None:
        return _("ended without a recorded exit code (the supervisor was killed, or the machine rebooted)")
    if record.cluster_state:
        from core.train.slurm import JobState

        return _("Slurm job {job}: {what}; `devtune resume {id}` continues from the last checkpoint",
                 job=record.job_id, what=JobState(record.job_id or "", record.cluster_state).describe(),
                 id=record.id)
    if record.stop_requested is not None:
        return _("stopped on request (exit code {code})", code=code)
    if code == 0:
        return ""
    if code in (-9, 137):
        return _("killed with SIGKILL (exit {code}): most often the kernel's OOM killer; see `dmesg`", code=code)
    if code < 0:
        name = signal.Signals(-code).name if -code in signal.Signals._value2member_map_ else str(-code)
        return _("killed by signal {sig}", sig=name)
    return _("failed with exit code {code}; `devtune diagnose {id}` explains the logs", code=code, id=record.id)


def read_record(directory: Path) -> RunRecord:
    try:
        record = RunRecord.model_validate_json(_record_path(directory).read_bytes())
        if not record.active:
            record.note = ending_note(record)
        return record
    except FileNotFoundError as exc:
        raise RunError(_("no run in {path} (run.json is missing)", path=str(directory))) from exc
    except ValueError as exc:
        raise RunError(_("{path} is damaged: {error}", path=str(_record_path(directory)), error=str(exc))) from exc


def write_record(directory: Path, record: RunRecord) -> None:
    write_atomic(_record_path(directory), record.model_dump_json(indent=2) + "\n")


def update_record(directory: Path, **changes) -> RunRecord:
    """Read-modify-write of run.json under the run's lock (the supervisor and devtune both write)."""
    with record_lock(directory):
        record = read_record(directory)
        record = record.model_copy(update=changes)
        write_record(directory, record)
        return record


# ---------------------------------------------------------------- launching

def new_run_id(label: str, runs_dir: Path) -> str:
    stamp = time.strftime("%Y%m%d-%H%M%S")
    safe = "".join(c if c.isalnum() or c in "-_." else "-" for c in label)[:40].strip("-") or "run"
    run_id, n = f"{stamp}-{safe}", 1
    while (runs_dir / run_id).exists():
        n += 1
        run_id = f"{stamp}-{safe}-{n}"
    return run_id


def reserve_run_dir(ws: Workspace, label: str) -> Path:
    """A new, empty run folder (its name is the run id), made before the run starts so files can go in."""
    ws.ensure()
    ws.runs_dir.mkdir(parents=True, exist_ok=True)
    while True:
        directory = run_dir(ws, new_run_id(label, ws.runs_dir))
        try:
            directory.mkdir()
            return directory
        except FileExistsError:
            continue


def start_run(ws: Workspace, argv: list[str], *, env: dict[str, str], label: str = "run",
              directory: Path | None = None, config: str | None = None, source_config: str | None = None,
              output_dir: str | None = None, kind: str = "train", resume_of: str | None = None,
              resume_checkpoint: str | None = None, launcher: str = "local", job_id: str | None = None,
              nodes: int = 1) -> RunRecord:
    """Launch `argv` detached under a supervisor and return its record at once.

    `env` is what devtune adds to the inherited environment; it is recorded in run.json (so it
    must never hold secrets). The process runs with cwd = the workspace root. `directory`: a folder
    from reserve_run_dir (default: a new one named after `label`).
    """
    if not argv:
        raise RunError(_("nothing to run"))
    directory = directory or reserve_run_dir(ws, label)
    run_id = directory.name
    log_start = 0
    if output_dir:
        try:
            log_start = (ws.abs(output_dir) / TRAINER_LOG).stat().st_size
        except OSError:
            log_start = 0
    record = RunRecord(id=run_id, kind=kind, argv=list(argv), cwd=str(ws.root), env=dict(env), config=config,
                       source_config=source_config, output_dir=output_dir, launcher=launcher, job_id=job_id,
                       nodes=nodes, resume_of=resume_of, resume_checkpoint=resume_checkpoint,
                       log_start=log_start)
    write_record(directory, record)
    for name in ("stdout.log", "stderr.log"):
        (directory / name).touch()
    with open(directory / "supervisor.log", "ab") as log:
        proc = subprocess.Popen(
            [sys.executable, "-m", "core.train.supervisor", str(directory)],
            cwd=ws.root, stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT,
            start_new_session=True, close_fds=True,
        )
    import psutil

    try:
        created = psutil.Process(proc.pid).create_time()
    except psutil.NoSuchProcess:
        created = 0.0
    return update_record(directory, supervisor=ProcessRef(pid=proc.pid, create_time=created))


# ---------------------------------------------------------------- a run's own trainer log

TRAINER_LOG = "trainer_log.jsonl"


def trainer_log_source(directory: Path, record: RunRecord) -> tuple[Path, int]:
    """Where this run's trainer_log.jsonl lines are and the byte offset they start at: the frozen copy in
    the run folder once the run has ended, else LLaMA-Factory's file in output_dir from `log_start`."""
    frozen = directory / TRAINER_LOG
    if record.log_frozen and frozen.exists():
        return frozen, 0
    out = Path(record.cwd) / record.output_dir if record.output_dir else directory
    return out / TRAINER_LOG, record.log_start


def freeze_trainer_log(directory: Path, record: RunRecord) -> bool:
    """Copy the run's own lines of output_dir/trainer_log.jsonl into its folder (once, when it ends)."""
    if record.log_frozen or not record.output_dir:
        return record.log_frozen
    source = Path(record.cwd) / record.output_dir / TRAINER_LOG
    try:
        data = source.read_bytes()
    except OSError:
        data = b""
    start = record.log_start if record.log_start <= len(data) else 0  # a shorter file: replaced since
    write_atomic(directory / TRAINER_LOG, data[start:])
    return True


# ---------------------------------------------------------------- reading and reconciling

def refresh(directory: Path) -> RunRecord:
    """The record, with an active run whose supervisor vanished marked as failed."""
    record = read_record(directory)
    if not record.active:
        return record
    if record.launcher == "slurm":
        _queue_state(directory, record)
    supervisor_alive = record.supervisor is not None and record.supervisor.alive()
    if supervisor_alive:
        return record
    if record.supervisor is None and time.time() - record.started < 10:
        return record  # still being launched
    trainer_alive = record.trainer is not None and record.trainer.alive()
    if trainer_alive:
        return record  # the trainer goes on; only the supervisor is gone (its outcome will be unknown)
    with record_lock(directory):
        record = read_record(directory)
        if record.active:
            record.status = RunStatus.STOPPED if record.stop_requested else RunStatus.FAILED
            record.ended = record.ended or time.time()
            record.note = record.note or _("ended without a recorded exit code (the supervisor was killed, "
                                           "or the machine rebooted)")
            record.log_frozen = freeze_trainer_log(directory, record)
            write_record(directory, record)
    return record


def _queue_state(directory: Path, record: RunRecord) -> None:
    """A Slurm job still in the queue is a run that is starting, with Slurm's reason as its note."""
    from core.train.slurm_launch import job_of

    state = job_of(directory)
    if state and state.get("state") in ("PENDING", "CONFIGURING", "REQUEUED", "RESIZING"):
        from core.train.slurm import JobState

        record.status = RunStatus.STARTING
        record.note = _("Slurm job {job}: {what}", job=record.job_id,
                        what=JobState(record.job_id or "", state["state"], state.get("reason") or "").describe())
    elif record.job_id:
        record.note = record.note or _("Slurm job {job}", job=record.job_id)


def list_runs(ws: Workspace) -> list[RunRecord]:
    """Every run in the workspace, newest first; unreadable ones are skipped with a note on stderr."""
    runs = []
    if not ws.runs_dir.is_dir():
        return runs
    for directory in ws.runs_dir.iterdir():
        if not directory.is_dir():
            continue
        try:
            runs.append(refresh(directory))
        except RunError as exc:
            print(f"devtune: {exc}", file=sys.stderr)
    return sorted(runs, key=lambda r: r.started, reverse=True)


def find_run(ws: Workspace, ref: str | None, kind: str | None = "train") -> RunRecord:
    """A run by id or unique id prefix (any kind), or (None / "last") the newest run of `kind`
    (training runs by default: an export run is not what `devtune monitor` means by "the last run")."""
    runs = list_runs(ws)
    if ref in (None, "", "last", "latest"):
        runs = [r for r in runs if kind is None or r.kind == kind]
    if not runs:
        raise RunError(_("no training runs in {path} yet; start one with `devtune train`", path=str(ws.root)))
    if ref in (None, "", "last", "latest"):
        return runs[0]
    exact = [r for r in runs if r.id == ref]
    if exact:
        return exact[0]
    matches = [r for r in runs if r.id.startswith(ref) or ref in r.id]
    if len(matches) == 1:
        return matches[0]
    if not matches:
        raise RunError(_("no run matches {ref}; `devtune runs` lists them", ref=ref))
    raise RunError(_("{ref} matches several runs: {ids}", ref=ref, ids=", ".join(r.id for r in matches[:5])))


# ---------------------------------------------------------------- stopping and resuming

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
        signal_leaves(record.trainer.pid, GRACEFUL_SIGNAL)
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


def resume_run(ws: Workspace, run_id: str) -> RunRecord:
    """Start a new run that continues `run_id` from its last checkpoint (same config and output_dir), once
    the checkpoint fits the run's config (core.train.checkpoint_fit: method, ZeRO stage, world size)."""
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
    if old.config:
        from core.config.files import load_spec
        from core.train.checkpoint_fit import fit_problems

        try:
            spec = load_spec(ws, old.config)
        except Exception as exc:  # noqa: BLE001 - any unreadable config is the same answer
            raise RunError(_("cannot read run {id}'s config {path}: {error}", id=old.id, path=old.config,
                             error=str(exc))) from exc
        problems = fit_problems(checkpoint, spec)
        if problems:
            raise RunError(_("{ck} cannot be resumed by run {id}'s config: {why}", ck=ws.rel(checkpoint), id=old.id,
                             why="; ".join(problems)))
    extra = [f"resume_from_checkpoint={ws.rel(checkpoint)}", "overwrite_output_dir=false"]
    base = old.id.split("-resume")[0]
    label = f"{base[16:] or 'run'}-resume"
    if old.launcher == "slurm":
        return _resume_on_slurm(ws, old, label, extra, checkpoint)
    argv = [a for a in old.argv if not a.startswith(("resume_from_checkpoint=", "overwrite_output_dir="))]
    return start_run(ws, argv + extra, env=old.env, label=label, config=old.config,
                     source_config=old.source_config, output_dir=old.output_dir, kind=old.kind,
                     resume_of=old.id, resume_checkpoint=ws.rel(checkpoint))


def _resume_on_slurm(ws: Workspace, old: RunRecord, label: str, extra: list[str], checkpoint: Path) -> RunRecord:
    """The old run's Slurm job submitted again (preflight included), continuing from `checkpoint`."""
    import shutil

    from core.config.files import load_spec
    from core.train.slurm import SlurmError
    from core.train.slurm_launch import preflight_files, resubmit

    directory = reserve_run_dir(ws, label)
    try:
        files = preflight_files(ws, load_spec(ws, old.config), old.config) if old.config else []
        job, job_id, waiter = resubmit(run_dir(ws, old.id), directory, extra, files)
    except (SlurmError, OSError, ValueError) as exc:
        shutil.rmtree(directory, ignore_errors=True)
        raise RunError(str(exc)) from exc
    return start_run(ws, waiter, env=old.env, directory=directory, config=old.config,
                     source_config=old.source_config, output_dir=old.output_dir, kind=old.kind, resume_of=old.id,
                     resume_checkpoint=ws.rel(checkpoint), launcher="slurm", job_id=job_id, nodes=job.nodes)
