"""Which GPU backend to use here, and why: `choose_backend() -> (backend | None, reason)`.

Automatic order: the amdsmi library, the `amd-smi` CLI, `rocm-smi`, NVML. The reason names the
backend chosen and why each one before it was passed over, so the panel can show it; where none
works, the reason says plainly that this machine has no GPU (a CPU run) and why each failed.

`DEVTUNE_GPU_BACKEND` forces a choice: `amdsmi`, `amd-smi`, `rocm-smi`, `nvml`, `none`, or
`replay:<path to a gpu.jsonl>` (what the CPU demo uses; nothing pretends a GPU exists otherwise).
"""

from __future__ import annotations

import os
from typing import Callable

from core.i18n import _
from core.train.gpu.backend import GpuBackend, GpuBackendUnavailable

ENV_BACKEND = "DEVTUNE_GPU_BACKEND"
AUTO_ORDER = ("amdsmi", "amd-smi", "rocm-smi", "nvml")


def backend_label(name: str) -> str:
    """A GPU backend as people read it in the reason line ("amdsmi library", "amd-smi CLI", ...)."""
    return {"amdsmi": _("amdsmi library"), "amd-smi": _("amd-smi CLI"), "rocm-smi": "rocm-smi", "nvml": "NVML",
            "replay": _("replay")}.get(name, name)


def _openers() -> dict[str, Callable[[], GpuBackend]]:
    from core.train.gpu.amd_smi import open_amd_smi_cli
    from core.train.gpu.amdsmi_lib import open_amdsmi_lib
    from core.train.gpu.nvml import open_nvml
    from core.train.gpu.rocm_smi import open_rocm_smi

    return {"amdsmi": open_amdsmi_lib, "amd-smi": open_amd_smi_cli, "rocm-smi": open_rocm_smi, "nvml": open_nvml}


def choose_backend(prefer: str | None = None, *, replay: str | os.PathLike | None = None,
                   openers: dict[str, Callable[[], GpuBackend]] | None = None) -> tuple[GpuBackend | None, str]:
    """The first backend that works (or the one asked for) and a one-line reason."""
    if replay is not None:
        prefer = f"replay:{replay}"
    prefer = (prefer or os.environ.get(ENV_BACKEND, "") or "auto").strip()
    if prefer == "none":
        return None, _("GPU sampling is off ({var}=none)", var=ENV_BACKEND)
    if prefer.startswith("replay:"):
        from core.train.gpu.history import open_replay

        path = prefer.split(":", 1)[1]
        try:
            backend = open_replay(path)
        except GpuBackendUnavailable as exc:
            return None, _("replay of {file} failed: {why}", file=path, why=str(exc))
        return backend, _("replay of {file} (recorded samples, not this machine's GPUs)", file=path)
    openers = openers if openers is not None else _openers()
    if prefer != "auto":
        if prefer not in openers:
            return None, _("unknown GPU backend {name!r}; choose one of {names}", name=prefer,
                           names=", ".join((*AUTO_ORDER, "replay:PATH", "none")))
        order = (prefer,)
    else:
        order = tuple(name for name in AUTO_ORDER if name in openers)
    failures: list[str] = []
    for name in order:
        try:
            backend = openers[name]()
        except GpuBackendUnavailable as exc:
            failures.append(f"{backend_label(name)}: {exc}")
            continue
        if failures:
            return backend, _("{backend} (passed over: {failures})", backend=backend_label(name),
                              failures="; ".join(failures))
        return backend, backend_label(name)
    if prefer != "auto":
        return None, _("the {backend} backend does not work here: {why}", backend=backend_label(prefer),
                       why=failures[0].split(": ", 1)[1])
    return None, _("no GPU on this machine (CPU run): {failures}", failures="; ".join(failures))
