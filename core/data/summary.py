"""The Data step's verdict on a dataset, saved for the later steps (Config reads it to check
`cutoff_len` against token lengths and that the dataset was linted clean).

Stored as `.devtune/datasets/<name>.json` in the workspace, one per registered dataset name.
A summary is stale when the file's content changed since it was made: its size, else (when its mtime
moved) its sha256. A file written again byte for byte (`data fix` run twice) is not "changed".
"""

from __future__ import annotations

import os
from pathlib import Path

from pydantic import BaseModel, Field

from core.files.atomic import write_atomic
from core.files.digest import file_sha256


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
    sha256: str | None = None  # of the file's content when summarised (None: a summary from before)

    def is_stale(self, root: Path) -> bool:
        path = root / self.file
        try:
            st = os.stat(path)
        except OSError:
            return True
        if st.st_size != self.size:
            return True
        if abs(st.st_mtime - self.mtime) <= 1e-6:
            return False
        if self.sha256 is None:
            return True
        try:
            return file_sha256(path) != self.sha256
        except OSError:
            return True





def summary_path(root: Path, name: str) -> Path:
    return root / ".devtune" / "datasets" / f"{name}.json"


def save_summary(root: Path, summary: DatasetSummary) -> Path:
    return write_atomic(summary_path(root, summary.name), summary.model_dump_json(indent=2) + "\n")


def load_summary(root: Path, name: str) -> DatasetSummary | None:
    try:
        return DatasetSummary.model_validate_json(summary_path(root, name).read_bytes())
    except (OSError, ValueError):
        return None
