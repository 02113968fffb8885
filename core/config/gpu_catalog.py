"""GPUs a run can target: the ones the doctor found, or one chosen from this catalogue when the
machine devtune runs on has none (planning on a laptop or a login node for a GPU box).

Memory is what the driver reports as total (rocm-smi / amd-smi VRAM total, nvidia-smi memory.total),
per device: an MI250 or MI250X shows up as two GCDs of 64 GiB each, and each GCD is one device for
torch, torchrun and DeepSpeed.

Peaks are the vendors' datasheet figures for dense matrix math (TFLOP/s per device, without structured
sparsity), one per precision a run trains in: BF16 and FP16 on the Matrix / Tensor Cores (FP32 accumulate
where a datasheet gives both), FP32 on AMD's Matrix Cores and, on NVIDIA, without TF32 (PyTorch's default
for matmul). None: the device has no such math (no BF16 on V100 or T4). core.train.throughput divides by them.
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
    peak_tflops: tuple[float | None, float | None, float] = (None, None, 0.0)  # dense (bf16, fp16, fp32)

    def peak(self, precision: str | None) -> float | None:
        """Dense TFLOP/s for a run's precision ("bf16", "pure_bf16", "fp16", "fp32"; None: fp32, as
        LLaMA-Factory trains without a precision key)."""
        bf16, fp16, fp32 = self.peak_tflops
        if precision in ("bf16", "pure_bf16"):
            return bf16
        if precision == "fp16":
            return fp16
        return fp32


CATALOG: tuple[GpuModel, ...] = (
    GpuModel("mi355x", "AMD Instinct MI355X", 288 * GIB, "amd", True, ("mi355x",), (2516.6, 2516.6, 157.3)),
    GpuModel("mi350x", "AMD Instinct MI350X", 288 * GIB, "amd", True, ("mi350x",), (2306.9, 2306.9, 144.2)),
    GpuModel("mi325x", "AMD Instinct MI325X", 256 * GIB, "amd", True, ("mi325x",), (1307.4, 1307.4, 163.4)),
    GpuModel("mi300x", "AMD Instinct MI300X", 192 * GIB, "amd", True, ("mi300x",), (1307.4, 1307.4, 163.4)),
    GpuModel("mi300a", "AMD Instinct MI300A (unified)", 128 * GIB, "amd", True, ("mi300a",), (980.6, 980.6, 122.6)),
    # one GCD: half an MI250's 362.1 / 90.5 (an MI250X's GCD does 191.5 / 47.9)
    GpuModel("mi250-gcd", "AMD Instinct MI250/MI250X (one GCD)", 64 * GIB, "amd", True, ("mi250", "mi250x"),
             (181.0, 181.0, 45.3)),
    GpuModel("mi210", "AMD Instinct MI210", 64 * GIB, "amd", True, ("mi210",), (181.0, 181.0, 45.3)),
    GpuModel("mi100", "AMD Instinct MI100", 32 * GIB, "amd", False, ("mi100",), (92.3, 184.6, 46.1)),
    GpuModel("h200", "NVIDIA H200", 143771 * MIB, "nvidia", True, ("h200",), (989.4, 989.4, 66.9)),
    GpuModel("h100-pcie", "NVIDIA H100 PCIe", 81559 * MIB, "nvidia", True, ("h100 pcie",), (756.5, 756.5, 51.2)),
    GpuModel("h100-80", "NVIDIA H100 80GB (SXM)", 81559 * MIB, "nvidia", True, ("h100",), (989.4, 989.4, 66.9)),
    GpuModel("a100-80", "NVIDIA A100 80GB", 81920 * MIB, "nvidia", True, ("a100-sxm4-80gb", "a100 80gb",
                                                                          "a100-pcie-80gb", "a100 80"),
             (312.0, 312.0, 19.5)),
    GpuModel("a100-40", "NVIDIA A100 40GB", 40960 * MIB, "nvidia", True, ("a100",), (312.0, 312.0, 19.5)),
    GpuModel("l40s", "NVIDIA L40S", 46068 * MIB, "nvidia", True, ("l40s",), (362.05, 362.05, 91.6)),
    GpuModel("rtx4090", "NVIDIA GeForce RTX 4090", 24564 * MIB, "nvidia", True, ("rtx 4090",), (165.2, 165.2, 82.6)),
    # NVIDIA publishes no datasheet for the A10G (AWS's A10 variant): the A10's figures
    GpuModel("a10g", "NVIDIA A10G", 23028 * MIB, "nvidia", True, ("a10g",), (125.0, 125.0, 31.2)),
    GpuModel("v100-32", "NVIDIA V100 32GB", 32768 * MIB, "nvidia", False, ("v100",), (None, 125.0, 15.7)),
    GpuModel("t4", "NVIDIA T4", 15360 * MIB, "nvidia", False, ("tesla t4", " t4"), (None, 65.0, 8.1)),
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
