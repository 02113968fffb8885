"""The GPUs the doctor found, saved for the Config step's memory fit: `.devtune/gpus.json`.

    {"gpus": [{"name": "AMD Instinct MI300X", "memory_bytes": 206141652992}, ...], "source": "amd-smi static"}

One entry per device torch will see (an MI250 card counts as its two GCDs), an integrated GPU set aside. Written after each
doctor run on this machine (not for a replayed recording); an empty list on a CPU-only machine.
"""

from __future__ import annotations

import json
from pathlib import Path

from core.doctor.evidence import Evidence
from core.doctor.facts import facts
from core.files.atomic import write_atomic
from core.setup.machine_kind import GpuSeen, rank

MIB = 1024 * 1024


def found_gpus(ev: Evidence) -> list[dict]:
    f = facts(ev)
    if f.kind == "rocm":  # an integrated GPU beside them is set aside (core.setup.machine_kind): not fitted on
        return [{"name": g.name or (g.gfx or "AMD GPU"), "memory_bytes": (g.vram_mb or 0) * MIB}
                for g in f.amd_gpus if g.vram_mb and rank(GpuSeen("amd", g.name or "", g.gfx, g.apu)) is not None]
    if f.kind == "nvidia":
        return [{"name": g.name, "memory_bytes": (g.memory_mib or 0) * MIB} for g in f.nvidia_gpus if g.memory_mib]
    return []


def save_found_gpus(root: Path, ev: Evidence) -> Path:
    f = facts(ev)
    data = {"gpus": found_gpus(ev), "kind": f.kind,
            "source": f.amd_gpu_source if f.kind == "rocm" else "nvidia-smi" if f.kind == "nvidia" else ""}
    return write_atomic(Path(root) / ".devtune" / "gpus.json", json.dumps(data, indent=2) + "\n")
