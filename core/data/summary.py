"""The Data step's verdict on a dataset, saved for the later steps (Config reads it to check
`cutoff_len` against token lengths and that the dataset was linted clean).

Stored as `.devtune/datasets/<name>.json` in the workspace, one per registered dataset name.
A summary is stale when the file's size or mtime changed since it was made.
"""

from __future__ import annotations

import os
from pathlib import Path

from pydantic import BaseModel, Field

from core.files.atomic import write_atomic


class DatasetSummary(BaseModel):
    name: str  # the name in dataset_info.json
    file: str  # path relative to the workspace
    size: int  # bytes, when summarised
    mtime: float
    format: str  # alpaca | sharegpt | messages | unknown
    kind: str = "supervised"  # supervised | pretrain | preference | kto (core.data.schema.KINDS)
    rows: int
    lint_errors: int
    lint_warnings: int
    tokenizer: str | None = None  # the tokenizer used for token counts, None = character estimate
    token_percentiles: dict[str, int] = Field(default_factory=dict)  # {"p50":..,"p90":..,"p95":..,"p99":..,"max":..}
    over_cutoff: dict[str, int] = Field(default_factory=dict)  # {"1024": rows longer than 1024 tokens, ...}

    def is_stale(self, root: Path) -> bool:
        try:
            st = os.stat(root / self.file)
        except OSError:
            return True
        return st.st_size != self.size or abs(st.st_mtime - self.mtime) > 1e-6


def summary_path(root: Path, name: str) -> Path:
    return root / ".devtune" / "datasets" / f"{name}.json"


def save_summary(root: Path, summary: DatasetSummary) -> Path:
    return write_atomic(summary_path(root, summary.name), summary.model_dump_json(indent=2) + "\n")


def load_summary(root: Path, name: str) -> DatasetSummary | None:
    try:
        return DatasetSummary.model_validate_json(summary_path(root, name).read_bytes())
    except (OSError, ValueError):
        return None
