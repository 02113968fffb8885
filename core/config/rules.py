"""devtune's own checks of a TrainSpec, which hold whether or not LLaMA-Factory is installed.

Each rule is a plain function of the spec and a `RuleContext` (what was read from the workspace:
dataset_info.json, the Data step's summaries, the template list, the target GPUs, the memory fit)
returning `ConfigFinding`s. core.config.files builds the context; the LLaMA-Factory parser check is
core.config.lf_argcheck. Severity: error (the run would fail or train the wrong thing), warning (likely a
mistake or a waste), info (what will happen).
"""

from __future__ import annotations

import os
import re
from pathlib import Path
from typing import Callable

from core.config.rule_context import SEVERITIES, ConfigFinding, RuleContext
from core.config.eval_loss import rule_eval
from core.config.rules_data import rule_batch, rule_data
from core.config.rules_stage import rule_stage
from core.config.spec import TrainSpec, value
from core.config.templates import default_template
from core.config.trackers import rule_trackers
from core.config.yaml_out import deepspeed_path
from core.config.resume_point import zero_step_reason
from core.i18n import _, _n

HUB_ID = re.compile(r"^[A-Za-z0-9][\w.-]*/[\w.-]+$")
LOCAL_ROOTS = ("models", "saves", "exports", ".", "..", "~")


Rule = Callable[[TrainSpec, RuleContext], list[ConfigFinding]]


def is_local_model(model: str, root: Path) -> bool:
    """A folder (relative to the workspace, or absolute) rather than a hub id."""
    if (root / model).exists() or Path(model).expanduser().is_absolute():
        return True
    first = model.split("/", 1)[0]
    return not HUB_ID.match(model) or first in LOCAL_ROOTS


def rule_model(spec: TrainSpec, ctx: RuleContext) -> list[ConfigFinding]:
    model = spec.model_name_or_path
    if is_local_model(model, ctx.root):
        folder = Path(model).expanduser() if Path(model).expanduser().is_absolute() else ctx.root / model
        if not (folder / "config.json").is_file():
            return [ConfigFinding("error", "model.missing", _("model folder {path} not found (or has no config.json)",
                                                        path=model), "model_name_or_path",
                            _("give a local model folder or a hub id such as meta-llama/Meta-Llama-3-8B-Instruct"))]
        return []
    if os.environ.get("HF_HUB_OFFLINE") in ("1", "true", "TRUE"):
        return [ConfigFinding("warning", "model.offline", _("{model} is a hub id but HF_HUB_OFFLINE is set: it must already "
                                                      "be in the Hugging Face cache", model=model),
                        "model_name_or_path")]
    return [ConfigFinding("info", "model.hub", _("{model} will be downloaded from the hub on first use", model=model),
                    "model_name_or_path")]


def rule_method(spec: TrainSpec, ctx: RuleContext) -> list[ConfigFinding]:
    out: list[ConfigFinding] = []
    if spec.is_qlora:
        bits = value(spec, "quantization_bit")
        if bits not in (4, 8):
            out.append(ConfigFinding("error", "qlora.bits", _("QLoRA with bitsandbytes takes 4 or 8 bits, not {bits}",
                                                        bits=bits), "quantization_bit"))
        if spec.launch.device == "cpu":
            out.append(ConfigFinding("error", "qlora.cpu", _("QLoRA (bitsandbytes 4-bit) needs a GPU"), "finetuning_type",
                               _("use LoRA on a CPU")))
        else:
            out.append(ConfigFinding("info", "qlora.rocm", _("QLoRA needs bitsandbytes; on ROCm its ROCm build "
                                                      "(the doctor checks it)"), "finetuning_type"))
        if spec.zero_stage == 3:
            if bits != 4:
                out.append(ConfigFinding("error", "qlora.zero3_bits", _("QLoRA with ZeRO-3 needs 4-bit quantization "
                                                                  "(LLaMA-Factory refuses 8-bit)"),
                                   "quantization_bit"))
            if spec.offload:
                out.append(ConfigFinding("warning", "qlora.zero3_offload", _("ZeRO-3 cannot offload 4-bit parameters to "
                                                                       "CPU; turn offload off"), "offload"))
            out.append(ConfigFinding("info", "qlora.zero3", _("QLoRA + ZeRO-3 stores the 4-bit weights in bf16 containers "
                                                        "so DeepSpeed can shard them (needs bitsandbytes >= 0.43)"),
                               "zero_stage"))
        out.append(ConfigFinding("info", "qlora.merge", _("merge the adapter into the 16-bit base model, not the 4-bit "
                                                    "one (the Merge step does)"), "finetuning_type"))
    if spec.finetuning_type == "freeze" and spec.freeze_trainable_layers == 0:
        out.append(ConfigFinding("error", "freeze.layers", _("freeze_trainable_layers must not be 0"),
                           "freeze_trainable_layers"))
    if spec.uses_lora:
        rank = int(value(spec, "lora_rank"))
        alpha = int(value(spec, "lora_alpha"))
        if alpha < rank:
            out.append(ConfigFinding("info", "lora.alpha", _("lora_alpha {alpha} is below lora_rank {rank}: the adapter's "
                                                       "updates are scaled down", alpha=alpha, rank=rank),
                               "lora_alpha"))
    return out


