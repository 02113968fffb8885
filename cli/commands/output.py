"""Small shared pieces for command handlers: JSON on stdout, messages on stderr, the workspace."""

from __future__ import annotations

import sys
from contextlib import contextmanager
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


@contextmanager
def reading(path):
    """An OS error while the block reads `path` becomes core's BadInput naming the file (exit 2, said once by
    cli.main); devtune's own errors (a refused overwrite is an OSError too) pass through as they are."""
    from core.errors import BadInput, DevtuneError

    try:
        yield
    except DevtuneError:
        raise
    except OSError as exc:
        from core.data.wording import os_reason
        from core.i18n import _

        raise BadInput(_("cannot read {path}: {error}", path=path, error=os_reason(exc))) from exc


def refuse_input(path) -> None:
    """The one message every data command gives for a file that cannot be a dataset (BadInput, exit 2)."""
    from core.data.reader import input_problem
    from core.errors import BadInput

    problem = input_problem(path)
    if problem is not None:
        raise BadInput(problem)


def given_path(args, name: str = "file"):
    """A path as given (relative to the current folder), else relative to the workspace."""
    from pathlib import Path

    p = Path(getattr(args, name)).expanduser()
    if not p.is_absolute() and not p.exists() and getattr(args, "workspace", None):
        candidate = workspace(args).abs(p)
        if candidate.exists() or name != "file":
            return candidate
    return p


def workspace(args):
    from core.workspace.layout import Workspace

    return Workspace.resolve(getattr(args, "workspace", None))


class StderrProgress:
    """Progress for work that may take more than two seconds, on stderr (also with --json, whose stdout
    holds only the report): `line(text)` relays a line as it is; `waiting(seconds)` says, every
    `every` seconds that nothing else was said, what is being waited for and for how long."""

    def __init__(self, what: str, every: float = 5.0) -> None:
        self.what, self.every = what, every
        self._quiet_since: float | None = 0.0  # seconds waited when something was last said

    def line(self, text: str) -> None:
        print("  " + text, file=sys.stderr, flush=True)
        self._quiet_since = None

    def waiting(self, seconds: float) -> None:
        from core.i18n import _

        if self._quiet_since is None:
            self._quiet_since = seconds
        elif seconds - self._quiet_since >= self.every:
            self._quiet_since = seconds
            print("  " + _("{what}: {s:.0f} s", what=self.what, s=seconds), file=sys.stderr, flush=True)
