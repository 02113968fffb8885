"""The wizard's state: `.devtune/state.json` as a pydantic model with a schema version.

Loaded through core.workspace.layout.Workspace.load_state (atomic writes, a lock, damaged files kept aside).
"""

from __future__ import annotations

import time

from pydantic import BaseModel, Field

from core.workspace.step_status import StepStatus

SCHEMA_VERSION = 1


class StepRecord(BaseModel):
    status: StepStatus = StepStatus.NOT_STARTED
    summary: str = ""  # one line: what the step found or produced
    updated: float = 0.0


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
        self.steps[step_id] = StepRecord(status=status, summary=summary, updated=time.time())
