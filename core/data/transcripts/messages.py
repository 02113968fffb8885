"""One message of a chat export, as the shape readers (`text_shape`, `record_shape`) find it."""

from __future__ import annotations

from dataclasses import dataclass

AGENT, CUSTOMER = "agent", "customer"


@dataclass
class Message:
    line: int                # where it starts in the file (a record's line for JSON/CSV)
    speaker: str             # the name (or id) as the file writes it
    text: str
    time: float | None = None
    chat: str = ""           # the conversation the file puts it in (a section, a chat id, a list)
    role: str = ""           # AGENT / CUSTOMER when the file says so (a role field, a side-loaded user)
    notice: bool = False     # a system notice or recall: no one's words
    hidden: bool = False     # an internal note (private / not public): not part of the conversation
    raw: str = ""
