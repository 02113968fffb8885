"""A spec set up for one training stage (pt, sft, dpo, kto), with that stage's own keys at LLaMA-Factory's
example values (examples/train_lora/*_dpo.yaml, *_kto.yaml, *_pretrain.yaml) and its own output folder."""

from __future__ import annotations

from core.config.spec import PREF_LOSSES, STAGE_KEYS, STAGES, TrainSpec

CLEARED = {k: None for keys in STAGE_KEYS.values() for k in keys}


def with_stage(spec: TrainSpec, stage: str, *, pref_loss: str | None = None, adapter: str | None = None) -> TrainSpec:
    """`spec` for `stage`: the other stages' keys cleared; dpo gets pref_beta 0.1 and pref_loss (sigmoid
    unless asked; simpo with its gamma), kto its beta; an SFT adapter to start from when given."""
    if stage not in STAGES:
        raise ValueError(stage)
    if pref_loss is not None and pref_loss not in PREF_LOSSES:
        raise ValueError(pref_loss)
    update: dict = {**CLEARED, "stage": stage}
    if stage == "dpo":
        loss = pref_loss or "sigmoid"
        update.update(pref_beta=0.1, pref_loss=loss)
        if loss == "simpo":
            update["simpo_gamma"] = 0.5
    elif stage == "kto":
        update.update(pref_beta=0.1)
    if adapter:
        update["adapter_name_or_path"] = adapter
    out = spec.output_dir.rstrip("/")
    base = out.rsplit("-", 1)[0] if out.rsplit("-", 1)[-1] in STAGES else out
    update["output_dir"] = base if stage == "sft" else f"{base}-{stage}"
    return TrainSpec.model_validate({**spec.model_dump(), **update})
