"""`<dataset_dir>/dataset_info.json`, LLaMA-Factory's registry of datasets, read in one place: every step
that needs an entry (the Data step's lint and registration, Config's checks, the Slurm preflight, eval and
verify) calls `read_dataset_info`, so they all see the same entries and the same error for a broken file.

LLaMA-Factory v1's `dataset_info.yaml` (USE_V1=1) is another format, which devtune does not read:
`is_v1_dataset_list` and `v1_dataset_list` find one so that the message says so.

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
# LLaMA-Factory v1's dataset list (USE_V1=1; its data/v1_*.yaml): entries with path, source, converter
V1_LIST_FILES = ("dataset_info.yaml", "dataset_info.yml")
V1_ENTRY_KEYS = ("converter", "source")


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


def is_v1_dataset_list(file: str | Path) -> bool:
    """Whether `file` is LLaMA-Factory v1's dataset list: a dataset_info.yaml, or a YAML mapping of names to
    entries with a `path` and a v1 `converter` or `source` (v0's dataset_info.json has file_name, formatting)."""
    path = Path(file)
    if path.name.lower() in V1_LIST_FILES:
        return True
    if path.suffix.lower() not in (".yaml", ".yml"):
        return False
    try:
        import yaml

        data = yaml.safe_load(path.read_text(encoding="utf-8-sig"))
    except (OSError, UnicodeDecodeError, ValueError):
        return False
    entries = list(data.values()) if isinstance(data, dict) else []
    return bool(entries) and all(isinstance(e, dict) and "path" in e and any(k in e for k in V1_ENTRY_KEYS)
                                 for e in entries)


def v1_dataset_list(dataset_dir: str | Path) -> Path | None:
    """A v1 dataset list in `dataset_dir` (what a folder prepared for LLaMA-Factory v1 has instead of
    dataset_info.json), or None."""
    for name in V1_LIST_FILES:
        if (Path(dataset_dir) / name).is_file():
            return Path(dataset_dir) / name
    return None


def v1_dataset_list_message(file: str | Path) -> str:
    return _("{path} is a LLaMA-Factory v1 dataset list (USE_V1=1); devtune drives LLaMA-Factory 0.9.x (v0), "
             "which reads {info} in the dataset folder: register each data file with devtune data register "
             "FILE --name NAME", path=file, info=INFO_FILE)
