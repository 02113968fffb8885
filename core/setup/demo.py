"""Seed a demo workspace: devtune's messy sample data and the tiny CPU model.

Re-running is cheap and safe: files the person has changed are kept, the model is built once.
"""

from __future__ import annotations

import filecmp
import shutil
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

from core.i18n import _
from core.workspace.layout import Workspace



def _samples_dir() -> Path:
    """The source checkout's data/, else the copy a wheel installs (pyproject's data-files: share/devtune/data)."""
    checkout = Path(__file__).resolve().parents[2] / "data"
    installed = Path(sys.prefix) / "share" / "devtune" / "data"
    return checkout if checkout.is_dir() or not installed.is_dir() else installed


SAMPLES_DIR = _samples_dir()
SAMPLE_SUFFIXES = (".jsonl", ".json", ".txt", ".csv", ".tsv")


@dataclass
class DemoReport:
    workspace: Path
    copied: list[str] = field(default_factory=list)
    unchanged: list[str] = field(default_factory=list)
    kept_edited: list[str] = field(default_factory=list)
    model_dir: Path | None = None
    model_built: bool = False

    def lines(self) -> list[str]:
        out = [_("demo workspace: {path}", path=self.workspace)]
        if self.copied:
            out.append("  " + _("sample data copied: {files}", files=", ".join(self.copied)))
        if self.unchanged:
            out.append("  " + _("sample data already there: {files}", files=", ".join(self.unchanged)))
        if self.kept_edited:
            out.append("  " + _("kept your edited files (not overwritten): {files}", files=", ".join(self.kept_edited)))
        if self.model_dir:
            if self.model_built:
                out.append("  " + _("tiny model built: {path}", path=self.model_dir))
            else:
                out.append("  " + _("tiny model already built: {path}", path=self.model_dir))
        return out


def sample_files(samples_dir: Path = SAMPLES_DIR) -> list[Path]:
    if not samples_dir.is_dir():
        raise FileNotFoundError(_("devtune's sample data folder {path} is missing; reinstall devtune (its wheel "
                                  "installs the samples under share/devtune/data) or run it from its source "
                                  "checkout (`make demo`)", path=samples_dir))
    return sorted(p for p in samples_dir.iterdir() if p.is_file() and p.suffix.lower() in SAMPLE_SUFFIXES)


def seed_demo(ws: Workspace, *, with_model: bool = True,
              progress: Callable[[str], None] | None = None) -> DemoReport:
    say = progress or (lambda _m: None)
    ws.ensure()
    report = DemoReport(ws.root)
    for src in sample_files():
        dst = ws.data_dir / src.name
        if not dst.exists():
            shutil.copy2(src, dst)
            report.copied.append(src.name)
        elif filecmp.cmp(src, dst, shallow=False):
            report.unchanged.append(src.name)
        else:
            report.kept_edited.append(src.name)
    if with_model:
        from core.setup.tinymodel import TINY_NAME, build_tiny_model

        model_dir = ws.models_dir / TINY_NAME
        report.model_dir = model_dir
        if not (model_dir / "devtune_model.json").exists():
            if model_dir.exists():
                shutil.rmtree(model_dir)  # a build interrupted half-way: devtune's own folder
            try:
                build_tiny_model(model_dir, SAMPLES_DIR, progress=say)
            except ImportError as exc:
                raise ValueError(_("building the tiny model needs the training stack ({name} is missing); "
                                   "run `make demo`, which installs it", name=exc.name)) from exc
            report.model_built = True
    return report
