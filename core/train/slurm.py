"""Training runs on a Slurm cluster: the sbatch script, submission, the job's state, signals to its nodes and a
preflight that compares the nodes before a launch.

    script = render_sbatch(SlurmJob(name="devtune-run1", nodes=2, ...))
    job_id = submit(run_dir / "job.sbatch")
    state = job_state(job_id)            # JobState(state="RUNNING", ...), from `scontrol show job -o`
    signal_nodes(job_id, 2, run_dir, "ABRT")   # LLaMA-Factory's graceful stop, on every node
    check_preflight(run_preflight(2, python, files=[...]))   # raises PreflightMismatch naming the node

One torchrun per node, started by one `srun` task per node: NNODES from SLURM_NNODES, NODE_RANK from
SLURM_NODEID, MASTER_ADDR the address of the job's first node, MASTER_PORT chosen by devtune. Each task writes
its pid to `<run>/nodes/<node id>.pid` (the run folder is on the shared file system the job's logs need
anyway), so a graceful stop can signal the training processes of each node (SIGABRT: LLaMA-Factory stops
after the step and saves) before `scancel` ends the job.

Save before the end: the job asks Slurm for SIGUSR1 SAVE_BEFORE_S seconds before its time limit
(`--signal=B:USR1@N`, to the batch shell), and the batch shell traps it, and the SIGTERM a preemption sends it,
as devtune's graceful stop of every node (the same signal_nodes as `devtune stop`): the ranks agree on a stop,
save a full checkpoint at that step (core/train/rank_site) and exit; the shell waits for them and its
`stop_reason` file (time-limit | preempted) tells the run's supervisor why the run stopped.
With requeue on (`#SBATCH --requeue`), a job that stopped so and saved requeues itself and its next start
resumes the last checkpoint; each start is one segment of the run's record (core.train.slurm_segments).

`python -m core.train.slurm wait JOB_ID STATE_FILE` waits for the job and exits with its exit code (128 +
signal when a signal ended it), writing the job's state to STATE_FILE at each change; it is what the run
supervisor (core.train.supervisor) watches in place of a local trainer. Accounting (sacct) is not needed:
`scontrol show job` keeps a finished job for MinJobAge seconds, long enough for a poll every 2 s.
"""

from __future__ import annotations

import json
import os
import shlex
import signal as signals
import sys
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path

from core.errors import Failed
from core.files.atomic import write_atomic
from core.i18n import _
from core.train.stalls import signal_ranks
from core.processes.helpers import run_helper

POLL_SECONDS = 2.0
ENDED = {"COMPLETED", "FAILED", "CANCELLED", "TIMEOUT", "PREEMPTED", "NODE_FAIL", "OUT_OF_MEMORY", "BOOT_FAIL",
         "DEADLINE", "REVOKED", "SPECIAL_EXIT"}
ENDED_BY_CLUSTER = ("TIMEOUT", "PREEMPTED", "NODE_FAIL", "OUT_OF_MEMORY", "BOOT_FAIL", "DEADLINE")
# Seconds before the time limit at which the job is told to save and stop (Slurm may send it up to a minute
# earlier). 120 s covers one optimizer step plus a checkpoint of a 7B LoRA run on shared storage; a run whose
# step or save takes longer sets SlurmJob.save_before in its slurm_job.json.
SAVE_BEFORE_S = 120
STOP_REASON_FILE = "stop_reason"  # in the run folder: why the cluster asked the job to stop
STOP_REASONS = {"USR1": "time-limit", "TERM": "preempted"}
PACKAGES = ("torch", "transformers", "deepspeed", "llamafactory", "peft", "accelerate", "datasets")


class SlurmError(Failed):
    """A Slurm command failed; the message says which and what it printed."""


class PreflightMismatch(SlurmError):
    """The nodes differ in something the run needs to be the same everywhere."""


