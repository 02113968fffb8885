"""What follows when a field of a training spec changes: the one place for the rules that tie fields together,
applied by the Config form (core.config.form.spec_from_form) and by `devtune config init`'s flags alike.

- A new method: the 4/8-bit choice belongs to QLoRA. Leaving QLoRA drops it (LLaMA-Factory would otherwise
  train `finetuning_type: lora` + `quantization_bit: 4` as QLoRA); other methods keep what they had (an
  imported HQQ/OFT setup).
- A new ZeRO stage or offload: devtune writes its own DeepSpeed JSON for it (a person's JSON is for the old one).
- Clearing the eval set turns the eval loss off (eval_strategy: no, so it is not wired again); naming one
  turns it on.
"""

from __future__ import annotations

from typing import Any

from core.config.spec import TrainSpec


def follow_changes(data: dict[str, Any], base: TrainSpec) -> None:
    """Apply, in place, to `data` (a changed copy of `base.model_dump()`) what its changes imply."""
    if (data.get("zero_stage"), data.get("offload")) != (base.zero_stage, base.offload):
        data["deepspeed"] = None
    if data.get("eval_dataset") != base.eval_dataset:
        if not data.get("eval_dataset"):
            data.update(eval_strategy="no", eval_steps=None, per_device_eval_batch_size=None)
        elif data.get("eval_strategy") in (None, "no"):
            data["eval_strategy"] = "steps"
    if data.get("finetuning_type") != "qlora":
        keep = base.finetuning_type != "qlora"
        data["quantization_bit"] = base.quantization_bit if keep else None
        data["quantization_method"] = base.quantization_method if keep else None
