"""The guide's multi-GPU check: VRAM use should be balanced across the cards in use.

With data parallel training (DDP, ZeRO) every rank holds about the same; one card far above the
others means rank 0 does extra work (evaluation, saving, a model loaded on it twice) or a process
landed on the wrong card, and it will run out of memory first.
"""

from __future__ import annotations

from dataclasses import dataclass

from core.i18n import _
from core.train.gpu.sample import GpuSample

IN_USE_FRACTION = 0.05  # a card with less VRAM in use than this takes no part in the run
IMBALANCE_FRACTION = 0.10  # max - min above this share of the total is a warning


@dataclass(frozen=True)
class VramImbalance:
    spread: float  # (max - min) / total, of the cards in use
    high_index: int
    low_index: int
    message: str


def vram_imbalance(samples: list[GpuSample], threshold: float = IMBALANCE_FRACTION) -> VramImbalance | None:
    """A warning when VRAM use differs by more than `threshold` of the total across the cards in use."""
    used = [s for s in samples if s.vram_fraction is not None and s.vram_fraction >= IN_USE_FRACTION]
    if len(used) < 2:
        return None
    high = max(used, key=lambda s: s.vram_fraction)
    low = min(used, key=lambda s: s.vram_fraction)
    spread = high.vram_fraction - low.vram_fraction
    if spread <= threshold:
        return None
    gib = 1024 ** 3
    return VramImbalance(
        spread=spread, high_index=high.index, low_index=low.index,
        message=_("VRAM unbalanced: GPU {high} uses {high_gib} GiB, GPU {low} {low_gib} GiB ({pct}% of a card "
                  "apart); expect GPU {high} to run out of memory first",
                  high=high.index, low=low.index, high_gib=f"{high.vram_used / gib:.1f}",
                  low_gib=f"{low.vram_used / gib:.1f}", pct=f"{spread * 100:.0f}"),
    )
