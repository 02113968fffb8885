"""What every GPU backend is, and the one way devtune runs a GPU tool.

A backend is opened once (`open_...()` functions raise `GpuBackendUnavailable` with the reason),
then `sample()` is called once per tick and returns one GpuSample per GPU, and `close()` releases
it. Library backends keep one handle open for their whole life (amdgpu_top's discipline: one
metrics call per GPU per tick, never a tool start per value).
"""

from __future__ import annotations

import subprocess
from typing import Protocol

from core.i18n import said
from core.processes.helpers import run_helper
from core.train.gpu.sample import GpuSample

TOOL_TIMEOUT = 10.0  # seconds; amd-smi and rocm-smi are Python programs that start slowly


class GpuBackendUnavailable(Exception):
    """This backend cannot sample here; str(exc) says why in a few words."""


class GpuBackend(Protocol):
    name: str  # "amdsmi", "amd-smi", "rocm-smi", "nvml", "replay"

    def sample(self) -> list[GpuSample]: ...

    def close(self) -> None: ...


def run_tool(argv: list[str], timeout: float = TOOL_TIMEOUT) -> str:
    """stdout of a GPU tool (argv list, never a shell, always a timeout); raises GpuBackendUnavailable."""
    try:
        proc = run_helper(argv, timeout=timeout)
    except FileNotFoundError:
        raise GpuBackendUnavailable(said("{tool} not found on PATH", tool=argv[0])) from None
    except subprocess.TimeoutExpired:
        raise GpuBackendUnavailable(said("{tool} did not answer within {seconds} s", tool=argv[0],
                                       seconds=f"{timeout:.0f}")) from None
    except OSError as exc:
        raise GpuBackendUnavailable(f"{argv[0]}: {exc}") from None
    if proc.returncode != 0:
        last = (proc.stderr.strip() or proc.stdout.strip()).splitlines()[-1:] or [""]
        raise GpuBackendUnavailable(said("{command} exited {code}: {message}", command=" ".join(argv[:2]),
                                      code=proc.returncode, message=last[0][:160]))
    return proc.stdout
