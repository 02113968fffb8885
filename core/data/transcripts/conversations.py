"""A transcript's messages as convert units: split into conversations (the file's own sections, chat ids or
lists; else a long silence), placeholders, notices and internal notes dropped, consecutive messages of one
side joined, and an unanswered tail set apart as its own reject so the answered exchanges before it stay.
Every conversation with words becomes units: rows in = rows out + rejects still holds."""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from statistics import median
from typing import Iterator

from core.data.sources import Unit
from core.data.transcripts.messages import AGENT, Message
from core.data.transcripts.roles import Roles
from core.i18n import _

GAP_MIN_S, GAP_MAX_S = 3600.0, 6 * 3600.0  # a silence this long (10 × the file's median gap, within) ends one


def split_conversations(messages: list[Message], by_gap: bool) -> list[list[Message]]:
    """Conversations in the order they start: by chat key, then (when the file has none of its own) by gaps."""
    chats: dict[str, list[Message]] = {}
    for m in messages:
        chats.setdefault(m.chat, []).append(m)
    if not by_gap:
        return list(chats.values())
    times = [m.time for m in messages if m.time is not None and not m.notice]
    gaps = [b - a for a, b in zip(times, times[1:]) if b > a]
    limit = min(GAP_MAX_S, max(GAP_MIN_S, 10 * median(gaps))) if gaps else GAP_MAX_S
    out: list[list[Message]] = []
    for chat in chats.values():
        cur: list[Message] = []
        last: float | None = None
        for m in chat:
            if m.time is not None and last is not None and m.time - last > limit and cur:
                out.append(cur)
                cur = []
            cur.append(m)
            if m.time is not None:
                last = m.time
        if cur:
            out.append(cur)
    return out


@dataclass
class Dropped:
    counts: Counter = field(default_factory=Counter)

    def add(self, m: Message) -> bool:
        """True when the message is no one's words in the conversation (and counts why)."""
        if m.notice:
            self.counts[_("system notice or recall dropped")] += 1
        elif m.hidden:
            self.counts[_("internal note dropped")] += 1
        elif not m.text.strip():
            self.counts[_("media placeholder or empty message dropped")] += 1
        else:
            return False
        return True


def conversation_units(conversations: list[list[Message]], roles: Roles, dropped: Dropped) -> Iterator[Unit]:
    for conv in conversations:
        said = [m for m in conv if not dropped.add(m)]
        if not said:
            continue
        turns: list[tuple[str, str, list[Message]]] = []
        for m in said:
            role = "assistant" if roles.of.get(m.speaker) == AGENT else "user"
            if turns and turns[-1][0] == role:
                turns[-1][2].append(m)
            else:
                turns.append((role, "", [m]))
        tail_from = len(turns)
        while tail_from > 0 and turns[tail_from - 1][0] == "user":
            tail_from -= 1
        body, tail = turns[:tail_from], turns[tail_from:]
        if body:
            yield _unit(body)
        if tail:
            unit = _unit(tail)
            unit.problem = _("no answer after the last question") if body else \
                _("no one answers in this conversation (agents: {agents})", agents=", ".join(roles.agents()) or "-")
            yield unit


def _unit(turns: list[tuple[str, str, list[Message]]]) -> Unit:
    first = turns[0][2][0]
    unit = Unit(first.line)
    for role, _t, msgs in turns:
        unit.turns.append((role, "\n".join(m.text for m in msgs)))
        if len(msgs) > 1:
            unit.notes.append(_("consecutive messages of one speaker joined"))
    unit.raw = "\n".join(m.raw.rstrip("\n") for _r, _t, msgs in turns for m in msgs)
    return unit
