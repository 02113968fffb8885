"""TrainSpec -> the YAML `llamafactory-cli train` reads, laid out like LLaMA-Factory's own examples
(### model, ### method, ### dataset, ### output, ### train, ### eval), nothing devtune-specific in it.

`lf_args(spec)` is the flat dict of LLaMA-Factory arguments (what the YAML holds); `render_yaml(spec)`
the text. Keys kept from an imported file go to their usual section, or to a last section.
"""

from __future__ import annotations

import re
from decimal import Decimal
from typing import Any

from core.config.deepspeed import ds_filename
from core.config.spec import TrainSpec

CONFIGS_DIR = "configs"

SECTIONS: tuple[tuple[str, tuple[str, ...]], ...] = (
    ("model", ("model_name_or_path", "adapter_name_or_path", "quantization_bit", "quantization_method",
               "trust_remote_code", "flash_attn", "disable_gradient_checkpointing")),
    ("method", ("stage", "do_train", "finetuning_type", "lora_rank", "lora_alpha", "lora_dropout", "lora_target",
                "additional_target", "freeze_trainable_layers", "freeze_trainable_modules", "deepspeed",
                "pref_beta", "pref_ftx", "pref_loss", "simpo_gamma", "kto_chosen_weight", "kto_rejected_weight",
                "ref_model")),
    ("dataset", ("dataset", "dataset_dir", "template", "cutoff_len", "max_samples", "preprocessing_num_workers",
                 "packing")),
    ("output", ("output_dir", "logging_steps", "save_steps", "plot_loss", "overwrite_output_dir", "report_to",
                "include_num_input_tokens_seen")),
    ("train", ("per_device_train_batch_size", "gradient_accumulation_steps", "learning_rate", "num_train_epochs",
               "max_steps", "lr_scheduler_type", "warmup_ratio", "warmup_steps", "max_grad_norm", "bf16", "fp16",
               "pure_bf16", "resume_from_checkpoint")),
    ("eval", ("eval_dataset", "val_size", "per_device_eval_batch_size", "eval_strategy", "eval_steps")),
)
MODELED_KEYS: frozenset[str] = frozenset(k for _, keys in SECTIONS for k in keys)

# where unmodelled keys usually live in LLaMA-Factory's examples
EXTRA_SECTION = {
    "adapter_name_or_path": "model", "cache_dir": "model", "model_revision": "model", "rope_scaling": "model",
    "enable_liger_kernel": "model", "use_unsloth": "model", "double_quantization": "model",
    "quantization_type": "model", "upcast_layernorm": "model",
    "use_dora": "method", "use_rslora": "method", "pissa_init": "method", "loraplus_lr_ratio": "method",
    "use_llama_pro": "method",
    "overwrite_cache": "dataset", "dataloader_num_workers": "dataset", "streaming": "dataset",
    "mix_strategy": "dataset", "train_on_prompt": "dataset", "mask_history": "dataset", "neat_packing": "dataset",
    "tokenized_path": "dataset", "eval_on_each_dataset": "eval",
    "save_only_model": "output", "save_total_limit": "output", "logging_dir": "output", "run_name": "output",
    "ddp_timeout": "train", "seed": "train", "weight_decay": "train", "optim": "train", "adam_beta2": "train",
    "gradient_checkpointing": "train",
}


def deepspeed_path(spec: TrainSpec) -> str | None:
    """The `deepspeed:` value: the spec's own path, else devtune's file under configs/ for its ZeRO stage."""
    if spec.deepspeed:
        return spec.deepspeed
    if spec.zero_stage is None:
        return None
    return f"{CONFIGS_DIR}/{ds_filename(spec.zero_stage, spec.offload and spec.zero_stage in (2, 3))}"


def _modeled(spec: TrainSpec) -> dict[str, Any]:
    raw = spec.model_dump(exclude={"extra", "launch", "preset", "precision", "zero_stage", "offload"})
    raw["deepspeed"] = deepspeed_path(spec)
    raw["dataset"] = ",".join(spec.dataset) if spec.dataset else None
    raw["eval_dataset"] = ",".join(spec.eval_dataset) if spec.eval_dataset else None
    trackers = [t.strip() for t in (spec.report_to or "").split(",") if t.strip()]
    if len(trackers) > 1:
        raw["report_to"] = trackers  # transformers reads a list, never "a,b"
    if spec.finetuning_type == "qlora":
        raw["finetuning_type"] = "lora"
        raw["quantization_bit"] = spec.quantization_bit or 4
        raw["quantization_method"] = spec.quantization_method or "bnb"
    if spec.precision == "fp32":
        raw["bf16"] = False
    elif spec.precision is not None:
        raw[spec.precision] = True
    return raw


