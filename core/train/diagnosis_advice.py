"""A rule's machine-specific advice decided by the machine the log describes.

A rule (core.train.failure_rules) is written once for every machine; some of its advice differs by machine, and
the log says which one this is:

- hip-no-binary, hip-invalid-device-function: HSA_OVERRIDE_GFX_VERSION from the gfx target the log prints
  (gfx103x -> 10.3.0, gfx110x-gfx115x -> 11.0.0, an Instinct gfx90a/gfx942/gfx950 -> unset); no gfx printed:
  the command that names it and the mapping.
- deepspeed-no-toolkit: CUDA's toolkit commands on a CUDA machine (ds_accelerator cuda, a cuXXX extensions root,
  CUDA_HOME in the error), ROCm's on a ROCm one.
- no-gpu-visible: the vendor's container flags (AMD: --device /dev/kfd --device /dev/dri --group-add video;
  NVIDIA: --gpus all) beside the groups of a user outside a container.
"""

from __future__ import annotations

import re

from core.i18n import _

GFX = re.compile(r"\b(gfx[0-9a-f]{3,4})\b")
INSTINCT = ("gfx908", "gfx90a", "gfx940", "gfx941", "gfx942", "gfx950")


def override_for(gfx: str) -> str | None:
    """The HSA_OVERRIDE_GFX_VERSION a consumer GPU runs with (None: an Instinct GPU, or one with no close target)."""
    if gfx in INSTINCT:
        return None
    if re.fullmatch(r"gfx103[0-9a-f]", gfx):
        return "10.3.0"
    if re.fullmatch(r"gfx11[0-5][0-9a-f]", gfx):
        return "11.0.0"
    return None


def agree_with_log(found: list, log_text: str) -> list:
    for diagnosis in found:
        if diagnosis.id in ("hip-no-binary", "hip-invalid-device-function"):
            _gfx_advice(diagnosis, log_text)
        elif diagnosis.id == "deepspeed-no-toolkit":
            _toolkit_advice(diagnosis, log_text)
        elif diagnosis.id == "no-gpu-visible":
            _visibility_advice(diagnosis, log_text)
    return found


def _gfx_advice(diagnosis, log_text: str) -> None:
    gfx = next((g for g in GFX.findall(log_text) if g != "gfx000"), None)
    build = "pip install --force-reinstall torch --index-url https://download.pytorch.org/whl/rocm6.4"
    if gfx is None:
        diagnosis.fix = _("The installed torch (or an extension) has no kernels for this GPU's gfx target; the log "
                          "does not name it, rocminfo does. A consumer Radeon the build lacks runs with "
                          "HSA_OVERRIDE_GFX_VERSION set to the close supported target: "
                          "HSA_OVERRIDE_GFX_VERSION=10.3.0 for gfx103x (RX 6000), 11.0.0 for gfx110x-gfx115x "
                          "(RX 7000 and newer); on an Instinct GPU (gfx90a, gfx942) unset it and install the ROCm "
                          "torch built for it.")
        diagnosis.commands = ["rocminfo | grep -o -m1 'gfx[0-9a-f]*'",
                              "HSA_OVERRIDE_GFX_VERSION=10.3.0 llamafactory-cli train configs/train.yaml  # gfx103x",
                              "HSA_OVERRIDE_GFX_VERSION=11.0.0 llamafactory-cli train configs/train.yaml  # gfx11xx",
                              build]
        return
    value = override_for(gfx)
    if value is None:
        diagnosis.fix = _("This GPU is {gfx}: install the ROCm torch (and extensions) built for {gfx}, and do not set "
                          "HSA_OVERRIDE_GFX_VERSION (an override maps it to another GPU's kernels).", gfx=gfx)
        diagnosis.commands = ["unset HSA_OVERRIDE_GFX_VERSION", build]
    else:
        diagnosis.fix = _("This GPU is {gfx}, a consumer target the ROCm build has no kernels for: run with "
                          "HSA_OVERRIDE_GFX_VERSION={value} (the close supported target), or install a torch built "
                          "for {gfx}.", gfx=gfx, value=value)
        diagnosis.commands = [f"HSA_OVERRIDE_GFX_VERSION={value} llamafactory-cli train configs/train.yaml", build]


def _toolkit_advice(diagnosis, log_text: str) -> None:
    cuda = re.search(r"ds_accelerator to cuda|_cu\d{3}\b|\+cu\d{3}|CUDA_HOME does not exist|nvcc", log_text)
    rocm = re.search(r"ROCM_HOME does not exist|\+rocm\d|_rocm\d|hipcc|/opt/rocm", log_text)
    if cuda and not rocm:  # DeepSpeed names a ROCm accelerator "cuda" too: a ROCm marker decides
        diagnosis.fix = _("This is a CUDA machine: install the CUDA toolkit (nvcc) of the CUDA version torch was "
                          "built with and export CUDA_HOME to it; or install DeepSpeed with the op prebuilt "
                          "(DS_BUILD_CPU_ADAM=1), or turn ZeRO offload off so the CPU-Adam op is not built.")
        diagnosis.commands = ["python -c \"import torch; print(torch.version.cuda)\"; which nvcc",
                              "export CUDA_HOME=/usr/local/cuda",
                              "DS_BUILD_CPU_ADAM=1 pip install --no-cache-dir --force-reinstall deepspeed"]
    elif rocm:
        diagnosis.fix = _("This is a ROCm machine: install ROCm's compiler (hipcc, in /opt/rocm) matching torch's "
                          "ROCm version and export ROCM_HOME to it; or install DeepSpeed with the op prebuilt.")
        diagnosis.commands = ["ls /opt/rocm/bin/hipcc", "export ROCM_HOME=/opt/rocm"]


def _visibility_advice(diagnosis, log_text: str) -> None:
    amd = re.search(r"HIP|hip\w*Error|/dev/kfd|rocm|ROCm", log_text)
    nvidia = re.search(r"NVIDIA|nvidia-smi|CUDA driver", log_text)
    if amd and not nvidia:
        diagnosis.fix = _("The process cannot open the AMD GPU's device nodes. In a container, start it with "
                          "--device /dev/kfd --device /dev/dri --group-add video --group-add render and check "
                          "rocminfo inside it; outside one, add the user to the video and render groups (and log "
                          "in again); devtune doctor checks HIP_VISIBLE_DEVICES and the torch build.")
        diagnosis.commands = ["docker run --device /dev/kfd --device /dev/dri --group-add video --group-add render ...",
                              "sudo usermod -aG render,video $USER", "devtune doctor"]
    elif nvidia and not amd:
        diagnosis.fix = _("The process sees no NVIDIA GPU. In a container, start it with --gpus all (the NVIDIA "
                          "container toolkit installed on the host); outside one, check the driver (nvidia-smi) and "
                          "CUDA_VISIBLE_DEVICES; devtune doctor checks the torch build.")
        diagnosis.commands = ["docker run --gpus all ...", "nvidia-smi", "devtune doctor"]
