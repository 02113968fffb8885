"""One rule of `devtune diagnose`: the patterns that recognise a failure in a log, and what to say about it.

The rules themselves are data: core/train/failure_rules.py (training, launch, checkpoints, memory),
failure_rules_stages.py (model access, data, kernels, distributed), failure_rules_export.py (export, merge
and serving).
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Rule:
    id: str
    patterns: tuple[str, ...]
    title: str
    explanation: str
    fix: str
    commands: tuple[str, ...] = ()
    weight: int = 50
    exit_codes: tuple[int, ...] = ()
    suppresses: tuple[str, ...] = ()
    symptom: bool = False  # what the other ranks see when one fails (a timeout, an abort): never the cause first
    unless: str | None = None  # a line that also matches this is not evidence for the rule
