"""A tiny LLaMA-architecture model built locally from scratch, so the whole journey runs on a CPU.

- tokenizer: byte-level BPE trained with `tokenizers` on the sample data shipped in `data/`,
  with the llama3 special tokens (including `<|eom_id|>`, without which LLaMA-Factory's llama3
  template adds it and asks for resize_vocab), BOS added by the post-processor, and the llama3
  chat template stored in the tokenizer;
- model: `LlamaForCausalLM`, hidden 64, intermediate 128, 2 layers, 2 heads of dim 32 (vLLM's CPU
  attention rejects head_dim 16), float32, seeded: the same bytes on every build.

torch, tokenizers and transformers are imported inside `build_tiny_model`, never at import time.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

from core.files.digest import file_sha256
from core.i18n import _

SPECIAL_TOKENS = (
    "<|begin_of_text|>",
    "<|end_of_text|>",
    "<|start_header_id|>",
    "<|end_header_id|>",
    "<|eot_id|>",
    "<|eom_id|>",
)

# Meta's Llama 3 Instruct chat template (the one LLaMA-Factory's `llama3` template reproduces).
LLAMA3_CHAT_TEMPLATE = (
    "{% set loop_messages = messages %}{% for message in loop_messages %}"
    "{% set content = '<|start_header_id|>' + message['role'] + '<|end_header_id|>\n\n'"
    " + message['content'] | trim + '<|eot_id|>' %}"
    "{% if loop.index0 == 0 %}{% set content = bos_token + content %}{% endif %}"
    "{{ content }}{% endfor %}"
    "{% if add_generation_prompt %}{{ '<|start_header_id|>assistant<|end_header_id|>\n\n' }}{% endif %}"
)

TINY_TEMPLATE = "llama3"  # the LLaMA-Factory template that matches the tokenizer's chat template
TINY_NAME = "tiny-llama3"
CORPUS_SUFFIXES = (".jsonl", ".json", ".txt", ".csv", ".tsv")


@dataclass(frozen=True)
class TinyModelSpec:
    vocab_size: int = 3000
    hidden_size: int = 64
    intermediate_size: int = 128
    num_hidden_layers: int = 2
    num_attention_heads: int = 2
    head_dim: int = 32
    max_position_embeddings: int = 2048
    seed: int = 0


def corpus_texts(data_dir: Path) -> list[str]:
    """The text the tokenizer learns from: every sample file in `data_dir`, decoded leniently
    (the samples include GBK and UTF-16 files on purpose), sorted by name for determinism."""
    texts = []
    for path in sorted(data_dir.rglob("*")):
        if path.suffix.lower() not in CORPUS_SUFFIXES or not path.is_file():
            continue
        raw = path.read_bytes()
        for enc in ("utf-8-sig", "utf-16", "gb18030"):
            try:
                texts.append(raw.decode(enc))
                break
            except UnicodeDecodeError:
                continue
        else:
            texts.append(raw.decode("utf-8", errors="replace"))
    return texts


def build_tiny_model(out_dir: Path, corpus_dir: Path, spec: TinyModelSpec = TinyModelSpec(),
                     progress: Callable[[str], None] | None = None) -> Path:
    """Build the tokenizer and model into `out_dir` (created; must be empty or absent)."""
    say = progress or (lambda _msg: None)
    out_dir = Path(out_dir)
    if out_dir.exists() and any(out_dir.iterdir()):
        raise FileExistsError(_("{path} is not empty; remove it or choose another folder", path=out_dir))
    texts = corpus_texts(Path(corpus_dir))
    if not texts:
        raise FileNotFoundError(_("no sample text found in {path} to train the tokenizer on", path=corpus_dir))

    say(_("training the byte-level BPE tokenizer"))
    from tokenizers import (
        Tokenizer,
        decoders,
        models,
        pre_tokenizers,
        processors,
        trainers,
    )

    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=spec.vocab_size,
        special_tokens=list(SPECIAL_TOKENS),
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        show_progress=False,
    )
    tok.train_from_iterator(texts, trainer=trainer)
    bos = SPECIAL_TOKENS[0]
    tok.post_processor = processors.TemplateProcessing(
        single=f"{bos} $A", pair=f"{bos} $A {bos} $B", special_tokens=[(bos, tok.token_to_id(bos))]
    )

    say(_("building the LLaMA model"))
    from core.setup.library_logs import quiet_library_logs

    quiet_library_logs()  # no DeepSpeed accelerator warning, no shard progress bar in `devtune demo`
    import torch
    from transformers import (
        GenerationConfig,
        LlamaConfig,
        LlamaForCausalLM,
        PreTrainedTokenizerFast,
    )

    fast = PreTrainedTokenizerFast(
        tokenizer_object=tok,
        bos_token=bos,
        eos_token="<|eot_id|>",
        pad_token="<|end_of_text|>",
        additional_special_tokens=list(SPECIAL_TOKENS[2:4]) + ["<|eom_id|>"],
        model_max_length=spec.max_position_embeddings,
    )
    fast.chat_template = LLAMA3_CHAT_TEMPLATE
    ids = {t: fast.convert_tokens_to_ids(t) for t in SPECIAL_TOKENS}
    config = LlamaConfig(
        vocab_size=len(fast),
        hidden_size=spec.hidden_size,
        intermediate_size=spec.intermediate_size,
        num_hidden_layers=spec.num_hidden_layers,
        num_attention_heads=spec.num_attention_heads,
        num_key_value_heads=spec.num_attention_heads,
        head_dim=spec.head_dim,
        max_position_embeddings=spec.max_position_embeddings,
        rope_theta=500000.0,
        tie_word_embeddings=False,
        bos_token_id=ids["<|begin_of_text|>"],
        eos_token_id=[ids["<|end_of_text|>"], ids["<|eot_id|>"]],
        pad_token_id=ids["<|end_of_text|>"],
    )
    torch.manual_seed(spec.seed)
    model = LlamaForCausalLM(config).to(torch.float32)
    model.generation_config = GenerationConfig(
        bos_token_id=config.bos_token_id,
        eos_token_id=config.eos_token_id,
        pad_token_id=config.pad_token_id,
        do_sample=False,
    )
    out_dir.mkdir(parents=True, exist_ok=True)
    model.save_pretrained(out_dir, safe_serialization=True)
    fast.save_pretrained(out_dir)
    (out_dir / "devtune_model.json").write_text(json.dumps({
        "name": TINY_NAME,
        "template": TINY_TEMPLATE,
        "built_by": "devtune core.setup.tinymodel",
        "spec": spec.__dict__,
        "weights_sha256": file_sha256(out_dir / "model.safetensors"),
    }, indent=2) + "\n")
    say(_("tiny model ready in {path}", path=out_dir))
    return out_dir
