"""TrainSpec: what the person chose for one LLaMA-Factory SFT run, as a pydantic model.

The fields are LLaMA-Factory's own argument names (the keys of the YAML `llamafactory-cli train`
reads), so a spec maps to the YAML one to one. A field left at None is not written: LLaMA-Factory
then uses its default, listed in `LF_DEFAULTS` (read from LLaMA-Factory 0.9.5 and transformers 5.6;
tests/core/test_config_lfcheck.py compares them with the installed dataclasses). `value(spec, key)`
gives the value in effect either way.

Three things are devtune's own and never reach the YAML as such:
- `finetuning_type: qlora` is written as `finetuning_type: lora` + `quantization_bit: 4` (bitsandbytes);
- `precision` becomes `bf16: true`, `fp16: true`, `pure_bf16: true` or `bf16: false` (fp32);
- `zero_stage` / `offload` choose the DeepSpeed JSON (core.config.deepspeed) that `deepspeed` points to,
  and `launch` says where and how to start it (GPUs per node, nodes, master address; core.config.files).
Keys devtune does not model are kept in `extra`, written back unchanged and reported.

Paths (model, dataset_dir, output_dir, deepspeed) are relative to the workspace root: the Train step
launches LLaMA-Factory with cwd = workspace root, and LLaMA-Factory resolves them against its cwd.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator

FinetuningType = Literal["lora", "qlora", "full", "freeze", "oft"]
Precision = Literal["bf16", "fp16", "fp32", "pure_bf16"]
Attention = Literal["auto", "disabled", "sdpa", "fa2", "fa3"]
ZeroStage = Literal[0, 2, 3]

FINETUNING_TYPES: tuple[str, ...] = ("lora", "qlora", "full", "freeze")
PRECISIONS: tuple[str, ...] = ("bf16", "fp16", "fp32", "pure_bf16")
ATTENTIONS: tuple[str, ...] = ("auto", "sdpa", "fa2", "fa3", "disabled")
SCHEDULERS: tuple[str, ...] = ("cosine", "linear", "constant", "constant_with_warmup", "cosine_with_restarts",
                               "polynomial", "inverse_sqrt", "reduce_lr_on_plateau", "cosine_with_min_lr",
                               "warmup_stable_decay")

# LLaMA-Factory 0.9.5 / transformers 5.6 defaults of the keys devtune models.
LF_DEFAULTS: dict[str, Any] = {
    "model_name_or_path": None, "template": None, "trust_remote_code": False, "flash_attn": "auto",
    "disable_gradient_checkpointing": False, "quantization_bit": None, "quantization_method": "bnb",
    "stage": "sft", "do_train": False, "finetuning_type": "lora", "lora_rank": 8, "lora_alpha": None,
    "lora_dropout": 0.0, "lora_target": "all", "additional_target": None, "freeze_trainable_layers": 2,
    "freeze_trainable_modules": "all", "deepspeed": None, "dataset": None, "dataset_dir": "data",
    "cutoff_len": 2048, "max_samples": None, "preprocessing_num_workers": None, "packing": None,
    "output_dir": None, "logging_steps": 500, "save_steps": 500, "plot_loss": False,
    "overwrite_output_dir": False, "report_to": "none", "per_device_train_batch_size": 8,
    "gradient_accumulation_steps": 1, "learning_rate": 5e-05, "num_train_epochs": 3.0, "max_steps": -1,
    "lr_scheduler_type": "linear", "warmup_ratio": None, "warmup_steps": 0, "max_grad_norm": 1.0,
    "bf16": False, "fp16": False, "pure_bf16": False, "resume_from_checkpoint": None, "val_size": 0.0,
    "per_device_eval_batch_size": 8, "eval_strategy": "no", "eval_steps": None, "eval_dataset": None,
    "adapter_name_or_path": None, "ref_model": None, "pref_beta": 0.1, "pref_ftx": 0.0, "pref_loss": "sigmoid",
    "simpo_gamma": 0.5, "kto_chosen_weight": 1.0, "kto_rejected_weight": 1.0,
}
# the training stages devtune sets up (LLaMA-Factory also has rm and ppo): the dataset kind each reads
STAGES: tuple[str, ...] = ("pt", "sft", "dpo", "kto")
PREF_LOSSES: tuple[str, ...] = ("sigmoid", "orpo", "simpo", "hinge", "ipo", "kto_pair")
# the keys that only mean something for some stages
STAGE_KEYS: dict[str, tuple[str, ...]] = {
    "dpo": ("pref_beta", "pref_ftx", "pref_loss", "simpo_gamma", "ref_model"),
    "kto": ("pref_beta", "pref_ftx", "kto_chosen_weight", "kto_rejected_weight", "ref_model"),
}


class Launch(BaseModel):
    """Where the run starts: devtune's own settings, never written into the LLaMA-Factory YAML."""

    model_config = ConfigDict(extra="forbid")

    device: Literal["cpu", "gpu"] = "gpu"
    gpus_per_node: int = Field(1, ge=1, le=64)  # on a CPU: processes per node (gloo ranks)
    nnodes: int = Field(1, ge=1, le=1024)
    master_addr: str | None = None  # address of node 0 (multi-node only)
    master_port: int = Field(29500, ge=1, le=65535)
    gpu_model: str | None = None  # core.config.gpu_catalog id of the target GPU, when the doctor found none
    omp_threads: int | None = Field(None, ge=1)  # OMP_NUM_THREADS; 1 on a CPU
    # how the nodes are started: "local" (this machine, or the per-node commands by hand) or "slurm" (sbatch)
    launcher: Literal["local", "slurm"] = "local"
    partition: str | None = None  # Slurm --partition
    account: str | None = None  # Slurm --account
    time_limit: str | None = None  # Slurm --time ("2-00:00:00", "90")
    sbatch_extra: list[str] = Field(default_factory=list)  # more "#SBATCH" lines, as written
    # Slurm: a job the cluster stops (time limit, preemption) after it saved is requeued and resumes from that
    # checkpoint (#SBATCH --requeue; core.train.slurm_segments)
    requeue: bool = False

    @property
    def world_size(self) -> int:
        return self.gpus_per_node * self.nnodes

    @property
    def distributed(self) -> bool:
        return self.gpus_per_node > 1 or self.nnodes > 1