@dataclass
class SlurmJob:
    name: str
    nodes: int
    workdir: str  # where the job starts: the workspace root
    run_dir: str  # .devtune/runs/<id>: the job's logs and the nodes' pid files
    argv: list[str]  # what each node runs (llamafactory-cli train CONFIG)
    env: dict[str, str] = field(default_factory=dict)  # exported for every node (FORCE_TORCHRUN, NPROC_PER_NODE...)
    gpus_per_node: int = 0  # 0: no GPU request (a CPU cluster)
    partition: str | None = None
    account: str | None = None
    time_limit: str | None = None  # Slurm's format: "2-00:00:00", "90"
    extra: list[str] = field(default_factory=list)  # more "#SBATCH ..." lines, as the person wrote them
    master_port: int = 29500
    recorder_python: str | None = None  # set: each node samples its GPUs into <run>/gpu-node<N>.jsonl
    save_before: int = SAVE_BEFORE_S  # SIGUSR1 this many seconds before the time limit: save and stop; 0: none
    requeue: bool = False  # stopped by the cluster after it saved: requeue and resume (core.train.slurm_segments)
    output_dir: str | None = None  # the trainer's output_dir: where a requeued job finds its last checkpoint


def render_sbatch(job: SlurmJob) -> str:
    """The batch script: its #SBATCH lines, the rendezvous, then one torchrun per node through srun."""
    lines = ["#!/bin/bash", f"#SBATCH --job-name={job.name}", f"#SBATCH --nodes={job.nodes}",
             "#SBATCH --ntasks-per-node=1", f"#SBATCH --output={job.run_dir}/stdout.log",
             f"#SBATCH --error={job.run_dir}/stderr.log", "#SBATCH --open-mode=append"]
    if job.gpus_per_node:
        lines.append(f"#SBATCH --gpus-per-node={job.gpus_per_node}")
    for key, value in (("partition", job.partition), ("account", job.account), ("time", job.time_limit)):
        if value:
            lines.append(f"#SBATCH --{key}={value}")
    if job.save_before > 0:
        lines.append(f"#SBATCH --signal=B:USR1@{job.save_before}")
    if job.requeue:
        lines.append("#SBATCH --requeue")
    for extra in job.extra:
        extra = extra.strip()
        if extra:
            lines.append(extra if extra.startswith("#SBATCH") else f"#SBATCH {extra}")
    lines += [
        "# written by devtune: one torchrun per node (llamafactory-cli with FORCE_TORCHRUN=1)",
        "set -euo pipefail",
        f"cd {shlex.quote(job.workdir)}",
        f"mkdir -p {shlex.quote(job.run_dir)}/nodes",
        'first=$(scontrol show hostnames "$SLURM_JOB_NODELIST" | head -n 1)',
        'addr=$(scontrol show node "$first" | grep -o "NodeAddr=[^ ]*" | cut -d= -f2)',
        'export MASTER_ADDR="${addr:-$first}"',
        f"export MASTER_PORT={job.master_port}",
        'export NNODES="$SLURM_NNODES"',
    ]
    lines += [f"export {key}={shlex.quote(value)}" for key, value in sorted(job.env.items())
              if key not in ("NNODES", "NODE_RANK", "MASTER_ADDR", "MASTER_PORT")]
    run = shlex.quote(job.run_dir)
    # ( ... & ): the recorder is not a child of the task, so a graceful stop's signal to the task's leaves
    # reaches the trainers only
    record = (f'({shlex.quote(job.recorder_python)} -m core.train.gpu.record --out {run}/gpu-node"$SLURM_NODEID".jsonl '
              f'--status-file {run}/gpu-node"$SLURM_NODEID".status --until-pid $$ >/dev/null 2>&1 &); '
              if job.recorder_python else "")
    task = (f'echo $$ > {run}/nodes/"$SLURM_NODEID".pid; {record}'
            f'export NODE_RANK="$SLURM_NODEID"; exec {shlex.join(job.argv)} "$@"')
    python = shlex.quote(job.recorder_python or sys.executable)
    segments = f"{python} -m core.train.slurm_segments"
    lines += [
        # one segment of the run's record per start of the job; a requeued job resumes its last checkpoint
        f"{segments} start {run} || true",
        "resume=()",
    ]
    if job.output_dir:
        lines.append('if [ "${SLURM_RESTART_COUNT:-0}" -gt 0 ]; then '
                     f"mapfile -t resume < <({segments} resume-args {shlex.quote(job.output_dir)}); fi")
    lines += [
        "# the cluster's notice (USR1 before the time limit, TERM on preemption): every node saves and stops",
        f"graceful_stop() {{ interrupted=1; {python} -m core.train.slurm stop-job \"$SLURM_JOB_ID\" "
        f'"$SLURM_NNODES" {run} "$1" || true; }}',
        *[f"trap 'graceful_stop {reason}' {sig}" for sig, reason in STOP_REASONS.items()],
        # in the background, so a trap runs at once (bash runs it only after a foreground command ends);
        # `wait` returns early (128 + the signal) for a trap, so it waits again for the trainers' own status
        # (127: it was already reported)
        f'srun --kill-on-bad-exit=1 --ntasks-per-node=1 bash -c {shlex.quote(task)} devtune-node "${{resume[@]}}" &',
        "trainers=$!",
        "code=0",
        'while :; do interrupted=0; status=0; wait "$trainers" || status=$?; [ "$status" = 127 ] || code=$status; '
        '[ "$interrupted" = 1 ] || break; done',
        # the trainers are done: a notice now changes nothing (and a requeue sends the shell one)
        "trap '' USR1 TERM",
        f'{segments} end {run} "$code" "$SLURM_JOB_ID"{" --requeue" if job.requeue else ""} || true',
        'exit "$code"',
    ]
    return "\n".join(lines) + "\n"


