"""GPUs a run can target: the ones the doctor found, or one chosen from this catalogue when the
machine devtune runs on has none (planning on a laptop or a login node for a GPU box).

Memory is what the driver reports as total (rocm-smi / amd-smi VRAM total, nvidia-smi memory.total),
per device: an MI250 or MI250X shows up as two GCDs of 64 GiB each, and each GCD is one device for
torch, torchrun and DeepSpeed.
"""

from __future__ import annotations

from dataclasses import dataclass

GIB = 1024 ** 3
MIB = 1024 ** 2


@dataclass(frozen=True)
class GpuModel:
    id: str
    name: str
    memory_bytes: int
    vendor: str  # amd | nvidia
    bf16: bool  # bf16 matrix math (Matrix Cores / Tensor Cores)
    match: tuple[str, ...] = ()  # lower-case substrings of the names drivers report


CATALOG: tuple[GpuModel, ...] = (
    GpuModel("mi355x", "AMD Instinct MI355X", 288 * GIB, "amd", True, ("mi355x",)),
    GpuModel("mi350x", "AMD Instinct MI350X", 288 * GIB, "amd", True, ("mi350x",)),
    GpuModel("mi325x", "AMD Instinct MI325X", 256 * GIB, "amd", True, ("mi325x",)),
    GpuModel("mi300x", "AMD Instinct MI300X", 192 * GIB, "amd", True, ("mi300x",)),
    GpuModel("mi300a", "AMD Instinct MI300A (unified)", 128 * GIB, "amd", True, ("mi300a",)),
    GpuModel("mi250-gcd", "AMD Instinct MI250/MI250X (one GCD)", 64 * GIB, "amd", True, ("mi250", "mi250x")),
    GpuModel("mi210", "AMD Instinct MI210", 64 * GIB, "amd", True, ("mi210",)),
    GpuModel("mi100", "AMD Instinct MI100", 32 * GIB, "amd", False, ("mi100",)),
    GpuModel("h200", "NVIDIA H200", 143771 * MIB, "nvidia", True, ("h200",)),
    GpuModel("h100-80", "NVIDIA H100 80GB", 81559 * MIB, "nvidia", True, ("h100",)),
    GpuModel("a100-80", "NVIDIA A100 80GB", 81920 * MIB, "nvidia", True, ("a100-sxm4-80gb", "a100 80gb",
                                                                          "a100-pcie-80gb", "a100 80")),
    GpuModel("a100-40", "NVIDIA A100 40GB", 40960 * MIB, "nvidia", True, ("a100",)),
    GpuModel("l40s", "NVIDIA L40S", 46068 * MIB, "nvidia", True, ("l40s",)),
    GpuModel("rtx4090", "NVIDIA GeForce RTX 4090", 24564 * MIB, "nvidia", True, ("rtx 4090",)),
    GpuModel("a10g", "NVIDIA A10G", 23028 * MIB, "nvidia", True, ("a10g",)),
    GpuModel("v100-32", "NVIDIA V100 32GB", 32768 * MIB, "nvidia", False, ("v100",)),
    GpuModel("t4", "NVIDIA T4", 15360 * MIB, "nvidia", False, ("tesla t4", " t4")),
)


@dataclass(frozen=True)
class GpuTarget:
    """One kind of device a run is sized for: its name, memory per device, count, bf16 support."""

    name: str
    memory_bytes: int
    count: int = 1
    bf16: bool | None = None  # None: unknown
    source: str = "catalog"  # catalog | doctor | host


def gpu_model(model_id: str) -> GpuModel | None:
    return next((g for g in CATALOG if g.id == model_id), None)


def match_gpu(name: str) -> GpuModel | None:
    """The catalogue entry for a name as a driver reports it ("AMD Instinct MI300X", "NVIDIA H100 80GB HBM3")."""
    low = f" {name.lower()}"
    for model in CATALOG:
        if any(token in low for token in model.match):
            return model
    return None


def targets_from_found(found: list[tuple[str, int]]) -> list[GpuTarget]:
    """The doctor's (name, memory bytes) per device, grouped by kind, smallest memory first
    (a data-parallel run is bound by its smallest device)."""
    groups: dict[tuple[str, int], int] = {}
    for name, memory in found:
        groups[(name, int(memory))] = groups.get((name, int(memory)), 0) + 1
    targets = []
    for (name, memory), count in groups.items():
        known = match_gpu(name)
        targets.append(GpuTarget(name, memory, count, known.bf16 if known else None, "doctor"))
    return sorted(targets, key=lambda t: t.memory_bytes)


def target_from_catalog(model_id: str, count: int = 1) -> GpuTarget:
    model = gpu_model(model_id)
    if model is None:
        raise KeyError(model_id)
    return GpuTarget(model.name, model.memory_bytes, count, model.bf16, "catalog")
