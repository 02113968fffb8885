"""The progress a lint reports (a leaf module: the scan, near duplicates and token counts all send it)."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class LintProgress:
    phase: str  # scan | duplicates | near-duplicates | tokens
    done: int
    total: int
