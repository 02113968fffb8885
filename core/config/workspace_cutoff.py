"""The cutoff_len the data checks judge lengths against: the workspace's config's (what training will cut at),
else LLaMA-Factory's default. `devtune data lint` / `data stats` and the Data step both ask here, so a config of
`cutoff_len: 256` is what "above cutoff_len" means everywhere, not 2048."""

from __future__ import annotations

from core.workspace.layout import Workspace

LF_DEFAULT_CUTOFF = 2048  # LLaMA-Factory's own default cutoff_len


def workspace_cutoff_len(ws: Workspace | None) -> int:
    """The workspace config's cutoff_len (state's config_file, else configs/train.yaml), else 2048."""
    if ws is None:
        return LF_DEFAULT_CUTOFF
    from core.config.files import current_config_path
    from core.config.yaml_in import ImportProblem, load_lf_yaml_text

    try:
        value = load_lf_yaml_text(ws.abs(current_config_path(ws)).read_text(encoding="utf-8")).get("cutoff_len")
    except (OSError, UnicodeDecodeError, ImportProblem):
        return LF_DEFAULT_CUTOFF
    return value if isinstance(value, int) and not isinstance(value, bool) and value > 0 else LF_DEFAULT_CUTOFF
