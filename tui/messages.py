"""Messages that cross screens."""

from __future__ import annotations

from dataclasses import dataclass

from textual.message import Message


@dataclass
class StepStateChanged(Message):
    """A step's status or summary changed (the stepper redraws)."""

    step_id: str
