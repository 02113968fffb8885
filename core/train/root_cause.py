"""The root cause of a failed run, read from its logs whether or not a rule knows the error.

    cause = find_root_cause(numbered_lines, "stderr.log", exit_code=1, last_step=640)
    cause.exception   # "ValueError: Can't find a valid checkpoint at saves/cpu-demo/checkpoint-640"

What is read:
- Python tracebacks (core.train.traceback_reader), also when every line carries torchrun's `[rankN]:` (or
  `[defaultN]:`) prefix, so each rank's traceback is read on its own even where the ranks' lines interleave.
  A chained traceback ("During handling of the above exception...", "The above exception was the direct cause...") counts from its first
  exception: that is what went wrong first; unless the last one sums up a lookup of several places ("X is not a
  local folder and is not a valid model identifier", raised from the Hub's 401): it names what was asked for.
- Wrappers are never the cause: torchrun's `ChildFailedError`, LLaMA-Factory's launcher `CalledProcessError`,
  `SystemExit`. torchrun's summary block ("Root Cause (first observed failure)") says which rank on which
  host failed first, with its exit code or signal, and that rank's first exception is the root cause.
- The frame that raised: the innermost frame outside the Python standard library (LLaMA-Factory,
  transformers, torch, DeepSpeed, vLLM, or the user's own code).
- Crashes in native code, which print no Python traceback: faulthandler's dump ("Fatal Python error:
  Segmentation fault", then "Current thread ... (most recent call first):", so its first File line is the
  innermost frame), and C++'s "terminate called after throwing an instance of 'c10::Error'" with its
  `what():` line (and "Exception raised from ..." as the frame). A terminate followed by faulthandler's
  "Fatal Python error: Aborted" is one crash: the what() names it, the Python frame says where.
- The last step reached: the last `N/M [` progress bar of the log, unless the caller knows better
  (trainer_log.jsonl).
"""

from __future__ import annotations

import re
import signal
from dataclasses import dataclass, field

from core.train.diagnosis_native import find_error_line, find_native_abort
from core.train.trainer_progress import last_progress
from core.train.traceback_reader import (CHAINED, EXCEPTION, FRAME, PREFIX, TRACEBACK, WORKER, WRAPPERS,  # noqa: F401
                                         RaisedException, _index_of, read_exceptions)

SUMMARY_FIELD = re.compile(r"^\s*(time|host|rank|exitcode|traceback)\s*:\s*(.*)$")
FATAL = re.compile(r"Fatal Python error: (.+)$")
DUMP_THREAD = re.compile(r"^(?:Current thread 0x[0-9a-fA-F]+.*|Stack) \(most recent call first\):$")
DUMP_FRAME = re.compile(r'^\s*File "([^"]+)", line (\d+) in (\S+)')
TERMINATE = re.compile(r"terminate called after throwing an instance of '([^']+)'")
WHAT = re.compile(r"^\s*what\(\):\s+(.*)$")
RAISED_FROM = re.compile(r"^Exception raised from .+ \(most recent call first\):$")
CRASH_SIGNALS = ("SIGSEGV", "SIGBUS", "SIGFPE", "SIGILL", "SIGABRT")  # the process itself crashed


@dataclass
class RootCause:
    exception: RaisedException | None
    exit_code: int | None = None
    signal: str | None = None
    rank: int | None = None
    host: str | None = None
    last_step: int | None = None
    total_steps: int | None = None
    failed_ranks: list[int] = field(default_factory=list)

    @property
    def known(self) -> bool:
        return self.exception is not None or self.signal is not None


def signal_name(exit_code: int | None) -> str | None:
    """SIGKILL for -9 (a child killed by a signal) or 137 (a shell's 128 + 9)."""
    if exit_code is None:
        return None
    number = -exit_code if exit_code < 0 else exit_code - 128 if 128 < exit_code < 160 else None
    if number is None:
        return None
    try:
        return signal.Signals(number).name
    except ValueError:
        return None


