"""What an action implies for the workspace's state, and the one function that applies it.

Core actions return a `StateChange` beside their result ("the registered dataset is now `mydata`, the Data
step is done"). Both front-ends hand it to `StateChange.apply`: the CLI through `Workspace.update_state`
(under the state lock), the wizard through its state writer. So a registered dataset, a saved config or a
started run is remembered the same way whichever front-end did it."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from core.workspace.step_status import StepStatus

if TYPE_CHECKING:
    from core.workspace.layout import Workspace
    from core.workspace.state import WizardState

# the WizardState fields an action may set (current_step and the step records are not "chosen things")
CHOSEN = ("dataset_file", "dataset_name", "config_file", "active_run", "export_dir", "active_server",
          "eval_base_server")


@dataclass(frozen=True)
class StepMark:
    status: StepStatus
    summary: str = ""


@dataclass(frozen=True)
class StateChange:
    chosen: dict[str, Any] = field(default_factory=dict)  # field of WizardState -> its new value
    steps: dict[str, StepMark] = field(default_factory=dict)  # step id -> its new status and summary

    def __post_init__(self) -> None:
        unknown = set(self.chosen) - set(CHOSEN)
        if unknown:
            raise ValueError(f"not a chosen thing of the state: {sorted(unknown)}")

    def apply(self, state: WizardState) -> None:
        for key, value in self.chosen.items():
            setattr(state, key, value)
        for step_id, mark in self.steps.items():
            state.set_step(step_id, mark.status, mark.summary)

    def __bool__(self) -> bool:
        return bool(self.chosen or self.steps)


def apply_change(ws: Workspace, change: StateChange | None) -> None:
    """The CLI's way: read, change and write state.json under its lock (nothing when there is no change)."""
    if change:
        ws.update_state(change.apply)