def rule_template(spec: TrainSpec, ctx: RuleContext) -> list[ConfigFinding]:
    known = default_template(spec.model_name_or_path, ctx.catalog, ctx.root)
    chosen = spec.template
    if chosen is None:
        return [ConfigFinding("warning", "template.unset", _("no template: LLaMA-Factory guesses one from the tokenizer "
                                                       "(else `empty`); train, merge and serve must use the same one"),
                        "template", _("set template: {name}", name=known) if known else None)]
    if chosen not in ctx.catalog:
        return [ConfigFinding("error", "template.unknown", _("template {name} does not exist in LLaMA-Factory {version}",
                                                       name=chosen, version=ctx.catalog.version), "template",
                        _("set template: {name}", name=known) if known else None)]
    if known and chosen != known:
        return [ConfigFinding("warning", "template.mismatch", _("{model} is trained with template {known}; you chose "
                                                          "{chosen}", model=spec.model_name_or_path, known=known,
                                                          chosen=chosen), "template",
                        _("set template: {name}", name=known))]
    return []


def rule_precision(spec: TrainSpec, ctx: RuleContext) -> list[ConfigFinding]:
    prec = spec.precision or "fp32"
    if spec.launch.device == "cpu":
        if prec in ("bf16", "pure_bf16"):
            return [ConfigFinding("error", "precision.cpu_bf16", _("{precision} needs a GPU with bf16 (LLaMA-Factory stops "
                                                            "with: Your setup doesn't support bf16/gpu)",
                                                            precision=prec), "precision", _("use fp32 on a CPU"))]
        if prec == "fp16":
            return [ConfigFinding("warning", "precision.cpu_fp16", _("fp16 mixed precision is meant for GPUs"),
                            "precision", _("use fp32 on a CPU"))]
        return []
    out: list[ConfigFinding] = []
    lacking = [t.name for t in ctx.targets if t.bf16 is False]
    if prec in ("bf16", "pure_bf16") and lacking:
        out.append(ConfigFinding("error", "precision.no_bf16", _("{gpu} has no bf16 support", gpu=lacking[0]), "precision",
                           _("use fp16")))
    if prec == "fp32":
        out.append(ConfigFinding("info", "precision.fp32", _("fp32: twice the activation memory of bf16, and no Matrix "
                                                       "Cores"), "precision", _("use bf16 on Instinct GPUs")))
    if prec == "pure_bf16" and spec.zero_stage == 3:
        out.append(ConfigFinding("error", "precision.pure_bf16_zero3", _("pure_bf16 is incompatible with DeepSpeed ZeRO-3"),
                           "precision", _("use bf16")))
    return out


