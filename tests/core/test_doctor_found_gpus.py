"""The doctor hands the GPUs it found to the Config step's memory fit (.devtune/gpus.json)."""

from pathlib import Path

import pytest

from core.config.files import found_gpus as config_found_gpus
from core.doctor.evidence import Evidence
from core.doctor.found_gpus import found_gpus, save_found_gpus

MACHINES = Path(__file__).resolve().parents[1] / "fixtures" / "doctor" / "machines"


@pytest.mark.parametrize("machine, count, name, gib", [
    ("mi300x8", 8, "MI300X", 190),
    ("mi250x4", 8, "MI250", 63),
    ("nvidia-h100x8", 8, "H100", 79),
    ("cpu-only", 0, None, None),
    ("ryzen-igpu-rtx4090", 1, "RTX 4090", 23),  # the Ryzen's integrated GPU is not a GPU to fit a model on
    ("r9700x2-rocm7.2", 2, "R9700", 31),
])
def test_found_gpus_reach_the_config_step(workspace, machine, count, name, gib):
    ev = Evidence.load(MACHINES / machine)
    gpus = found_gpus(ev)
    assert len(gpus) == count
    save_found_gpus(workspace.root, ev)
    seen = config_found_gpus(workspace)
    assert len(seen) == count
    if count:
        assert all(name in n for n, _ in seen)
        assert all(b >= gib * 1024 ** 3 for _, b in seen)


def test_an_integrated_gpu_beside_discrete_radeons_is_not_fitted_on():
    import json

    ev = Evidence.load(MACHINES / "r9700x2-rocm7.2")
    static = json.loads(ev.commands["amd_smi_static"].stdout)
    igpu = json.loads((MACHINES / "ryzen-igpu-rtx4090" / "commands" / "amd_smi_static.out").read_text())["gpu_data"][0]
    static["gpu_data"].append({**igpu, "gpu": 2})
    ev.commands["amd_smi_static"].stdout = json.dumps(static)
    assert [g["name"] for g in found_gpus(ev)] == ["AMD Radeon AI PRO R9700"] * 2
