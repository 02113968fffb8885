"""Starting points for a TrainSpec, one per common situation.

- cpu-demo: the tiny demo model on the demo data, on a CPU. Tuned so the random model really
  memorises the answers (a later closed-loop check asks the training questions): rank 16 LoRA on
  every linear layer plus embed_tokens and lm_head, lr 1e-2, 80 epochs; final loss ~0.03 in about a
  minute on a laptop CPU (measured: 480 steps, 14 s train_runtime on 24 rows).
- lora-1gpu: LoRA on a 7-13B instruct model on one GPU (bf16, ZeRO off).
- qlora-70b: QLoRA (4-bit bitsandbytes) on a 70B model on one big GPU.
- zero3-multi-gpu: LoRA on a 70B model across 8 GPUs of one node with DeepSpeed ZeRO-3.
- multi-node: the same across 2 nodes of 8 GPUs (needs the address of node 0).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

from core.config.spec import Launch, TrainSpec
from core.i18n import _
from core.setup.tinymodel import TINY_NAME, TINY_TEMPLATE

DEFAULT_DATASET = "support"


@dataclass(frozen=True)
class Preset:
    name: str
    build: Callable[[list[str]], TrainSpec]

    @property
    def description(self) -> str:
        return PRESET_TEXT[self.name]()


PRESET_TEXT: dict[str, Callable[[], str]] = {
    "cpu-demo": lambda: _("the tiny demo model on the demo data, on a CPU, in about a minute"),
    "lora-1gpu": lambda: _("LoRA on a 7-13B model on one GPU"),
    "qlora-70b": lambda: _("QLoRA (4-bit) on a 70B model on one GPU"),
    "zero3-multi-gpu": lambda: _("LoRA on a 70B model across 8 GPUs with DeepSpeed ZeRO-3"),
    "multi-node": lambda: _("LoRA on a 70B model across 2 nodes of 8 GPUs with DeepSpeed ZeRO-3"),
}


def _gpu_common(datasets: list[str]) -> dict:
    return dict(
        trust_remote_code=True, stage="sft", do_train=True, dataset=datasets, dataset_dir="data",
        cutoff_len=2048, preprocessing_num_workers=16, logging_steps=10, save_steps=500, plot_loss=False,
        overwrite_output_dir=False, report_to="none", learning_rate=1.0e-4, num_train_epochs=3.0,
        lr_scheduler_type="cosine", warmup_ratio=0.1, precision="bf16", include_num_input_tokens_seen=True,
    )


def cpu_demo(datasets: list[str]) -> TrainSpec:
    return TrainSpec(
        preset="cpu-demo", model_name_or_path=f"models/{TINY_NAME}", template=TINY_TEMPLATE, stage="sft",
        do_train=True, finetuning_type="lora", lora_rank=16, lora_alpha=32, lora_target="all",
        additional_target="embed_tokens,lm_head", dataset=datasets, dataset_dir="data", cutoff_len=256,
        preprocessing_num_workers=1, output_dir="saves/cpu-demo", logging_steps=5, save_steps=100,
        plot_loss=False, overwrite_output_dir=False, report_to="none", per_device_train_batch_size=4,
        gradient_accumulation_steps=1, learning_rate=1.0e-2, num_train_epochs=80.0, lr_scheduler_type="cosine",
        warmup_ratio=0.05, max_grad_norm=10.0, precision="fp32", include_num_input_tokens_seen=True,
        launch=Launch(device="cpu", omp_threads=1),
    )


def lora_1gpu(datasets: list[str]) -> TrainSpec:
    return TrainSpec(
        preset="lora-1gpu", model_name_or_path="meta-llama/Meta-Llama-3-8B-Instruct", template="llama3",
        finetuning_type="lora", lora_rank=8, lora_alpha=16, lora_dropout=0.05, lora_target="all",
        output_dir="saves/llama3-8b-lora-sft", per_device_train_batch_size=2, gradient_accumulation_steps=8,
        launch=Launch(device="gpu", gpus_per_node=1, gpu_model="mi300x"), **_gpu_common(datasets),
    )


def qlora_70b(datasets: list[str]) -> TrainSpec:
    return TrainSpec(
        preset="qlora-70b", model_name_or_path="meta-llama/Meta-Llama-3-70B-Instruct", template="llama3",
        finetuning_type="qlora", quantization_bit=4, lora_rank=16, lora_alpha=32, lora_dropout=0.05,
        lora_target="all", output_dir="saves/llama3-70b-qlora-sft", per_device_train_batch_size=1,
        gradient_accumulation_steps=16, launch=Launch(device="gpu", gpus_per_node=1, gpu_model="mi300x"),
        **_gpu_common(datasets),
    )


def zero3_multi_gpu(datasets: list[str]) -> TrainSpec:
    return TrainSpec(
        preset="zero3-multi-gpu", model_name_or_path="meta-llama/Meta-Llama-3-70B-Instruct", template="llama3",
        finetuning_type="lora", lora_rank=16, lora_alpha=32, lora_dropout=0.05, lora_target="all",
        zero_stage=3, output_dir="saves/llama3-70b-lora-zero3", per_device_train_batch_size=1,
        gradient_accumulation_steps=2, launch=Launch(device="gpu", gpus_per_node=8, gpu_model="mi300x"),
        **_gpu_common(datasets),
    )


def multi_node(datasets: list[str]) -> TrainSpec:
    spec = zero3_multi_gpu(datasets)
    return spec.model_copy(update={
        "preset": "multi-node", "output_dir": "saves/llama3-70b-lora-2node",
        "launch": Launch(device="gpu", gpus_per_node=8, nnodes=2, master_port=29500, gpu_model="mi300x"),
    })


PRESETS: dict[str, Preset] = {p.name: p for p in (
    Preset("cpu-demo", cpu_demo),
    Preset("lora-1gpu", lora_1gpu),
    Preset("qlora-70b", qlora_70b),
    Preset("zero3-multi-gpu", zero3_multi_gpu),
    Preset("multi-node", multi_node),
)}


def preset_spec(name: str, datasets: list[str] | None = None) -> TrainSpec:
    """The preset's spec, on `datasets` (default: the demo data's name)."""
    if name not in PRESETS:
        raise KeyError(name)
    return PRESETS[name].build(list(datasets or [DEFAULT_DATASET]))