class TrainSpec(BaseModel):
    """One SFT run. None = not written, LLaMA-Factory's default applies (see LF_DEFAULTS)."""

    model_config = ConfigDict(extra="forbid", validate_assignment=True)

    preset: str | None = None  # the preset it started from, for the record

    # model
    model_name_or_path: str = Field(min_length=1)
    template: str | None = None
    trust_remote_code: bool | None = None
    flash_attn: Attention | None = None
    disable_gradient_checkpointing: bool | None = None

    adapter_name_or_path: str | None = None  # an adapter to start from (e.g. the SFT run's, for DPO)

    # method
    stage: str = "sft"  # STAGES: pt | sft | dpo | kto
    do_train: bool | None = True
    finetuning_type: FinetuningType = "lora"
    quantization_bit: int | None = None  # qlora: 4 (default) or 8
    quantization_method: str | None = None
    lora_rank: int | None = Field(None, ge=1, le=4096)
    lora_alpha: int | None = Field(None, ge=1)
    lora_dropout: float | None = Field(None, ge=0.0, lt=1.0)
    lora_target: str | None = None
    additional_target: str | None = None
    freeze_trainable_layers: int | None = None
    freeze_trainable_modules: str | None = None
    zero_stage: ZeroStage | None = None  # None: no DeepSpeed
    offload: bool = False  # DeepSpeed CPU offload (optimizer; and parameters on ZeRO-3)
    deepspeed: str | None = None  # the JSON's path; None = devtune's file for zero_stage/offload

    # preference / KTO stages (dpo, kto)
    pref_beta: float | None = Field(None, gt=0.0)
    pref_ftx: float | None = Field(None, ge=0.0)  # weight of an SFT loss added to the preference loss
    pref_loss: str | None = None  # PREF_LOSSES; orpo and simpo need no reference model
    simpo_gamma: float | None = None
    kto_chosen_weight: float | None = Field(None, gt=0.0)
    kto_rejected_weight: float | None = Field(None, gt=0.0)
    ref_model: str | None = None  # a separate reference model (None: LLaMA-Factory uses the policy's base)

    # dataset
    dataset: list[str] = Field(default_factory=list)
    dataset_dir: str | None = None
    cutoff_len: int | None = Field(None, ge=1)
    max_samples: int | None = Field(None, ge=1)
    preprocessing_num_workers: int | None = Field(None, ge=1)
    packing: bool | None = None

    # output
    output_dir: str = Field(min_length=1)
    logging_steps: int | None = Field(None, ge=1)
    save_steps: int | None = Field(None, ge=1)
    plot_loss: bool | None = None
    overwrite_output_dir: bool | None = None
    report_to: str | None = None  # "none", or trackers comma-separated (core.config.trackers)

    # train
    per_device_train_batch_size: int | None = Field(None, ge=1)
    gradient_accumulation_steps: int | None = Field(None, ge=1)
    learning_rate: float | None = Field(None, gt=0.0)
    num_train_epochs: float | None = Field(None, gt=0.0)
    max_steps: int | None = None  # None or -1: epochs decide
    lr_scheduler_type: str | None = None
    warmup_ratio: float | None = Field(None, ge=0.0, le=1.0)
    warmup_steps: int | None = Field(None, ge=0)
    max_grad_norm: float | None = Field(None, ge=0.0)
    precision: Precision | None = None  # None: no precision key written (LLaMA-Factory: fp32)
    resume_from_checkpoint: str | None = None
    # LLaMA-Factory then logs total_tokens and throughput in trainer_log.jsonl (every rank's tokens): tokens/s
    # and MFU are measured, not estimated (core.train.throughput); devtune's presets set it
    include_num_input_tokens_seen: bool | None = None

    # eval
    eval_dataset: list[str] = Field(default_factory=list)  # held-out sets (N_eval, core.config.eval_loss)
    val_size: float | None = Field(None, ge=0.0)
    per_device_eval_batch_size: int | None = Field(None, ge=1)
    eval_strategy: str | None = None
    eval_steps: int | None = Field(None, ge=1)

    # keys devtune does not model, kept as they were
    extra: dict[str, Any] = Field(default_factory=dict)
    launch: Launch = Field(default_factory=Launch)

    @field_validator("report_to", mode="before")
    @classmethod
    def _join_trackers(cls, value: Any) -> Any:
        # the YAML holds a list when several trackers are named (transformers takes no comma string); the spec
        # keeps them comma-separated, as the form and `config init --report-to` give them
        if isinstance(value, (list, tuple)):
            return ",".join(str(v).strip() for v in value if str(v).strip()) or "none"
        return value

    @field_validator("dataset", "eval_dataset", mode="before")
    @classmethod
    def _split_datasets(cls, value: Any) -> Any:
        if isinstance(value, str):
            return [part.strip() for part in value.split(",") if part.strip()]
        return value

    @property
    def loads_reference(self) -> bool:
        """dpo/kto compare with a reference model, except the reference-free losses (orpo, simpo).
        With LoRA the base with the adapter off serves as the reference (no second copy in memory); a full
        or frozen-layer run loads a second copy of the model (or `ref_model`)."""
        if self.stage == "kto":
            return True
        return self.stage == "dpo" and (self.pref_loss or "sigmoid") not in ("orpo", "simpo")

    @property
    def reference_copy(self) -> bool:
        """A second model is held in memory as the reference."""
        return self.loads_reference and (not self.uses_lora or self.ref_model is not None)

    @property
    def is_qlora(self) -> bool:
        return self.finetuning_type == "qlora"

    @property
    def uses_lora(self) -> bool:
        return self.finetuning_type in ("lora", "qlora")


def value(spec: TrainSpec, key: str) -> Any:
    """The value in effect for a LLaMA-Factory key: the spec's, else LLaMA-Factory's default."""
    if key == "finetuning_type":
        return "lora" if spec.finetuning_type == "qlora" else spec.finetuning_type
    if key == "quantization_bit":
        if spec.quantization_bit is not None:
            return spec.quantization_bit
        return 4 if spec.is_qlora else None
    if key in ("bf16", "fp16", "pure_bf16"):
        return spec.precision == key
    if key == "lora_alpha":
        got = spec.lora_alpha
        return got if got is not None else 2 * value(spec, "lora_rank")
    if key in spec.extra:
        return spec.extra[key]
    got = getattr(spec, key, None) if key in TrainSpec.model_fields else None
    if got is None or (key in ("dataset", "eval_dataset") and not got):
        return LF_DEFAULTS.get(key)
    return got


def effective_precision(spec: TrainSpec) -> str:
    return spec.precision or "fp32"


def effective_batch(spec: TrainSpec) -> int:
    """per-device batch × gradient accumulation × data-parallel processes (GPUs × nodes)."""
    return (int(value(spec, "per_device_train_batch_size")) * int(value(spec, "gradient_accumulation_steps"))
            * spec.launch.world_size)
