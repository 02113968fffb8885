"""Requeue without a person: the segments of a Slurm job that the cluster stopped and Slurm started again.

With `requeue` on (Launch.requeue: `#SBATCH --requeue`), the batch script (core.train.slurm.render_sbatch) runs

    python -m core.train.slurm_segments start RUN_DIR              # a segment begins: nodes, start
    python -m core.train.slurm_segments resume-args OUTPUT_DIR     # on a restart: where the trainers resume
    python -m core.train.slurm_segments end RUN_DIR CODE JOB_ID [--requeue]   # it ended: why; requeue?

`end` asks Slurm to requeue the job (`scontrol requeue`, which runs the same script again with
SLURM_RESTART_COUNT set) only when the cluster asked the job to stop (stop_reason: time-limit | preempted) and
the trainers saved and exited 0: a job that failed is not run again. The requeued job asks for the same number
of nodes (the script's `#SBATCH --nodes`), so a segment resumes the checkpoint with the world size it was saved
with; another node count is `devtune resume RUN --nodes N` (core.train.universal for DeepSpeed ZeRO runs).
Slurm holds a requeued job for a while before it is eligible again (Reason=BeginTime, about two minutes).

Every segment is one entry of the run's own record (run.json `segments`): one run, however often it restarted.
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

from core.config.resume_point import last_checkpoint_of
from core.i18n import _
from core.train.runs import Segment, read_record, record_lock, write_record
from core.train.slurm import STOP_REASON_FILE, SlurmError, _slurm, stop_reason


def _change(run_dir: Path, change) -> bool:
    """Apply change(segments) to run.json under the run's lock; False when the folder has no run record."""
    if not (run_dir / "run.json").exists():
        return False
    with record_lock(run_dir):
        record = read_record(run_dir)
        segments = [s.model_copy() for s in record.segments]
        change(segments)
        write_record(run_dir, record.model_copy(update={"segments": segments}))
    return True


def start_segment(run_dir: Path, env: dict[str, str] | os._Environ = os.environ, now: float | None = None) -> None:
    """A (re)start of the job: the earlier segment's stop_reason and pid files belong to it, not to this one."""
    (run_dir / STOP_REASON_FILE).unlink(missing_ok=True)
    for pid_file in (run_dir / "nodes").glob("*.pid"):
        pid_file.unlink(missing_ok=True)
    restart = int(env.get("SLURM_RESTART_COUNT") or 0)
    segment = Segment(restart=restart, nodes=int(env.get("SLURM_NNODES") or 1),
                      nodelist=env.get("SLURM_JOB_NODELIST", ""), start=time.time() if now is None else now)
    _change(run_dir, lambda segments: segments.append(segment))


def end_reason(run_dir: Path, code: int) -> str:
    """Why a segment ended: the cluster's stop (time-limit | preempted), else completed or its exit code."""
    return stop_reason(run_dir) or ("completed" if code == 0 else f"exit {code}")


def should_requeue(run_dir: Path, code: int) -> bool:
    """Only a job the cluster stopped, whose trainers saved (exit 0), runs again."""
    return code == 0 and stop_reason(run_dir) is not None


def end_segment(run_dir: Path, reason: str, *, requeued: bool = False, now: float | None = None) -> None:
    """Close the open segment (the last one without an end); nothing when none is open."""
    def close(segments: list[Segment]) -> None:
        if segments and segments[-1].end is None:
            segments[-1] = segments[-1].model_copy(update={"end": time.time() if now is None else now,
                                                           "reason": reason, "requeued": requeued})
    _change(run_dir, close)


def resume_args(output_dir: Path) -> list[str]:
    """The trainer's arguments on a restart: its last checkpoint (the one decision, core.config.resume_point),
    none when the earlier segment saved none (it starts again from the beginning)."""
    checkpoint = last_checkpoint_of(output_dir)
    if checkpoint is None:
        return []
    return [f"resume_from_checkpoint={checkpoint}", "overwrite_output_dir=false"]


def finish(run_dir: Path, code: int, job_id: str, requeue: bool) -> int:
    """The end of the batch script: record the segment, and requeue the job when it should run again."""
    reason = end_reason(run_dir, code)
    again = requeue and should_requeue(run_dir, code)
    end_segment(run_dir, reason, requeued=again)
    if again:
        print(_("slurm job {id}: saved ({reason}); requeued, it resumes from that checkpoint", id=job_id,
                reason=reason), file=sys.stderr, flush=True)
        try:
            _slurm(["scontrol", "requeue", job_id])
        except (SlurmError, subprocess.TimeoutExpired) as exc:  # the record then says it stopped, and `devtune resume` continues it
            print(exc, file=sys.stderr, flush=True)
            _change(run_dir, _not_requeued)
            return 1
    return 0


def _not_requeued(segments: list[Segment]) -> None:
    if segments:
        segments[-1] = segments[-1].model_copy(update={"requeued": False})


def main(argv: list[str]) -> int:
    if len(argv) == 2 and argv[0] == "start":
        start_segment(Path(argv[1]))
        return 0
    if len(argv) == 2 and argv[0] == "resume-args":
        print("\n".join(resume_args(Path(argv[1]))))
        return 0
    if len(argv) in (4, 5) and argv[0] == "end" and argv[2].lstrip("-").isdigit():
        return finish(Path(argv[1]), int(argv[2]), argv[3], requeue=argv[4:] == ["--requeue"])
    print("usage: python -m core.train.slurm_segments start RUN_DIR | resume-args OUTPUT_DIR | "
          "end RUN_DIR CODE JOB_ID [--requeue]", file=sys.stderr)
    return 2


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
