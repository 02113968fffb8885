"""The doctor's report as text (the CLI) and as Markdown (a file to attach to a support ticket)."""

from __future__ import annotations

import time
from pathlib import Path

from core.doctor.evidence import Evidence
from core.doctor.model import (
    FAIL,
    OK,
    SKIP,
    WARN,
    DoctorReport,
    category_title,
    status_label,
)
from core.files.atomic import FileExistsRefused, write_new
from core.i18n import _, said

def text_mark(status: str) -> str:
    """A check's status mark in the text report, in the reader's language."""
    return {OK: _("[ ok ]"), WARN: _("[warn]"), FAIL: _("[FAIL]"), SKIP: _("[skip]")}[status]
MD_MARKS = {OK: "✅", WARN: "⚠️", FAIL: "❌", SKIP: "➖"}
EVIDENCE_LINES = 80  # lines of each tool's output kept in the Markdown appendix


def counts_line(report: DoctorReport) -> str:
    c = report.counts()
    return said("failing: {fail}, warnings: {warn}, ok: {ok}, not applicable: {skip}",
             fail=c[FAIL], warn=c[WARN], ok=c[OK], skip=c[SKIP])


def render_text(report: DoctorReport, *, show_skipped: bool = True) -> str:
    lines = [_("devtune doctor: {machine}", machine=report.machine_summary or report.machine), ""]
    for category, checks in report.by_category():
        shown = [c for c in checks if show_skipped or c.status != SKIP]
        if not shown:
            continue
        if all(c.status == SKIP for c in shown):
            reasons = list(dict.fromkeys(c.evidence for c in shown))
            lines += [f"{category_title(category)}: {_('not applicable')} ({'; '.join(reasons)})", ""]
            continue
        lines.append(category_title(category))
        for check in shown:
            lines.append(f"  {text_mark(check.status)} {check.title}")
            lines.append(f"         {check.evidence}")
            if check.fix and check.status != SKIP:
                fix_lines = check.fix.splitlines()
                lines.append(f"         {_('fix')}: {fix_lines[0]}")
                lines += [f"              {line}" for line in fix_lines[1:]]
        lines.append("")
    lines.append(counts_line(report))
    lines.append(report.verdict())
    return "\n".join(lines) + "\n"


def _devtune_version() -> str:
    try:
        from importlib.metadata import version

        return version("devtune")
    except Exception:
        return "?"


def render_markdown(report: DoctorReport, evidence: Evidence | None = None) -> str:
    when = time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime(report.created or time.time()))
    host = evidence.host if evidence else {}
    out = [f"# {_('devtune doctor report')}", ""]
    out.append(f"- {_('machine')}: {report.machine_summary or report.machine}")
    if host:
        out.append(f"- {_('host')}: `{host.get('hostname', '?')}`, {_('kernel')} `{host.get('kernel', '?')}`, "
                   f"Python {host.get('python', '?')}" + (f", {_('container')}: {host['container']}"
                                                          if host.get("container") else ""))
    out.append(f"- devtune {_devtune_version()}, {when}")
    out.append(f"- {_('result')}: {counts_line(report)}. {report.verdict()}")
    out += ["", f"| | {_('check')} | {_('category')} |", "|---|---|---|"]
    for check in report.checks:
        out.append(f"| {MD_MARKS[check.status]} {status_label(check.status)} | {check.title} | "
                   f"{category_title(check.category)} |")
    out.append("")
    for category, checks in report.by_category():
        out += [f"## {category_title(category)}", ""]
        for check in checks:
            out.append(f"### {MD_MARKS[check.status]} {check.title}")
            out.append("")
            out.append(f"`{check.id}` · **{status_label(check.status)}** · {check.evidence}")
            if check.fix:
                out += ["", "```sh", check.fix, "```"]
            if check.reference:
                out += ["", f"{_('Reference')}: {check.reference}"]
            out.append("")
    if evidence is not None:
        out += _evidence_appendix(evidence)
    return "\n".join(out).rstrip() + "\n"


def _evidence_appendix(ev: Evidence) -> list[str]:
    out = [f"## {_('Evidence')}", ""]
    if ev.env:
        out += [f"<details><summary>{_('environment variables (secrets hidden)')}</summary>", "", "```"]
        out += [f"{k}={v}" for k, v in ev.env.items() if k != "LD_LIBRARY_PATH"]
        out += ["```", "</details>", ""]
    for name, result in sorted(ev.commands.items()):
        if not result.ran or not (result.stdout or result.stderr):
            continue
        text = (result.stdout + ("\n" + result.stderr if result.stderr else "")).strip().splitlines()
        cut = len(text) > EVIDENCE_LINES
        out += [f"<details><summary>{name}: <code>{result.command_line()}</code> ({result.outcome()})</summary>",
                "", "```"]
        out += text[:EVIDENCE_LINES]
        if cut:
            out.append("[... " + _("{n} more lines", n=len(text) - EVIDENCE_LINES) + " ...]")
        out += ["```", "</details>", ""]
    return out


def save_report(folder: str | Path, report: DoctorReport, evidence: Evidence | None = None,
                *, now: float | None = None) -> Path:
    """Write `doctor-report-<time>.md` in `folder`; never overwrites (adds -2, -3, ...)."""
    stamp = time.strftime("%Y%m%d-%H%M%S", time.localtime(now if now is not None else time.time()))
    text = render_markdown(report, evidence)
    folder = Path(folder)
    for n in range(1, 1000):
        path = folder / (f"doctor-report-{stamp}.md" if n == 1 else f"doctor-report-{stamp}-{n}.md")
        try:
            return write_new(path, text)
        except FileExistsRefused:
            continue
    raise FileExistsError(_("too many doctor reports named doctor-report-{stamp}* in {folder}", stamp=stamp,
                            folder=folder))
