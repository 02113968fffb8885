"""Snapshot tests render each step at a fixed size in a workspace at a fixed path, with recorded
inputs only (a replayed doctor machine, recorded runs), so a screen looks the same on every machine."""

import json
import shutil
from pathlib import Path

import pytest

from core.workspace.layout import Workspace

ROOT = Path(__file__).resolve().parents[2]
FIXTURES = ROOT / "tests" / "fixtures"
BASE = Path("/tmp/devtune-snapshots")


@pytest.fixture
def snap_ws(request, monkeypatch):
    """A fresh workspace at /tmp/devtune-snapshots/<test name> (paths show on screen, so they are fixed)."""
    monkeypatch.setenv("DEVTUNE_LANG", "en")
    monkeypatch.delenv("DEVTUNE_THEME", raising=False)
    root = BASE / request.node.name.replace("[", "-").replace("]", "")
    if root.exists():
        shutil.rmtree(root)
    ws = Workspace(root / "ws").ensure()
    for sample in (ROOT / "data").iterdir():
        shutil.copy(sample, ws.data_dir / sample.name)
    yield ws
    shutil.rmtree(root, ignore_errors=True)


def cache_templates(ws: Workspace) -> None:
    """LLaMA-Factory's template list, as the Config step caches it (reading it takes a subprocess)."""
    from core.config.templates import BUILTIN_TEMPLATES, installed_llamafactory_version

    ws.cache_dir.mkdir(parents=True, exist_ok=True)
    (ws.cache_dir / "lf_templates.json").write_text(json.dumps({
        "version": installed_llamafactory_version(), "names": list(BUILTIN_TEMPLATES), "hub": {}}))
