"""The first fatal line of a native crash: what a GPU runtime or library printed before the process aborted.

A run that dies in compiled code often prints no Python traceback at all, only the runtime's own message and
the shell's "Aborted (core dumped)":

    Memory access fault by GPU node-2 (Agent handle: 0x56468ab3bb50) on address 0x7fe55fb03000. Reason: ...
    Aborted (core dumped)

The library's line names the failure; the abort only says the process ended. So the first line of a library
(HIP/HSA, rocBLAS, hipBLASLt, MIOpen, RCCL/NCCL, CUDA/cuBLAS; a kernel's device-side assertion, the ROCm runtime's
"HW Exception ... GPU Hang", glibc's heap checks such as "free(): invalid pointer", slurmstepd's "oom_kill event") is
the root, and the abort or signal line only when no library spoke. faulthandler dumps and C++ terminate messages are read by core.train.root_cause.
"""

from __future__ import annotations

import re

LIBRARY_FATAL = re.compile(
    r"(Memory access fault by GPU node-\d+.*"
    r"|.*\bHSA_STATUS_ERROR_\w+.*"
    r"|rocBLAS error: .*|rocblaslt error: .*|hipBLASLt error: .*"
    r"|MIOpen Error: .*|MIOpen\(HIP\): Error .*"
    r"|.*\bNCCL WARN .*(?:[Ff]ailure|[Ee]rror).*|.*\bRCCL WARN .*"
    r"|.*\bhipError\w+.*|HIP error: .*|CUDA error: .*|CUBLAS_STATUS_\w+.*"
    r"|GPU core dump failed.*|HW Exception by GPU node-\d+.*"
    r"|.*(?:Device-side assertion|\bAssertion) [`'][^`']+[`'] failed\.?"  # a kernel's assert (an index past a table)
    r"|(?:free|malloc|realloc|munmap_chunk|malloc_consolidate)\(\): .*|double free or corruption.*"  # glibc's heap
    r"|corrupted size vs\. prev_size.*|\*\*\* stack smashing detected \*\*\*.*"
    r"|slurmstepd: error: Detected \d+ oom[-_]kill events?.*)$")  # the job's cgroup killed a task for its memory
ABORT = re.compile(r"^(?:Aborted|Segmentation fault|Bus error|Illegal instruction|Floating point exception)"
                   r"(?: \(core dumped\))?$|^Killed$")
# a library's warning that is not fatal by itself (hipBLASLt falls back to Tensile and goes on)
NOT_FATAL = re.compile(r"falling back|Heuristic Fetch Failed|This message will be only be displayed once")


def find_native_abort(numbered: list[tuple[int, str]], prefix: re.Pattern) -> tuple[int, int | None, str] | None:
    """(line number, rank, text) of the first fatal native line in this log, or None. A library's line wins over
    the abort it caused; a log with neither has no native crash."""
    abort = None
    for number, raw in numbered:
        m = prefix.match(raw)
        text = (raw[m.end():] if m else raw).strip()
        text = text.rsplit("\r", 1)[-1].strip()
        if not text or NOT_FATAL.search(text):
            continue
        if LIBRARY_FATAL.match(text):
            return number, int(m.group(1)) if m else None, text[:400]
        if abort is None and ABORT.match(text):
            abort = (number, int(m.group(1)) if m else None, text)
    return abort


# A program's own error line when it printed no traceback: argparse's and Slurm's `prog: error: ...`, Go tools'
# cmd.exe's and PowerShell's "is not recognized" for a missing command, also in another code page (GBK text read as
# UTF-8 is replacement characters after the quoted name); a program's `docker: Error response from daemon: ...`.
CMD_NOT_FOUND = re.compile(r"^'([\w.+-]+)' (?:is not recognized as an internal or external command|不是内部或外部命令|"
                           r"[^\x00-\x7f]*\ufffd[^\x00-\x7f]*\ufffd[^\x00-\x7f]*\ufffd)|^([\w.+-]+) : The term '[\w.+-]+' is not recognized")
# `Error: ...` (ollama), pip's `ERROR: ...`, a shell's `prog: fatal: ...`. Never a logger's record (`ERROR 12-03 ...`,
# `[ERROR|...]`), which the traceback readers see. Also a shell's `bash: x: command not found` and a C library's
# `XCheck FAIL file=... : message` (old torch's THCudaCheck).
ERROR_LINE = re.compile(r"^(?:[\w./-]+(?: [a-z][\w-]*)?: )?(?:error|fatal)(?:\([\w ]+\))?: \S.*|^(?:Error|ERROR|FATAL|Fatal): \S.*|"
                        r"^[\w./-]+: (?:Error|ERROR|error)\b[\w ]{0,40}: \S.*|"  # docker: Error response from daemon: ...
                        r"^(?:[\w./-]+: )(?:line \d+: )?[\w.+-]+: command not found$|^\S+ FAIL\b.*: \S.*|"
                        r"^(?:zsh|fish): command not found: [\w.+-]+$|"
                        r"^Failed to [\w ]{3,40}: \S.*|"  # a C tool's own failure line (nvidia-smi's NVML)
                        r".*\] exits with return code = -?\d+$|"  # DeepSpeed's launcher: a rank's status or signal
                        + CMD_NOT_FOUND.pattern)


# pip's lines after a build's own error: they say which package failed, the subprocess's error above says why
PIP_SUMMARY = re.compile(r"^(?:ERROR: (?:Could not build wheels|Failed building wheel|Failed to build)|error: "
                         r"(?:subprocess-exited-with-error|metadata-generation-failed))")


def find_error_line(numbered: list[tuple[int, str]], prefix: re.Pattern) -> tuple[int, int | None, str] | None:
    """(line, rank, text) of the last error line a program printed, for a log without a Python traceback."""
    found = None
    for number, raw in numbered:
        m = prefix.match(raw)
        text = (raw[m.end():] if m else raw).strip()
        if ERROR_LINE.match(text) and not (found is not None and PIP_SUMMARY.match(text)):
            found = (number, int(m.group(1)) if m else None,
                     text if len(text) <= 400 else text[:200] + " ... " + text[-195:])  # its end says the status
    return found
