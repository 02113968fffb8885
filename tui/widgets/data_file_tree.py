"""DataFileTree: the workspace's folders and its dataset-like files (json, jsonl, csv, tsv, txt, and the
spreadsheets convert reads: xlsx, xlsm, xls, ods)."""

from __future__ import annotations

from pathlib import Path
from typing import Iterable

from textual.widgets import DirectoryTree

from core.data.spreadsheet import SPREADSHEET_SUFFIXES

DATA_SUFFIXES = {".json", ".jsonl", ".csv", ".tsv", ".txt", *SPREADSHEET_SUFFIXES}
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

    def _populate_node(self, node, content) -> None:
        """The workspace's `data/` opens by itself: that is where the sample files and the person's own
        datasets are, so the first thing on screen is a file to pick."""
        super()._populate_node(node, content)
        if node is self.root:
            for child in node.children:
                if child.data is not None and child.data.path.name == "data" and not child.is_expanded:
                    child.expand()

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
