"""Why a training run failed, from its logs: each diagnosis with its evidence (the lines, with line
numbers) and the fix, most likely first.

    diagnose_files([run_dir / "stderr.log", run_dir / "stdout.log"], exit_code=1)
    diagnose_run(run_dir, exit_code=record.exit_code, stop_requested=record.stop_requested is not None)

The rules are data (core/train/failure_rules.py). Ranking: the rule's weight (how decisive its match is),
plus a little for evidence near the end of a log (the error that ended the run comes last), minus
for evidence that is only the exit status. An exit after devtune's graceful stop (SIGABRT turns into
exit 0, or 134 when the trainer had not yet installed its handler) is not a failure.

Logs can be large (tqdm on stderr): a file over MAX_SCAN bytes is read at its head and its tail, the
line numbers stay true.
"""

from __future__ import annotations

import os
import re
from bisect import bisect_right
from functools import lru_cache
from itertools import accumulate
from pathlib import Path

from core.i18n import _, current_language
from core.train.failure_rules import Rule, rules
from core.train.diagnosis_model import Diagnosis, LogEvidence
from core.train.diagnosis_model import exception_evidence as _exception_evidence
from core.train.diagnosis_model import exit_evidence as _exit_evidence
from core.train.diagnosis_model import where_evidence as _where
from core.train.diagnosis_report import run_python, with_family
from core.train.root_cause import CRASH_SIGNALS, PREFIX, RootCause, find_root_cause

MAX_SCAN = 16 * 1024 * 1024  # the head and the tail of a bigger log: where a run fails
HEAD_SCAN = 4 * 1024 * 1024
MAX_EVIDENCE = 3  # lines per rule per file
STOP_EXITS = (0, 134, -6, 143, -15)  # what a requested stop may end with


@lru_cache(maxsize=4)
def _compiled(lang: str) -> tuple[list[Rule], list[list[re.Pattern]], list[re.Pattern | None]]:
    table = rules()
    patterns = [[re.compile(p, re.M) for p in r.patterns] for r in table]
    unless = [re.compile(r.unless) if r.unless else None for r in table]
    return table, patterns, unless


def _read_for_scan(path: Path) -> tuple[list[tuple[int, str]], int]:
    """(line number, text) of the lines to scan, and the total line count (head + tail of big files)."""
    size = path.stat().st_size
    with open(path, "rb") as fh:
        if size <= MAX_SCAN:
            data = fh.read()
            lines = data.decode("utf-8", "replace").split("\n")
            return list(enumerate(lines, 1)), len(lines)
        head = fh.read(HEAD_SCAN)
        head = head[: head.rfind(b"\n") + 1]
        skipped_newlines = 0
        fh.seek(len(head))
        tail_start = size - (MAX_SCAN - HEAD_SCAN)
        while fh.tell() < tail_start:
            chunk = fh.read(min(1 << 22, tail_start - fh.tell()))
            skipped_newlines += chunk.count(b"\n")
        tail = fh.read()
    head_lines = head.decode("utf-8", "replace").split("\n")[:-1]
    first_tail = len(head_lines) + skipped_newlines + 1  # the tail's first (partial) line
    tail_lines = tail.decode("utf-8", "replace").split("\n")
    numbered = list(enumerate(head_lines, 1)) + list(enumerate(tail_lines[1:], first_tail + 1))
    return numbered, first_tail + len(tail_lines) - 1


def _segment(text: str, start: int, end: int) -> str:
    """The \\r-separated piece of a line that holds the match (tqdm redraws share one line)."""
    first = text.rfind("\r", 0, start) + 1
    last = text.find("\r", end)
    piece = text[first:] if last < 0 else text[first:last]
    return piece.strip()[:400]


