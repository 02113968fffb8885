"""The progress of a `llamafactory-cli export` run, read from its logs: LLaMA-Factory's INFO lines and the
"Loading weights" / "Writing model shards" tqdm bars mapped to stages, and, for a failed export, the first
diagnosis of the failure rules (core.train.failures), so the CLI and the Merge step say the cause and fix."""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

from core.i18n import _
from core.train.runs import RunRecord, RunStatus, read_record, refresh, run_dir, status_label
from core.workspace.layout import Workspace

STAGES = ("starting", "loading", "merging", "converting", "writing", "tokenizer", "done")
_STAGE_SPAN = {"starting": (0.0, 0.02), "loading": (0.02, 0.30), "merging": (0.30, 0.45),
               "converting": (0.45, 0.50), "writing": (0.50, 0.95), "tokenizer": (0.95, 1.0), "done": (1.0, 1.0)}
def stage_label(stage: str) -> str:
    """An export stage (or "check", the merged folder's check) in words for people."""
    return {"starting": _("starting"), "loading": _("loading"), "merging": _("merging"),
            "converting": _("converting"), "writing": _("writing"), "tokenizer": _("tokenizer"),
            "done": _("done"), "check": _("check")}.get(stage, stage)


_TQDM = re.compile(r"(Loading weights|Writing model shards)[^|]*\|[^|]*\|\s*(\d+)/(\d+)")
_MARKS = (
    ("tokenizer", ("Ollama modelfile saved", "tokenizer config file saved", "Model weights saved in")),
    ("writing", ("Writing model shards", "Configuration saved in")),
    ("converting", ("Convert model dtype to",)),
    ("merging", ("Merged ", "Loaded adapter(s)")),
    ("loading", ("loading configuration file", "Loading weights", "loading weights file", "Add <|")),
)


@dataclass
class ExportProgress:
    stage: str
    fraction: float  # 0..1 over the whole export
    detail: str  # the latest meaningful line
    status: str  # the run's status
    error: str | None = None
    diagnosis: object | None = None  # core.train.failures.Diagnosis: the cause of a failed export, and its fix

    def failure_text(self) -> str | None:
        """The error, then its cause and fix when the diagnosis knows them (what the CLI and the screen say)."""
        if self.diagnosis is None:
            return self.error
        return _("{error} — {cause}. Fix: {fix}", error=self.error or "", cause=self.diagnosis.title,
                 fix=self.diagnosis.fix)


def _last_error(stderr: str) -> str | None:
    lines = [line.strip() for line in stderr.replace("\r", "\n").splitlines() if line.strip()]
    for line in reversed(lines):
        if re.match(r"^[A-Za-z_.]*(Error|Exception)\b.*:", line) or line.startswith(("RuntimeError", "ValueError")):
            return line
    return lines[-1] if lines else None


def parse_export_log(stdout: str, stderr: str, status: str = "running") -> ExportProgress:
    lines = (stderr + "\n" + stdout).replace("\r", "\n").splitlines()
    stage, detail = "starting", ""
    for name, needles in _MARKS:  # the furthest stage reached, with its latest line
        hits = [line.strip() for line in lines if any(n in line for n in needles)]
        if hits:
            stage, detail = name, hits[-1]
            break
    text = "\n".join(lines)
    low, high = _STAGE_SPAN[stage]
    fraction = low
    bars = [(m.group(1), int(m.group(2)), int(m.group(3))) for m in _TQDM.finditer(text)]
    if bars and stage in ("loading", "writing"):
        wanted = "Loading weights" if stage == "loading" else "Writing model shards"
        mine = [b for b in bars if b[0] == wanted]
        if mine and mine[-1][2]:
            fraction = low + (high - low) * mine[-1][1] / mine[-1][2]
            detail = f"{wanted} {mine[-1][1]}/{mine[-1][2]}"
    error = None
    if status == RunStatus.FINISHED.value:
        stage, fraction = "done", 1.0
    elif status in (RunStatus.FAILED.value, RunStatus.STOPPED.value):
        error = _last_error(stderr) or _("the export ended with status {status}", status=status_label(status))
    return ExportProgress(stage=stage, fraction=min(1.0, fraction), detail=detail[-200:], status=status, error=error)


def _read_tail(path: Path, limit: int = 200_000) -> str:
    try:
        with open(path, "rb") as fh:
            fh.seek(0, 2)
            size = fh.tell()
            fh.seek(max(0, size - limit))
            return fh.read().decode("utf-8", errors="replace")
    except OSError:
        return ""


def export_progress(ws: Workspace, run_id: str) -> ExportProgress:
    """The export's progress; for a failed export, the first diagnosis of its logs (the failure rules)."""
    directory = run_dir(ws, run_id)
    record = refresh(directory)
    progress = parse_export_log(_read_tail(directory / "stdout.log"), _read_tail(directory / "stderr.log"),
                                record.status.value)
    if record.status is RunStatus.FAILED:
        from core.train.failures import diagnose_run

        found = diagnose_run(directory, exit_code=record.exit_code, training=False)
        progress.diagnosis = found[0] if found else None
    return progress


def wait_export(ws: Workspace, run_id: str, *, on_progress=None, interval: float = 0.5,
                cancelled=None) -> RunRecord:
    """Block until the export run ends, reporting each change of progress."""
    import time

    last = None
    directory = run_dir(ws, run_id)
    while True:
        progress = export_progress(ws, run_id)
        key = (progress.stage, round(progress.fraction, 3), progress.status in ("starting", "running"))
        if on_progress and key != last:
            on_progress(progress)
            last = key
        record = read_record(directory)
        if not record.active:
            return refresh(directory)
        if cancelled and cancelled():
            return record
        time.sleep(interval)
