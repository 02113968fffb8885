"""DataFileTree: the workspace's folders and its dataset-like files (json, jsonl, csv, tsv, txt)."""

from __future__ import annotations

from pathlib import Path
from typing import Iterable

from textual.widgets import DirectoryTree

DATA_SUFFIXES = {".json", ".jsonl", ".csv", ".tsv", ".txt"}
HIDDEN_DIRS = {"saves", "exports", "models", "configs", "__pycache__", "node_modules"}


class DataFileTree(DirectoryTree):
    DEFAULT_CSS = """
    DataFileTree {
        height: 1fr;
        border: round $panel-lighten-2;
        border-title-color: $text-muted;
    }
    DataFileTree:focus {
        border: round $accent;
    }
    """

    def filter_paths(self, paths: Iterable[Path]) -> Iterable[Path]:
        out = []
        for p in paths:
            if p.name.startswith("."):
                continue
            try:
                if p.is_dir():
                    if p.name not in HIDDEN_DIRS:
                        out.append(p)
                elif p.suffix.lower() in DATA_SUFFIXES:
                    out.append(p)
            except OSError:
                continue
        return out
