"""The DeepSpeed JSON a LLaMA-Factory run points to with `deepspeed:`.

The files are LLaMA-Factory's own `examples/deepspeed/ds_z{0,2,3}[_offload]_config.json` (upstream
HEAD ff6d4d12), key for key: batch sizes, gradient clipping and fp16/bf16 stay "auto" so the
HF Trainer fills them from the YAML (one source of truth), and ZeRO-3 keeps the stage-3 settings
of `ds_z3_config.json` (16-bit weights gathered on save, so the LoRA adapter and merged model are
normal files). Offload moves the optimizer state (ZeRO-2/3) and the parameters (ZeRO-3) to CPU RAM.

`ds_filename(stage, offload)` gives upstream's file name; devtune writes it under configs/.
"""

from __future__ import annotations

import json
import re
from typing import Any

from core.i18n import _

_BASE: dict[str, Any] = {
    "train_batch_size": "auto",
    "train_micro_batch_size_per_gpu": "auto",
    "gradient_accumulation_steps": "auto",
    "gradient_clipping": "auto",
    "zero_allow_untested_optimizer": True,
    "fp16": {
        "enabled": "auto",
        "loss_scale": 0,
        "loss_scale_window": 1000,
        "initial_scale_power": 16,
        "hysteresis": 2,
        "min_loss_scale": 1,
    },
    "bf16": {"enabled": "auto"},
}

_OFFLOAD = {"device": "cpu", "pin_memory": True}


def ds_filename(stage: int, offload: bool = False) -> str:
    return f"ds_z{stage}{'_offload' if offload else ''}_config.json"


def ds_config(stage: int, offload: bool = False) -> dict[str, Any]:
    """The config dict for ZeRO stage 0, 2 or 3 (offload: not for stage 0)."""
    if stage not in (0, 2, 3):
        raise ValueError(_("ZeRO stage must be 0, 2 or 3, not {stage}", stage=stage))
    if offload and stage == 0:
        raise ValueError(_("CPU offload needs ZeRO stage 2 or 3"))
    zero: dict[str, Any] = {"stage": stage}
    if stage in (0, 2):
        if offload:
            zero["offload_optimizer"] = dict(_OFFLOAD)
        zero.update({
            "allgather_partitions": True,
            "allgather_bucket_size": 500000000,
            "overlap_comm": False,
            "reduce_scatter": True,
            "reduce_bucket_size": 500000000,
            "contiguous_gradients": True,
            "round_robin_gradients": True,
        })
    else:
        if offload:
            zero["offload_optimizer"] = dict(_OFFLOAD)
            zero["offload_param"] = dict(_OFFLOAD)
        zero.update({
            "overlap_comm": False,
            "contiguous_gradients": True,
            "sub_group_size": 1000000000,
            "reduce_bucket_size": "auto",
            "stage3_prefetch_bucket_size": "auto",
            "stage3_param_persistence_threshold": "auto",
            "stage3_max_live_parameters": 1000000000,
            "stage3_max_reuse_distance": 1000000000,
            "stage3_gather_16bit_weights_on_model_save": True,
        })
    return {**json.loads(json.dumps(_BASE)), "zero_optimization": zero}


def render_ds_json(stage: int, offload: bool = False) -> str:
    return json.dumps(ds_config(stage, offload), indent=2) + "\n"


def describe_ds(config: dict[str, Any]) -> tuple[int | None, bool]:
    """(ZeRO stage, CPU offload) of a DeepSpeed config dict; stage None when it has none."""
    zero = config.get("zero_optimization") if isinstance(config, dict) else None
    if not isinstance(zero, dict):
        return None, False
    try:
        stage = int(zero.get("stage", 0))
    except (TypeError, ValueError):
        return None, False

    def on_cpu(key: str) -> bool:
        part = zero.get(key)
        return isinstance(part, dict) and str(part.get("device", "none")).lower() in ("cpu", "nvme")

    return stage, on_cpu("offload_optimizer") or on_cpu("offload_param")


def stage_from_filename(path: str) -> tuple[int | None, bool]:
    """Upstream's naming (ds_z3_offload_config.json): the stage and offload, when the file is absent."""
    match = re.search(r"z(\d)(_offload)?", path.rsplit("/", 1)[-1])
    if not match:
        return None, False
    return int(match.group(1)), bool(match.group(2))
