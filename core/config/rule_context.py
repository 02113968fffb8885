"""What the Config checks report (`ConfigFinding`) and what they read (`RuleContext`)."""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from core.config.gpu_catalog import GpuTarget
from core.config.spec import TrainSpec, effective_batch, value
from core.config.templates import BUILTIN, TemplateCatalog
from core.data.summary import DatasetSummary

SEVERITIES = ("error", "warning", "info")


@dataclass(frozen=True)
class ConfigFinding:
    severity: str  # error | warning | info
    code: str  # stable id, e.g. "template.mismatch"
    message: str
    field: str | None = None  # the TrainSpec field it is about (the form marks it)
    fix: str | None = None
    source: str = "devtune"  # devtune | llamafactory


@dataclass
class RuleContext:
    """What the rules read from the workspace, gathered once by core.config.files.rule_context."""

    root: Path
    catalog: TemplateCatalog = BUILTIN
    targets: list[GpuTarget] = field(default_factory=list)  # what the run is sized for
    found_gpus: int = 0  # GPUs the doctor found on this machine
    doctor_ran: bool = False  # the doctor has looked for GPUs here (found_gpus 0 then means: none)
    dataset_info: dict[str, Any] | None = None  # data/dataset_info.json, None when absent
    dataset_info_error: str | None = None
    summaries: dict[str, DatasetSummary | None] = field(default_factory=dict)  # per dataset name
    fit: Any = None  # core.config.memfit.FitEstimate, None when the model's shape is unknown
    advice: list = field(default_factory=list)  # core.config.memfit_advice.FitAdvice
    zero2_fit: Any = None  # a ZeRO-3 run's FitEstimate under ZeRO-2 (None when not asked)
    config_path: str = "configs/train.yaml"  # the YAML being checked (hints that edit it name it)


def train_rows(spec: TrainSpec, rows: int) -> int:
    """Rows left for training after the validation split and max_samples."""
    val = float(value(spec, "val_size") or 0)
    left = rows - (int(val) if val >= 1 else int(rows * val))
    if value(spec, "max_samples"):
        left = min(left, int(value(spec, "max_samples")))
    return max(left, 0)


def steps_per_epoch(spec: TrainSpec, rows: int) -> int:
    return max(1, math.ceil(train_rows(spec, rows) / effective_batch(spec)))