def scan_text(numbered: list[tuple[int, str]], total_lines: int, name: str) -> dict[str, tuple[list[LogEvidence], float]]:
    """rule id -> (evidence lines, position of the last one in the file from 0 to 1).

    Each pattern searches the whole text at once (a literal start lets the regex engine skip ahead; one
    alternation of every pattern, line by line, was 6x slower on a 100 MB log); a line is evidence for a
    rule once, through the first of its patterns that matches there.

    A line that tqdm redrew many times (\\r-separated bars) is searched in its last piece only: what a
    program prints ends with a newline, so a message that follows a bar is that line's last piece, and the
    bars before it hold no error (a 100 MB log of training is mostly such lines: 16 MB scanned -> 3 MB)."""
    table, patterns, unless = _compiled(current_language())
    lines = [_last_piece(text.rstrip("\r")) for _n, text in numbered]
    starts = list(accumulate(map((1).__add__, map(len, lines[:-1])), initial=0))
    joined = "\n".join(lines)
    found: dict[str, tuple[list[LogEvidence], float]] = {}
    for rule, pats, skip in zip(table, patterns, unless):
        hits: dict[int, tuple[int, int]] = {}  # line index -> the match's span in that line
        for pat in pats:
            for match in pat.finditer(joined):
                i = bisect_right(starts, match.start()) - 1
                if i not in hits:
                    hits[i] = (match.start() - starts[i], match.end() - starts[i])
        if skip is not None:
            hits = {i: span for i, span in hits.items() if not skip.search(lines[i])}
        if not hits:
            continue
        order = sorted(hits)
        kept = order if len(order) <= MAX_EVIDENCE else order[:MAX_EVIDENCE - 1] + order[-1:]  # first two, latest
        evidence = [LogEvidence(name, numbered[i][0], _segment(lines[i], *hits[i])) for i in kept]
        found[rule.id] = (evidence, numbered[order[-1]][0] / max(1, total_lines))
    return found


def _last_piece(line: str) -> str:
    return line[line.rfind("\r") + 1:] if line.count("\r", 0, 4096) >= 3 else line


def diagnose_files(paths: list[str | os.PathLike], *, exit_code: int | None = None,
                   stop_requested: bool = False, last_step: tuple[int, int] | None = None,
                   training: bool = True, python: str | None = None, settings=None) -> list[Diagnosis]:
    """Diagnoses from these log files (OSError when one cannot be read), most likely first. `python`: the run's
    interpreter, whose installed packages are the facts of a version skew (default: the versions the log printed,
    else this interpreter's). `settings`: the run's YAML, DeepSpeed JSON, working directory and environment
    (core.train.diagnosis_families_config.RunSettings; default: what the log printed)."""
    merged: dict[str, tuple[list[LogEvidence], float]] = {}
    logs = []
    for path in paths:
        path = Path(path)
        numbered, total = _read_for_scan(path)
        logs.append((str(path), numbered))
        for rule_id, (evidence, pos) in scan_text(numbered, total, str(path)).items():
            prev_ev, prev_pos = merged.get(rule_id, ([], 0.0))
            merged[rule_id] = (prev_ev + evidence, max(prev_pos, pos))
    cause = find_root_cause(logs, exit_code=exit_code, last_step=last_step, training=training)
    return with_family(_rank(merged, exit_code, stop_requested, cause), cause, logs, stop_requested, python=python,
                       settings=settings)


def diagnose_text(text: str, name: str = "log", *, exit_code: int | None = None,
                  stop_requested: bool = False) -> list[Diagnosis]:
    numbered = list(enumerate(text.split("\n"), 1))
    cause = find_root_cause([(name, numbered)], exit_code=exit_code)
    return with_family(_rank(scan_text(numbered, len(numbered), name), exit_code, stop_requested, cause), cause,
                       [(name, numbered)], stop_requested)


def diagnose_run(run_dir: str | os.PathLike, output_dir: str | os.PathLike | None = None, *,
                 exit_code: int | None = None, stop_requested: bool = False,
                 training: bool = True, python: str | None = None, settings=None) -> list[Diagnosis]:
    """A devtune run folder: stderr.log, stdout.log (and LLaMA-Factory's running_log.txt when present).
    `training=False` for an export run (no steps in its logs)."""
    run_dir = Path(run_dir)
    paths = [p for p in (run_dir / "stderr.log", run_dir / "stdout.log") if p.exists()]
    if output_dir is not None and (Path(output_dir) / "running_log.txt").exists() and not paths:
        paths.append(Path(output_dir) / "running_log.txt")
    step = last_logged_step(Path(output_dir)) if output_dir is not None else None
    return diagnose_files(paths, exit_code=exit_code, stop_requested=stop_requested, last_step=step,
                          training=training, python=python, settings=settings)


