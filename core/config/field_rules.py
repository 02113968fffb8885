"""What follows when a field of a training spec changes: the one place for the rules that tie fields together,
applied by the Config form (core.config.form.spec_from_form) and by `devtune config init`'s flags alike.

- A new method: the 4/8-bit choice belongs to QLoRA. Leaving QLoRA drops it (LLaMA-Factory would otherwise
  train `finetuning_type: lora` + `quantization_bit: 4` as QLoRA); other methods keep what they had (an
  imported HQQ/OFT setup).
- A new ZeRO stage or offload: devtune writes its own DeepSpeed JSON for it (a person's JSON is for the old one).
- Clearing the eval set turns the eval loss off (eval_strategy: no, so it is not wired again); naming one
  turns it on.
- A new training stage: that stage's keys and its own output folder (core.config.stages.with_stage, as
  `config init --stage`), e.g. saves/cpu-demo -> saves/cpu-demo-dpo.
- A new run length (GPUs, nodes, batch, accumulation, epochs, max_steps, logging steps): an eval interval that
  devtune chose (about TARGET_EVALS evaluations over the run, core.config.eval_loss.eval_steps_for) is chosen
  again for the new length; one the person typed stays.
"""

from __future__ import annotations

from typing import Any

from pydantic import ValidationError

from core.config.eval_loss import eval_steps_for
from core.config.spec import TrainSpec
from core.config.stages import with_stage


def follow_changes(data: dict[str, Any], base: TrainSpec, rows: int | None = None) -> None:
    """Apply, in place, to `data` (a changed copy of `base.model_dump()`) what its changes imply. `rows`: the
    training rows of the datasets (None when unknown: devtune's interval is then save_steps)."""
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
    if data.get("stage") != base.stage:
        _follow_stage(data, base)
    if data.get("report_to") != base.report_to:
        _follow_trackers(data)
    _follow_run_length(data, base, rows)


def _follow_trackers(data: dict[str, Any]) -> None:
    """report_to as LLaMA-Factory takes it (swanlab is its use_swanlab, in SwanLab's local mode); an unknown name
    stays as typed, for the config check to name."""
    from core.config.trackers import UnknownTracker, parse_report_to, report_to_value, yaml_keys

    try:
        trackers = parse_report_to(data.get("report_to"))
    except UnknownTracker:
        return
    data["report_to"] = report_to_value(trackers)
    extra = {k: v for k, v in (data.get("extra") or {}).items() if not k.startswith("swanlab_") and k != "use_swanlab"}
    data["extra"] = {**extra, **yaml_keys(trackers)}


def _valid(data: dict[str, Any]) -> TrainSpec | None:
    try:
        return TrainSpec.model_validate(data)
    except ValidationError:
        return None  # the caller reports what is wrong; no rule follows from an invalid value


def _follow_stage(data: dict[str, Any], base: TrainSpec) -> None:
    """The new stage's keys and folder; what the person set in the same change stays as set."""
    spec = _valid(data)
    if spec is None:
        return
    before = base.model_dump()
    asked = {k for k, v in data.items() if k != "stage" and v != before.get(k)}
    loss = spec.pref_loss if "pref_loss" in asked else None
    staged = with_stage(spec, spec.stage, pref_loss=loss).model_dump()
    data.update({k: v for k, v in staged.items() if k not in asked})


def _follow_run_length(data: dict[str, Any], base: TrainSpec, rows: int | None) -> None:
    if not data.get("eval_dataset") or base.eval_steps is None or data.get("eval_steps") != base.eval_steps:
        return  # no eval loss, or the person set the interval in this change
    if base.eval_steps != eval_steps_for(base, rows):
        return  # an interval the person chose
    spec = _valid(data)
    if spec is not None:
        data["eval_steps"] = eval_steps_for(spec, rows)