def lf_args(spec: TrainSpec) -> dict[str, Any]:
    """The LLaMA-Factory arguments of `spec`, in the examples' order; None values are left out."""
    return {k: v for _, items in sections_of(_modeled(spec), spec.extra) for k, v in items}


def sections_of(raw: dict[str, Any], extra: dict[str, Any]) -> list[tuple[str, list[tuple[str, Any]]]]:
    out: list[tuple[str, list[tuple[str, Any]]]] = []
    placed: set[str] = set()
    for name, keys in SECTIONS:
        items = [(k, raw[k]) for k in keys if raw.get(k) is not None]
        for k, v in extra.items():
            if EXTRA_SECTION.get(k) == name:
                items.append((k, v))
                placed.add(k)
        out.append((name, items))
    out.append(("other", [(k, v) for k, v in extra.items() if k not in placed]))
    return [(name, items) for name, items in out if items]


def render_yaml(spec: TrainSpec, *, header: str | None = None) -> str:
    lines: list[str] = []
    if header:
        lines += [f"# {line}".rstrip() for line in header.splitlines()]
        lines.append("")
    for name, items in sections_of(_modeled(spec), spec.extra):
        title = name if name != "other" else "other (kept as imported; devtune does not model these keys)"
        lines.append(f"### {title}")
        lines += [f"{key}: {yaml_scalar(val)}" for key, val in items]
        lines.append("")
    return "\n".join(lines).rstrip("\n") + "\n"


# The floats of LLaMA-Factory's loader (OmegaConf's YAML rules): wider than PyYAML's, `1e-4` and `0E0`
# included. A string that looks like one is written quoted (yaml_scalar) and read as a float on import.
OMEGACONF_FLOAT = re.compile(r"""^(?:
     [-+]?[0-9]+(?:_[0-9]+)*\.[0-9_]*(?:[eE][-+]?[0-9]+)?
    |[-+]?[0-9]+(?:_[0-9]+)*(?:[eE][-+]?[0-9]+)
    |\.[0-9]+(?:_[0-9]+)*(?:[eE][-+][0-9]+)?
    |[-+]?[0-9]+(?:_[0-9]+)*(?::[0-5]?[0-9])+\.[0-9_]*
    |[-+]?\.(?:inf|Inf|INF)
    |\.(?:nan|NaN|NAN))$""", re.X)


def yaml_scalar(val: Any) -> str:
    """One value as YAML that PyYAML (and OmegaConf) read back as the same value."""
    import yaml

    if isinstance(val, bool) or val is None:
        return {True: "true", False: "false", None: "null"}[val]
    if isinstance(val, float):
        return _float(val)
    if isinstance(val, int):
        return str(val)
    if isinstance(val, str):
        plain = yaml.safe_dump(val, allow_unicode=True, width=10_000).strip().removesuffix("...").strip()
        if val.isprintable() and "\n" not in plain and not OMEGACONF_FLOAT.match(plain):
            return plain
        # double-quoted with escapes: line breaks, NEL/LS/PS and unprintables would otherwise be folded,
        # and a string LLaMA-Factory would read as a float ("0E0", "1e-4") stays a string
        return yaml.safe_dump(val, default_style='"', allow_unicode=True, width=10**9).strip().removesuffix(
            "...").strip()
    text = yaml.safe_dump(val, default_flow_style=True, allow_unicode=True, width=10_000).strip()
    return text.removesuffix("...").rstrip()


def _float(val: float) -> str:
    if val != val:
        return ".nan"
    if val in (float("inf"), float("-inf")):
        return ".inf" if val > 0 else "-.inf"
    if val != 0 and abs(val) < 1e-3:
        mantissa, _, exp = format(Decimal(repr(val)), "e").partition("e")
        if "." not in mantissa:
            mantissa += ".0"
        return f"{mantissa}e{int(exp):+d}"
    text = repr(val)
    if "e" in text:
        mantissa, _, exp = text.partition("e")
        if "." not in mantissa:
            mantissa += ".0"
        return f"{mantissa}e{int(exp):+d}"
    return text