def rule_distributed(spec: TrainSpec, ctx: RuleContext) -> list[ConfigFinding]:
    launch, out = spec.launch, []
    if launch.device == "cpu":
        if launch.distributed:
            out.append(ConfigFinding("info", "launch.cpu_many", _n(
                "{n} training process on this CPU (gloo): it tests the multi-GPU path, it is not faster than one",
                "{n} training processes on this CPU (gloo): they test the multi-GPU path, not faster than one",
                launch.world_size), "launch"))
        if spec.zero_stage is not None:
            out.append(ConfigFinding("warning", "deepspeed.cpu", _("DeepSpeed on a CPU works but is slow and builds its "
                                                            "CPU kernels on first use"), "zero_stage"))
    else:
        if launch.distributed and spec.zero_stage is None:
            out.append(ConfigFinding("info", "launch.ddp", _("several GPUs without DeepSpeed: plain data parallel, every GPU "
                                                      "holds the whole model"), "zero_stage",
                               _("ZeRO-3 shards it across the GPUs")))
        if launch.nnodes > 1 and not launch.master_addr and launch.launcher != "slurm":
            out.append(ConfigFinding("error", "launch.master_addr", _("multi-node runs need the address of node 0 "
                                                               "(MASTER_ADDR)"), "launch",
                               _("devtune config edit --config {path} --master-addr HOST",
                                 path=ctx.config_path)))
        if ctx.found_gpus and launch.gpus_per_node > ctx.found_gpus:
            out.append(ConfigFinding("warning", "launch.gpus", _("{asked} GPUs per node asked, the doctor found {found}",
                                                          asked=launch.gpus_per_node, found=ctx.found_gpus),
                               "launch"))
        if spec.zero_stage is not None and not launch.distributed:
            out.append(ConfigFinding("info", "deepspeed.one_gpu", _("DeepSpeed on one GPU shards nothing; only offload "
                                                             "saves memory there"), "zero_stage"))
    ds = deepspeed_path(spec)
    if spec.deepspeed and ds and not (ctx.root / ds).is_file() and not Path(ds).is_absolute():
        out.append(ConfigFinding("error", "deepspeed.missing", _("DeepSpeed file {path} not found in the workspace",
                                                          path=ds), "deepspeed",
                           _("choose the ZeRO stage in devtune, which writes configs/ds_z*_config.json")))
    return out


def rule_output(spec: TrainSpec, ctx: RuleContext) -> list[ConfigFinding]:
    out: list[ConfigFinding] = []
    rel = spec.output_dir
    if Path(rel).is_absolute() or not rel.startswith("saves/"):
        out.append(ConfigFinding("warning", "output.outside", _("output_dir {path} is not under saves/: the Train and Merge "
                                                          "steps look there", path=rel), "output_dir"))
    folder = Path(rel) if Path(rel).is_absolute() else ctx.root / rel
    if folder.is_dir():
        checkpoints = sorted((p for p in folder.glob("checkpoint-*") if p.name[11:].isdigit()),
                             key=lambda p: int(p.name[11:]))
        overwrite = bool(value(spec, "overwrite_output_dir"))
        if overwrite and any(folder.iterdir()):
            out.append(ConfigFinding("warning", "output.overwrite", _("overwrite_output_dir: the earlier run in {path} "
                                                                "starts over and its log is cleared", path=rel),
                               "overwrite_output_dir"))
        elif checkpoints and not spec.resume_from_checkpoint and zero_step_reason(spec, folder):
            out.append(ConfigFinding("error", "output.nothing_left", _("{path} holds a finished run: {reason}", path=rel,
                                                                  reason=zero_step_reason(spec, folder)),
                                     "output_dir", _("choose a new output_dir under saves/, or set "
                                                     "overwrite_output_dir: true to train again from the start")))
        elif checkpoints and not spec.resume_from_checkpoint:
            out.append(ConfigFinding("info", "output.resume", _("{path} has {ckpt}: training resumes from it", path=rel,
                                                         ckpt=checkpoints[-1].name), "output_dir"))
        elif not checkpoints and any((folder / n).exists() for n in ("adapter_model.safetensors", "model.safetensors",
                                                                     "pytorch_model.bin")):
            out.append(ConfigFinding("error", "output.not_empty", _("{path} holds a finished run and no checkpoint: "
                                                             "LLaMA-Factory refuses it", path=rel), "output_dir",
                               _("choose a new output_dir under saves/")))
    if spec.resume_from_checkpoint and not (ctx.root / spec.resume_from_checkpoint).is_dir() \
            and not Path(spec.resume_from_checkpoint).is_dir():
        out.append(ConfigFinding("error", "output.resume_missing", _("checkpoint {path} not found",
                                                               path=spec.resume_from_checkpoint),
                           "resume_from_checkpoint"))
    if value(spec, "plot_loss"):
        import importlib.util

        if importlib.util.find_spec("matplotlib") is None:
            out.append(ConfigFinding("warning", "output.plot_loss", _("plot_loss needs matplotlib, which is not installed "
                                                                "(devtune draws the loss curve itself)"), "plot_loss",
                               _("set plot_loss: false")))
    return out


