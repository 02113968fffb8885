"""The Config form's fields and the conversion between a TrainSpec and the form's plain values.

The screen shows `form_values(spec)` (strings and booleans; an empty string means "LLaMA-Factory's
default", shown as the field's placeholder) and turns what the person typed back into a spec with
`spec_from_form(base, values)`, which returns the per-field error messages instead of raising.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from pydantic import ValidationError

from core.config.field_rules import follow_changes
from core.config.spec import LF_DEFAULTS, Launch, TrainSpec
from core.i18n import _


@dataclass(frozen=True)
class FormField:
    key: str  # TrainSpec field, or "launch.<field>"
    kind: str  # str | int | float | bool | choice | list
    section: str  # model | method | data | train | hardware | output


FIELDS: tuple[FormField, ...] = (
    FormField("model_name_or_path", "str", "model"),
    FormField("template", "choice", "model"),
    FormField("stage", "choice", "method"),
    FormField("finetuning_type", "choice", "method"),
    FormField("quantization_bit", "choice", "method"),
    FormField("lora_rank", "int", "method"),
    FormField("lora_alpha", "int", "method"),
    FormField("lora_dropout", "float", "method"),
    FormField("lora_target", "str", "method"),
    FormField("additional_target", "str", "method"),
    FormField("pref_loss", "choice", "method"),
    FormField("pref_beta", "float", "method"),
    FormField("adapter_name_or_path", "str", "method"),
    FormField("dataset", "list", "data"),
    FormField("cutoff_len", "int", "data"),
    FormField("val_size", "float", "data"),
    FormField("eval_dataset", "list", "data"),
    FormField("eval_steps", "int", "data"),
    FormField("max_samples", "int", "data"),
    FormField("per_device_train_batch_size", "int", "train"),
    FormField("gradient_accumulation_steps", "int", "train"),
    FormField("learning_rate", "float", "train"),
    FormField("num_train_epochs", "float", "train"),
    FormField("max_steps", "int", "train"),
    FormField("lr_scheduler_type", "choice", "train"),
    FormField("warmup_ratio", "float", "train"),
    FormField("precision", "choice", "train"),
    FormField("flash_attn", "choice", "train"),
    FormField("disable_gradient_checkpointing", "bool", "train"),
    FormField("logging_steps", "int", "train"),
    FormField("save_steps", "int", "train"),
    FormField("launch.device", "choice", "hardware"),
    FormField("launch.gpu_model", "choice", "hardware"),
    FormField("launch.gpus_per_node", "int", "hardware"),
    FormField("launch.nnodes", "int", "hardware"),
    FormField("launch.master_addr", "str", "hardware"),
    FormField("launch.master_port", "int", "hardware"),
    FormField("launch.launcher", "choice", "hardware"),
    FormField("launch.partition", "str", "hardware"),
    FormField("launch.account", "str", "hardware"),
    FormField("launch.time_limit", "str", "hardware"),
    FormField("launch.sbatch_extra", "lines", "hardware"),
    FormField("launch.requeue", "bool", "hardware"),
    FormField("zero_stage", "choice", "hardware"),
    FormField("offload", "bool", "hardware"),
    FormField("output_dir", "str", "output"),
    FormField("overwrite_output_dir", "bool", "output"),
    FormField("resume_from_checkpoint", "str", "output"),
    FormField("report_to", "str", "output"),
)
BY_KEY = {f.key: f for f in FIELDS}


def _get(spec: TrainSpec, key: str) -> Any:
    if key.startswith("launch."):
        return getattr(spec.launch, key.split(".", 1)[1])
    return getattr(spec, key)


def ruled_values(base: TrainSpec, new: TrainSpec, values: dict[str, Any]) -> dict[str, Any]:
    """The fields the rules changed in `new` that the person left as `base` showed them: what the form must
    show again (QLoRA bits cleared, the stage's output folder, a new eval interval)."""
    before, after = form_values(base), form_values(new)
    return {k: v for k, v in after.items() if v != before[k] and values.get(k, before[k]) == before[k]}


def form_values(spec: TrainSpec) -> dict[str, Any]:
    """The spec as the form shows it: str for text and choices ("" = default), bool for switches."""
    out: dict[str, Any] = {}
    for f in FIELDS:
        val = _get(spec, f.key)
        if f.kind == "bool":
            out[f.key] = bool(val)
        elif f.kind == "list":
            out[f.key] = ",".join(val or [])
        elif f.kind == "lines":
            out[f.key] = "; ".join(val or [])
        elif f.key == "zero_stage":
            out[f.key] = "none" if val is None else str(val)
        else:
            out[f.key] = "" if val is None else (repr(val) if isinstance(val, float) else str(val))
    return out


def placeholder(key: str) -> str:
    """What an empty field means: LLaMA-Factory's default."""
    default = LF_DEFAULTS.get(key)
    if key == "lora_alpha":
        return _("2 × rank")
    if key == "eval_steps":
        return _("= logging steps")
    if key == "report_to":
        return _("none; or tensorboard, mlflow, swanlab, wandb")
    if default is None or default == "":
        return ""
    return _("default {value}", value=default)


def _convert(f: FormField, raw: Any) -> Any:
    if f.kind == "bool":
        return bool(raw)
    text = str(raw).strip() if raw is not None else ""
    if f.kind == "list":
        return [p.strip() for p in text.split(",") if p.strip()]
    if f.kind == "lines":
        return [p.strip() for p in text.split(";") if p.strip()]
    if f.key == "stage":
        return text or "sft"
    if text == "":
        return None
    if f.key == "zero_stage":
        return None if text == "none" else int(text)
    if f.key == "quantization_bit" or f.kind == "int":
        try:
            return int(text)
        except ValueError:
            raise ValueError(_("a whole number")) from None
    if f.kind == "float":
        try:
            return float(text)
        except ValueError:
            raise ValueError(_("a number such as 1e-4 or 0.1")) from None
    return text


def spec_from_form(base: TrainSpec, values: dict[str, Any],
                   rows: int | None = None) -> tuple[TrainSpec | None, dict[str, str]]:
    """A new spec from `base` with the form's values, and what they imply (core.config.field_rules, as
    `config init`; `rows`: the datasets' training rows); (None, {field: message}) when some are invalid."""
    errors: dict[str, str] = {}
    data = base.model_dump()
    launch = dict(data["launch"])
    launch_defaults = Launch().model_dump()
    shown = form_values(base)
    for key, raw in values.items():
        f = BY_KEY.get(key)
        if f is None or raw == shown.get(key):
            continue  # unchanged: keep the spec's own value (None stays "not written")
        try:
            val = _convert(f, raw)
        except ValueError as exc:
            errors[key] = str(exc)
            continue
        if key.startswith("launch."):
            name = key.split(".", 1)[1]
            launch[name] = launch_defaults[name] if val is None else val
        else:
            data[key] = val
    data["launch"] = launch
    if errors:
        return None, errors
    follow_changes(data, base, rows)
    try:
        return TrainSpec.model_validate(data), {}
    except ValidationError as exc:
        for error in exc.errors():
            loc = [str(p) for p in error.get("loc", ())]
            key = ".".join(loc[:2]) if loc and loc[0] == "launch" else (loc[0] if loc else "")
            errors.setdefault(key, error.get("msg", ""))
        return None, errors
