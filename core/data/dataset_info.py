"""`<dataset_dir>/dataset_info.json`, LLaMA-Factory's registry of datasets, read in one place: every step
that needs an entry (the Data step's lint and registration, Config's checks, the Slurm preflight, eval and
verify) calls `read_dataset_info`, so they all see the same entries and the same error for a broken file.

It is read as UTF-8 (a BOM is allowed). No file, or an empty one, is an empty registry; a file that is not
valid JSON, or whose top level is not an object of entries, is a `DatasetInfoError` naming the file and
what is wrong. The entries are returned as they are (name → entry); what an entry means is for its reader
(core.data.dataset_entry reads it as LLaMA-Factory's DatasetAttr does).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from core.errors import BadInput
from core.i18n import _

INFO_FILE = "dataset_info.json"


class RegisterError(BadInput):
    """The registry cannot be changed or read (a bad name, an unreadable dataset_info.json); the message
    names the file and what to do. core.data.register raises it for registrations."""


class DatasetInfoError(RegisterError):
    """dataset_info.json cannot be read: unreadable, not valid JSON, or not an object of entries."""


def info_file(dataset_dir: str | Path) -> Path:
    return Path(dataset_dir) / INFO_FILE


def read_dataset_info(dataset_dir: str | Path) -> dict[str, Any]:
    """The entries of `<dataset_dir>/dataset_info.json` ({} when there is none, or it is empty)."""
    path = info_file(dataset_dir)
    try:
        text = path.read_text(encoding="utf-8-sig")
    except FileNotFoundError:
        return {}
    except (OSError, UnicodeDecodeError) as exc:
        raise DatasetInfoError(_("{path}: cannot read it ({error})", path=path, error=exc)) from exc
    if not text.strip():
        return {}
    try:
        data = json.loads(text)
    except json.JSONDecodeError as exc:
        raise DatasetInfoError(_("{path}:{line}:{col}: invalid JSON ({msg}); fix it by hand, it was not changed",
                                 path=path, line=exc.lineno, col=exc.colno, msg=exc.msg)) from exc
    if not isinstance(data, dict):
        raise DatasetInfoError(_("{path}: the top level must be an object of dataset entries", path=path))
    return data