def diagnose_record(ws, record, *, exit_code: int | None = None, stop_requested: bool = False) -> list[Diagnosis]:
    """A devtune run's diagnosis as both front-ends ask for it (the Train step, `devtune diagnose RUN`): its
    logs and output folder, its own exit code unless `exit_code` says another, a stop asked by the person or
    by its record, and an export run read as one; advice the run's machine cannot use is replaced by what holds
    there (core.train.failure_facts). A run that finished well has nothing to diagnose."""
    from core.train.diagnosis_families_config import record_settings
    from core.train.failure_facts import agree_with_machine, ran_on_cpu
    from core.train.runs import RunStatus, run_dir

    if record.status is RunStatus.FINISHED and exit_code is None:
        return []
    directory = run_dir(ws, record.id)
    found = diagnose_run(directory, ws.abs(record.output_dir) if record.output_dir else None,
                         exit_code=record.exit_code if exit_code is None else exit_code,
                         stop_requested=stop_requested or record.stop_requested is not None,
                         training=record.kind != "export", python=run_python(record),
                         settings=record_settings(ws, record))
    return agree_with_machine(found, on_cpu=ran_on_cpu(record, directory), config=record.source_config)


def last_logged_step(output_dir: Path) -> tuple[int, int] | None:
    """(current_steps, total_steps) of the last line of LLaMA-Factory's trainer_log.jsonl, if any."""
    path = output_dir / "trainer_log.jsonl"
    try:
        with open(path, "rb") as fh:
            fh.seek(max(0, path.stat().st_size - 65536))
            lines = fh.read().splitlines()
    except OSError:
        return None
    import json

    for raw in reversed(lines):
        try:
            row = json.loads(raw)
            return int(row["current_steps"]), int(row["total_steps"])
        except (ValueError, KeyError, TypeError):
            continue
    return None


def _rank(found: dict[str, tuple[list[LogEvidence], float]], exit_code: int | None,
          stop_requested: bool, cause: RootCause | None = None) -> list[Diagnosis]:
    table, _patterns, _any = _compiled(current_language())
    graceful = stop_requested and exit_code in STOP_EXITS
    out: list[Diagnosis] = []
    for rule in table:
        evidence, pos = found.get(rule.id, ([], 0.0))
        by_exit = exit_code is not None and exit_code in rule.exit_codes and not graceful
        if rule.id in ("aborted", "terminated") and (graceful or exit_code is None or exit_code == 0):
            continue  # "Aborted" alone is no failure after a requested stop, nor in a run that ended well
        if not evidence and not by_exit:
            continue
        score = rule.weight + 8 * pos
        if by_exit:
            evidence = evidence + [_exit_evidence(exit_code)]
            score += 4 if len(evidence) > 1 else -5
        out.append(Diagnosis(rule.id, rule.title, rule.explanation, rule.fix, list(rule.commands), evidence, score))
    present = {d.id for d in out}
    suppressed = {s for rule in table if rule.id in present for s in rule.suppresses}
    out = [d for d in out if d.id not in suppressed]
    out.sort(key=lambda d: -d.score)
    failed = exit_code not in (None, 0) and not graceful
    if cause is None or graceful or not (failed or (exit_code is None and cause.exception)):
        return out
    exc = cause.exception
    if exc is not None and exc.traceback_start:
        for d in out:
            own = [e for e in d.evidence if e.file == exc.file and e.line is not None]
            d.before_root = bool(own) and all(e.line < exc.traceback_start for e in own)
    explained = [d for d in out if exc is not None and any(e.file == exc.file and e.line == exc.line
                                                           for e in d.evidence)]
    symptoms = {r.id for r in table if r.symptom}
    if explained and not (explained[0].id in symptoms and out[0].id not in symptoms):
        # the rule that matches the root exception itself comes first (unless it only names the symptom, as
        # "NCCL error" does, and a rule of the cause matched elsewhere: "Mismatched NCCL version")
        out.remove(explained[0])
        out.insert(0, explained[0])
        _quote_root_exception(out[0], cause)
    elif out and not (exc is not None and out[0].id in symptoms):
        _quote_root_exception(out[0], cause)
    else:  # nothing matched, or only what the other ranks saw (a timeout, an abort): name the first failure
        out.insert(0, _root_cause_diagnosis(cause, exit_code))
    return out


