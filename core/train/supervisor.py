"""The supervisor of one detached run: `python -m core.train.supervisor <run dir>`.

Started by core.train.runs.start_run in its own session (no controlling terminal: an SSH hang-up never
reaches it). It starts the trainer in its own process group with stdout/stderr to files, records
the pids, samples the GPUs into gpu.jsonl while the trainer lives (when a GPU backend exists), waits,
and writes how the run ended into run.json. It is the only process that reaps the trainer, so the
exit code is never lost.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

from core.notify.run_events import StallWatch, notify_run_end
from core.train.runs import ProcessRef, RunStatus, ending_note, freeze_trainer_log, read_record, update_record


def _status_for(exit_code: int, stop_requested: bool) -> RunStatus:
    if stop_requested:
        return RunStatus.STOPPED
    return RunStatus.FINISHED if exit_code == 0 else RunStatus.FAILED


def _start_gpu_recorder(directory: Path, trainer_pid: int) -> threading.Thread | None:
    """Sample GPUs into gpu.jsonl while the trainer lives, when core.train.gpu finds a backend."""
    try:
        from core.train.gpu.record import record_until  # type: ignore[attr-defined]
    except ImportError:
        return None

    thread = threading.Thread(
        target=record_until,
        kwargs={"out": directory / "gpu.jsonl", "until_pid": trainer_pid, "status_file": directory / "gpu.status"},
        name="gpu-recorder",
        daemon=True,
    )
    thread.start()
    return thread


def supervise(directory: Path) -> int:
    import psutil

    record = read_record(directory)
    env = {**os.environ, **record.env}
    # The trainer ignores SIGHUP too (nohup semantics) although it has no terminal to lose.
    signal.signal(signal.SIGHUP, signal.SIG_IGN)
    with open(directory / "stdout.log", "ab") as out, open(directory / "stderr.log", "ab") as err:
        try:
            proc = subprocess.Popen(record.argv, cwd=record.cwd, env=env, stdin=subprocess.DEVNULL, stdout=out,
                                    stderr=err, process_group=0, close_fds=True)
        except OSError as exc:
            from core.i18n import _

            err.write(("devtune: " + _("cannot start {cmd}: {error}", cmd=record.argv[0], error=exc) + "\n").encode())
            update_record(directory, status=RunStatus.FAILED, exit_code=127, ended=time.time(),
                          note=_("could not start {cmd}: {error}", cmd=record.argv[0], error=str(exc)))
            notify_run_end(directory)
            return 127
        try:
            created = psutil.Process(proc.pid).create_time()
        except psutil.NoSuchProcess:
            created = 0.0
        update_record(directory, status=RunStatus.RUNNING, trainer=ProcessRef(pid=proc.pid, create_time=created),
                      pgid=proc.pid)
        if record.launcher != "slurm":  # a Slurm job's nodes record their own GPUs (gpu-node<N>.jsonl)
            _start_gpu_recorder(directory, proc.pid)
        stall_watch = StallWatch(directory, proc.pid).start()  # `stalled` notifications, once a minute
        code = proc.wait()
        stall_watch.stop.set()
    record = read_record(directory)
    stopped = record.stop_requested is not None
    if record.launcher == "slurm":
        from core.train.slurm import ENDED_BY_CLUSTER, stop_reason
        from core.train.slurm_launch import job_of

        state = (job_of(directory) or {}).get("state")
        if state in ENDED_BY_CLUSTER and not stopped:
            record = update_record(directory, cluster_state=state)
        reason = None if stopped else stop_reason(directory)  # the job's own save-and-stop (time limit, preemption)
        if reason:
            record = update_record(directory, stop_reason=reason)
            stopped = True
        from core.train.slurm_segments import end_segment

        # a segment the batch script could not close (the cluster killed it, a node failed) ends now
        cluster = state if state in ENDED_BY_CLUSTER else None
        end_segment(directory, reason or cluster or ("completed" if code == 0 else f"exit {code}"))
        record = read_record(directory)
    frozen = freeze_trainer_log(directory, record)  # before the status says it ended: readers find the copy
    ended = record.model_copy(update={"status": _status_for(code, stopped), "exit_code": code})
    rates = _throughput(directory, record.model_copy(update={"log_frozen": frozen}))
    update_record(directory, status=ended.status, exit_code=code, ended=time.time(), note=ending_note(ended),
                  log_frozen=frozen, throughput=rates)
    notify_run_end(directory)  # finished / failed to the workspace's notify targets, after the record says so
    return 0


def _throughput(directory: Path, record) -> dict | None:
    """tokens/s and MFU over the run, for its record; never in the way of recording how it ended."""
    try:
        from core.train.throughput import run_throughput
        from core.workspace.layout import Workspace

        return run_throughput(Workspace(Path(record.cwd)), directory, record)
    except Exception:  # an unreadable config or log: the record says how the run ended all the same
        return None


def main(argv: list[str]) -> int:
    if len(argv) != 1:
        print("usage: python -m core.train.supervisor RUN_DIR", file=sys.stderr)
        return 2
    return supervise(Path(argv[0]))


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
