"""A quick, read-only look at `.devtune/state.json` with the standard library alone.

The wizard paints its first frame (the step bar with each step's state) from this, before pydantic
and the full WizardState (core/workspace/state.py) are loaded in the background. Anything unreadable simply
reads as "not started".
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from enum import Enum
from pathlib import Path

from core.i18n import reworded


class StepStatus(str, Enum):
    NOT_STARTED = "not_started"
    ATTENTION = "attention"
    DONE = "done"


@dataclass(frozen=True)
class StepPeek:
    status: StepStatus = StepStatus.NOT_STARTED
    summary: str = ""
    summary_key: str = ""  # the summary as data (core.workspace.state.StepRecord)
    summary_args: dict = field(default_factory=dict)
    summary_many: str = ""

    def shown_summary(self) -> str:
        return shown_summary(self)


def shown_summary(record) -> str:
    """A step's saved summary (StepRecord or StepPeek) in the reader's language: said again from its key and
    values, or its text as written (a state from before summaries were kept as data)."""
    data = ({"key": record.summary_key, "args": record.summary_args, "many": record.summary_many}
            if record.summary_key else None)
    return reworded(record.summary, data)


@dataclass(frozen=True)
class StatePeek:
    current_step: str = "data"
    steps: dict[str, StepPeek] = field(default_factory=dict)
    settings: dict[str, str] = field(default_factory=dict)

    def step(self, step_id: str) -> StepPeek:
        return self.steps.get(step_id) or StepPeek()


def peek_state(path: Path) -> StatePeek:
    try:
        raw = json.loads(Path(path).read_bytes())
    except (OSError, ValueError):
        return StatePeek()
    if not isinstance(raw, dict):
        return StatePeek()
    steps = {}
    for step_id, record in (raw.get("steps") or {}).items():
        if isinstance(record, dict):
            try:
                status = StepStatus(record.get("status", "not_started"))
            except ValueError:
                status = StepStatus.NOT_STARTED
            args = record.get("summary_args")
            steps[str(step_id)] = StepPeek(status, str(record.get("summary") or ""), str(record.get("summary_key") or ""),
                                           args if isinstance(args, dict) else {}, str(record.get("summary_many") or ""))
    settings = raw.get("settings") if isinstance(raw.get("settings"), dict) else {}
    current = raw.get("current_step") if isinstance(raw.get("current_step"), str) else "data"
    return StatePeek(current, steps, {str(k): str(v) for k, v in settings.items()})
