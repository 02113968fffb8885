"""How fast the GPUs really work: tokens per second and model FLOPs utilisation (MFU), and what would raise it.

    rate = token_rate(snapshot.tokens_per_s, snapshot.steps_per_s, tokens_per_step=4096)
    mfu = model_flops_utilisation(rate.tokens_per_s, params=7.6e9, gpu="mi300x", devices=8, method="lora")

The rates are the run's ProgressSnapshot's (core.train.metrics.RateWindow: a sliding window of the trainer's
own clock that a resume restarts; not measurable until it spans 10 s). LLaMA-Factory logs `total_tokens`
when `include_num_input_tokens_seen: true` (it counts every rank's tokens); without it the rate is the
steps' pace times the tokens of a step (effective batch x the dataset's typical row length, from the Data
step's token statistics) and is marked as an estimate.

MFU = model FLOPs per token x tokens per second / (peak dense matrix FLOP/s of one device for the run's precision
x devices). Model FLOPs per token: 6N for full fine-tuning (forward 2N, backward 4N), 4N when the base weights are
frozen (LoRA, QLoRA, freeze: no weight gradients for them); attention's own FLOPs and gradient checkpointing's
recomputation are not counted (MFU, not hardware FLOPs utilisation). The peaks are the GPU catalogue's
(core.config.gpu_catalog: the vendors' datasheet figures, bf16 / fp16 / fp32, without sparsity). On a CPU run
MFU is not applicable, and says so.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from core.i18n import _

FROZEN_BASE = ("lora", "qlora", "freeze")


@dataclass(frozen=True)
class TokenRate:
    tokens_per_s: float | None
    estimated: bool  # from the batch shape and the data's typical length, not LLaMA-Factory's count

    @property
    def measurable(self) -> bool:
        return self.tokens_per_s is not None


def token_rate(tokens_per_s: float | None, steps_per_s: float | None,
               tokens_per_step: float | None = None) -> TokenRate:
    """From a run's ProgressSnapshot (core.train.metrics: rates over a sliding window of the trainer's own
    clock, a resume restarting it): LLaMA-Factory's token count when it logs one, else the steps' pace
    times the tokens of a step, marked as an estimate."""
    if tokens_per_s is not None:
        return TokenRate(tokens_per_s, False)
    if steps_per_s and tokens_per_step:
        return TokenRate(steps_per_s * tokens_per_step, True)
    return TokenRate(None, tokens_per_step is not None)


def flops_per_token(params: float, method: str) -> float:
    return (4.0 if method in FROZEN_BASE else 6.0) * params


def peak_tflops(gpu: str | None, precision: str | None) -> float | None:
    """The catalogue's dense peak of one device for the run's precision (None: unknown GPU, or no such math)."""
    from core.config.gpu_catalog import gpu_model

    model = gpu_model(gpu or "")
    return model.peak(precision) if model is not None else None


def model_flops_utilisation(tokens_per_s: float | None, *, params: float | None, gpu: str | None, devices: int,
                            method: str, precision: str | None = "bf16") -> float | None:
    """A fraction (0.42 = 42 %); None when not applicable (CPU, an unknown GPU) or not measurable."""
    peak = peak_tflops(gpu, precision)
    if not tokens_per_s or not params or not peak or devices < 1:
        return None
    return flops_per_token(params, method) * tokens_per_s / (peak * 1e12 * devices)


@dataclass(frozen=True)
class Speedup:
    id: str
    text: str


def what_would_raise_it(spec_values: dict, *, memory_headroom: float | None, vendor: str | None,
                        mfu: float | None) -> list[Speedup]:
    """Changes that raise throughput, judged from the config (LLaMA-Factory keys) and the memory fit.

    `memory_headroom`: the fraction of device memory the fit leaves free (None: unknown)."""
    out: list[Speedup] = []
    if vendor is None:
        return out  # a CPU run: none of these apply
    if not spec_values.get("packing") and not spec_values.get("neat_packing"):
        out.append(Speedup("packing", _("packing: true puts several short rows in one sequence, so fewer tokens "
                                        "are padding (neat_packing: true keeps them from attending to each other)")))
    attn = spec_values.get("flash_attn") or "auto"
    if attn in ("disabled", "eager"):
        out.append(Speedup("attention", _("flash_attn: {attn} uses the slowest attention; sdpa is fast on {vendor} "
                                          "GPUs", attn=attn, vendor=vendor.upper() if vendor == "amd" else "NVIDIA")))
    if not spec_values.get("enable_liger_kernel"):
        out.append(Speedup("liger", _("enable_liger_kernel: true fuses RMSNorm, RoPE, SwiGLU and the loss "
                                      "(pip install liger-kernel; it supports ROCm)")))
    if memory_headroom is not None and memory_headroom > 0.35:
        out.append(Speedup("batch", _("the memory fit leaves {pct:.0%} of each device free: a larger "
                                      "per_device_train_batch_size (and fewer gradient_accumulation_steps) keeps "
                                      "the GPUs busier", pct=memory_headroom)))
    if not spec_values.get("disable_gradient_checkpointing") and memory_headroom is not None \
            and memory_headroom > 0.5:
        out.append(Speedup("checkpointing", _("gradient checkpointing recomputes activations (about a third more "
                                              "compute); with this much free memory, disable_gradient_checkpointing: "
                                              "true is faster")))
    if mfu is not None and mfu < 0.2 and not out:
        out.append(Speedup("small", _("below 20 % MFU with nothing left to tune: the model or the batch may be too "
                                      "small for these GPUs")))
    return out


@dataclass(frozen=True)
class RunShape:
    """What MFU and the estimate need to know about a run, read once from its config and the workspace."""

    params: float | None
    method: str  # lora | qlora | full | freeze
    gpu: str | None  # core.config.gpu_catalog id; None on a CPU run or an unknown GPU
    vendor: str | None  # amd | nvidia; None on a CPU run
    devices: int
    tokens_per_step: float | None  # effective batch x the dataset's median row length in tokens
    settings: tuple = ()  # (key, value) of the config's speed settings: packing, flash_attn, liger, checkpointing
    memory_headroom: float | None = None  # the share of a device the memory fit leaves free
    precision: str | None = None  # bf16 | pure_bf16 | fp16 | fp32 (None: fp32): which peak MFU is against


def run_shape(ws, config_path: str | None) -> RunShape | None:
    """From the run's YAML (core.config), the model's config.json, the doctor's GPUs and the Data step's
    token statistics; None when the config cannot be read."""
    import json

    from core.config.files import fit_targets, found_gpus, load_spec
    from core.config.gpu_catalog import gpu_model, match_gpu
    from core.config.memfit import estimate
    from core.config.model_shapes import shape_from_config, shape_from_name
    from core.config.spec import effective_batch, value
    from core.data.summary import load_summary

    try:
        spec = load_spec(ws, config_path)
    except Exception:  # a YAML edited into something unreadable: no figures, the rest of monitor goes on
        return None
    model = str(value(spec, "model_name_or_path") or "")
    shape = None
    try:
        shape = shape_from_config(json.loads((ws.abs(model) / "config.json").read_text(encoding="utf-8")))
    except (OSError, ValueError, KeyError, TypeError):
        shape = shape_from_name(model)
    method = "qlora" if spec.is_qlora else str(value(spec, "finetuning_type") or "lora")
    gpu = vendor = None
    devices = 0
    if spec.launch.device == "gpu":
        devices = spec.launch.world_size
        found = found_gpus(ws)
        catalog = match_gpu(found[0][0]) if found else gpu_model(spec.launch.gpu_model or "")
        if catalog is not None:
            gpu, vendor = catalog.id, catalog.vendor
    tokens = None
    datasets = value(spec, "dataset") or []
    summary = load_summary(ws.root, datasets[0]) if datasets else None
    if summary is not None and summary.token_percentiles.get("p50"):
        cutoff = value(spec, "cutoff_len") or summary.token_percentiles["p50"]
        tokens = effective_batch(spec) * min(summary.token_percentiles["p50"], cutoff)
    if value(spec, "include_num_input_tokens_seen"):
        # the run counts its own tokens: its rate is measured, never estimated (an estimate said until the
        # count's window spans 10 s, then the count, would be two answers to one question; seen in CI)
        tokens = None
    settings = tuple((key, value(spec, key)) for key in ("packing", "neat_packing", "flash_attn", "enable_liger_kernel",
                                                           "disable_gradient_checkpointing"))
    headroom = None
    targets = fit_targets(spec, found_gpus(ws)) if devices else []
    if shape is not None and targets:
        ratio = estimate(spec, shape, targets[0]).ratio
        headroom = None if ratio is None else max(0.0, 1.0 - ratio)
    return RunShape(shape.params if shape else None, method, gpu, vendor, devices, tokens, settings, headroom,
                    spec.precision)


@dataclass(frozen=True)
class Throughput:
    """How fast a run goes, as monitor and the Train step show it: steps/s, tokens/s (measured or estimated),
    MFU and what would raise it.

    `over` says what the rates span: "window" (a live run: the last minute of the trainer's clock, see
    core.train.metrics.RateWindow) or "run" (an ended run: between its first and last logged steps, as its
    run.json keeps them)."""

    rate: TokenRate
    mfu: float | None
    applicable: bool  # False on a CPU run: MFU means nothing there
    advice: tuple = ()
    steps_per_s: float | None = None
    over: str = "window"

    @classmethod
    def of(cls, snap, shape: RunShape | None) -> Throughput:
        """From a ProgressSnapshot's rates (a sliding window)."""
        return cls.from_rates(snap.tokens_per_s, snap.steps_per_s, shape)

    @classmethod
    def from_rates(cls, tokens_per_s: float | None, steps_per_s: float | None,
                   shape: RunShape | None, over: str = "window") -> Throughput:
        tokens_per_step = shape.tokens_per_step if shape else None
        rate = token_rate(tokens_per_s, steps_per_s, tokens_per_step)
        if shape is None or (shape.devices and shape.vendor is None):
            # the config or the GPU is unknown: MFU unknown, not "not applicable"
            return cls(rate, None, True, steps_per_s=steps_per_s, over=over)
        if not shape.devices:
            return cls(rate, None, False, steps_per_s=steps_per_s, over=over)  # a CPU run
        mfu = model_flops_utilisation(rate.tokens_per_s, params=shape.params, gpu=shape.gpu, devices=shape.devices,
                                      method=shape.method, precision=shape.precision)
        advice = what_would_raise_it(dict(shape.settings), memory_headroom=shape.memory_headroom,
                                     vendor=shape.vendor, mfu=mfu)
        return cls(rate, mfu, True, tuple(advice), steps_per_s, over)

    @classmethod
    def from_record(cls, kept: dict) -> Throughput:
        """What an ended run's record keeps (run_throughput; a record written before steps_per_s was kept has
        none). Advice is for a run that still goes: none."""
        def number(key: str) -> float | None:
            v = kept.get(key)
            return float(v) if isinstance(v, (int, float)) and not isinstance(v, bool) else None

        return cls(TokenRate(number("tokens_per_s"), bool(kept.get("tokens_estimated"))), number("mfu"),
                   bool(kept.get("mfu_applicable", True)), (), number("steps_per_s"), "run")

    @classmethod
    def kept(cls, record) -> Throughput | None:
        """The speed an ended run's record keeps (core.train.runs.RunRecord.throughput), the one said of it; None
        while it runs, or when it ended keeping none (then its metrics' last window is said)."""
        if record.active or not record.throughput:
            return None
        return cls.from_record(record.throughput)

    def without_advice(self) -> Throughput:
        return replace(self, advice=())

    def to_json(self) -> dict:
        return {"steps_per_s": self.steps_per_s, "tokens_per_s": self.rate.tokens_per_s,
                "tokens_estimated": self.rate.estimated,
                "mfu": None if self.mfu is None else round(self.mfu, 4), "mfu_applicable": self.applicable,
                "advice": [{"id": a.id, "text": a.text} for a in self.advice], "over": self.over}

    def text(self) -> str:
        """For the progress line, after its measured tokens/s: '~1234 tokens/s (estimate)  MFU 31%', or
        'MFU not applicable (CPU run)' (empty when nothing is known yet)."""
        parts = []
        if self.rate.estimated and self.rate.tokens_per_s is not None:
            parts.append(_("~{rate:.0f} tokens/s (estimate)", rate=self.rate.tokens_per_s))
        if not self.applicable:
            parts.append(_("MFU not applicable (CPU run)"))
        elif self.mfu is not None:
            parts.append(_("MFU {pct:.0%}", pct=self.mfu))
        return "  ".join(parts)

    def advice_lines(self) -> list[str]:
        """What would raise the throughput, one line each (the Train step and `monitor`'s text)."""
        return [_("to go faster: {advice}", advice=a.text) for a in self.advice]


