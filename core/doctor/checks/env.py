"""Environment variables that change which GPUs are used and how: HSA_OVERRIDE_GFX_VERSION, the
*_VISIBLE_DEVICES filters, PYTORCH_ROCM_ARCH / GPU_ARCHS."""

from __future__ import annotations

import re

from core.doctor.evidence import Evidence
from core.doctor.facts import HARDWARE, facts
from core.doctor.verdict import Judgement, fail, ok, skip, verdict, warn
from core.i18n import _

NEEDS = HARDWARE + ("host",)


@verdict("env.hsa_override", "env", NEEDS, lambda: _("HSA_OVERRIDE_GFX_VERSION is not set on Instinct"))
def judge_hsa_override(ev: Evidence) -> Judgement:
    f = facts(ev)
    value = ev.env.get("HSA_OVERRIDE_GFX_VERSION")
    fix = ("unset HSA_OVERRIDE_GFX_VERSION\n"
           "sed -i '/HSA_OVERRIDE_GFX_VERSION/d' ~/.bashrc ~/.profile   # " + _("so a new login does not set it again"))
    if f.kind != "rocm":
        if value is None:
            return skip(_("no AMD GPU stack on this machine"))
        return warn(_("HSA_OVERRIDE_GFX_VERSION={value} is set but there is no AMD GPU: it does nothing here",
                      value=value), fix, "")
    if value is None:
        return ok(_("not set (right: Instinct GPUs are supported as they are)"))
    if f.instinct:
        return fail(_("HSA_OVERRIDE_GFX_VERSION={value} on {gpus}: a consumer-GPU workaround that on supported "
                      "hardware causes kernel crashes, KFD interrupt overflows and GPU resets",
                      value=value, gpus=", ".join(f.gfx_list) or _("an Instinct GPU")),
                    fix, "ROCm/rocm-systems PR#3461; tensorflow-upstream#1800")
    return ok(_("HSA_OVERRIDE_GFX_VERSION={value} on {gpus}, a consumer GPU where this workaround is common",
                value=value, gpus=", ".join(f.gfx_list) or "?"))


def parse_indexes(value: str) -> list[str]:
    return [p.strip() for p in value.split(",") if p.strip()]


@verdict("env.visible_devices", "env", NEEDS,
         lambda: _("ROCR_VISIBLE_DEVICES / HIP_VISIBLE_DEVICES / CUDA_VISIBLE_DEVICES agree"))
def judge_visible(ev: Evidence) -> Judgement:
    f = facts(ev)
    names = ("ROCR_VISIBLE_DEVICES", "HIP_VISIBLE_DEVICES", "CUDA_VISIBLE_DEVICES") if f.kind == "rocm" \
        else ("CUDA_VISIBLE_DEVICES",)
    env = {k: ev.env[k] for k in names if k in ev.env}
    shown = " ".join(f"{k}={v}" if v.strip() else f"{k}=''" for k, v in env.items())
    if f.kind == "cpu":
        return skip(_("no GPU on this machine"))
    if not env:
        return ok(_("none set: all {n} GPUs are visible", n=f.gpu_count))
    empty = [k for k, v in env.items() if not v.strip() or v.strip() == "-1"]
    if empty:
        return fail(_("{env}: this hides every GPU", env=shown), "unset " + " ".join(empty), "")
    for key, value in env.items():
        for index in parse_indexes(value):
            if index.isdigit() and f.gpu_count and int(index) >= f.gpu_count:
                return fail(_("{env}: GPU {index} does not exist (there are {n}, numbered from 0)",
                              env=shown, index=index, n=f.gpu_count),
                            f"export {key}={','.join(str(i) for i in range(f.gpu_count))}", "")
    if len(env) > 1:
        keep = "ROCR_VISIBLE_DEVICES" if "ROCR_VISIBLE_DEVICES" in env else next(iter(env))
        others = [k for k in env if k != keep]
        return warn(_("{env}: ROCR_VISIBLE_DEVICES is applied first and HIP/CUDA_VISIBLE_DEVICES then index into "
                      "the GPUs left, so the two filters compound. Set only one (on Linux, ROCR_VISIBLE_DEVICES)",
                      env=shown),
                    "unset " + " ".join(others) + f"   # keep {keep}={env[keep]}", "pytorch/pytorch PR#142292")
    key, value = next(iter(env.items()))
    return ok(_("{env}: {count} of {n} GPUs visible to training", env=shown, count=len(parse_indexes(value)),
                n=f.gpu_count or "?"))


def parse_arch_list(value: str) -> list[str]:
    return [a.split(":")[0] for a in re.split(r"[;,\s]+", value) if a.strip()]


@verdict("env.rocm_arch", "env", NEEDS, lambda: _("PYTORCH_ROCM_ARCH / GPU_ARCHS match the GPU"))
def judge_rocm_arch(ev: Evidence) -> Judgement:
    f = facts(ev)
    env = {k: ev.env[k] for k in ("PYTORCH_ROCM_ARCH", "GPU_ARCHS") if ev.env.get(k)}
    if f.kind != "rocm":
        return skip(_("no AMD GPU stack on this machine"))
    gfx = f.gfx_list
    if not env:
        return ok(_("not set: extensions built from source (flash-attn, DeepSpeed ops) target the GPU found "
                    "at build time"))
    if not gfx:
        return skip(_("{env} is set, but the GPU's gfx is unknown", env=" ".join(f"{k}={v}" for k, v in env.items())))
    for key, value in env.items():
        archs = parse_arch_list(value)
        if "native" in archs:
            continue
        missing = [g for g in gfx if g not in archs]
        if missing:
            return fail(_("{key}={value}, but the GPU is {gfx}: what is built with it stops with "
                          "hipErrorNoBinaryForGpu (\"program ISA ... is not compatible with the device ISA\")",
                          key=key, value=value, gfx=" ".join(gfx)),
                        f'export {key}="{";".join(gfx)}"   # ' +
                        _("then rebuild what was built with the old value (flash-attn, DeepSpeed ops)"),
                        "ROCm/flash-attention#120")
    return ok(" ".join(f"{k}={v}" for k, v in env.items()) + " " + _("includes {gfx}", gfx=" ".join(gfx)))
