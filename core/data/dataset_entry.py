"""The file's own entry in a `dataset_info.json` (the one beside it, or in a folder above it): when a
dataset is registered, that entry says what LLaMA-Factory reads, so the Data step judges the rows by it
(`schema_from_entry`), the way `llamafactory.data.parser.DatasetAttr.join` reads it.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from core.data.dataset_info import DatasetInfoError, read_dataset_info
from core.data.schema import ALPACA, FEEDBACK, MESSAGES, PREFERENCE, PRETRAIN, SHAREGPT, SUPERVISED, Schema

COLUMNS = ("prompt", "query", "response", "history", "messages", "system", "tools", "images", "videos", "audios",
           "chosen", "rejected", "kto_tag")
TAGS = ("role_tag", "content_tag", "user_tag", "assistant_tag", "observation_tag", "function_tag", "system_tag")
# DatasetAttr's defaults when an entry has no columns map
DEFAULT_COLUMNS = {"prompt": "instruction", "query": "input", "response": "output", "messages": "conversations"}
DEFAULT_TAGS = {"role_tag": "from", "content_tag": "value", "user_tag": "human", "assistant_tag": "gpt",
                "observation_tag": "observation", "function_tag": "function_call", "system_tag": "system"}


@dataclass(frozen=True)
class DatasetEntry:
    name: str
    entry: dict
    dataset_dir: Path


def find_entry(path: str | Path, levels: int = 2) -> DatasetEntry | None:
    """The entry whose file_name is this file, in the dataset_info.json beside it or up to `levels`
    folders above; None when the file is not registered (or the registry cannot be read)."""
    file = Path(path).resolve()
    folder = file.parent
    for _level in range(levels + 1):
        try:
            info = read_dataset_info(folder)
        except DatasetInfoError:
            info = {}  # lint's rule 14 (core.data.register) reports the broken registry itself
        for name, entry in info.items():
            fn = entry.get("file_name") if isinstance(entry, dict) else None
            if isinstance(fn, str) and (folder / fn).resolve() == file:
                return DatasetEntry(name, entry, folder)
        if folder.parent == folder:
            break
        folder = folder.parent
    return None


def schema_from_entry(entry: dict[str, Any], name: str = "", first_row: Any = None) -> Schema:
    """The Schema LLaMA-Factory reads rows with, for this entry. `first_row` only tells sharegpt from the
    OpenAI `messages` shape for display."""
    cols = entry.get("columns") if isinstance(entry.get("columns"), dict) else None
    col = (lambda key: cols.get(key)) if cols is not None else (lambda key: DEFAULT_COLUMNS.get(key))
    tags = entry.get("tags") if isinstance(entry.get("tags"), dict) else {}
    tag = {k: tags.get(k, DEFAULT_TAGS[k]) if tags.get(k) is not None else DEFAULT_TAGS[k] for k in TAGS}
    fmt = entry.get("formatting", "alpaca")
    ranking = bool(entry.get("ranking", False))
    task = PREFERENCE if ranking else FEEDBACK if col("kto_tag") else SUPERVISED
    common = dict(system=col("system"), tools=col("tools"), images=col("images"), videos=col("videos"),
                  audios=col("audios"), chosen=col("chosen") if ranking else None,
                  rejected=col("rejected") if ranking else None, kto_tag=col("kto_tag"),
                  source=name or "dataset_info.json")
    if fmt in ("sharegpt", "openai"):
        kind = MESSAGES if (tag["role_tag"] == "role" and col("messages") == "messages") else SHAREGPT
        return Schema(kind=kind, messages=col("messages") or "conversations", query=None,
                      role_tag=tag["role_tag"], content_tag=tag["content_tag"], user_tag=tag["user_tag"],
                      assistant_tag=tag["assistant_tag"], system_tag=tag["system_tag"],
                      observation_tag=tag["observation_tag"], function_tag=tag["function_tag"],
                      openai=fmt == "openai", task=task, **common)
    prompt, response = col("prompt"), col("response")
    if task == SUPERVISED and prompt and not response:
        task = PRETRAIN  # no response column: LLaMA-Factory reads the prompt as unsupervised text
    return Schema(kind=ALPACA, prompt=prompt or "instruction", query=col("query"), response=response or "output",
                  history=col("history"), task=task, **common)