def run_throughput(ws, directory, record) -> dict | None:
    """What a run's record keeps when it ends: steps/s and tokens/s over the whole run (LLaMA-Factory's
    total_tokens over its elapsed time, else the steps' pace x the tokens of a step, marked as an estimate)
    and its MFU; None when no step was logged. Throughput.from_record reads it back."""
    from core.train.metrics import LogRecord, MetricsTail
    from core.train.runs import trainer_log_source

    path, start = trainer_log_source(directory, record)
    rows = [r for r in MetricsTail(path, start).poll() if r.elapsed_s and r.eval_loss is None]
    if not rows:
        return None
    # between its first and its last logged step: a resumed run restarts the clock but not the step and token
    # counts (they come back from the checkpoint), and the first step carries the warm-up
    first, last = rows[0], rows[-1]
    if last.elapsed_s <= first.elapsed_s or last.step <= first.step:
        first = LogRecord(step=0, elapsed_s=0.0, total_tokens=0)
    seconds = last.elapsed_s - first.elapsed_s
    tokens = ((last.total_tokens - (first.total_tokens or 0)) / seconds) if last.total_tokens else None
    steps = (last.step - first.step) / seconds
    out = Throughput.from_rates(tokens, steps, run_shape(ws, record.config), over="run").to_json()
    for key in ("advice", "over"):  # a record is of the whole run, and advice is for a run that goes on
        out.pop(key)
    return out
