"""Python tracebacks read from a log, one stream per rank and per vLLM process (core.train.root_cause uses it).

    read_exceptions(numbered_lines, "stderr.log") -> [RaisedException(exc_type, message, file, line, rank, frame, ...)]

Each chain counts once, from the exception that caused the rest; a logger's prefix before "Traceback" is taken
off every line of that traceback; a message that goes on below (a colon at its end, pydantic's field errors) is
read with the lines that continue it.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from core.train.validation_errors import HEADER, read_field_errors, summary

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
# an error that sums up a lookup of several places (a local folder, then the Hub), raised from the last place's
# error: the summary names what the person gave, the HTTP error before it only the last place tried
LOOKED_EVERYWHERE = re.compile(r"is not a local folder and is not a valid model identifier")


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
class _Stream:
    """The traceback being read on one stream (one rank's prefixed lines, or the unprefixed ones)."""

    start: int = 0
    frames: list[tuple[str, int, str, int, str]] = field(default_factory=list)  # path, line, func, log line, text
    chain: list[tuple[RaisedException, str | None]] = field(default_factory=list)  # (exception, link after it)
    reading: bool = False
    log_prefix: str = ""  # what a logger put before each line of this traceback


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
        if exc.exc_type.endswith("ValidationError") and HEADER.search(exc.message):  # pydantic's fields below
            errors = read_field_errors(exc.message, _after_on_stream(numbered, i, st.log_prefix))
            exc.message = f"{exc.message}: {summary(errors)}" if errors else exc.message
        elif exc.message.endswith(":") or (not exc.message and stripped.endswith(":")):  # the message goes on below
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


def _after_on_stream(numbered: list[tuple[int, str]], i: int, log_prefix: str, most: int = 200) -> list[str]:
    """The lines after line i with a rank's, a vLLM process's and this traceback's logger prefix taken off."""
    out = []
    for _number, raw in numbered[i + 1: i + 1 + most]:
        m = PREFIX.match(raw)
        text = raw[m.end():] if m else raw
        worker = WORKER.match(text)
        text = (text[worker.end():] if worker else text).rstrip("\r\n")
        out.append(text[len(log_prefix):] if log_prefix and text.startswith(log_prefix) else text)
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
