"""numpy for the lint's byte and column passes where the C extension is not built, imported without
a BLAS thread pool.

numpy starts OpenBLAS's worker threads when it is first imported, one per extra CPU, and they spin for a
while after start-up. The lint does no linear algebra, and on a 2-CPU machine those spinning threads take
the core that the second `--jobs` worker needs (bench/lint.py: ~0.2 s of CPU per process on 1M rows).
The thread count is read once, at that first import, so it is set only for the import and put back after:
processes started later (a training run) see the environment as it was.
"""

from __future__ import annotations

import os
import sys

from core.processes.environment import env_restored

_LIMITS = ("OPENBLAS_NUM_THREADS",)


def numpy_or_none():
    """The numpy module, or None when it is not installed."""
    if "numpy" in sys.modules:
        return sys.modules["numpy"]
    with env_restored(*_LIMITS):
        for name in _LIMITS:
            os.environ[name] = "1"
        try:
            import numpy
        except ImportError:
            return None
    return numpy
