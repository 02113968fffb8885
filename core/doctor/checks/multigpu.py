"""Multi-GPU communication: RCCL's kernel-command-line requirement (iommu=pt) and the NCCL_* switches
that turn peer-to-peer off."""

from __future__ import annotations

from core.doctor.evidence import Evidence
from core.doctor.facts import HARDWARE, facts
from core.doctor.fixes import in_container
from core.doctor.verdict import Judgement, ok, skip, verdict, warn
from core.i18n import _

NEEDS = HARDWARE + ("host",)
GRUB_FIX = ("sudo sed -i 's/^GRUB_CMDLINE_LINUX_DEFAULT=\"/&iommu=pt /' /etc/default/grub\n"
            "sudo update-grub && sudo reboot")


def _single(ev: Evidence) -> Judgement | None:
    f = facts(ev)
    if f.kind == "cpu":
        return skip(_("no GPU on this machine"))
    if f.gpu_count < 2:
        return skip(_("{n} GPU: nothing to communicate with", n=f.gpu_count))
    return None


@verdict("multigpu.iommu", "multigpu", NEEDS, lambda: _("Kernel command line has iommu=pt (RCCL)"))
def judge_iommu(ev: Evidence) -> Judgement:
    if (single := _single(ev)) is not None:
        return single
    f = facts(ev)
    if f.kind != "rocm":
        return skip(_("iommu=pt is an AMD RCCL requirement; NVIDIA does not need it"))
    cmdline = ev.files.get("/proc/cmdline")
    if cmdline is None:
        return warn(_("could not read /proc/cmdline"), "cat /proc/cmdline", "")
    if f.kernel_args.get("iommu") == "pt":
        return ok(_("iommu=pt is on the kernel command line"))
    host = _("on the host (the container shares its kernel)") if in_container(ev) else ""
    p2p_off = ev.env.get("NCCL_P2P_DISABLE") == "1"
    workaround = _("NCCL_P2P_DISABLE=1 is set as a workaround meanwhile") if p2p_off else ""
    return warn(
        " ".join(filter(None, [
            _("iommu=pt is missing from the kernel command line: RCCL warns 'Missing \"iommu=pt\" from kernel "
              "command line which can lead to system instablity or hang!' and multi-GPU training can hang"),
            workaround])),
        ("# " + host + "\n" if host else "") + GRUB_FIX +
        ("" if p2p_off else "\nexport NCCL_P2P_DISABLE=1   # " + _("until the reboot: slower, but no hang")),
        "ROCm/rccl#1026, #1129, #1454; ROCm/vllm#390",
    )


@verdict("multigpu.p2p", "multigpu", NEEDS, lambda: _("Peer-to-peer GPU communication is not turned off"))
def judge_p2p(ev: Evidence) -> Judgement:
    if (single := _single(ev)) is not None:
        return single
    f = facts(ev)
    switched = {k: ev.env[k] for k in ("NCCL_P2P_DISABLE", "NCCL_SHM_DISABLE") if ev.env.get(k) == "1"}
    extra = {k: ev.env[k] for k in ("NCCL_SOCKET_IFNAME", "NCCL_IB_DISABLE", "HSA_FORCE_FINE_GRAIN_PCIE",
                                    "NCCL_DEBUG") if k in ev.env}
    seen = " ".join(f"{k}={v}" for k, v in {**switched, **extra}.items())
    if not switched:
        return ok(_("NCCL/RCCL defaults ({env})", env=seen or _("no NCCL_* switches set")))
    if f.kind == "rocm" and "NCCL_P2P_DISABLE" in switched and f.kernel_args.get("iommu") != "pt":
        return ok(_("{env}: the workaround while iommu=pt is missing (slower, see the iommu check)", env=seen))
    return warn(_("{env}: GPU-to-GPU traffic goes through host memory, which makes multi-GPU training slower",
                  env=seen),
                "unset " + " ".join(switched), "ROCm/vllm#390")
