"""Convert chat logs, Q&A text, CSV/TSV, sharegpt and OpenAI messages into alpaca JSON Lines.

- chat logs: `用户：…` / `客服：…` (and 客户/顾客/买家 … / 坐席/助手 …, User/Agent, Human/Assistant), with
  timestamps (`[2024-03-12 09:15:02]`) and session headers (`=== 会话 … ===`); a session (a header or a
  blank line ends one) becomes one row: its last exchange in instruction/output, the earlier ones in
  `history`. Consecutive lines of one speaker are joined; a greeting before the first question and a
  question without an answer are reported.
- Q&A text: `Q:` / `A:`, `问：` / `答：`, `Question:` / `Answer:`: one row per pair.
- CSV/TSV: the columns named by `columns` (`{"instruction": "customer_question", "output": "agent_reply"}`),
  or guessed from the header.
- sharegpt / messages: the system turn into `system`, earlier pairs into `history`.
- JSON with question/answer (or other alias) keys: renamed, `context` into `input`.
- chat transcripts without speaker tags (WeChat, WeCom, QQ, DingTalk, Feishu, WhatsApp, Telegram, LINE,
  helpdesk JSON/CSV): the header pattern, the speakers and who answers are learned from the file
  (`core.data.transcripts`); `agents` / `customers` correct the roles.

Every source unit (session, pair, CSV row, JSON row; read by `core.data.sources`) ends in the output or
in the rejects file.
Two passes: the first finds whether any row needs `history`/`system` (so every row has the same keys).
"""

from __future__ import annotations

import os
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterator

from core.data.fix import FixRefused
from core.data.fix_output import FixReport, RowWriter, default_rejects_path
from core.data.reader import JSON_LAYOUTS, TEXT, probe_file
from core.data.source_kind import detect_source, unit_to_row
from core.data.sources import ConvertError, Unit, csv_units, json_units, text_units
from core.i18n import _, _n

SOURCES = ("auto", "chatlog", "qa", "csv", "sharegpt", "messages", "transcript")


@dataclass
class ConvertReport(FixReport):
    source_format: str = ""
    ignored_lines: list[int] = field(default_factory=list)
    notes: Counter = field(default_factory=Counter)
    detected: Any = None  # a transcript's TranscriptSummary: its layout, conversations, agents, customers

    def to_json(self) -> dict:
        out = {**super().to_json(), "from": self.source_format, "ignored_lines": self.ignored_lines[:100],
               "notes": dict(self.notes)}
        if self.detected is not None:
            out["detected"] = self.detected.to_json()
        return out

    def lines(self) -> list[str]:
        from core.data.wording import counted

        out = [_("{units} in → {rows} written to {output}, {rejected} rejected to {rejects}",
                 units=_n("{n} {kind} unit", "{n} {kind} units", self.rows_in, kind=self.source_format),
                 rows=counted("row", self.rows_out), output=self.output, rejected=self.rows_rejected,
                 rejects=self.rejects)]
        if self.detected is not None:
            out.append(_("  detected {summary}", summary=self.detected.line()))
            out.append(_("  roles wrong? name them: --agent NAME / --customer NAME (repeatable)"))
        for note, n in self.notes.most_common():
            out.append(_("  note     {n}: {note}", n=n, note=note))
        for reason, n in self.reasons.most_common():
            out.append(_("  rejected {n}: {reason}", n=n, reason=reason))
        if self.ignored_lines:
            shown = ", ".join(f"L{n}" for n in self.ignored_lines[:8])
            out.append(_n("  ignored {n} line that is no turn ({shown})",
                          "  ignored {n} lines that are no turn ({shown})", len(self.ignored_lines), shown=shown))
        return out


def _units(path: Path, kind: str, columns: dict[str, str] | None, report: ConvertReport,
           roles: tuple[tuple[str, ...], tuple[str, ...]] = ((), ())) -> Iterator[Unit]:
    if kind == "transcript":
        from core.data.transcripts.detect import transcript_units

        units, summary = transcript_units(path, roles[0], roles[1], report)
        report.detected = summary
        for note, n in summary.dropped.items():
            report.notes[note] += n
        return iter(units)
    if kind in ("chatlog", "qa") and probe_file(path).layout == TEXT:
        return text_units(path, kind, report)
    if kind == "csv":
        return csv_units(path, columns, report)
    return json_units(path, kind)


def convert_file(source: str | os.PathLike, output: str | os.PathLike, *, source_format: str = "auto",
                 columns: dict[str, str] | None = None, rejects: str | os.PathLike | None = None,
                 force: bool = False, dry_run: bool = False, preview: int = 0, agents: tuple[str, ...] = (),
                 customers: tuple[str, ...] = ()) -> ConvertReport:
    """`agents` / `customers`: speaker names whose role a transcript's detection should not guess."""
    src, out = Path(source), Path(output)
    if source_format not in SOURCES:
        raise ConvertError(_("--from must be one of {choices}", choices=", ".join(SOURCES)))
    if not src.is_file():
        raise FileNotFoundError(src)
    if out.exists() and out.resolve() == src.resolve():
        raise FixRefused(_("{out} is the input file; convert never writes in place: choose another -o", out=out))
    rej = Path(rejects) if rejects else default_rejects_path(out)
    kind = detect_source(src) if source_format == "auto" else source_format
    roles = (tuple(agents), tuple(customers))
    report = ConvertReport(str(src), str(out), str(rej), source_format=kind)
    with_history = with_system = False
    scratch = ConvertReport(str(src), str(out), str(rej))
    for unit in _units(src, kind, columns, scratch, roles):  # pass 1: which keys every row needs
        row = unit_to_row(unit, True, True)
        if isinstance(row, dict):
            with_history = with_history or bool(row["history"])
            with_system = with_system or bool(row["system"])
    probe = probe_file(src)  # JSON rows inside one document are named by their path (`data.items[3]`)
    nested = probe.nested if kind in ("qa", "sharegpt", "messages") and probe.layout in JSON_LAYOUTS else None
    with RowWriter(report, dry_run, preview, force, nested=nested) as writer:
        for unit in _units(src, kind, columns, report, roles):
            report.rows_in += 1
            row = unit_to_row(unit, with_history, with_system)
            for note in unit.notes:
                report.notes[note] += 1
            if isinstance(row, str):
                writer.reject(unit.line, row, "convert", unit.raw)
            else:
                writer.row(row)
        report.written = not dry_run
    return report


def parse_columns(spec: str | None) -> dict[str, str] | None:
    """`instruction=customer_question,output=agent_reply` → a dict (CLI --columns)."""
    if not spec:
        return None
    out = {}
    for part in spec.split(","):
        if "=" not in part:
            raise ConvertError(_("--columns: \"{part}\" is not TARGET=COLUMN", part=part))
        k, v = part.split("=", 1)
        out[k.strip()] = v.strip()
    return out


__all__ = ["convert_file", "detect_source", "parse_columns", "ConvertError", "ConvertReport", "SOURCES"]
