"""Which screen draws each of the wizard's steps (the steps themselves, their titles and blurbs, are
core.workspace.steps). A step is listed here when its screen has landed.

Screens are imported lazily (by dotted path) so the wizard's first paint loads only the step the person
is on. The app takes this list when it is built (`DevtuneApp(steps=...)`) and widgets read the app's.
"""

from __future__ import annotations

import importlib
from dataclasses import dataclass

from core.workspace import steps as core_steps


@dataclass(frozen=True)
class StepInfo:
    id: str
    title: str
    screen: str  # "module:Class"
    blurb: str  # what the step is for, one line

    def load(self):
        module, _sep, cls = self.screen.partition(":")
        return getattr(importlib.import_module(module), cls)


SCREENS = {
    "data": "screens.data:DataScreen",
    "doctor": "screens.doctor:DoctorScreen",
    "config": "screens.config:ConfigScreen",
    "train": "screens.train:TrainScreen",
    "merge": "screens.merge:MergeScreen",
    "playground": "screens.playground:PlaygroundScreen",
}

STEPS: tuple[StepInfo, ...] = tuple(
    StepInfo(step.id, step.title, SCREENS[step.id], step.blurb) for step in core_steps.STEPS)


def step_ids() -> tuple[str, ...]:
    return tuple(s.id for s in STEPS)


def get_step(step_id: str) -> StepInfo | None:
    return next((s for s in STEPS if s.id == step_id), None)
