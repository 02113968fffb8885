"""Environment variables changed for a block of code only (a child process's start, an import, a
rendering in another language), then put back as they were: set again, or removed when they were
absent."""

from __future__ import annotations

import os
from contextlib import contextmanager
from typing import Iterator


@contextmanager
def env_restored(*names: str) -> Iterator[None]:
    saved = {name: os.environ.get(name) for name in names}
    try:
        yield
    finally:
        for name, value in saved.items():
            if value is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = value
