"""Stalls, caught while they happen: a live run that logs no new step for several times its recent step time,
that has not logged two steps yet and writes no output for STARTUP_STALL_SECONDS (10 minutes: a hung
rendezvous, NCCL/RCCL init or model load), or whose GPUs sit idle with their memory held, and what each
training process is doing right now.

    stall = check_stall(output_dir / "trainer_log.jsonl", trainer_pid, gpu_samples)
    if stall: stall.reason, stall.stacks   # {pid: the Python stack of that process, from py-spy dump}

The stacks come from `py-spy dump`, which reads a running Python process from outside and needs no change to
the trainer: a hung collective shows as a rank waiting in all_reduce, a stuck data loader as a rank waiting on
its queue. Reading another process needs ptrace rights (root, or kernel.yama.ptrace_scope=0); without them
the stack says so and gives the command to run with sudo.

The check reads the last few kB of trainer_log.jsonl and its modification time, and calls py-spy only once a
stall is found (once per stall), so watching costs nothing measurable while a run is healthy.
"""

from __future__ import annotations

import json
import os
import shutil
import statistics
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

from core.i18n import _
from core.processes.helpers import run_helper

STALL_FACTOR = 5.0  # no new step for this many times the recent step interval ...
MIN_STALL_SECONDS = 120.0  # ... and at least this long (saving a checkpoint or an eval pause is not a stall)
IDLE_UTIL = 5.0  # % GPU use under which a GPU is idle
IDLE_SECONDS = 120.0  # idle this long, with memory held, while the run lives
HELD_FRACTION = 0.1  # memory held: at least this share of the card's VRAM
# Before two steps are logged the pace is unknown: launch, rendezvous, NCCL/RCCL init, dataset tokenisation and
# model load print as they go (tqdm bars, log lines), so ten minutes with no new output at all is a stall.
STARTUP_STALL_SECONDS = 600.0
TAIL_BYTES = 8192  # the last ~30 lines of trainer_log.jsonl: step_interval reads 12


@dataclass
class Stall:
    kind: str  # "no-step" | "startup" (no two steps yet, no output) | "gpus-idle"
    seconds: float  # how long it has been so
    reason: str
    step: int | None = None
    stacks: dict[int, str] = field(default_factory=dict)

    def to_dict(self) -> dict:
        return {"kind": self.kind, "seconds": round(self.seconds, 1), "reason": self.reason, "step": self.step,
                "stacks": {str(pid): text for pid, text in self.stacks.items()}}


def _hms(text: str) -> float | None:
    try:
        parts = [float(p) for p in str(text).split(":")]
    except ValueError:
        return None
    total = 0.0
    for part in parts:
        total = total * 60 + part
    return total


def _last_rows(path: Path) -> list[dict]:
    try:
        with open(path, "rb") as fh:
            fh.seek(max(0, path.stat().st_size - TAIL_BYTES))
            lines = fh.read().splitlines()[1:] if path.stat().st_size > TAIL_BYTES else fh.read().splitlines()
    except OSError:
        return []
    import orjson

    rows = []
    for raw in lines:
        try:
            row = orjson.loads(raw)
        except ValueError:
            try:
                row = json.loads(raw)  # NaN / Infinity, as Python's json.dumps writes them
            except ValueError:
                continue
        if isinstance(row, dict) and "current_steps" in row and "loss" in row:  # training steps, not eval lines
            rows.append(row)
    return rows


def step_interval(rows: list[dict]) -> float | None:
    """Seconds between logged steps lately: the median over the last rows (LLaMA-Factory's elapsed_time)."""
    times = [(r["current_steps"], _hms(r.get("elapsed_time", ""))) for r in rows[-12:]]
    times = [(s, t) for s, t in times if t is not None]
    gaps = [t2 - t1 for (s1, t1), (s2, t2) in zip(times, times[1:]) if s2 > s1]
    return statistics.median(gaps) if gaps else None


def no_step_stall(trainer_log: Path, now: float | None = None, rows: list[dict] | None = None) -> Stall | None:
    rows = _last_rows(trainer_log) if rows is None else rows
    if len(rows) < 2:
        return None  # still loading, or too early to know its pace
    interval = step_interval(rows) or 0.0
    try:
        since = (now or time.time()) - trainer_log.stat().st_mtime
    except OSError:
        return None
    limit = max(STALL_FACTOR * interval, MIN_STALL_SECONDS)
    if since < limit:
        return None
    step = rows[-1]["current_steps"]
    return Stall("no-step", since, _("no new step for {s:.0f} s after step {step} (the steps before took {i:.1f} s "
                                     "between logs)", s=since, step=step, i=interval), step)


