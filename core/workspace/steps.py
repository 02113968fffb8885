"""The wizard's six steps, in order: their ids, titles and one-line blurbs. Both front-ends name the steps
from here (the wizard's step bar and guide, the CLI's help); which screen draws a step is the wizard's own
business (screens/steps.py). Titles and blurbs are translated when this module is imported (after --lang)."""

from __future__ import annotations

from dataclasses import dataclass

from core.i18n import _


@dataclass(frozen=True)
class Step:
    id: str
    title: str
    blurb: str  # what the step is for, one line


STEPS: tuple[Step, ...] = (
    Step("data", _("Data"),
         _("preview, lint, fix, convert and register a dataset for LLaMA-Factory, with token-length stats")),
    Step("doctor", _("Doctor"),
         _("every environment check (groups, driver, ROCm, torch build, libraries, vLLM, disk) with the "
           "exact fix")),
    Step("config", _("Config"),
         _("LoRA / QLoRA / full, template, DeepSpeed, GPUs and nodes: the YAML, JSON and command, with a "
           "memory fit")),
    Step("train", _("Train"),
         _("a detached run that survives SSH drops: live loss chart, GPU panels, diagnosis, stop and resume")),
    Step("merge", _("Merge"),
         _("llamafactory-cli export with progress; the merged folder checked (weights, tokenizer, chat "
           "template)")),
    Step("playground", _("Playground"),
         _("a vLLM server for the merged model, streaming chat with TTFT and tokens/s, and the closed-loop "
           "check")),
)
