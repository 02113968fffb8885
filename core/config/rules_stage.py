"""Config checks about the training stage (pt, sft, dpo, kto): that each dataset's kind is what the
stage reads, the stage's own keys, and the adapter a DPO / KTO run starts from.

The kind of a dataset is what LLaMA-Factory reads its entry in dataset_info.json as (`ranking: true`:
preference pairs; a `kto_tag` column: KTO feedback; a prompt column and no response: pre-training text),
the same reading the Data step judges the rows by (core.data.dataset_entry).
"""

from __future__ import annotations

from core.config.rule_context import ConfigFinding, RuleContext
from core.config.spec import PREF_LOSSES, STAGE_KEYS, STAGES, TrainSpec
from core.i18n import _


def kind_text(kind: str) -> str:
    return {"supervised": _("supervised rows (one answer each)"), "pretrain": _("pre-training text"),
            "preference": _("preference pairs (a chosen and a rejected answer)"),
            "kto": _("KTO feedback (answers tagged true or false)")}.get(kind, kind)


def _why(stage: str, kind: str) -> str:
    if stage == "dpo":
        return _("dpo learns from pairs: register a file with a chosen and a rejected answer per prompt "
                 "(dataset_info.json: \"ranking\": true)")
    if stage == "kto":
        return _("kto needs a boolean tag per answer (a kto_tag column: true = desirable)")
    if stage == "sft" and kind == "preference":
        return _("sft trains on one answer per prompt; LLaMA-Factory drops every ranked row (use dpo, or a "
                 "supervised copy of the chosen answers)")
    return _("sft needs a response to learn (pre-training text trains with pt)")


def dataset_kind(entry: dict, summary=None) -> str:
    """The kind LLaMA-Factory reads an entry as (the Data step's saved kind when the entry says no more)."""
    from core.data.dataset_entry import schema_from_entry

    kind = schema_from_entry(entry).task
    if kind == "supervised" and summary is not None and getattr(summary, "kind", "supervised") != "supervised":
        return summary.kind
    return kind


def rule_stage(spec: TrainSpec, ctx: RuleContext) -> list[ConfigFinding]:
    from core.data.schema import STAGES_FOR_KIND

    out: list[ConfigFinding] = []
    stage = spec.stage
    if stage not in STAGES:
        out.append(ConfigFinding("warning", "stage.other", _(
            "stage {stage}: devtune sets up pt, sft, dpo and kto; this one is passed to LLaMA-Factory unchecked",
            stage=stage), "stage"))
        return out
    for name in spec.dataset:
        entry = (ctx.dataset_info or {}).get(name)
        if not isinstance(entry, dict):
            continue  # rule_data says it is not registered
        kind = dataset_kind(entry, ctx.summaries.get(name))
        if stage not in STAGES_FOR_KIND.get(kind, ()):
            out.append(ConfigFinding("error", "stage.dataset_kind", _(
                "dataset {name} holds {kind}; stage {stage} cannot train on it", name=name, kind=kind_text(kind),
                stage=stage), "dataset", _why(stage, kind)))
    used = set(STAGE_KEYS.get(stage, ()))
    for key in sorted({k for keys in STAGE_KEYS.values() for k in keys} - used):
        if getattr(spec, key) is not None:
            out.append(ConfigFinding("warning", "stage.unused_key", _(
                "{key} is set but stage {stage} does not use it", key=key, stage=stage), key))
    if spec.pref_loss is not None and spec.pref_loss not in PREF_LOSSES:
        out.append(ConfigFinding("error", "stage.pref_loss", _(
            "pref_loss {loss} is not one of {losses}", loss=spec.pref_loss, losses=", ".join(PREF_LOSSES)),
            "pref_loss"))
    if spec.adapter_name_or_path:
        path = ctx.root / spec.adapter_name_or_path
        local = path.exists() or spec.adapter_name_or_path.startswith(("saves/", "/", "."))
        if local and not (path / "adapter_config.json").is_file():
            out.append(ConfigFinding("error", "stage.adapter_missing", _(
                "adapter_name_or_path {path}: no adapter_config.json there", path=spec.adapter_name_or_path),
                "adapter_name_or_path", _("point it at a finished LoRA run's folder (saves/RUN)")))
        elif not spec.uses_lora:
            out.append(ConfigFinding("warning", "stage.adapter_full", _(
                "an adapter to start from with finetuning_type {method}: merge it first (Merge step) and train the "
                "merged model", method=spec.finetuning_type), "adapter_name_or_path"))
    elif stage in ("dpo", "kto") and spec.uses_lora:
        out.append(ConfigFinding("info", "stage.from_base", _(
            "{stage} starts from the base model; a preference pass usually starts from the SFT run's adapter",
            stage=stage), "adapter_name_or_path", _("adapter_name_or_path: saves/RUN (the SFT run)")))
    return out