def stop_job(job_id: str, nodes: int, run_dir: Path, reason: str) -> None:
    """What the batch shell runs on the cluster's notice: record why, then devtune's graceful stop of every
    node (the trainers save a checkpoint at the step they agree on, and exit)."""
    write_atomic(run_dir / STOP_REASON_FILE, reason + "\n")
    print(_("slurm job {id}: the cluster asked it to stop ({reason}); saving a checkpoint", id=job_id,
            reason=reason), file=sys.stderr, flush=True)
    signal_nodes(job_id, nodes, run_dir, "ABRT")


def stop_reason(run_dir: Path) -> str | None:
    """time-limit | preempted when the cluster asked the job to stop, else None."""
    try:
        return (run_dir / STOP_REASON_FILE).read_text(encoding="utf-8").strip() or None
    except OSError:
        return None


def _slurm(argv: list[str], timeout: float = 30, env: dict[str, str] | None = None) -> str:
    try:
        proc = run_helper(argv, timeout=timeout, env=env)
    except FileNotFoundError:
        raise SlurmError(_("{tool} not found: this machine has no Slurm client (install slurm-client, or run on "
                           "the cluster's login node)", tool=argv[0])) from None
    if proc.returncode != 0:
        raise SlurmError(_("{command} failed with exit code {code}: {output}", command=shlex.join(argv),
                           code=proc.returncode, output=(proc.stderr or proc.stdout).strip()[-500:]))
    return proc.stdout


def submit(script: Path, env: dict[str, str] | None = None) -> str:
    """sbatch the script; returns the job id."""
    out = _slurm(["sbatch", "--parsable", str(script)], env=env).strip()
    job_id = out.split(";", 1)[0]
    if not job_id.isdigit():
        raise SlurmError(_("sbatch printed no job id: {output}", output=out[:200]))
    return job_id


@dataclass(frozen=True)
class JobState:
    job_id: str
    state: str  # Slurm's JobState: PENDING, RUNNING, COMPLETED, FAILED, CANCELLED, TIMEOUT, PREEMPTED, ...
    reason: str = ""
    exit_code: int | None = None
    signal: int | None = None
    nodes: str = ""

    @property
    def ended(self) -> bool:
        return self.state in ENDED

    @property
    def process_exit(self) -> int | None:
        """The exit status a local process would have had: the code, or 128 + the signal."""
        if self.signal:
            return 128 + self.signal
        return self.exit_code

    def describe(self) -> str:
        """In words, for a person: what Slurm says happened to the job."""
        texts = {
            "PENDING": _("waiting in the queue ({reason})", reason=self.reason or "-"),
            "CONFIGURING": _("nodes are being prepared"),
            "RUNNING": _("running on {nodes}", nodes=self.nodes or "?"),
            "COMPLETED": _("completed"),
            "FAILED": _("failed with exit code {code}", code=self.exit_code),
            "CANCELLED": _("cancelled"),
            "TIMEOUT": _("ended by the cluster: it reached its time limit"),
            "PREEMPTED": _("ended by the cluster: preempted by another job"),
            "NODE_FAIL": _("ended by the cluster: a node failed"),
            "OUT_OF_MEMORY": _("ended by the cluster: out of memory"),
        }
        return texts.get(self.state, self.state.lower())

    @property
    def ended_by_cluster(self) -> bool:
        return self.state in ENDED_BY_CLUSTER