BARE = re.compile(r"^([A-Za-z_][\w.]*(?:Error|Exception)|Exception):\s?(.*)$")  # a Rust library's bare `Exception:`


def read_bare_exceptions(numbered: list[tuple[int, str]], name: str) -> list[RaisedException]:
    """Exception lines in a log that printed no traceback header (an excerpt, a logger's one-liner)."""
    out = []
    for number, raw in numbered:
        m = PREFIX.match(raw)
        text = (raw[m.end():] if m else raw).rstrip()
        em = BARE.match(text)
        if em:
            out.append(RaisedException(em.group(1), em.group(2).strip(), name, number,
                                       int(m.group(1)) if m else None))
    return out


def read_native_crashes(numbered: list[tuple[int, str]], name: str) -> list[RaisedException]:
    """faulthandler dumps and C++ terminate messages, each as one exception (see the module's docstring)."""
    if not any("Fatal Python error: " in raw or "terminate called after" in raw for _n, raw in numbered):
        return []  # most logs: one quick pass instead of reading each line
    out: list[RaisedException] = []
    pending: dict[int | None, RaisedException] = {}  # a terminate per rank, waiting for its faulthandler dump
    dumps: dict[int | None, RaisedException] = {}  # a Fatal Python error per rank, waiting for its first frame
    for i, (number, raw) in enumerate(numbered):
        m = PREFIX.match(raw)
        rank = int(m.group(1)) if m else None
        text = (raw[m.end():] if m else raw).rstrip("\r\n")
        stripped = text.strip()
        t = TERMINATE.search(stripped)
        if t:
            exc = RaisedException(t.group(1), "", name, number, rank, traceback_start=number)
            for _n, nxt in numbered[i + 1: i + 12]:
                nm = PREFIX.match(nxt)
                if (int(nm.group(1)) if nm else None) != rank:
                    continue
                body = (nxt[nm.end():] if nm else nxt).strip()
                w = WHAT.match(body)
                if w and not exc.message:
                    exc.message, exc.line, exc.printed = w.group(1).strip(), _n, body
                elif RAISED_FROM.match(body):
                    exc.frame, exc.frame_line, exc.frame_text = body[len("Exception raised from "):].split(
                        " (most recent call first)")[0], _n, body
                    break
            out.append(exc)
            pending[rank] = exc
            continue
        f = FATAL.search(stripped.rsplit("\r", 1)[-1].strip()) if "Fatal Python error: " in stripped else None
        if f:  # (also at the end of a tqdm line: faulthandler writes where the cursor is)
            before = pending.pop(rank, None)
            if before is not None and number - before.line < 80:
                dumps[rank] = before  # "Fatal Python error: Aborted" of that terminate: the what() names it
            else:
                exc = RaisedException("Fatal Python error", f.group(1).strip(), name, number, rank,
                                      traceback_start=number, printed=f.group(0))
                out.append(exc)
                dumps[rank] = exc
            continue
        if rank in dumps and DUMP_THREAD.match(stripped):
            exc = dumps.pop(rank)
            for _n, nxt in numbered[i + 1: i + 40]:
                nm = PREFIX.match(nxt)
                if (int(nm.group(1)) if nm else None) != rank:
                    continue
                fm = DUMP_FRAME.match(nxt[nm.end():] if nm else nxt)
                if fm:  # the first frame under "(most recent call first)" is the innermost
                    exc.frame = f"{fm.group(1)}:{fm.group(2)} in {fm.group(3)}"
                    exc.frame_line, exc.frame_text = _n, fm.group(0).strip()
                    break
                if (nxt[nm.end():] if nm else nxt).strip():
                    break  # "<no Python frame>": a C++ thread crashed
    return out


