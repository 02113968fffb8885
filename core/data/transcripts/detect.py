"""Is this file a chat transcript, and what is in it: the shape readers tried on the file (JSON / CSV records
first, then text lines), the conversations, who answers, and the summary the CLI prints ("chat export
(`TIME NAME` header lines): 3 conversations, 1 agent (售后-小林), 2 customers")."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from core.data.reader import CSV, EMPTY, JSONL, TEXT, ReadNotes, iter_text_lines, probe_file
from core.data.sources import ConvertError
from core.data.transcripts.conversations import Dropped, conversation_units, split_conversations
from core.data.transcripts.messages import Message
from core.data.transcripts.noise import clean_text, is_notice, is_system_speaker
from core.data.transcripts.record_shape import find_messages
from core.data.transcripts.roles import Roles, assign_roles
from core.data.transcripts.text_shape import learn_layout, parse_text, sample_lines
from core.i18n import _, _n


@dataclass
class Transcript:
    messages: list[Message]
    layout: str
    by_gap: bool
    ignored_lines: list[int] = field(default_factory=list)


@dataclass
class TranscriptSummary:
    layout: str
    conversations: int
    roles: Roles
    dropped: dict[str, int] = field(default_factory=dict)

    def to_json(self) -> dict:
        return {"layout": self.layout, "conversations": self.conversations, "agents": self.roles.agents(),
                "customers": self.roles.customers(), "evidence": dict(self.roles.evidence),
                "dropped": dict(self.dropped), "summary": self.line()}

    def line(self) -> str:
        agents, customers = self.roles.agents(), self.roles.customers()
        return _("chat export ({layout}): {conversations}, {agents} ({agent_names}), {customers}",
                 layout=self.layout,
                 conversations=_n("{n} conversation", "{n} conversations", self.conversations),
                 agents=_n("{n} agent", "{n} agents", len(agents)), agent_names=", ".join(agents[:5]) or "-",
                 customers=_n("{n} customer", "{n} customers", len(customers)))


def read_transcript(path: Path) -> Transcript | None:
    probe = probe_file(path)
    if probe.layout == EMPTY:
        return None
    if probe.layout != TEXT:
        found = _records(path, probe)
        if found is not None:
            return found
    layout = learn_layout(sample_lines(path, probe.encoding))
    if layout is None:
        return None
    parsed = parse_text(iter_text_lines(path, probe.encoding, ReadNotes()), layout)
    for m in parsed.messages:
        m.notice = m.notice or not m.speaker or is_system_speaker(m.speaker) or is_notice(m.text)
        m.text = clean_text(m.text)
    return Transcript(parsed.messages, layout.label, True, parsed.ignored_lines)


def _records(path: Path, probe) -> Transcript | None:
    import orjson

    root, lines = None, None
    try:
        if probe.layout == CSV:
            from core.data.csv_table import csv_reader

            reader = csv_reader(path)
            header = [h.strip().lstrip("\ufeff") for h in next(reader, [])]
            root, lines = [], []
            for row in reader:
                if any(c.strip() for c in row):
                    root.append(dict(zip(header, row)))
                    lines.append(reader.line_num)
        elif probe.layout == JSONL:
            root, lines = [], []
            for n, raw in enumerate(path.read_bytes().splitlines(), start=1):
                if raw.strip():
                    root.append(orjson.loads(raw))
                    lines.append(n)
        else:
            root = orjson.loads(path.read_bytes())
    except (orjson.JSONDecodeError, UnicodeDecodeError, ValueError):
        return None
    found = find_messages(root, lines)
    if found is None:
        return None
    messages, fields = found
    return Transcript(messages, fields.label, not (fields.chat or fields.to or "[]" in fields.pattern))


def transcript_units(path: Path, agents=(), customers=(), report=None):
    """(units, summary) of a transcript; ConvertError when it is none, or a role names no speaker."""
    found = read_transcript(path)
    if found is None or not found.messages:
        raise ConvertError(_("{file}: no chat transcript found (no message-header lines, no message objects "
                             "with a speaker and a text)", file=path))
    speakers = {m.speaker for m in found.messages if m.speaker and m.text and not m.notice}
    for flag, names in (("--agent", agents), ("--customer", customers)):
        for name in names:
            if name not in speakers:
                raise ConvertError(_("{flag} {name}: no such speaker in {file}; speakers are: {speakers}", flag=flag,
                                     name=name, file=path, speakers=", ".join(sorted(speakers)[:20])))
    conversations = split_conversations(found.messages, found.by_gap)
    roles = assign_roles(conversations, agents, customers)
    dropped = Dropped()
    units = list(conversation_units(conversations, roles, dropped))
    if report is not None:
        report.ignored_lines.extend(found.ignored_lines)
    talked = sum(1 for c in conversations if any(m.text and not m.notice and not m.hidden for m in c))
    summary = TranscriptSummary(found.layout, talked, roles, dict(dropped.counts))
    return units, summary
