"""The root cause of a failed run, read from its logs whether or not a rule knows the error.

    cause = find_root_cause(numbered_lines, "stderr.log", exit_code=1, last_step=640)
    cause.exception   # "ValueError: Can't find a valid checkpoint at saves/cpu-demo/checkpoint-640"

What is read:
- Python tracebacks, also when every line carries torchrun's `[rankN]:` (or `[defaultN]:`) prefix, so each
  rank's traceback is read on its own even where the ranks' lines interleave. A chained traceback ("During
  handling of the above exception...", "The above exception was the direct cause...") counts from its first
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

# the rank prefix of each launcher: torchrun's `[rank0]:` and `[default0]:` (--tee), torchx's `[0]:`, and
# srun --label's `0: ` (also "task 0: "); one group, the rank
PREFIX = re.compile(r"^(?:\[(?:rank|default)?|(?:task )?(?=\d+: ))(\d+)(?:\]:\s?|: )")
# vLLM's worker and engine processes: `(VllmWorkerProcess pid=N) ERROR 12-03 14:10:06 [file.py:238] ...`,
# `(EngineCore_DP0 pid=N) ...`: one stream per process, read like a rank's (its logger header is stripped too)
WORKER = re.compile(r"^\(([A-Za-z_][\w]*) pid=(\d+)\)\s?(?:(?:ERROR|WARNING|INFO|DEBUG|CRITICAL) "
                    r"\d\d-\d\d \d\d:\d\d:\d\d(?:\.\d+)? \[?[\w./-]+:\d+\]?\s?)?")
TRACEBACK = "Traceback (most recent call last):"
CHAINED = ("During handling of the above exception, another exception occurred:",
           "The above exception was the direct cause of the following exception:")
FRAME = re.compile(r'^\s*File "([^"]+)", line (\d+), in (\S+)')
EXCEPTION = re.compile(r"^([A-Za-z_][\w.]*(?:Error|Exception|Exit|Interrupt|Warning|Failure|Fault)|[A-Za-z_]\w*"
                       r"(?:\.[A-Za-z_]\w*)+|KeyboardInterrupt|StopIteration|Exception)(?::\s?(.*))?$")
WRAPPERS = ("ChildFailedError", "CalledProcessError", "SystemExit")
STDLIB = re.compile(r"/lib/python3\.\d+/(?!site-packages/|dist-packages/)")
SUMMARY_FIELD = re.compile(r"^\s*(time|host|rank|exitcode|traceback)\s*:\s*(.*)$")
FATAL = re.compile(r"Fatal Python error: (.+)$")
DUMP_THREAD = re.compile(r"^(?:Current thread 0x[0-9a-fA-F]+.*|Stack) \(most recent call first\):$")
DUMP_FRAME = re.compile(r'^\s*File "([^"]+)", line (\d+) in (\S+)')
TERMINATE = re.compile(r"terminate called after throwing an instance of '([^']+)'")
WHAT = re.compile(r"^\s*what\(\):\s+(.*)$")
RAISED_FROM = re.compile(r"^Exception raised from .+ \(most recent call first\):$")
# an error that sums up a lookup of several places (a local folder, then the Hub), raised from the last place's
# error: the summary names what the person gave, the HTTP error before it only the last place tried
LOOKED_EVERYWHERE = re.compile(r"is not a local folder and is not a valid model identifier")
CRASH_SIGNALS = ("SIGSEGV", "SIGBUS", "SIGFPE", "SIGILL", "SIGABRT")  # the process itself crashed


@dataclass
class RaisedException:
    """One exception as a traceback printed it."""

    exc_type: str
    message: str
    file: str
    line: int  # the exception line's number in the log
    rank: int | None = None
    frame: str | None = None  # 'path/to/file.py:96 in run_sft' of the frame that raised
    frame_line: int | None = None
    frame_text: str = ""  # that frame's line as the log printed it
    traceback_start: int = 0  # the line of "Traceback (most recent call last):"
    printed: str = ""  # the line to quote when it is not "Type: message" (a C++ what() line)

    @property
    def text(self) -> str:
        return f"{self.exc_type}: {self.message}" if self.message else self.exc_type

    @property
    def wrapper(self) -> bool:
        return self.exc_type.rsplit(".", 1)[-1] in WRAPPERS


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


@dataclass
class _Stream:
    """The traceback being read on one stream (one rank's prefixed lines, or the unprefixed ones)."""

    start: int = 0
    frames: list[tuple[str, int, str, int, str]] = field(default_factory=list)  # path, line, func, log line, text
    chain: list[tuple[RaisedException, str | None]] = field(default_factory=list)  # (exception, link after it)
    reading: bool = False
    log_prefix: str = ""  # what a logger put before each line of this traceback


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


def _raising_frame(frames: list[tuple[str, int, str, int, str]]) -> tuple[str | None, int | None, str]:
    if not frames:
        return None, None, ""
    chosen = next((f for f in reversed(frames) if f[0].endswith(".py") and not STDLIB.search(f[0])),
                  next((f for f in reversed(frames) if not STDLIB.search(f[0])), frames[-1]))
    path, line, func, log_line, text = chosen
    return f"{path}:{line} in {func}", log_line, text


def read_exceptions(numbered: list[tuple[int, str]], name: str) -> list[RaisedException]:
    """Every first exception of every traceback (chains counted once, from their first exception)."""
    streams: dict = {}  # a rank (None: unprefixed), or (rank, vLLM pid)
    found: list[RaisedException] = []  # in the order their chains ended
    for i, (number, raw) in enumerate(numbered):
        m = PREFIX.match(raw)
        rank = int(m.group(1)) if m else None
        text = raw[m.end():] if m else raw
        worker = WORKER.match(text)
        if worker:  # a vLLM process's line: its own stream, the rank's (if any) name kept
            text = text[worker.end():]
        text = text.rstrip("\r\n")
        st = streams.setdefault((rank, worker.group(2)) if worker else rank, _Stream())
        if text.endswith(TRACEBACK):  # also after a logger's prefix ("ERROR 11-20 12:10:02 [core.py:843] ")
            if not st.reading:
                st.start = number
            st.reading, st.frames, st.log_prefix = True, [], _log_prefix(numbered, i, text[: -len(TRACEBACK)])
            continue
        if st.log_prefix:
            if not text.startswith(st.log_prefix):
                continue  # another logger's line between this traceback's lines
            text = text[len(st.log_prefix):]
        stripped = text.strip()
        if stripped.endswith(CHAINED):
            st.log_prefix = ""
            continue
        if not st.reading:
            continue
        fm = FRAME.match(text)
        if fm:
            st.frames.append((fm.group(1), int(fm.group(2)), fm.group(3), number, text.strip()))
            continue
        if text.startswith((" ", "\t")) or not stripped:
            continue  # the source line under a frame, carets, an indented note
        em = EXCEPTION.match(stripped)
        if em is None:
            continue
        frame, frame_line, frame_text = _raising_frame(st.frames)
        exc = RaisedException(em.group(1), (em.group(2) or "").strip(), name, number, rank, frame, frame_line,
                              frame_text, st.start)
        if exc.message.endswith(":") or (not exc.message and stripped.endswith(":")):  # the message goes on below
            # (DeepSpeed's list of mismatches; torch's `AssertionError:` whose text starts on the next line)
            exc.message = " ".join([exc.message] + _listed_after(numbered, i, rank)).strip()
        st.reading, st.frames, st.log_prefix = False, [], ""
        link = _link_after(numbered, number)
        st.chain.append((exc, link))
        if link is None:
            found.append(_chain_root(st.chain))
            st.chain = []
    for st in streams.values():  # a log cut in the middle of a chain
        if st.chain:
            found.append(_chain_root(st.chain))
    return found


LISTED_STOP = re.compile(r"^\s*$|^\[?\d{2,4}[-/]\d\d|^\[(?:INFO|WARNING|ERROR)|^(?:INFO|WARNING|ERROR)\b|^\s*File \"|"
                         + re.escape(TRACEBACK))


def _listed_after(numbered: list[tuple[int, str]], i: int, rank: int | None) -> list[str]:
    """The lines a message ending in a colon went on with, on the same rank's stream (at most 8)."""
    out: list[str] = []
    for _number, raw in numbered[i + 1: i + 9]:
        m = PREFIX.match(raw)
        if (int(m.group(1)) if m else None) != rank:
            break
        text = (raw[m.end():] if m else raw).rstrip("\r\n")
        if LISTED_STOP.search(text) or EXCEPTION.match(text.strip()) and ":" in text and not text.startswith("-"):
            break
        out.append(text.strip())
    return out


def _log_prefix(numbered: list[tuple[int, str]], i: int, before: str) -> str:
    """What a logger wrote before "Traceback" and before each line after it; not a tqdm bar that the
    traceback happened to follow on the same line (no line after it starts with that)."""
    if not before.strip():
        return ""
    following = (PREFIX.sub("", raw) for _n, raw in numbered[i + 1: i + 6])  # other loggers may come between
    return before if any(line.startswith(before) for line in following) else ""


def _link_after(numbered: list[tuple[int, str]], number: int) -> str | None:
    """How the next traceback relates to the exception on line `number`: "cause" (it was the direct cause of
    the next one), "context" (the next one happened while handling it), or None (the chain ends here).

    The exception's message may go on for lines (datasets' CastError prints both schemas), so the lines of
    the same stream are read up to the next "Traceback" header: a chain marker before it links the two."""
    idx = _index_of(numbered, number)
    m = PREFIX.match(numbered[idx][1]) if idx < len(numbered) else None
    rank = m.group(1) if m else None
    for _n, raw in numbered[idx + 1: idx + 61]:
        pm = PREFIX.match(raw)
        if (pm.group(1) if pm else None) != rank:
            continue  # another rank's line in between
        text = (raw[pm.end():] if pm else raw).strip()
        if text.endswith(CHAINED[0]):
            return "context"
        if text.endswith(CHAINED[1]):
            return "cause"
        if text.endswith(TRACEBACK):
            return None
    return None


def _chain_root(chain: list[tuple[RaisedException, str | None]]) -> RaisedException:
    """The exception that caused the last one: back from the last along "direct cause" links (an exception
    raised while handling another is a new error, so a "during handling" link stops the walk)."""
    i = len(chain) - 1
    if LOOKED_EVERYWHERE.search(chain[i][0].message) and not chain[i][0].wrapper:
        return chain[i][0]  # the lookup's own summary: every place it tried failed (the HTTP errors are one of them)
    while i > 0 and chain[i - 1][1] == "cause" and not chain[i - 1][0].wrapper:
        i -= 1
    while i < len(chain) - 1 and chain[i][0].wrapper:
        i += 1
    return chain[i][0]


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


def _index_of(numbered: list[tuple[int, str]], number: int) -> int:
    lo, hi = 0, len(numbered) - 1
    while lo <= hi:  # the numbers ascend (a head and a tail of a big log keep their true numbers)
        mid = (lo + hi) // 2
        if numbered[mid][0] < number:
            lo = mid + 1
        elif numbered[mid][0] > number:
            hi = mid - 1
        else:
            return mid
    return lo


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
