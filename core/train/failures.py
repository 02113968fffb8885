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
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path

from core.i18n import _, current_language
from core.train.failure_rules import Rule, rules

MAX_SCAN = 32 * 1024 * 1024
HEAD_SCAN = 4 * 1024 * 1024
MAX_EVIDENCE = 3  # lines per rule per file
STOP_EXITS = (0, 134, -6, 143, -15)  # what a requested stop may end with


@dataclass(frozen=True)
class LogEvidence:
    file: str
    line: int | None  # 1-based; None when the evidence is the exit status
    text: str

    def to_dict(self) -> dict:
        return {"file": self.file, "line": self.line, "text": self.text}


@dataclass
class Diagnosis:
    id: str
    title: str
    explanation: str
    fix: str
    commands: list[str] = field(default_factory=list)
    evidence: list[LogEvidence] = field(default_factory=list)
    score: float = 0.0

    def to_dict(self) -> dict:
        return {"id": self.id, "title": self.title, "evidence": [e.to_dict() for e in self.evidence],
                "fix": self.fix, "explanation": self.explanation, "commands": list(self.commands),
                "score": round(self.score, 1)}


@lru_cache(maxsize=4)
def _compiled(lang: str) -> tuple[list[Rule], list[list[re.Pattern]], re.Pattern]:
    table = rules()
    patterns = [[re.compile(p) for p in r.patterns] for r in table]
    any_rule = re.compile("|".join(f"(?:{p})" for r in table for p in r.patterns))
    return table, patterns, any_rule


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


def _segment(text: str, match: re.Match) -> str:
    """The \\r-separated piece of a line that holds the match (tqdm redraws share one line)."""
    start = text.rfind("\r", 0, match.start()) + 1
    end = text.find("\r", match.end())
    piece = text[start:] if end < 0 else text[start:end]
    return piece.strip()[:400]


def scan_text(numbered: list[tuple[int, str]], total_lines: int, name: str) -> dict[str, tuple[list[LogEvidence], float]]:
    """rule id -> (evidence lines, position of the last one in the file from 0 to 1)."""
    table, patterns, any_rule = _compiled(current_language())
    found: dict[str, tuple[list[LogEvidence], float]] = {}
    for number, text in numbered:
        if not any_rule.search(text):
            continue
        stripped = text.rstrip("\r")
        for rule, pats in zip(table, patterns):
            for pat in pats:
                match = pat.search(stripped)
                if match:
                    evidence, _pos = found.get(rule.id, ([], 0.0))
                    if len(evidence) < MAX_EVIDENCE:
                        evidence.append(LogEvidence(name, number, _segment(stripped, match)))
                    elif len(evidence) == MAX_EVIDENCE:  # keep the first two and the latest
                        evidence[-1] = LogEvidence(name, number, _segment(stripped, match))
                    found[rule.id] = (evidence, number / max(1, total_lines))
                    break
    return found


def diagnose_files(paths: list[str | os.PathLike], *, exit_code: int | None = None,
                   stop_requested: bool = False) -> list[Diagnosis]:
    """Diagnoses from these log files (OSError when one cannot be read), most likely first."""
    merged: dict[str, tuple[list[LogEvidence], float]] = {}
    for path in paths:
        path = Path(path)
        numbered, total = _read_for_scan(path)
        for rule_id, (evidence, pos) in scan_text(numbered, total, str(path)).items():
            prev_ev, prev_pos = merged.get(rule_id, ([], 0.0))
            merged[rule_id] = (prev_ev + evidence, max(prev_pos, pos))
    return _rank(merged, exit_code, stop_requested)


def diagnose_text(text: str, name: str = "log", *, exit_code: int | None = None,
                  stop_requested: bool = False) -> list[Diagnosis]:
    lines = text.split("\n")
    return _rank(scan_text(list(enumerate(lines, 1)), len(lines), name), exit_code, stop_requested)


def diagnose_run(run_dir: str | os.PathLike, output_dir: str | os.PathLike | None = None, *,
                 exit_code: int | None = None, stop_requested: bool = False) -> list[Diagnosis]:
    """A devtune run folder: stderr.log, stdout.log (and LLaMA-Factory's running_log.txt when present)."""
    run_dir = Path(run_dir)
    paths = [p for p in (run_dir / "stderr.log", run_dir / "stdout.log") if p.exists()]
    if output_dir is not None and (Path(output_dir) / "running_log.txt").exists() and not paths:
        paths.append(Path(output_dir) / "running_log.txt")
    return diagnose_files(paths, exit_code=exit_code, stop_requested=stop_requested)


def _rank(found: dict[str, tuple[list[LogEvidence], float]], exit_code: int | None,
          stop_requested: bool) -> list[Diagnosis]:
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
            evidence = evidence + [LogEvidence(_("exit status"), None,
                                            _("the trainer exited with {code}", code=exit_code))]
            score += 4 if len(evidence) > 1 else -5
        out.append(Diagnosis(rule.id, rule.title, rule.explanation, rule.fix, list(rule.commands), evidence, score))
    present = {d.id for d in out}
    suppressed = {s for rule in table if rule.id in present for s in rule.suppresses}
    out = [d for d in out if d.id not in suppressed]
    if exit_code not in (None, 0) and not graceful and not out:
        out.append(Diagnosis("unexplained-failure", _("The run failed with exit code {code}", code=exit_code),
                             _("No known error pattern is in the logs."),
                             _("Read the last lines of stderr.log; the Python traceback's last line names the error."),
                             [], [LogEvidence(_("exit status"), None,
                                           _("the trainer exited with {code}", code=exit_code))],
                             1.0))
    out.sort(key=lambda d: -d.score)
    return out