def _last_output_line(path: Path) -> str:
    try:
        with open(path, "rb") as fh:
            fh.seek(max(0, path.stat().st_size - 4096))
            text = fh.read().decode("utf-8", errors="replace")
    except OSError:
        return ""
    pieces = [p.strip() for line in text.splitlines() for p in line.split("\r")]
    return next((p for p in reversed(pieces) if p), "")[:200]


def startup_stall(trainer_log: Path, outputs: tuple[Path, ...], now: float | None = None,
                  rows: list[dict] | None = None) -> Stall | None:
    """A run that has not logged two steps yet and has written nothing to its trainer log, stdout or stderr for
    STARTUP_STALL_SECONDS: stuck at the rendezvous, in the collective library's init or in the model load."""
    rows = _last_rows(trainer_log) if rows is None else rows
    if len(rows) >= 2:
        return None  # no_step_stall knows its pace
    written = []
    for path in (trainer_log, *outputs):
        try:
            written.append((path.stat().st_mtime, path))
        except OSError:
            continue
    if not written:
        return None
    since = (now or time.time()) - max(written)[0]
    if since < STARTUP_STALL_SECONDS:
        return None
    step = rows[-1]["current_steps"] if rows else None
    lines = (_last_output_line(path) for _t, path in sorted(written, reverse=True) if path != trainer_log)
    line = next((text for text in lines if text), "")
    reason = _("no training step yet and no new output for {s:.0f} s (launch, rendezvous, NCCL/RCCL init and the "
               "model load print as they go)", s=since)
    if line:
        reason += " — " + _("its last line: {line}", line=line)
    return Stall("startup", since, reason, step)


def gpus_idle_stall(samples_by_tick: list[list], now: float | None = None) -> Stall | None:
    """`samples_by_tick`: GpuSample lists, oldest first (core.train.gpu.history.group_ticks); a stall when the
    latest ticks, for IDLE_SECONDS or more, show every GPU idle with memory held."""
    if not samples_by_tick:
        return None
    now = now or time.time()
    idle_since = None
    for tick in reversed(samples_by_tick):
        busy = [s for s in tick if (s.util_pct or 0) > IDLE_UTIL or not s.vram_total
                or (s.vram_used or 0) < HELD_FRACTION * s.vram_total]
        if busy or not tick:
            break
        idle_since = min(s.ts for s in tick)
    if idle_since is None or now - idle_since < IDLE_SECONDS:
        return None
    return Stall("gpus-idle", now - idle_since, _("the GPUs have been idle for {s:.0f} s with their memory held",
                                                 s=now - idle_since))


def py_spy() -> str | None:
    here = Path(sys.executable).parent / "py-spy"
    return str(here) if here.exists() else shutil.which("py-spy")


def dump_stack(pid: int, timeout: float = 20.0) -> str:
    """The Python stack of every thread of `pid` (py-spy dump), or why it could not be read."""
    tool = py_spy()
    if tool is None:
        return _("py-spy is not installed (pip install py-spy) so the stack cannot be read")
    stopped = _is_stopped(pid)
    # a stopped process cannot be paused to be read: read it as it is (it does not move anyway)
    argv = [tool, "dump", "--pid", str(pid)] + (["--nonblocking"] if stopped else [])
    head = _("process {pid} is stopped (SIGSTOP, or a debugger holds it): it cannot answer the other ranks; "
             "kill -CONT {pid} lets it go on", pid=pid) if stopped else ""
    try:
        proc = run_helper(argv, timeout=timeout)
    except Exception as exc:  # a timeout, a vanished process
        return "\n".join(filter(None, [head, _("py-spy could not read process {pid}: {error}", pid=pid, error=exc)]))
    if proc.returncode == 0:
        return "\n".join(filter(None, [head, proc.stdout.strip()]))
    if stopped:
        return head
    text = (proc.stderr or proc.stdout).strip()
    if "ermission" in text or "ptrace" in text:
        return _("reading process {pid} needs ptrace rights: sudo {tool} dump --pid {pid}", pid=pid, tool=tool)
    return _("py-spy could not read process {pid}: {error}", pid=pid, error=text[-300:])


# Launchers in a trainer's tree: they only wait for the ranks they started, so their stacks say nothing. A
# process is skipped as one only when its command line names one of these AND it has started other Python
# programs; any other Python process is dumped (a stack too many costs less than the hung rank missed).
LAUNCHERS = ("torchrun", "torch.distributed.run", "torch.distributed.launch", "torch/distributed/run.py",
             "llamafactory-cli", "deepspeed", "accelerate", "mpirun", "srun")