def _quote_root_exception(first: Diagnosis, cause: RootCause) -> None:
    """The rule's diagnosis also quotes the exception that ended the run, where it was raised and by whom."""
    exc = cause.exception
    if exc is not None:
        rest = [e for e in first.evidence if not (e.file == exc.file and e.line == exc.line)
                and not PREFIX.sub("", e.text).lstrip().startswith("raise ")]  # the raise's source line, not the error
        first.evidence = _exception_evidence(exc) + rest
    known = {e.text for e in first.evidence}
    has_exit = any(e.file == _("exit status") for e in first.evidence)
    for e in _where(cause):
        if e.text not in known and not (e.file == _("exit status") and has_exit):
            first.evidence.append(e)


def _root_cause_diagnosis(cause: RootCause, exit_code: int | None) -> Diagnosis:
    """No rule knows this failure: name it from the first exception of the first failing rank."""
    exc = cause.exception
    if exc is not None:
        evidence = _exception_evidence(exc) + _where(cause)
        native = bool(exc.printed) and exc.exc_type != "error line"  # a faulthandler dump or a C++ what()
        if exc.exc_type == "error line":
            return Diagnosis(
                "root-cause", exc.printed[:200],
                _("No rule of devtune knows this error; the program printed no traceback, and this is the last "
                  "error line it printed."),
                _("The line names what was wrong (an argument, a file, a resource); the lines around it show what "
                  "was run. Fix that and run it again."),
                [f"sed -n '{max(1, exc.line - 20)},{exc.line + 5}p' {exc.file}"], evidence, 10.0)
        return Diagnosis(
            "root-cause", (exc.printed if exc.exc_type == "native abort" else exc.text)[:200],
            _("No rule of devtune knows this error; the process crashed in native code (a compiled library), "
              "and this is what it printed first: the error, and the innermost frame it ran.") if native else
            _("No rule of devtune knows this error; this is the first exception of the first rank that failed, "
              "and the code that raised it."),
            _("The innermost frame names the library that crashed: reinstall it built for this torch, CUDA/ROCm "
              "version and GPU architecture, or update it; the command below prints the whole dump.") if native else
            _("Read the exception and the frame that raised it: the message names what was wrong (a path, a key, "
              "a value of the config); fix that and start the run again. The command below prints the whole "
              "traceback."),
            [f"sed -n '{exc.traceback_start or exc.line},{max(exc.line, exc.frame_line or 0)}p' {exc.file}"],
            evidence, 10.0)
    crashed = cause.signal in CRASH_SIGNALS
    title = (_("The run crashed with {signal}", signal=cause.signal) if crashed else
             _("The run was killed by {signal}", signal=cause.signal) if cause.signal
             else _("The run failed with exit code {code}", code=exit_code))
    if crashed:
        explanation = _("The process crashed in native code ({signal}: a compiled library, a GPU kernel or the "
                        "driver) and printed no Python traceback.", signal=cause.signal)
        fix = _("Run it again with PYTHONFAULTHANDLER=1 in the environment: Python then prints the frame that "
                "crashed, and devtune diagnose names it. Meanwhile suspect an extension built for another torch or "
                "GPU architecture (flash-attn, bitsandbytes, DeepSpeed ops), or HSA_OVERRIDE_GFX_VERSION.")
        commands = ["PYTHONFAULTHANDLER=1 FORCE_TORCHRUN=1 llamafactory-cli train configs/train.yaml"]
    elif cause.signal:
        explanation = _("No Python exception is in the logs: the process was ended from outside (the kernel's "
                        "out-of-memory killer, a scheduler's time limit, or a person).")
        fix = _("Check the kernel log for the out-of-memory killer (dmesg), the job scheduler's limits, and the "
                "host's memory while the run is at the step shown.")
        commands = ["dmesg -T | grep -i -E 'killed process|out of memory' | tail"]
    else:
        explanation = _("No Python exception and no known error pattern is in the logs.")
        fix = _("Read the last lines of stderr.log; the Python traceback's last line names the error.")
        commands = []
    return Diagnosis("unexplained-failure", title, explanation, fix, commands,
                     _where(cause) or [_exit_evidence(exit_code)], 1.0)
