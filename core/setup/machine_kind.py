"""Which GPUs devtune trains on here: AMD (ROCm), NVIDIA (CUDA) or none (CPU), decided once from what the
tools said, for the installer (which torch build), the doctor (which checks apply) and the GPU panels
(which backend to sample).

Facts, never the mere presence of a tool: `rocminfo` or /opt/rocm existing says ROCm is installed, not that
there is an AMD GPU worth training on (Transformer Lab #2382 installed ROCm wheels on NVIDIA machines for
that). Every GPU a tool lists is weighed, best first:

1. a discrete AMD GPU that ROCm and PyTorch's ROCm wheels target (Instinct, the supported Radeon cards);
2. an NVIDIA GPU that `nvidia-smi` lists (its driver answers);
3. any other discrete AMD GPU (ROCm may run it; devtune is tested on the first kind);
4. an integrated AMD GPU that is itself a training target (Ryzen AI Max "Strix Halo", gfx1151).

An integrated GPU (a Ryzen APU's "AMD Radeon Graphics": a few compute units sharing the CPU's memory) that
is not a target is set aside and said so, unless it is all there is and HSA_OVERRIDE_GFX_VERSION asks for
it. An AMD stack with no GPU listed (no access to /dev/kfd, a driver that did not load) still makes an AMD
machine when nothing else answers: the doctor's access and driver checks then say why.

Standard library only: the installer runs this with the system Python before any environment exists.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from core.i18n import _

# gfx -> (family, what a person calls it): AMD Instinct (CDNA). MI250/MI250X show one device per GCD.
INSTINCT = {
    "gfx908": ("CDNA1", "MI100"),
    "gfx90a": ("CDNA2", "MI210 / MI250 / MI250X"),
    "gfx942": ("CDNA3", "MI300X / MI300A / MI325X"),
    "gfx950": ("CDNA4", "MI350X / MI355X"),
}
# Radeon GPUs on ROCm's Linux support list, for which PyTorch's ROCm wheels carry kernels.
RADEON_TARGETS = {
    "gfx1030": "Radeon PRO W6800 / V620",
    "gfx1100": "Radeon RX 7900 / PRO W7900",
    "gfx1101": "Radeon RX 7800 / PRO W7800",
    "gfx1200": "Radeon RX 9060",
    "gfx1201": "Radeon RX 9070 / AI PRO R9700",
    "gfx1151": "Ryzen AI Max (Strix Halo)",
}
# The GPUs built into Ryzen processors (APUs), by gfx, for tools that do not say "APU" themselves
# (amd-smi and rocm-smi do not; rocminfo prints "Memory Properties: APU").
INTEGRATED_GFX = {
    "gfx902": "Raven Ridge", "gfx909": "Picasso", "gfx90c": "Renoir / Cezanne / Barcelo",
    "gfx1033": "Van Gogh", "gfx1035": "Rembrandt (Radeon 680M)", "gfx1036": "Raphael / Granite Ridge",
    "gfx1037": "Mendocino (Radeon 610M)", "gfx1103": "Phoenix / Hawk Point (Radeon 780M)",
    "gfx1150": "Strix Point (Radeon 890M)", "gfx1151": "Strix Halo (Radeon 8060S)", "gfx1152": "Krackan Point",
}


@dataclass(frozen=True)
class GpuSeen:
    """One GPU as a tool listed it."""

    vendor: str  # "amd" | "nvidia"
    name: str = ""
    gfx: str | None = None  # AMD: "gfx942"
    apu: bool | None = None  # rocminfo's "Memory Properties: APU"; None: the tool does not say
    source: str = ""  # "rocminfo", "amd-smi", "nvidia-smi", ...

    @property
    def integrated(self) -> bool:
        if self.vendor != "amd":
            return False
        return self.apu if self.apu is not None else self.gfx in INTEGRATED_GFX

    @property
    def target(self) -> bool:
        """A GPU PyTorch's wheels are built for and devtune trains on."""
        if self.vendor == "nvidia":
            return True
        return self.gfx in INSTINCT or self.gfx in RADEON_TARGETS or "Instinct" in self.name

    def label(self) -> str:
        return (self.name or ("AMD GPU" if self.vendor == "amd" else "NVIDIA GPU")) + \
            (f" ({self.gfx})" if self.gfx else "")


def rank(gpu: GpuSeen, override: bool = False) -> int | None:
    """1 (best) to 4 as in the module's list; None: not trained on (an integrated GPU that is no target)."""
    if gpu.vendor == "nvidia":
        return 2
    instinct = gpu.gfx in INSTINCT or "Instinct" in gpu.name  # MI300A is an APU and an Instinct
    if instinct or (gpu.target and not gpu.integrated):
        return 1
    if not gpu.integrated:
        return 3
    if gpu.target or override:
        return 4
    return None


def why_not_used(gpu: GpuSeen, chosen: str) -> str:
    """Why `gpu` is not trained on, on a machine whose kind is `chosen`."""
    if gpu.integrated and not gpu.target:
        return _("{gpu}: an integrated GPU (part of the processor, sharing its memory), not a ROCm training "
                 "target; not used", gpu=gpu.label())
    if gpu.integrated:
        return _("{gpu}: an integrated GPU; the discrete GPUs are used", gpu=gpu.label())
    if gpu.vendor == "amd" and chosen == "nvidia":
        return _("{gpu}: not on ROCm's list of training GPUs; the NVIDIA GPUs are used", gpu=gpu.label())
    if gpu.vendor == "nvidia":
        return _("{gpu}: one training job uses one vendor's GPUs; the AMD GPUs are used", gpu=gpu.label())
    return _("{gpu}: not used", gpu=gpu.label())


