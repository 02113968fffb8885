"""Which LLaMA-Factory generation a training config is written for.

LLaMA-Factory 0.9.x (v0) reads `llamafactory-cli train CONFIG.yaml` with `model_name_or_path`, `stage`,
`finetuning_type`, `dataset` (names in dataset_info.json). Its "v1" (`USE_V1=1`, llamafactory/v1/, examples/v1/)
has other commands (`llamafactory-cli sft`), another schema (`model`, `model_class`, `peft_config`,
`dist_config`, `kernel_config`, `quant_config`, `train_dataset` pointing at a dataset_info.yaml,
`micro_batch_size`) and another data format. devtune drives v0 only, so a v1 config is refused with a message
naming what devtune supports, before any v0 rule reports a missing key.
"""

from __future__ import annotations

from typing import Any

from core.i18n import _

# keys of LLaMA-Factory v1's ModelArguments / DataArguments / TrainingArguments that v0 does not have
# (llamafactory/v1/config/*.py); `model` alone is v1's name for model_name_or_path.
V1_KEYS = ("model_class", "peft_config", "kernel_config", "quant_config", "init_config", "dist_config",
           "optim_config", "lr_scheduler_config", "train_dataset", "micro_batch_size", "global_batch_size",
           "sample_backend")
V0_MARKERS = ("model_name_or_path", "stage", "finetuning_type", "dataset")


def v1_keys(args: dict[str, Any]) -> list[str]:
    """The keys that make `args` a LLaMA-Factory v1 config ([] for a v0 one)."""
    if any(key in args for key in V0_MARKERS):
        return []
    found = [key for key in V1_KEYS if key in args]
    if "model" in args and found:
        found.insert(0, "model")
    return found


def v1_config_message(keys: list[str]) -> str:
    return _("this is a LLaMA-Factory v1 config (USE_V1=1: {keys}); devtune drives LLaMA-Factory 0.9.x (v0), "
             "whose configs use model_name_or_path, stage, finetuning_type and dataset (names in "
             "dataset_info.json). Start one with devtune config init (--preset or --from-yaml of a v0 YAML)",
             keys=", ".join(keys))
