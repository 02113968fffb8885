"""Small shared pieces for command handlers: JSON on stdout, messages on stderr, the workspace."""

from __future__ import annotations

import sys
from typing import Any


def emit_json(obj: Any) -> None:
    """One JSON document on stdout (orjson; pydantic models and dataclasses are accepted)."""
    import orjson

    if hasattr(obj, "model_dump"):
        obj = obj.model_dump(mode="json")
    sys.stdout.buffer.write(orjson.dumps(obj, option=orjson.OPT_INDENT_2 | orjson.OPT_NON_STR_KEYS) + b"\n")
    sys.stdout.flush()


def emit_json_line(obj: Any) -> None:
    """One compact JSON object per line (for --follow streams)."""
    import orjson

    if hasattr(obj, "model_dump"):
        obj = obj.model_dump(mode="json")
    sys.stdout.buffer.write(orjson.dumps(obj, option=orjson.OPT_NON_STR_KEYS) + b"\n")
    sys.stdout.flush()


def err(msg: str) -> None:
    print(f"devtune: {msg}", file=sys.stderr)


def workspace(args):
    from core.workspace.layout import Workspace

    return Workspace.resolve(getattr(args, "workspace", None))