@dataclass
class MachineKind:
    kind: str  # "rocm" | "nvidia" | "cpu"
    evidence: list[str] = field(default_factory=list)
    set_aside: list[str] = field(default_factory=list)  # the GPUs seen and not used, each with why


def choose_kind(gpus: list[GpuSeen], *, amd_stack: list[str] = (), nvidia_driver: bool = False,
                override: bool = False) -> MachineKind:
    """The machine's kind from the GPUs the tools listed. `amd_stack`: signs of an AMD GPU stack with or
    without a GPU listed ("/dev/kfd is present", "ROCm 7.2.0 is installed"); `nvidia_driver`: the NVIDIA
    kernel driver is loaded; `override`: HSA_OVERRIDE_GFX_VERSION is set (an unlisted AMD GPU is wanted)."""
    ranked = [(r, g) for g in gpus if (r := rank(g, override)) is not None]
    amd = [g for g in gpus if g.vendor == "amd"]
    nvidia = [g for g in gpus if g.vendor == "nvidia"]
    if ranked:
        best = min(r for r, _g in ranked)
        vendor = next(g.vendor for r, g in ranked if r == best)
        kind = "rocm" if vendor == "amd" else "nvidia"
        used = [g for r, g in ranked if g.vendor == vendor and (vendor == "nvidia" or r == best)]
        tools = sorted({g.source for g in used if g.source})
        evidence = [_("{tool} lists {n} GPUs", tool=", ".join(tools) or vendor, n=len(used))]
        if kind == "rocm":
            evidence = [s for s in amd_stack if s] + evidence
        set_aside = [why_not_used(g, kind) for g in gpus if g not in used]
        if kind == "nvidia" and amd_stack and not amd:
            set_aside.append(_("an AMD GPU stack is installed ({signs}) but no tool lists an AMD GPU; "
                               "the NVIDIA GPUs are used", signs=", ".join(amd_stack)))
        return MachineKind(kind, evidence, set_aside)
    set_aside = [why_not_used(g, "cpu") for g in amd]
    if nvidia_driver and not nvidia:
        return MachineKind("nvidia", [_("the NVIDIA driver is loaded")], set_aside)
    if amd_stack and not amd:
        return MachineKind("rocm", [s for s in amd_stack if s], [])
    return MachineKind("cpu", [_("no /dev/kfd, and no tool lists an AMD or NVIDIA GPU")] if not amd else
                       [_("no GPU to train on")], set_aside)


def seen_from_outputs(rocminfo: str | None = None, nvidia_query: str | None = None) -> list[GpuSeen]:
    """The GPUs in `rocminfo`'s output and in `nvidia-smi --query-gpu=index,name,...` CSV."""
    from core.doctor.parse_amd import parse_rocminfo
    from core.doctor.parse_tools import parse_nvidia_query

    gpus = [GpuSeen("amd", g.name or "", g.gfx, g.apu, "rocminfo") for g in parse_rocminfo(rocminfo or "").gpus]
    return gpus + [GpuSeen("nvidia", g.name, source="nvidia-smi") for g in parse_nvidia_query(nvidia_query or "")]


def machine_from_outputs(*, rocminfo: str | None = None, nvidia_query: str | None = None, kfd: bool = False,
                         rocm_version: str | None = None, nvidia_driver: bool = False,
                         override: bool = False) -> MachineKind:
    """The installer's and the GPU panels' view of a machine, from its tools' outputs (recorded or live)."""
    stack = []
    if kfd:
        stack.append(_("/dev/kfd is present"))
    if rocm_version:
        stack.append(_("ROCm {version} is installed", version=rocm_version))
    return choose_kind(seen_from_outputs(rocminfo, nvidia_query), amd_stack=stack, nvidia_driver=nvidia_driver,
                       override=override)


NVIDIA_QUERY = ("--query-gpu=index,name,driver_version,memory.total,compute_cap", "--format=csv,noheader")


def probe_this_machine(rocm_version: str | None = None) -> MachineKind:
    """Run rocminfo and nvidia-smi (when present, with a timeout) and judge this machine."""
    import os
    import shutil
    from pathlib import Path

    rocm_path = os.environ.get("ROCM_PATH", "/opt/rocm")
    rocminfo = shutil.which("rocminfo") or (str(Path(rocm_path, "bin", "rocminfo"))
                                            if Path(rocm_path, "bin", "rocminfo").exists() else None)
    nvidia_smi = shutil.which("nvidia-smi")
    return machine_from_outputs(
        rocminfo=_output([rocminfo]) if rocminfo else None,
        nvidia_query=_output([nvidia_smi, *NVIDIA_QUERY]) if nvidia_smi else None,
        kfd=Path("/dev/kfd").exists(), rocm_version=rocm_version,
        nvidia_driver=Path("/proc/driver/nvidia/version").exists(),
        override=bool(os.environ.get("HSA_OVERRIDE_GFX_VERSION", "").strip()),
    )


def _output(argv: list[str], timeout: float = 20.0) -> str | None:
    """stdout of a tool, or None when it fails (a failing tool lists nothing)."""
    import subprocess

    try:
        proc = subprocess.run(argv, capture_output=True, text=True, timeout=timeout, errors="replace")
    except (OSError, subprocess.SubprocessError):
        return None
    return proc.stdout if proc.returncode == 0 else None