def read_torchrun_summary(numbered: list[tuple[int, str]]) -> dict:
    """host, rank, exit code and signal of torchrun's "Root Cause (first observed failure)" block. A multi-node
    run's log holds one block per node (each node's torchrun sees its own ranks fail): the first observed failure
    of the run is the block with the earliest `time` (two-node Slurm: the killed rank's node, then the node whose
    rank lost its peer), else the first block in the log."""
    blocks: list[dict] = []
    inside = False
    for _n, raw in numbered:
        text = PREFIX.sub("", raw)
        if "Root Cause (first observed failure)" in text:
            inside = True
            blocks.append({})
            continue
        if not inside:
            continue
        if text.startswith("====="):
            inside = False
            continue
        m = SUMMARY_FIELD.match(text)
        if not m:
            continue
        out = blocks[-1]
        key, value = m.group(1), m.group(2).strip()
        if key == "time":
            out["time"] = value  # 2026-12-02_02:25:28: sorts as text
        elif key == "host":
            out["host"] = value
        elif key == "rank":
            r = re.match(r"(\d+)", value)
            out["rank"] = int(r.group(1)) if r else None
        elif key == "exitcode":
            c = re.match(r"(-?\d+)", value)
            out["exit_code"] = int(c.group(1)) if c else None
        elif key == "traceback":
            s = re.search(r"Signal \d+ \((SIG\w+)\)", value)
            if s:
                out["signal"] = s.group(1)
    if not blocks:
        return {}
    first = min(range(len(blocks)), key=lambda i: (blocks[i].get("time") or "~", i))
    summary = blocks[first]
    summary.pop("time", None)
    return summary


def find_root_cause(logs: list[tuple[str, list[tuple[int, str]]]], *, exit_code: int | None = None,
                    last_step: tuple[int, int] | None = None, training: bool = True) -> RootCause:
    """`logs`: (name, numbered lines) of each log file, stderr first. `training=False` (an export's logs):
    its progress bars are loading and writing bars, not steps, so no step is read from them."""
    exceptions: list[RaisedException] = []
    summary: dict = {}
    progress = None
    for name, numbered in logs:
        exceptions += sorted(read_exceptions(numbered, name) + read_native_crashes(numbered, name),
                             key=lambda e: e.line)
    if not [e for e in exceptions if not e.wrapper]:
        for name, numbered in logs:
            exceptions += read_bare_exceptions(numbered, name)
    # no traceback: a native abort's first fatal line is the root, else the program's own last error line
    for kind, finder in (("native abort", find_native_abort), ("error line", find_error_line)):
        if [e for e in exceptions if not e.wrapper]:
            break
        for name, numbered in logs:
            found = finder(numbered, PREFIX)
            if found is not None:
                number, rank, text = found
                exceptions.append(RaisedException(kind, text, name, number, rank, traceback_start=number,
                                                  printed=text))
                break
    for _name, numbered in logs:
        summary = summary or read_torchrun_summary(numbered)
        progress = progress or (last_progress(numbered) if training else None)
    real = [e for e in exceptions if not e.wrapper]
    rank = summary.get("rank")
    first = None
    if real:
        if rank is not None and any(e.rank == rank for e in real):
            first = next(e for e in real if e.rank == rank)
        else:
            first = real[0]
            rank = first.rank if rank is None else rank
    code = summary.get("exit_code", exit_code) if summary.get("exit_code") not in (None, 1) else exit_code
    sig = summary.get("signal") or signal_name(code) or ("SIGABRT" if first is not None and first.exc_type == "native abort" and code is None and _aborted(logs) else None)
    step = last_step or progress
    return RootCause(first, code, sig, rank, summary.get("host"), step[0] if step else None,
                     step[1] if step else None, sorted({e.rank for e in real if e.rank is not None}))


def _aborted(logs: list[tuple[str, list[tuple[int, str]]]]) -> bool:
    """The log says the process aborted (a shell's "Aborted (core dumped)", srun's "task N: Aborted")."""
    return any("Aborted (core dumped)" in raw for _name, numbered in logs for _n, raw in numbered[-200:])
