"""The workspace's keep list: contact details that are the business's own and public (its hotline, its support
address), which the personal-data rule neither reports nor masks.

Masking personal data before training is right; masking the company's own `400-820-8820` teaches the model to
answer `400-***-8820`. The list is `.devtune/keep.txt` in the workspace, one value per line (`#` starts a
comment), written by `devtune data fix FILE --keep VALUE` (or `data lint --keep`) and the Data step's "keep"
of a personal-data finding. A value matches however it is spaced or dashed (400 820 8820 = 400-820-8820) and,
for an e-mail address, in any case.

Lint and fix read the list of the workspace that holds the file (the nearest folder above it with a
`.devtune/`), so the CLI and the wizard judge a file alike."""

from __future__ import annotations

import re
from pathlib import Path

KEEP_FILE = Path(".devtune") / "keep.txt"
_SEPARATORS = re.compile(r"[\s().\-]")


def normalized(value: str) -> str:
    """The form values are compared in: no spaces, dashes, dots or brackets, lower case."""
    return _SEPARATORS.sub("", value).lower()


def workspace_of(path: str | Path) -> Path | None:
    """The workspace that holds this file: the nearest folder above it with a .devtune folder."""
    here = Path(path).expanduser().resolve()
    for folder in (here, *here.parents) if here.is_dir() else here.parents:
        if (folder / ".devtune").is_dir():
            return folder
    return None


def load_keep(root: str | Path | None) -> frozenset[str]:
    """The normalized values of the workspace's keep list (none when it has no list)."""
    if root is None:
        return frozenset()
    try:
        text = (Path(root) / KEEP_FILE).read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError):
        return frozenset()
    return frozenset(normalized(v) for v in (line.split("#", 1)[0].strip() for line in text.splitlines()) if v)


def keep_for(path: str | Path) -> frozenset[str]:
    """The keep list that applies to this data file."""
    return load_keep(workspace_of(path))


def add_keep(root: str | Path, values: list[str]) -> list[str]:
    """Add values to the workspace's keep list (atomically); returns the ones that were not on it yet."""
    from core.files.atomic import write_atomic

    path = Path(root) / KEEP_FILE
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        text = ("# contact details that are the business's own and public: devtune's personal-data lint and fix\n"
                "# leave them as they are (one per line)\n")
    have = load_keep(root)
    new = [v.strip() for v in dict.fromkeys(values) if v.strip() and normalized(v) not in have]
    if new:
        path.parent.mkdir(parents=True, exist_ok=True)
        write_atomic(path, text + ("" if text.endswith("\n") or not text else "\n") + "".join(v + "\n" for v in new))
    return new