def parse_scontrol_job(text: str) -> JobState | None:
    """`scontrol show job -o ID`: one line of Key=Value fields."""
    line = next((ln for ln in text.splitlines() if ln.startswith("JobId=")), None)
    if line is None:
        return None
    fields: dict[str, str] = {}
    for token in line.split():
        key, sep, value = token.partition("=")
        if sep and key not in fields:
            fields[key] = value
    code, sig = None, None
    if ":" in fields.get("ExitCode", ""):
        a, b = fields["ExitCode"].split(":", 1)
        code, sig = (int(a) if a.isdigit() else None), (int(b) if b.isdigit() and int(b) else None)
    state = fields.get("JobState", "UNKNOWN")
    reason = fields.get("Reason", "")
    return JobState(fields.get("JobId", ""), state, "" if reason == "None" else reason, code, sig,
                    "" if fields.get("NodeList") == "(null)" else fields.get("NodeList", ""))


def job_state(job_id: str) -> JobState | None:
    """The job as Slurm sees it now; None once Slurm has forgotten it (or never knew it)."""
    try:
        out = _slurm(["scontrol", "show", "job", "-o", str(job_id)])
    except SlurmError as exc:
        if "Invalid job id" in str(exc):
            return None
        raise
    return parse_scontrol_job(out)


def cancel(job_id: str, sig: str | None = None) -> None:
    """scancel the job (with --signal: only signal it, the job goes on)."""
    _slurm(["scancel", *([f"--signal={sig}"] if sig else []), str(job_id)])


SIGNAL_LEAD_S = 3.0  # srun starts the signal's tasks within this; they all signal at that agreed moment


def signal_nodes(job_id: str, nodes: int, run_dir: str | os.PathLike, sig: str = "ABRT",
                 python: str = sys.executable) -> None:
    """Send `sig` to the training processes of every node of the job (the leaves of each node's task).

    Every node signals at one agreed moment (now + SIGNAL_LEAD_S, on clocks a cluster keeps in step), not as
    its task happens to start: LLaMA-Factory stops after the step in which the signal arrives, and ranks that
    stop after different steps wait on each other's collectives until one aborts.

    A graceful stop can end the job before this step has reported back (Slurm then aborts the step): that is
    not an error, the signal has done its work."""
    try:
        _slurm(["srun", "--overlap", f"--jobid={job_id}", f"--nodes={nodes}", "--ntasks-per-node=1",
                python, "-m", "core.train.slurm", "signal-node", str(run_dir), sig,
                f"{time.time() + SIGNAL_LEAD_S:.3f}"], timeout=60)
    except SlurmError:
        # The job may still be finishing (COMPLETING) when srun reports the aborted step: give it a moment.
        deadline = time.monotonic() + 15
        while True:
            state = job_state(job_id)
            if state is None or state.ended or state.state == "COMPLETING":
                return
            if time.monotonic() > deadline:
                raise
            time.sleep(0.5)


def _signal_this_node(run_dir: Path, sig: str, at: float | None = None) -> int:
    if at is not None:
        time.sleep(max(0.0, at - time.time()))
    pid_file = run_dir / "nodes" / f"{os.environ.get('SLURM_NODEID', '0')}.pid"
    try:
        pid = int(pid_file.read_text().strip())
    except (OSError, ValueError):
        print(_("no training process on this node ({file})", file=pid_file), file=sys.stderr)
        return 1
    signal_ranks(pid, getattr(signals, f"SIG{sig}"))
    return 0


# ---- preflight: the same software and data on every node -----------------------------------------------

