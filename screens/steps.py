"""The wizard's steps, in order. A step is listed here when its screen has landed.

Screens are imported lazily (by dotted path) so the wizard's first paint loads only the step
the person is on. Titles and blurbs are translated when this module is imported (after --lang).
"""

from __future__ import annotations

import importlib
from dataclasses import dataclass

from core.i18n import _


@dataclass(frozen=True)
class StepInfo:
    id: str
    title: str
    screen: str  # "module:Class"
    blurb: str  # what the step is for, one line

    def load(self):
        module, _sep, cls = self.screen.partition(":")
        return getattr(importlib.import_module(module), cls)


STEPS: tuple[StepInfo, ...] = (
    StepInfo("data", _("Data"), "screens.data:DataScreen",
             _("preview, lint, fix, convert and register a dataset for LLaMA-Factory, with token-length stats")),
    StepInfo("doctor", _("Doctor"), "screens.doctor:DoctorScreen",
             _("every environment check (groups, driver, ROCm, torch build, libraries, vLLM, disk) with the "
               "exact fix")),
    StepInfo("config", _("Config"), "screens.config:ConfigScreen",
             _("LoRA / QLoRA / full, template, DeepSpeed, GPUs and nodes: the YAML, JSON and command, with a "
               "memory fit")),
    StepInfo("train", _("Train"), "screens.train:TrainScreen",
             _("a detached run that survives SSH drops: live loss chart, GPU panels, diagnosis, stop and resume")),
    StepInfo("merge", _("Merge"), "screens.merge:MergeScreen",
             _("llamafactory-cli export with progress; the merged folder checked (weights, tokenizer, chat "
               "template)")),
    StepInfo("playground", _("Playground"), "screens.playground:PlaygroundScreen",
             _("a vLLM server for the merged model, streaming chat with TTFT and tokens/s, and the closed-loop "
               "check")),
)


def step_ids() -> tuple[str, ...]:
    return tuple(s.id for s in STEPS)



def get_step(step_id: str) -> StepInfo | None:
    return next((s for s in STEPS if s.id == step_id), None)
