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

from core.errors import Unavailable
from core.config.resume_point import last_checkpoint_of as last_checkpoint  # noqa: F401 (the one definition)
from core.files.atomic import write_atomic
from core.i18n import _
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


class Segment(BaseModel):
    """One start of a Slurm job: a requeued job runs its script again (core.train.slurm_segments)."""

    restart: int = 0  # SLURM_RESTART_COUNT
    nodes: int = 1
    nodelist: str = ""
    start: float
    end: float | None = None
    reason: str | None = None  # time-limit | preempted (it saved and stopped) | completed | exit N | TIMEOUT...
    requeued: bool = False  # it asked Slurm to requeue the job: another segment follows


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
    stop_reason: str | None = None  # the cluster asked the job to save and stop: time-limit | preempted
    resume_checkpoint: str | None = None
    segments: list[Segment] = Field(default_factory=list)  # a Slurm job's starts, one per requeue
    note: str = ""  # why it ended, in words
    # This run's own lines of output_dir/trainer_log.jsonl: a resume appends to the same file, so a run
    # starts reading at the size the file had when it started, and when it ends its lines are copied
    # into its run folder (trainer_log.jsonl there): its record is frozen, whatever a resume adds later.
    log_start: int = 0
    log_frozen: bool = False
    # when it ended: tokens/s over the run and its MFU (core.train.throughput.run_throughput)
    throughput: dict | None = None

    @property
    def active(self) -> bool:
        return self.status in ACTIVE


class RunError(Unavailable):
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
    them; readers get these, made from the record's facts); a requeued job's segments after it."""
    note = _ending_reason(record)
    if record.active or len(record.segments) < 2:
        return note
    return "; ".join(part for part in (note, segments_line(record.segments)) if part)


def segments_line(segments: list[Segment]) -> str:
    """`segments: n[1-2] 10:00-10:59 time-limit, n[1-2] 11:02-11:30 completed`, for the runs list and the Train step."""
    parts = [f"{s.nodelist or s.nodes} {time.strftime('%H:%M', time.localtime(s.start))}-"
             f"{time.strftime('%H:%M', time.localtime(s.end)) if s.end else '…'} {s.reason or ''}".rstrip()
             for s in segments]
    return _("segments: {parts}", parts=", ".join(parts))


def _ending_reason(record: RunRecord) -> str:
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
    if record.stop_reason:
        what = {"time-limit": _("its time limit was near"), "preempted": _("it was preempted")}
        return _("Slurm job {job} saved a checkpoint and stopped: {why}; `devtune resume {id}` continues from it",
                 job=record.job_id, why=what.get(record.stop_reason, record.stop_reason), id=record.id)
    if code == 0:
        return ""
    if code in (-9, 137):
        return _("killed with SIGKILL (exit {code}): most often the kernel's OOM killer; see `dmesg`", code=code)
    if code < 0:
        name = signal.Signals(-code).name if -code in signal.Signals._value2member_map_ else str(-code)
        return _("killed by signal {sig}", sig=name)
    # the note follows the status ("failed: ..."): it says why, not "failed" again
    return _("the trainer exited with code {code}; `devtune diagnose {id}` explains the logs", code=code, id=record.id)


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