def rule_fit(spec: TrainSpec, ctx: RuleContext) -> list[ConfigFinding]:
    from core.config.memfit import gib, verdict_label

    fit = ctx.fit
    if fit is None:
        return [ConfigFinding("info", "fit.unknown_model", _("memory fit unknown: the model's shape could not be read"),
                        "model_name_or_path")]
    if fit.verdict == "unknown":
        return [ConfigFinding("info", "fit.no_target", _("about {need} per GPU; no GPU found here: choose a target GPU",
                                                   need=gib(fit.per_device_bytes)), "launch")]
    fix = "; ".join(a.text for a in ctx.advice) or None
    severity = {"fits": "info", "tight": "warning", "does_not_fit": "error"}[fit.verdict]
    out = [ConfigFinding(severity, f"fit.{fit.verdict}", _("memory: {need} of {have} per device on {device} ({verdict})",
                                                      need=gib(fit.per_device_bytes), have=gib(fit.capacity_bytes),
                                                      device=_judged_on(spec, ctx, fit.device),
                                                      verdict=verdict_label(fit.verdict)),
                         None, fix)]
    two = ctx.zero2_fit
    if fit.verdict == "fits" and two is not None and two.verdict == "fits":
        out.append(ConfigFinding("info", "deepspeed.zero2_enough", _(
            "ZeRO-2 would fit too ({need} per device): it shards only gradients and optimizer state, so every "
            "device keeps the whole weights and talks less than under ZeRO-3, usually faster",
            need=gib(two.per_device_bytes)), "zero_stage", _("--zero 2, if speed matters more than headroom")))
    if spec.launch.device == "gpu" and ctx.doctor_ran and not ctx.found_gpus:
        out.append(ConfigFinding("warning", "fit.no_gpu_here", _("the doctor found no GPU on this machine: this config "
                                                                 "trains on GPUs and will not start here"), "launch",
                                 _("run it where the GPUs are, or use the cpu-demo preset here")))
    return out


def _judged_on(spec: TrainSpec, ctx: RuleContext, device: str) -> str:
    """The device the fit was judged against, and where that choice came from."""
    target = ctx.targets[0] if ctx.targets else None
    if target is None or target.source == "host":
        return device
    if target.source == "doctor":
        return _("{device}, found by the doctor", device=device)
    if ctx.doctor_ran:
        return _("{device}, the config's gpu_model {id}; the doctor found no GPU here", device=device,
                 id=spec.launch.gpu_model)
    return _("{device}, the config's gpu_model {id}; the doctor has not looked for GPUs here (devtune doctor)",
             device=device, id=spec.launch.gpu_model)


def rule_kept(spec: TrainSpec, ctx: RuleContext) -> list[ConfigFinding]:
    if not spec.extra:
        return []
    return [ConfigFinding("info", "import.kept", _("kept as imported (devtune does not model them): {keys}",
                                             keys=", ".join(spec.extra)), None)]


RULES: tuple[Rule, ...] = (rule_model, rule_method, rule_template, rule_data, rule_eval, rule_stage, rule_batch,
                           rule_precision, rule_distributed, rule_output, rule_trackers, rule_fit, rule_kept)


def check_rules(spec: TrainSpec, ctx: RuleContext) -> list[ConfigFinding]:
    findings = [f for rule in RULES for f in rule(spec, ctx)]
    order = {s: i for i, s in enumerate(SEVERITIES)}
    return sorted(findings, key=lambda f: order[f.severity])