def _is_python(p) -> bool:
    try:
        return "python" in os.path.basename(p.exe() or p.name()).lower()
    except Exception:  # psutil's NoSuchProcess / AccessDenied / ZombieProcess
        return False


def _is_worker(p, parent) -> bool:
    """A data-loader (multiprocessing) worker of its parent: forked with the same command line, or started
    by multiprocessing's spawn / forkserver."""
    try:
        cmd = p.cmdline()
        if any("multiprocessing" in part for part in cmd):
            return True
        return parent is not None and cmd == parent.cmdline()
    except Exception:
        return False


def _is_stopped(pid: int) -> bool:
    import psutil

    try:
        return psutil.Process(pid).status() in (psutil.STATUS_STOPPED, psutil.STATUS_TRACING_STOP)
    except psutil.Error:
        return False


def stack_lines(text: str, frames: int = 5) -> list[str]:
    """The lines of a dump worth showing in a small box: what was said before it (stopped, no ptrace rights),
    the main thread's line and its innermost `frames` frames (py-spy prints the innermost first)."""
    lines = text.splitlines()
    start = next((i for i, line in enumerate(lines) if line.startswith("Process ")), len(lines))
    out = [line.strip() for line in lines[:start] if line.strip()]
    threads = [i for i in range(start, len(lines)) if lines[i].startswith("Thread ")]
    main = next((i for i in threads if "MainThread" in lines[i]), threads[0] if threads else None)
    if main is None:
        return out or [line.strip() for line in lines[:frames + 1] if line.strip()]
    body = []
    for line in lines[main + 1:]:
        if not line.startswith(" "):
            break
        body.append(line.strip())
    return out + [lines[main].strip()] + body[:frames]


def training_processes(pid: int) -> list[int]:
    """The processes that run the training loop: every Python process of the trainer's tree that is a rank,
    that is neither a launcher (torchrun's elastic agent, llamafactory-cli starting torchrun, DeepSpeed's
    launcher) nor a data-loader worker of a rank (its rank's stack shows it waiting on that worker).

    llamafactory-cli -> torchrun -> rank 0, rank 1 -> their workers gives the two ranks; a single-process run
    with workers gives that process."""
    import psutil

    try:
        root = psutil.Process(pid)
        tree = [root] + root.children(recursive=True)
    except psutil.NoSuchProcess:
        return []
    ranks = []
    for p in tree:
        if not _is_python(p):
            continue
        try:
            parent = p.parent() if p.pid != pid else None
            children = [c for c in p.children() if _is_python(c)]
            command = " ".join(p.cmdline())
        except (psutil.NoSuchProcess, psutil.AccessDenied, psutil.ZombieProcess):
            continue
        if parent is not None and _is_python(parent) and _is_worker(p, parent):
            continue
        programs = [c for c in children if not _is_worker(c, p)]  # Python children that are not its workers
        if programs and any(name in command for name in LAUNCHERS):
            continue
        ranks.append(p.pid)
    return ranks or [pid]


def dump_stacks(pids: list[int]) -> dict[int, str]:
    """py-spy dump of each process, side by side (a hung rank can take py-spy its full timeout)."""
    from concurrent.futures import ThreadPoolExecutor

    with ThreadPoolExecutor(max_workers=min(8, max(1, len(pids)))) as pool:
        return dict(zip(pids, pool.map(dump_stack, pids)))


def check_stall(trainer_log: Path, trainer_pid: int | None, samples_by_tick: list[list] | None = None, *,
                outputs: tuple[Path, ...] = (), now: float | None = None, with_stacks: bool = True) -> Stall | None:
    """A stall of a live run, with each training process's stack; None while it makes progress.
    `outputs`: the run's stdout.log and stderr.log (what a run that has not stepped yet still writes)."""
    if trainer_pid is None:
        return None
    rows = _last_rows(trainer_log)  # read once for both checks
    stall = (no_step_stall(trainer_log, now, rows) or startup_stall(trainer_log, outputs, now, rows)
             or gpus_idle_stall(samples_by_tick or [], now))
    if stall is not None and with_stacks:
        stall.stacks = dump_stacks(training_processes(trainer_pid))
    return stall


def signal_ranks(pid: int, sig: int) -> None:
    """Signal the ranks of the trainer's tree (training_processes: neither their launchers nor their data-loader
    or dataset-map workers, which have no handler and would die of it). LLaMA-Factory's graceful stop is SIGABRT
    to them; the ranks then agree on the step they stop at (core/train/rank_site/sitecustomize.py)."""
    import psutil

    for rank in training_processes(pid):
        try:
            psutil.Process(rank).send_signal(sig)
        except psutil.NoSuchProcess:
            pass
