"""What the Data step says of a file as it opens, before anything is converted: a chat export (its layout, who
was found to answer and who asks, and why), or a workbook whose sheets convert to rows like a CSV table.

The speakers' roles are corrected with the same request the CLI makes (`convert_file(..., agents=...,
customers=...)`, `--agent` / `--customer`): `SpeakerRole` lists what detection decided, `roles_request` turns
the person's choice into that request.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path

from core.data.spreadsheet import is_spreadsheet
from core.i18n import _

DETECT_BYTES = 64 << 20  # a bigger file is not read whole to find a chat export when it opens
TRANSCRIPT, WORKBOOK = "transcript", "workbook"


@dataclass(frozen=True)
class SpeakerRole:
    name: str
    agent: bool  # answers (an agent); else asks (a customer)
    why: str  # the rule that decided, in the reader's language


@dataclass
class Opened:
    kind: str  # TRANSCRIPT | WORKBOOK
    line: str  # what was detected, as the CLI's convert report says it
    speakers: list[SpeakerRole] = field(default_factory=list)


def _why(evidence: str) -> str:
    said = {"--agent": _("you said it answers"), "--customer": _("you said it asks"),
            "the file's role field": _("the file's role field"), "an agent-like name": _("an agent-like name"),
            "a customer-like name": _("a customer-like name"), "in every conversation": _("in every conversation"),
            "beside a known agent": _("beside a known agent"), "answers a known customer": _("answers a known customer"),
            "speaks first": _("speaks first"), "answers the first speaker": _("answers the first speaker")}
    if evidence.startswith("an id shaped like a known "):
        return _("an id shaped like a known agent's") if "agent" in evidence else _("an id shaped like a known "
                                                                                     "customer's")
    return said.get(evidence, evidence)


def detect_opened(path: str | os.PathLike, agents: tuple[str, ...] = (), customers: tuple[str, ...] = ()
                  ) -> Opened | None:
    """A chat export or a workbook, or None for a file that is a dataset already (or too big to read whole here:
    convert still detects it). `agents` / `customers` as `convert_file` takes them."""
    from core.data.convert import ConvertError, detect_source
    from core.errors import DevtuneError

    p = Path(path)
    if is_spreadsheet(p):
        return Opened(WORKBOOK, _("a workbook: each sheet is a table whose header row names the columns; convert (v) "
                                  "turns its rows into alpaca rows, as it does a CSV file"))
    try:
        if p.stat().st_size > DETECT_BYTES or detect_source(p) != "transcript":
            return None
        from core.data.transcripts.detect import transcript_units

        _units, summary = transcript_units(p, agents, customers)
    except (ConvertError, DevtuneError, OSError, ValueError):
        return None
    roles = summary.roles
    speakers = [SpeakerRole(name, role == "agent", _why(roles.evidence.get(name, "")))
                for name, role in sorted(roles.of.items(), key=lambda kv: (kv[1] != "agent", kv[0]))]
    return Opened(TRANSCRIPT, summary.line(), speakers)


def pages_rows(path: str | os.PathLike) -> bool:
    """Does the file have rows to page through as it is (a workbook has none until it is converted)?"""
    return not is_spreadsheet(path)


def roles_request(speakers: list[str], agents: set[str] | list[str]) -> tuple[tuple[str, ...], tuple[str, ...]]:
    """The person's choice (which speakers answer) as convert's request: (agents, customers), every speaker
    named, in the order they were listed."""
    chosen = set(agents)
    return tuple(s for s in speakers if s in chosen), tuple(s for s in speakers if s not in chosen)


__all__ = ["DETECT_BYTES", "Opened", "SpeakerRole", "TRANSCRIPT", "WORKBOOK", "detect_opened", "pages_rows", "roles_request"]
