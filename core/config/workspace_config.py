"""Which config is the workspace's: the one `devtune train`, `config show` and the wizard use (state's
`config_file`, else configs/train.yaml: core.config.files.current_config_path), and when a newly written
config becomes it. A file the person named (`config init --output`) is a side file."""

from __future__ import annotations

from pathlib import Path

from core.config.files import LoadedConfig, current_config_path, load_config, sidecar_path
from core.i18n import _
from core.workspace.layout import Workspace


def becomes_workspace_config(ws: Workspace, path: str, *, named: bool, make_default: bool = False) -> bool:
    """Whether a config written to `path` becomes the workspace's config (what `devtune train`, `config show`
    and the wizard use). A file written where the person named (`config init --output`) is a side file: the
    workspace's config stays the one it was, unless it is that same file, the workspace has none yet, or the
    person asks (`make_default`)."""
    if make_default or not named:
        return True
    current = current_config_path(ws)
    return ws.abs(current).resolve() == ws.abs(path).resolve() or not ws.abs(current).is_file()


def workspace_config_note(ws: Workspace, path: str) -> str:
    """Which config `path` is, in words: the workspace's own, or a side file beside it."""
    current = current_config_path(ws)
    if ws.abs(current).resolve() == ws.abs(path).resolve():
        return _("{path} is the workspace's config: devtune train, config show and the wizard use it", path=path)
    return _("{path} is a side file: devtune train, config show and the wizard use {current}; use this one with "
             "--config {path} (or make it the workspace's config: devtune config init --from-yaml {path} --output "
             "{path} --default)", path=path, current=current)


def recorded_config(ws: Workspace, path: str) -> LoadedConfig | None:
    """A YAML in the workspace that devtune wrote, read with the settings only its record holds (nodes, GPUs,
    launcher); None for any other file (it is imported as a person's LLaMA-Factory YAML)."""
    rel = ws.rel(ws.abs(path))
    if Path(rel).is_absolute() or not sidecar_path(ws, rel).is_file() or not ws.abs(rel).is_file():
        return None
    return load_config(ws, rel)
