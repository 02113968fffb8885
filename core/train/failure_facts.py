"""A diagnosis agrees with the machine the run ran on: advice that cannot work there is not given.

A log rule knows the error, not the machine: "bitsandbytes is not installed" says `pip install -U
bitsandbytes`, which helps on a GPU and does nothing on a CPU, where QLoRA (bitsandbytes 4-bit) cannot run at
all, as the config check already said. The run's own facts decide (its record and its run folder, written
while it ran): a run launched for the CPU (DS_ACCELERATOR=cpu, the CPU presets) or one whose GPU recorder
found no GPU on its machine (gpu.status "no-gpu") ran on a CPU.
"""

from __future__ import annotations

import json
from pathlib import Path

from core.i18n import _

BITSANDBYTES_RULES = ("bitsandbytes-missing", "bitsandbytes-cuda", "bitsandbytes-rocm")


def ran_on_cpu(record, directory: Path) -> bool:
    """The run trained on a CPU: launched for one, or its machine had no GPU while it ran."""
    if (record.env or {}).get("DS_ACCELERATOR") == "cpu":
        return True
    try:
        status = json.loads((directory / "gpu.status").read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return False
    return isinstance(status, dict) and status.get("state") == "no-gpu"


def run_context(ws, record, directory: Path):
    """The run's device and its config's max_grad_norm, for the live anomalies' advice (core.train.anomalies)."""
    from core.train.anomalies import RunContext

    max_grad_norm = None
    if record.config:
        from core.config.yaml_in import ImportProblem, load_lf_yaml_text

        try:
            value = load_lf_yaml_text(ws.abs(record.config).read_text(encoding="utf-8")).get("max_grad_norm", 1.0)
            max_grad_norm = float(value) if isinstance(value, (int, float)) and not isinstance(value, bool) else None
        except (OSError, UnicodeDecodeError, ImportProblem):
            pass
    return RunContext("cpu" if ran_on_cpu(record, directory) else "gpu", max_grad_norm)


def agree_with_machine(found: list, *, on_cpu: bool, config: str | None = None) -> list:
    """The diagnoses, with the advice a CPU run cannot use replaced by what holds there."""
    if not on_cpu:
        return found
    for diagnosis in found:
        if diagnosis.id in BITSANDBYTES_RULES:
            diagnosis.fix = _("This run trained on a CPU, and QLoRA (quantization_bit: bitsandbytes 4-bit) needs a "
                              "GPU: installing or upgrading bitsandbytes does not change that here (the config "
                              "check says so too). Train with LoRA on this machine (method lora, no "
                              "quantization_bit), or run this config on a machine with a GPU.")
            diagnosis.commands = [f"devtune config check --config {config}" if config else "devtune config check"]
    return found
