"""Which preset a workspace without a training config starts from: `cpu-demo` where the demo's tiny
model has been built (`devtune demo`), else `lora-1gpu`. The Config step and `devtune config init`
without --preset both ask here."""

from __future__ import annotations


def starting_preset(ws) -> str:
    from core.setup.tinymodel import TINY_NAME

    return "cpu-demo" if (ws.models_dir / TINY_NAME / "config.json").exists() else "lora-1gpu"
