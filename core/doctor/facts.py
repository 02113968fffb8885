"""What the evidence says about the machine, worked out once per evidence revision.

The verdicts ask these questions over and over (is it an AMD box? which gfx? which ROCm? which
torch build?), so the answers live here, computed from whatever probes have finished.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from core.doctor.evidence import Evidence
from core.doctor.parse_amd import (
    AmdGpu,
    AmdSmiStatic,
    RocmInfo,
    parse_amd_smi_static,
    parse_amd_smi_version,
    parse_hipconfig_version,
    parse_rocm_smi_json,
    parse_rocm_version_file,
    parse_rocminfo,
)
from core.doctor.parse_tools import (
    NvidiaGpu,
    kernel_args,
    parse_meminfo,
    parse_nvidia_query,
    parse_nvidia_table,
)
from core.doctor.scripts import parse_probe_lines
from core.i18n import _
from core.setup.machine_kind import INSTINCT, GpuSeen, choose_kind

# Probes the machine kind and GPU list are worked out from: a verdict that asks `facts(ev).kind`
# lists these in its needs.
HARDWARE = ("devices", "files", "amd_smi_static", "rocm_smi", "rocminfo", "nvidia_smi_query")

@dataclass
class Facts:
    kind: str = "cpu"  # rocm | nvidia | cpu
    kind_evidence: list[str] = field(default_factory=list)
    set_aside: list[str] = field(default_factory=list)  # GPUs seen and not used, each with why
    amd_gpus: list[AmdGpu] = field(default_factory=list)
    amd_gpu_source: str = ""  # which tool listed them
    amd_static: AmdSmiStatic | None = None
    rocminfo: RocmInfo | None = None
    amd_smi_version: dict[str, str] = field(default_factory=dict)
    rocm_version: str | None = None  # "7.2.1"
    rocm_version_source: str = ""
    rocm_versions_seen: dict[str, str] = field(default_factory=dict)  # source -> version
    nvidia_gpus: list[NvidiaGpu] = field(default_factory=list)
    nvidia_driver: dict[str, str] = field(default_factory=dict)
    kernel_args: dict[str, str] = field(default_factory=dict)
    meminfo: dict[str, int] = field(default_factory=dict)

    @property
    def gfx_list(self) -> list[str]:
        return sorted({g.gfx for g in self.amd_gpus if g.gfx})

    @property
    def gpu_count(self) -> int:
        return len(self.amd_gpus) if self.kind == "rocm" else len(self.nvidia_gpus) if self.kind == "nvidia" else 0

    @property
    def instinct(self) -> bool:
        """A data-center AMD GPU (CDNA): no HSA_OVERRIDE_GFX_VERSION, no consumer-GPU workarounds."""
        return any(g in INSTINCT for g in self.gfx_list) or any("Instinct" in (g.name or "") for g in self.amd_gpus)

    def describe_gpus(self) -> str:
        if self.kind == "rocm" and self.amd_gpus:
            return _count_names([(g.name or "AMD GPU") + (f" ({g.gfx})" if g.gfx else "") for g in self.amd_gpus])
        if self.kind == "nvidia" and self.nvidia_gpus:
            return _count_names([g.name for g in self.nvidia_gpus])
        return ""


def _count_names(names: list[str]) -> str:
    counts: dict[str, int] = {}
    for name in names:
        counts[name] = counts.get(name, 0) + 1
    return ", ".join(f"{n} x {name}" for name, n in counts.items())


def facts(ev: Evidence) -> Facts:
    cached = getattr(ev, "_facts_cache", None)
    if cached and cached[0] == ev.revision:
        return cached[1]
    result = _compute(ev)
    ev._facts_cache = (ev.revision, result)  # type: ignore[attr-defined]
    return result


def _compute(ev: Evidence) -> Facts:
    f = Facts()
    f.kernel_args = kernel_args(ev.files.get("/proc/cmdline"))
    f.meminfo = parse_meminfo(ev.files.get("/proc/meminfo"))

    static_cmd = ev.command("amd_smi_static")
    if static_cmd.ran and static_cmd.stdout:
        f.amd_static = parse_amd_smi_static(static_cmd.stdout)
    rocminfo_cmd = ev.command("rocminfo")
    if rocminfo_cmd.ran:
        f.rocminfo = parse_rocminfo(rocminfo_cmd.text())
    version_cmd = ev.command("amd_smi_version")
    if version_cmd.ran:
        f.amd_smi_version = parse_amd_smi_version(version_cmd.stdout)

    # GPU list: amd-smi (with names and gfx), else rocm-smi, else rocminfo's GPU agents; gfx and names
    # that one tool could not read (N/A without render access) are filled from the others by index.
    rocm_smi_gpus = []
    rocm_smi_cmd = ev.command("rocm_smi")
    if rocm_smi_cmd.ran and rocm_smi_cmd.stdout:
        rocm_smi_gpus = parse_rocm_smi_json(rocm_smi_cmd.stdout)[0]
    sources = [("amd-smi", f.amd_static.gpus if f.amd_static else []), ("rocm-smi", rocm_smi_gpus),
               ("rocminfo", f.rocminfo.gpus if f.rocminfo else [])]
    for name, gpus in sources:
        if gpus:
            f.amd_gpus = [AmdGpu(g.index, g.name, g.gfx, g.vram_mb, g.bdf, g.apu) for g in gpus]
            f.amd_gpu_source = name
            break
    for _source, gpus in sources:
        by_index = {i: g for i, g in enumerate(gpus)}
        for i, gpu in enumerate(f.amd_gpus):
            other = by_index.get(i)
            if other is not None:
                gpu.gfx = gpu.gfx or other.gfx
                gpu.name = gpu.name or other.name
                gpu.apu = gpu.apu if gpu.apu is not None else other.apu

    # ROCm version: the install's own file, then amd-smi, then hipconfig
    for source, version in (
        (".info/version", parse_rocm_version_file(_rocm_version_file(ev))),
        ("amd-smi version", f.amd_smi_version.get("rocm")),
        ("hipconfig", parse_hipconfig_version(ev.command("hipconfig").stdout) if ev.command("hipconfig").ok else None),
    ):
        if version:
            f.rocm_versions_seen[source] = version
            if f.rocm_version is None:
                f.rocm_version, f.rocm_version_source = version, source

    nv_cmd = ev.command("nvidia_smi_query")
    if nv_cmd.ok:
        f.nvidia_gpus = parse_nvidia_query(nv_cmd.stdout)
    nv_table = ev.command("nvidia_smi")
    if nv_table.ok:
        f.nvidia_driver = parse_nvidia_table(nv_table.stdout)

    # which GPUs are trained on: one rule for the doctor, the installer and the GPU panels
    kfd = ev.devices.get("/dev/kfd") or {}
    amd_stack = []
    if kfd.get("exists"):
        amd_stack.append(_("/dev/kfd is present"))
    if ev.paths.get("/sys/module/amdgpu") and (kfd.get("exists") or f.rocm_version):
        amd_stack.append(_("the amdgpu module is loaded"))
    if f.rocm_version and not amd_stack:
        amd_stack.append(_("ROCm {version} is installed", version=f.rocm_version))
    seen = [GpuSeen("amd", g.name or "", g.gfx, g.apu, f.amd_gpu_source) for g in f.amd_gpus]
    seen += [GpuSeen("nvidia", g.name, source="nvidia-smi") for g in f.nvidia_gpus]
    chosen = choose_kind(seen, amd_stack=amd_stack, nvidia_driver=bool(ev.files.get("/proc/driver/nvidia/version")),
                         override=bool((ev.env.get("HSA_OVERRIDE_GFX_VERSION") or "").strip()))
    f.kind, f.kind_evidence, f.set_aside = chosen.kind, chosen.evidence, chosen.set_aside
    return f


def _rocm_version_file(ev: Evidence) -> str | None:
    rocm_path = ev.env.get("ROCM_PATH") or "/opt/rocm"
    return ev.files.get(f"{rocm_path.rstrip('/')}/.info/version") or ev.files.get("/opt/rocm/.info/version")


def probe_json(ev: Evidence, name: str) -> dict | None:
    """The merged marker lines of a Python probe (torch, packages, serve), or None."""
    result = ev.commands.get(name)
    if result is None or not result.ran:
        return None
    return parse_probe_lines(result.stdout)
