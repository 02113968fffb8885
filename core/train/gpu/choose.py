"""Which GPU backend to use here, and why: `choose_backend() -> (backend | None, reason)`.

Automatic order: the amdsmi library, the `amd-smi` CLI, `rocm-smi`, NVML, keeping those of the vendor the
machine trains on (core.setup.machine_kind: an AMD iGPU beside an NVIDIA card gets NVML). The reason names the
backend chosen and why each one before it was passed over, so the panel can show it; where none
works, the reason says plainly that this machine has no GPU (a CPU run) and why each failed. The reason is
a Said (core.i18n): the sampler, a process of its own, saves it as data beside its text, so the panel says
it in the reader's language (`status_reason`).

`DEVTUNE_GPU_BACKEND` forces a choice: `amdsmi`, `amd-smi`, `rocm-smi`, `nvml`, `none`, or
`replay:<path to a gpu.jsonl>` (what the CPU demo uses; nothing pretends a GPU exists otherwise).
"""

from __future__ import annotations

import os
from typing import Callable

from core.i18n import Said, said
from core.setup.machine_kind import MachineKind
from core.train.gpu.backend import GpuBackend, GpuBackendUnavailable

ENV_BACKEND = "DEVTUNE_GPU_BACKEND"
AUTO_ORDER = ("amdsmi", "amd-smi", "rocm-smi", "nvml")
# The backends of each machine kind (core.setup.machine_kind decides the kind): a machine samples the GPUs it
# trains on, so an AMD iGPU beside an NVIDIA card is never the panel's GPU.
VENDOR_BACKENDS = {"rocm": ("amdsmi", "amd-smi", "rocm-smi"), "nvidia": ("nvml",)}


def backend_label(name: str) -> str:
    """A GPU backend as people read it in the reason line ("amdsmi library", "amd-smi CLI", ...)."""
    return {"amdsmi": said("amdsmi library"), "amd-smi": said("amd-smi CLI"), "rocm-smi": "rocm-smi",
            "nvml": "NVML", "replay": said("replay")}.get(name, name)


def why_unavailable(exc: GpuBackendUnavailable) -> str:
    """What a backend said when it could not open: its Said, kept as data (or the library's own text)."""
    first = exc.args[0] if exc.args else ""
    return first if isinstance(first, Said) else str(exc)


def listed(items: list) -> str:
    """Reasons one after another ("a; b; c"), kept as data when they are."""
    if not items:
        return ""
    out = items[0]
    for item in items[1:]:
        out = said("{first}; {then}", first=out, then=item)
    return out


def status_reason(status: dict | None) -> str:
    """A sampler's status file's reason in the reader's language: said again from `reason_words` (the sampler
    ran in its own process and language), else its text as written."""
    from core.i18n import reworded

    status = status or {}
    words = status.get("reason_words")
    return reworded(str(status.get("reason") or ""), words if isinstance(words, dict) else None)


def _openers() -> dict[str, Callable[[], GpuBackend]]:
    from core.train.gpu.amd_smi import open_amd_smi_cli
    from core.train.gpu.amdsmi_lib import open_amdsmi_lib
    from core.train.gpu.nvml import open_nvml
    from core.train.gpu.rocm_smi import open_rocm_smi

    return {"amdsmi": open_amdsmi_lib, "amd-smi": open_amd_smi_cli, "rocm-smi": open_rocm_smi, "nvml": open_nvml}


def choose_backend(prefer: str | None = None, *, replay: str | os.PathLike | None = None,
                   openers: dict[str, Callable[[], GpuBackend]] | None = None,
                   machine: MachineKind | None = None) -> tuple[GpuBackend | None, str]:
    """The first backend that works (or the one asked for) and a one-line reason. Automatic choice samples
    the vendor the machine trains on (`machine`, probed here when not given and the real backends are
    used): on an NVIDIA machine with a Ryzen iGPU, NVML, never the iGPU through amdsmi."""
    if replay is not None:
        prefer = f"replay:{replay}"
    if not prefer:
        from core.errors import BadInput
        from core.settings import current

        try:
            prefer = current().gpu_backend
        except BadInput as exc:  # the front-ends stop on it first; a sampler says it and samples nothing
            return None, exc.args[0] if exc.args and isinstance(exc.args[0], Said) else str(exc)
    prefer = (prefer or "auto").strip()
    if prefer == "none":
        return None, said("GPU sampling is off ({var}=none)", var=ENV_BACKEND)
    if prefer.startswith("replay:"):
        from core.train.gpu.history import open_replay

        path = prefer.split(":", 1)[1]
        try:
            backend = open_replay(path)
        except GpuBackendUnavailable as exc:
            return None, said("replay of {file} failed: {why}", file=path, why=why_unavailable(exc))
        return backend, said("replay of {file} (recorded samples, not this machine's GPUs)", file=path)
    real = openers is None
    openers = openers if openers is not None else _openers()
    if prefer != "auto":
        if prefer not in openers:
            return None, said("unknown GPU backend {name!r}; choose one of {names}", name=prefer,
                           names=", ".join((*AUTO_ORDER, "replay:PATH", "none")))
        order = (prefer,)
    else:
        if machine is None and real:
            from core.setup.machine_kind import probe_this_machine

            machine = probe_this_machine()
        vendor = VENDOR_BACKENDS.get(machine.kind if machine else "", AUTO_ORDER)
        order = tuple(name for name in AUTO_ORDER if name in openers and name in vendor)
    failures: list[str] = []  # Said "{backend}: {why}" of each backend that did not open
    for name in order:
        try:
            backend = openers[name]()
        except GpuBackendUnavailable as exc:
            failures.append(said("{backend}: {why}", backend=backend_label(name), why=why_unavailable(exc)))
            continue
        aside = (said(" (not sampled: {gpus})", gpus="; ".join(machine.set_aside))
                 if prefer == "auto" and machine and machine.set_aside else "")
        if failures:
            return backend, said("{backend} (passed over: {failures}){aside}", backend=backend_label(name),
                                 failures=listed(failures), aside=aside)
        return backend, said("{backend}{aside}", backend=backend_label(name), aside=aside)
    if prefer != "auto":
        return None, said("the {backend} backend does not work here: {why}", backend=backend_label(prefer),
                          why=failures[0].values["why"])
    if machine and machine.kind != "cpu":
        return None, said("none of the {kind} GPU backends works: {failures}", kind=machine.kind,
                          failures=listed(failures))
    return None, said("no GPU on this machine (CPU run): {failures}", failures=listed(failures))
