"""Memory fit: how much memory each GPU needs for a TrainSpec, against the GPUs it runs on.

The method (docs/memory-fit.md has the derivation and the comparison with published figures):

    per device = frozen weights                 (16-bit, or 4.127 bits/param for QLoRA's nf4 linears,
                                                 divided by the GPUs under ZeRO-3, 0 when offloaded)
               + trainable weights, gradients   (LoRA/additional targets, the freeze layers or all
                 and AdamW state                 parameters: 4+4+8 bytes/param as LLaMA-Factory upcasts
                                                 them to fp32 without DeepSpeed; DeepSpeed's 2 + 18
                                                 bytes/param, partitioned by ZeRO-2/3, 0 when offloaded)
               + activations                    (micro-batch × sequence: with gradient checkpointing, on by
                                                 default in LLaMA-Factory, one hidden state per layer plus
                                                 one layer's full set; without, every layer's full set;
                                                 eager attention adds heads × seq² per layer)
               + logits                         (micro-batch × sequence × vocabulary: 16-bit logits, their
                                                 fp32 copy for the loss and its fp32 gradient)
               + buffers                        (ZeRO-2 gradient bucket, ZeRO-3 gathered layers and
                                                 buckets, the QLoRA dequantization buffer)
               + runtime                        (HIP/CUDA context, 5% allocator fragmentation)

The sequence length is `cutoff_len`, or the longest row of the dataset when the Data step measured it
and packing is off (LLaMA-Factory pads each batch to its longest row, not to cutoff_len).

Verdict: fits (≤ 85% of the device memory), tight (85-100%: may fail on the longest batch or with
fragmentation), does_not_fit (> 100%). See core.config.memfit_advice for what to change.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from core.config.gpu_catalog import GIB, GpuTarget
from core.config.model_shapes import LINEAR_MODULES, ModelShape
from core.config.spec import TrainSpec, effective_precision, value
from core.i18n import _, said

FIT_RATIO = 0.85
NF4_BYTES = (4 + 8 / 64 + 32 / (64 * 256)) / 8  # nf4 + double-quantized absmax constants (QLoRA paper)
INT8_BYTES = 1.0 + 4 / 4096  # LLM.int8 weights + per-row scale (order of)
GPU_CONTEXT = int(0.75 * GIB)
CPU_RUNTIME = int(0.5 * GIB)
FRAGMENTATION = 0.05
ZERO2_BUCKET = 500_000_000  # reduce_bucket_size elements in LLaMA-Factory's ds_z2 configs

VERDICTS = ("fits", "tight", "does_not_fit", "unknown")


@dataclass(frozen=True)
class MemoryPart:
    key: str  # weights | reference | trainable | gradients | optimizer | activations | logits | buffers | runtime
    bytes: int

    @property
    def label(self) -> str:
        return part_label(self.key)


@dataclass(frozen=True)
class FitEstimate:
    parts: tuple[MemoryPart, ...]
    capacity_bytes: int | None  # memory of one device; None when no target is known
    device: str  # the target's name
    devices: int  # data-parallel processes (GPUs × nodes)
    seq_len: int
    micro_batch: int
    host_bytes: int = 0  # CPU RAM per node for DeepSpeed offload
    trainable_params: int = 0
    total_params: int = 0
    notes: tuple[str, ...] = field(default=())

    @property
    def per_device_bytes(self) -> int:
        return sum(p.bytes for p in self.parts)

    @property
    def ratio(self) -> float | None:
        return self.per_device_bytes / self.capacity_bytes if self.capacity_bytes else None

    @property
    def verdict(self) -> str:
        ratio = self.ratio
        if ratio is None:
            return "unknown"
        return "fits" if ratio <= FIT_RATIO else "tight" if ratio <= 1.0 else "does_not_fit"

    def part(self, key: str) -> int:
        return sum(p.bytes for p in self.parts if p.key == key)


def part_label(key: str) -> str:
    return {
        "weights": _("frozen weights"),
        "trainable": _("trainable weights"),
        "reference": _("reference model"),
        "gradients": _("gradients"),
        "optimizer": _("optimizer state"),
        "activations": _("activations"),
        "logits": _("logits and loss"),
        "buffers": _("DeepSpeed / quantization buffers"),
        "runtime": _("runtime and fragmentation"),
    }.get(key, key)


def verdict_label(verdict: str) -> str:
    return {"fits": said("fits"), "tight": said("tight"), "does_not_fit": said("does not fit"),
            "unknown": said("no target GPU")}.get(verdict, verdict)


def gib(n: int | float) -> str:
    return f"{n / GIB:.1f} GiB"


def human_bytes(n: int | float) -> str:
    """GiB from 1 GiB up, MiB below (a tiny model's parts are not all "0.0 GiB")."""
    return gib(n) if n >= GIB else f"{n / 1024 ** 2:.0f} MiB"


def _targets(spec: TrainSpec) -> list[str]:
    raw = str(value(spec, "lora_target") or "all")
    names = [t.strip() for t in raw.split(",") if t.strip()]
    if "all" in names:
        return list(LINEAR_MODULES)
    return [m for m in LINEAR_MODULES if any(n == m or n in m for n in names)]


def trainable_params(spec: TrainSpec, shape: ModelShape) -> int:
    ft = spec.finetuning_type
    if ft == "full":
        return shape.params
    if ft == "freeze":
        layers = min(shape.layers, abs(int(value(spec, "freeze_trainable_layers") or 2)))
        return layers * shape.layer_params
    rank = int(value(spec, "lora_rank"))
    dims = shape.linear_dims()
    per_layer = 0
    for module in _targets(spec):
        a, b = dims[module]
        per_layer += rank * (a + b) * (shape.experts if module in ("gate_proj", "up_proj", "down_proj") else 1)
    total = per_layer * shape.layers
    extra = str(value(spec, "additional_target") or "")
    if "embed_tokens" in extra:
        total += shape.embed_params
    if "lm_head" in extra:
        total += shape.head_params or shape.embed_params
    return total


def _frozen_weight_bytes(spec: TrainSpec, shape: ModelShape, w_bytes: int) -> float:
    ft = spec.finetuning_type
    if ft == "full":
        return 0.0
    if ft == "freeze":
        return (shape.params - trainable_params(spec, shape)) * w_bytes
    bits = value(spec, "quantization_bit")
    if bits in (4, 8) and str(value(spec, "quantization_method")) == "bnb":
        per = NF4_BYTES if bits == 4 else INT8_BYTES
        return shape.linear_params * per + (shape.params - shape.linear_params) * w_bytes
    return shape.params * w_bytes


def activation_bytes(spec: TrainSpec, shape: ModelShape, seq: int, batch: int, act_bytes: int) -> int:
    """Activations kept for the backward pass (see the module docstring)."""
    h, q, kv = shape.hidden, shape.q_dim, shape.kv_dim
    per_token_layer = 8 * h + 3 * q + 3 * kv + 4 * shape.intermediate * shape.active_experts
    if spec.uses_lora and float(value(spec, "lora_dropout") or 0) > 0:
        per_token_layer += 3 * h + q + 2 * h + shape.intermediate  # dropout copies of adapted inputs
    eager = str(value(spec, "flash_attn")) == "disabled"
    attn_scores = 2 * shape.heads * seq * seq * act_bytes * batch if eager else 0
    tokens = batch * seq
    if bool(value(spec, "disable_gradient_checkpointing")):
        return shape.layers * (tokens * per_token_layer * act_bytes + attn_scores)
    return tokens * shape.layers * h * act_bytes + tokens * per_token_layer * act_bytes + attn_scores


def estimate(spec: TrainSpec, shape: ModelShape, target: GpuTarget | None, *,
             seq_len: int | None = None) -> FitEstimate:
    """Per-device memory for `spec` on `target` (None: the parts without a verdict)."""
    prec = effective_precision(spec)
    on_cpu = spec.launch.device == "cpu"
    act_b = 4 if prec == "fp32" else 2
    w_b = 4 if prec == "fp32" else 2
    n = spec.launch.world_size
    nodes = spec.launch.nnodes
    stage = spec.zero_stage
    offload = bool(spec.offload) and stage in (2, 3)
    seq = int(seq_len or value(spec, "cutoff_len"))
    batch = int(value(spec, "per_device_train_batch_size"))
    p_train = trainable_params(spec, shape)
    notes: list[str] = []

    frozen = _frozen_weight_bytes(spec, shape, w_b)
    host = 0.0
    if stage == 3:
        if offload:
            host += frozen / nodes
            frozen = 0.0
        else:
            frozen /= n

    if stage is None:
        if prec == "pure_bf16":
            t_w, t_g, t_o = 2, 2, 4
        else:
            t_w, t_g, t_o = 4, 4, 8  # LLaMA-Factory upcasts trainable parameters to fp32
        trainable = p_train * t_w
        grads = p_train * t_g * (2 if n > 1 else 1)  # DDP keeps a bucket copy of the gradients
        optim = p_train * t_o
    else:
        half = prec != "fp32"
        t_w = 2 if half else 4
        rest_g, rest_o = (6, 12) if half else (4, 8)  # DeepSpeed: 2 + 18 bytes/param in mixed precision
        trainable, grads, optim = p_train * t_w, p_train * rest_g, p_train * rest_o
        if stage == 2:
            grads, optim = grads / n, optim / n
        elif stage == 3:
            trainable, grads, optim = trainable / n, grads / n, optim / n
        if offload:
            host += (p_train * (rest_g + rest_o) + (p_train * t_w if stage == 3 else 0)) / nodes * 1.5
            optim = 0.0
            if stage == 3:
                trainable = 0.0
                grads = 0.0

    # dpo / kto: each step runs the chosen and the rejected (KTO: the KL) sequences together, twice the rows
    rows = batch * (2 if spec.stage in ("dpo", "kto") else 1)
    acts = activation_bytes(spec, shape, seq, rows, act_b)
    logits = rows * seq * shape.vocab * (act_b + 4 + 4)
    reference = 0.0
    if spec.reference_copy:  # full / freeze (or a separate ref_model): a second, frozen copy of the model
        reference = shape.params * w_b / (n if stage == 3 else 1)
        notes.append(_("{stage}: a frozen reference copy of the model is held beside the one that trains",
                       stage=spec.stage))
    elif spec.loads_reference:
        notes.append(_("{stage} with LoRA: the base model with the adapter switched off serves as the reference "
                       "(no second copy)", stage=spec.stage))

    buffers = 0.0
    if stage == 2 or stage == 0:
        buffers += min(ZERO2_BUCKET, max(p_train, 1)) * (2 if prec != "fp32" else 4)
    elif stage == 3:
        buffers += 4 * shape.largest_layer_params + 2 * 1.9 * shape.hidden ** 2
    if spec.is_qlora:
        buffers += 2 * shape.hidden * shape.intermediate  # one dequantized linear at a time

    dynamic = acts + logits + grads + buffers
    runtime = (CPU_RUNTIME if on_cpu else GPU_CONTEXT) + FRAGMENTATION * dynamic

    if shape.source == "name":
        notes.append(_("model shape estimated from the size in its name"))
    if shape.experts > 1:
        notes.append(_("mixture-of-experts model: all experts counted in the weights, active ones in activations"))

    parts = tuple(MemoryPart(k, int(v)) for k, v in (
        ("weights", frozen), ("reference", reference), ("trainable", trainable), ("gradients", grads),
        ("optimizer", optim), ("activations", acts), ("logits", logits), ("buffers", buffers), ("runtime", runtime)) if v > 0)
    return FitEstimate(
        parts=parts,
        capacity_bytes=target.memory_bytes if target else None,
        device=target.name if target else "",
        devices=n,
        seq_len=seq,
        micro_batch=batch,
        host_bytes=int(host),
        trainable_params=p_train,
        total_params=shape.params,
        notes=tuple(notes),
    )


def max_micro_batch(spec: TrainSpec, shape: ModelShape, target: GpuTarget, *, seq_len: int | None = None,
                    limit: int = 256) -> int:
    """The largest per-device batch whose estimate still fits (0 when even 1 does not)."""
    best, batch = 0, 1
    while batch <= limit:
        trial = spec.model_copy(update={"per_device_train_batch_size": batch})
        if estimate(trial, shape, target, seq_len=seq_len).verdict != "fits":
            break
        best, batch = batch, batch * 2
    return best
