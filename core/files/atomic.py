"""Atomic file writes: a temporary file in the same folder, fsync, then os.replace.

A reader never sees half a file, and a crash mid-write leaves the old file intact.
`write_new` refuses to replace a file that already exists unless asked: a user's own
file is never overwritten silently.
"""

from __future__ import annotations

import os
import tempfile
from contextlib import contextmanager
from pathlib import Path
from typing import IO, Iterator

from core.errors import BadInput
from core.i18n import _


class FileExistsRefused(BadInput, FileExistsError):
    """Raised when a write would replace an existing file and overwriting was not asked for."""

    def __init__(self, path: Path):
        super().__init__(_("{path} already exists; choose another name or pass --force to replace it", path=path))
        self.path = path


@contextmanager
def atomic_open(path: str | os.PathLike, mode: str = "w", *, encoding: str | None = "utf-8",
                overwrite: bool = True, file_mode: int | None = None) -> Iterator[IO]:
    """Open a temporary sibling of `path` for writing; on success it replaces `path` atomically.

    On an exception the temporary file is removed and `path` is untouched.
    """
    target = Path(path)
    if not overwrite and target.exists():
        raise FileExistsRefused(target)
    target.parent.mkdir(parents=True, exist_ok=True)
    binary = "b" in mode
    fd, tmp = tempfile.mkstemp(prefix=f".{target.name}.", suffix=".tmp", dir=target.parent)
    try:
        if file_mode is not None:
            os.fchmod(fd, file_mode)
        with os.fdopen(fd, mode, encoding=None if binary else encoding, newline=None if binary else "") as fh:
            yield fh
            fh.flush()
            os.fsync(fh.fileno())
        if not overwrite and target.exists():
            raise FileExistsRefused(target)
        os.replace(tmp, target)
    except BaseException:
        try:
            os.unlink(tmp)
        except FileNotFoundError:
            pass
        raise


def write_atomic(path: str | os.PathLike, data: str | bytes, *, overwrite: bool = True,
                 file_mode: int | None = None) -> Path:
    mode = "wb" if isinstance(data, bytes) else "w"
    with atomic_open(path, mode, overwrite=overwrite, file_mode=file_mode) as fh:
        fh.write(data)
    return Path(path)


def write_new(path: str | os.PathLike, data: str | bytes, *, force: bool = False,
              file_mode: int | None = None) -> Path:
    """Write a file that must not exist yet (unless `force`)."""
    return write_atomic(path, data, overwrite=force, file_mode=file_mode)
