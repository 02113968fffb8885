"""What to change when a run is tight or does not fit: each candidate change is estimated again with
core.config.memfit, and the ones that help are returned, least disruptive first (a smaller micro-batch with
more accumulation keeps the effective batch; a shorter cutoff only when the data allows it; then
gradient checkpointing, memory-efficient attention, ZeRO-3, offload, QLoRA, more or bigger GPUs)."""

from __future__ import annotations

from dataclasses import dataclass

from core.config.gpu_catalog import CATALOG, GpuTarget
from core.config.memfit import FitEstimate, estimate
from core.config.model_shapes import ModelShape
from core.config.spec import TrainSpec, value
from core.i18n import _

RANK = {"fits": 0, "tight": 1, "does_not_fit": 2, "unknown": 3}


@dataclass(frozen=True)
class FitAdvice:
    key: str  # batch | cutoff | checkpointing | attention | zero3 | offload | qlora | lora | gpus | gpu_model
    text: str
    estimate: FitEstimate
    update: dict  # TrainSpec fields to set (launch fields under "launch")


def _apply(spec: TrainSpec, update: dict) -> TrainSpec:
    launch = update.get("launch")
    fields = {k: v for k, v in update.items() if k != "launch"}
    if launch:
        fields["launch"] = spec.launch.model_copy(update=launch)
    return spec.model_copy(update=fields)


def _candidates(spec: TrainSpec, p99: int | None, seq: int) -> list[tuple[str, str, dict]]:
    out: list[tuple[str, str, dict]] = []
    batch = int(value(spec, "per_device_train_batch_size"))
    accum = int(value(spec, "gradient_accumulation_steps"))
    if batch > 1:
        out.append(("batch", _("per-device batch 1 with gradient accumulation {accum} (same effective batch)",
                                accum=accum * batch),
                    {"per_device_train_batch_size": 1, "gradient_accumulation_steps": accum * batch}))
    if p99 and p99 < seq:
        cutoff = max(64, -(-p99 // 64) * 64)
        if cutoff < seq:
            out.append(("cutoff", _("cutoff_len {cutoff} (99% of the rows fit; longer ones are truncated)",
                                    cutoff=cutoff), {"cutoff_len": cutoff}))
    if value(spec, "disable_gradient_checkpointing"):
        out.append(("checkpointing", _("turn gradient checkpointing back on"),
                    {"disable_gradient_checkpointing": None}))
    if str(value(spec, "flash_attn")) == "disabled":
        out.append(("attention", _("memory-efficient attention (sdpa)"), {"flash_attn": "sdpa"}))
    if spec.launch.device == "gpu":
        if spec.launch.world_size > 1 and spec.zero_stage != 3:
            out.append(("zero3", _("DeepSpeed ZeRO-3: shard weights, gradients and optimizer across the GPUs"),
                        {"zero_stage": 3, "deepspeed": None}))
        if spec.zero_stage in (2, 3) and not spec.offload and not spec.is_qlora:
            out.append(("offload", _("DeepSpeed CPU offload (slower; needs CPU RAM)"),
                        {"offload": True, "deepspeed": None}))
        if spec.finetuning_type == "lora":
            out.append(("qlora", _("QLoRA: the base model in 4 bits (bitsandbytes)"),
                        {"finetuning_type": "qlora", "quantization_bit": 4}))
        if spec.finetuning_type in ("full", "freeze"):
            out.append(("lora", _("LoRA instead of {method} fine-tuning", method=spec.finetuning_type),
                        {"finetuning_type": "lora"}))
    return out


def advise(spec: TrainSpec, shape: ModelShape, target: GpuTarget | None, *, seq_len: int | None = None,
           p99: int | None = None, limit: int = 4) -> list[FitAdvice]:
    """Changes that make the run fit better, each with its new estimate (empty when it fits)."""
    if target is None:
        return []
    now = estimate(spec, shape, target, seq_len=seq_len)
    if now.verdict == "fits":
        return []
    seq = now.seq_len
    found: list[FitAdvice] = []
    for key, text, update in _candidates(spec, p99, seq):
        trial = _apply(spec, update)
        new_seq = min(seq, int(update["cutoff_len"])) if "cutoff_len" in update else seq_len
        est = estimate(trial, shape, target, seq_len=new_seq)
        if RANK[est.verdict] < RANK[now.verdict] or est.per_device_bytes < 0.9 * now.per_device_bytes:
            found.append(FitAdvice(key, text, est, update))
    if spec.launch.device == "gpu":
        more = _more_gpus(spec, shape, target, seq_len)
        if more:
            found.append(more)
        bigger = _bigger_gpu(spec, shape, target, seq_len)
        if bigger:
            found.append(bigger)
    found.sort(key=lambda a: RANK[a.estimate.verdict])  # stable: the least disruptive first within a rank
    return found[:limit]


def _more_gpus(spec: TrainSpec, shape: ModelShape, target: GpuTarget, seq_len: int | None) -> FitAdvice | None:
    for gpus in (2, 4, 8):
        if gpus <= spec.launch.gpus_per_node:
            continue
        update = {"zero_stage": 3, "deepspeed": None, "launch": {"gpus_per_node": gpus}}
        est = estimate(_apply(spec, update), shape, target, seq_len=seq_len)
        if est.verdict == "fits":
            return FitAdvice("gpus", _("{n} GPUs per node with DeepSpeed ZeRO-3", n=gpus), est, update)
    return None


def _bigger_gpu(spec: TrainSpec, shape: ModelShape, target: GpuTarget, seq_len: int | None) -> FitAdvice | None:
    for model in sorted(CATALOG, key=lambda g: g.memory_bytes):
        if model.memory_bytes <= target.memory_bytes:
            continue
        bigger = GpuTarget(model.name, model.memory_bytes, target.count, model.bf16)
        est = estimate(spec, shape, bigger, seq_len=seq_len)
        if est.verdict == "fits":
            return FitAdvice("gpu_model", _("a GPU with more memory, such as {name}", name=model.name), est,
                             {"launch": {"gpu_model": model.id}})
    return None
