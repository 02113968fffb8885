"""The wizard's state: `.devtune/state.json` as a pydantic model with a schema version.

Loaded through core.workspace.layout.Workspace.load_state (atomic writes, a lock, damaged files kept aside).
"""

from __future__ import annotations

import time

from typing import Any

from pydantic import BaseModel, Field

from core.i18n import Said
from core.workspace.step_status import StepStatus, shown_summary

SCHEMA_VERSION = 1


class StepRecord(BaseModel):
    status: StepStatus = StepStatus.NOT_STARTED
    summary: str = ""  # one line: what the step found or produced, as it was said (a state from before: all there is)
    summary_key: str = ""  # the same line as data (core.i18n.Said): its catalog key, said again when shown
    summary_args: dict[str, Any] = Field(default_factory=dict)
    summary_many: str = ""  # the plural key of a count
    updated: float = 0.0

    def shown_summary(self) -> str:
        """The summary in the reader's language (a Said, which `set_step` can store again as data)."""
        return shown_summary(self)


class WizardState(BaseModel):
    """Everything the wizard remembers about one workspace between sessions."""

    schema_version: int = SCHEMA_VERSION
    current_step: str = "data"
    steps: dict[str, StepRecord] = Field(default_factory=dict)
    dataset_file: str | None = None  # workspace-relative path of the chosen dataset
    dataset_name: str | None = None  # its name in data/dataset_info.json
    config_file: str | None = None  # workspace-relative path of the train YAML
    active_run: str | None = None
    export_dir: str | None = None
    active_server: str | None = None
    eval_base_server: str | None = None  # the base model's server the last eval compared against (two servers)
    settings: dict[str, str] = Field(default_factory=dict)  # small UI preferences

    def step(self, step_id: str) -> StepRecord:
        return self.steps.get(step_id) or StepRecord()

    def set_step(self, step_id: str, status: StepStatus, summary: str = "") -> None:
        """`summary` a Said (core.i18n.said) is kept as data too, so it is shown in the reader's language."""
        data = summary.to_data() if isinstance(summary, Said) else {}
        self.steps[step_id] = StepRecord(status=status, summary=str(summary), summary_key=data.get("key", ""),
                                         summary_args=data.get("args", {}), summary_many=data.get("many", ""),
                                         updated=time.time())