PREFLIGHT = r"""
import hashlib, json, os, platform, socket, sys
from importlib import metadata
out = {"node": os.environ.get("SLURMD_NODENAME") or socket.gethostname(), "python": platform.python_version()}
for name in json.loads(sys.argv[1]):
    try:
        out[name] = metadata.version(name)
    except metadata.PackageNotFoundError:
        out[name] = None
for path in json.loads(sys.argv[2]):
    try:
        h = hashlib.sha256()
        with open(path, "rb") as fh:
            for block in iter(lambda: fh.read(1 << 20), b""):
                h.update(block)
        out["file:" + path] = h.hexdigest()[:16]
    except OSError as exc:
        out["file:" + path] = "unreadable: " + (exc.strerror or str(exc))
print("DEVTUNE-PREFLIGHT " + json.dumps(out), flush=True)
"""


def run_preflight(nodes: int, python: str, files: list[str], *, cwd: str | None = None,
                  extra_srun: list[str] | None = None) -> list[dict]:
    """One record per allocated node: its Python, the training packages' versions, the hash of each file."""
    out = _slurm(["srun", f"--nodes={nodes}", "--ntasks-per-node=1", *(extra_srun or []),
                  *([f"--chdir={cwd}"] if cwd else []), python, "-c", PREFLIGHT, json.dumps(list(PACKAGES)),
                  json.dumps(files)], timeout=300)
    records = [json.loads(line.split(" ", 1)[1]) for line in out.splitlines() if line.startswith("DEVTUNE-PREFLIGHT ")]
    if len(records) != nodes:
        raise SlurmError(_("the preflight answered from {got} of {nodes} nodes", got=len(records), nodes=nodes))
    return sorted(records, key=lambda r: r["node"])


def check_preflight(records: list[dict]) -> None:
    """Raise PreflightMismatch naming each node and value that differs from the first node's."""
    if not records:
        return
    first = records[0]
    problems = []
    for rec in records[1:]:
        for key in sorted(set(first) | set(rec)):
            if key != "node" and first.get(key) != rec.get(key):
                problems.append(_("{what}: {a} on {node_a}, {b} on {node_b}", what=key.removeprefix("file:"),
                                  a=first.get(key), node_a=first["node"], b=rec.get(key), node_b=rec["node"]))
    unreadable = [_("{what} on {node}: {value}", what=k.removeprefix("file:"), node=r["node"], value=v)
                  for r in records for k, v in r.items() if k.startswith("file:") and str(v).startswith("unreadable")]
    if problems or unreadable:
        raise PreflightMismatch(_("the nodes differ; a multi-node run needs the same software and data on every "
                                  "node:") + "\n  " + "\n  ".join(unreadable + problems))


# ---- waiting for a job (what the run supervisor runs) ---------------------------------------------------

def wait(job_id: str, state_file: Path | None = None, poll: float = POLL_SECONDS) -> JobState:
    last: JobState | None = None
    while True:
        state = job_state(job_id)
        if state is None:  # forgotten before we saw it end: MinJobAge shorter than our poll
            state = JobState(job_id, "UNKNOWN", _("Slurm no longer knows the job"))
        if state != last and state_file is not None:
            write_atomic(state_file, json.dumps(asdict(state), indent=1) + "\n")
        last = state
        if state.ended or state.state == "UNKNOWN":
            return state
        time.sleep(poll)


def main(argv: list[str]) -> int:
    if len(argv) == 3 and argv[0] == "wait":
        state = wait(argv[1], Path(argv[2]))
        print(_("slurm job {id}: {state}", id=state.job_id, state=state.describe()), file=sys.stderr)
        code = state.process_exit
        return 1 if code is None and state.state != "COMPLETED" else (code or 0)
    if len(argv) == 5 and argv[0] == "stop-job":
        stop_job(argv[1], int(argv[2]), Path(argv[3]), argv[4])
        return 0
    if len(argv) in (3, 4) and argv[0] == "signal-node":
        return _signal_this_node(Path(argv[1]), argv[2], float(argv[3]) if len(argv) == 4 else None)
    print("usage: python -m core.train.slurm wait JOB_ID STATE_FILE | signal-node RUN_DIR SIGNAL [AT] | "
          "stop-job JOB_ID NODES RUN_DIR REASON",
          file=sys.stderr)
    return 2


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
