"""The shape of a decoder-only model (hidden size, layers, heads, MLP width, vocabulary), which the
memory fit needs: from a local folder's config.json, else from a built-in table of common hub
models (values from their config.json), else estimated from the size in the name ("...-14B-...").

No torch: config.json is read as JSON, parameters are counted from the shape (LLaMA-style blocks:
attention q/k/v/o, gated MLP gate/up/down, two RMSNorms; embeddings and lm_head, tied or not).
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, replace
from pathlib import Path

LINEAR_MODULES = ("q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj")


@dataclass(frozen=True)
class ModelShape:
    hidden: int
    layers: int
    heads: int
    kv_heads: int
    intermediate: int
    vocab: int
    head_dim: int = 0  # 0: hidden // heads
    tied: bool = False
    experts: int = 1  # MoE experts per layer (weights), 1 for dense
    active_experts: int = 1
    source: str = "known"  # config.json | known | name

    @property
    def hd(self) -> int:
        return self.head_dim or self.hidden // self.heads

    @property
    def q_dim(self) -> int:
        return self.heads * self.hd

    @property
    def kv_dim(self) -> int:
        return self.kv_heads * self.hd

    def linear_dims(self) -> dict[str, tuple[int, int]]:
        """(in, out) of each linear module in one layer (one expert for the MLP)."""
        h, i = self.hidden, self.intermediate
        return {"q_proj": (h, self.q_dim), "k_proj": (h, self.kv_dim), "v_proj": (h, self.kv_dim),
                "o_proj": (self.q_dim, h), "gate_proj": (h, i), "up_proj": (h, i), "down_proj": (i, h)}

    @property
    def attn_params_per_layer(self) -> int:
        dims = self.linear_dims()
        return sum(a * b for k, (a, b) in dims.items() if k.endswith(("q_proj", "k_proj", "v_proj", "o_proj")))

    @property
    def mlp_params_per_layer(self) -> int:
        return 3 * self.hidden * self.intermediate * self.experts

    @property
    def layer_params(self) -> int:
        return self.attn_params_per_layer + self.mlp_params_per_layer + 2 * self.hidden

    @property
    def embed_params(self) -> int:
        return self.vocab * self.hidden

    @property
    def head_params(self) -> int:
        return 0 if self.tied else self.vocab * self.hidden

    @property
    def linear_params(self) -> int:
        """Parameters in the layers' linear modules (what 4-bit quantization stores in 4 bits)."""
        return self.layers * (self.attn_params_per_layer + self.mlp_params_per_layer)

    @property
    def params(self) -> int:
        return self.embed_params + self.head_params + self.layers * self.layer_params + self.hidden

    @property
    def largest_layer_params(self) -> int:
        return max(self.layer_params, self.embed_params)


def _s(h, l, a, kv, i, v, hd=0, tied=False) -> ModelShape:
    return ModelShape(hidden=h, layers=l, heads=a, kv_heads=kv, intermediate=i, vocab=v, head_dim=hd, tied=tied)


# (family, size in billions) -> shape, from each model's config.json on the hub
KNOWN: dict[tuple[str, str], ModelShape] = {
    ("llama-2", "7"): _s(4096, 32, 32, 32, 11008, 32000),
    ("llama-2", "13"): _s(5120, 40, 40, 40, 13824, 32000),
    ("llama-2", "70"): _s(8192, 80, 64, 8, 28672, 32000),
    ("llama-3", "8"): _s(4096, 32, 32, 8, 14336, 128256),
    ("llama-3", "70"): _s(8192, 80, 64, 8, 28672, 128256),
    ("llama-3", "1"): _s(2048, 16, 32, 8, 8192, 128256, 64, True),
    ("llama-3", "3"): _s(3072, 28, 24, 8, 8192, 128256, 128, True),
    ("llama-3", "405"): _s(16384, 126, 128, 8, 53248, 128256),
    ("mistral", "7"): _s(4096, 32, 32, 8, 14336, 32768),
    ("qwen2.5", "0.5"): _s(896, 24, 14, 2, 4864, 151936, 0, True),
    ("qwen2.5", "1.5"): _s(1536, 28, 12, 2, 8960, 151936, 0, True),
    ("qwen2.5", "3"): _s(2048, 36, 16, 2, 11008, 151936, 0, True),
    ("qwen2.5", "7"): _s(3584, 28, 28, 4, 18944, 152064),
    ("qwen2.5", "14"): _s(5120, 48, 40, 8, 13824, 152064),
    ("qwen2.5", "32"): _s(5120, 64, 40, 8, 27648, 152064),
    ("qwen2.5", "72"): _s(8192, 80, 64, 8, 29568, 152064),
    ("qwen3", "0.6"): _s(1024, 28, 16, 8, 3072, 151936, 128, True),
    ("qwen3", "1.7"): _s(2048, 28, 16, 8, 6144, 151936, 128, True),
    ("qwen3", "4"): _s(2560, 36, 32, 8, 9728, 151936, 128, True),
    ("qwen3", "8"): _s(4096, 36, 32, 8, 12288, 151936, 128),
    ("qwen3", "14"): _s(5120, 40, 40, 8, 17408, 151936, 128),
    ("qwen3", "32"): _s(5120, 64, 64, 8, 25600, 151936, 128),
}

_FAMILIES = (
    ("llama-3", r"llama-?3(\.\d)?\b|llama3"),
    ("llama-2", r"llama-?2\b|llama2"),
    ("qwen2.5", r"qwen-?2\.5"),
    ("qwen3", r"qwen-?3(?![.\d])"),
    ("mistral", r"mistral"),
)
_SIZE = re.compile(r"(?<![\w.])(\d+(?:\.\d+)?)b(?![a-z])")


def shape_from_config(config: dict) -> ModelShape:
    text = config.get("text_config") if isinstance(config.get("text_config"), dict) else config
    hidden = int(text["hidden_size"])
    heads = int(text.get("num_attention_heads") or max(1, hidden // 128))
    experts = int(text.get("num_local_experts") or text.get("num_experts") or 1)
    inter = int(text.get("moe_intermediate_size") or 0) if experts > 1 else 0
    inter = inter or int(text.get("intermediate_size") or 4 * hidden)
    return ModelShape(
        hidden=hidden,
        layers=int(text["num_hidden_layers"]),
        heads=heads,
        kv_heads=int(text.get("num_key_value_heads") or heads),
        intermediate=inter,
        vocab=int(text.get("vocab_size") or config.get("vocab_size") or 32000),
        head_dim=int(text.get("head_dim") or 0),
        tied=bool(config.get("tie_word_embeddings", text.get("tie_word_embeddings", False))),
        experts=experts,
        active_experts=int(text.get("num_experts_per_tok") or 1) if experts > 1 else 1,
        source="config.json",
    )


def shape_from_name(name: str) -> ModelShape | None:
    low = name.lower().rsplit("/", 1)[-1].replace("_", "-")
    size_match = _SIZE.search(low)
    if not size_match:
        return None
    size = size_match.group(1)
    size = size[:-2] if size.endswith(".0") else size
    for family, pattern in _FAMILIES:
        if re.search(pattern, low) and (family, size) in KNOWN:
            return KNOWN[(family, size)]
    # an unknown family or size: the known shape nearest in size, with its layer count scaled
    billions = float(size)
    if billions <= 0:
        return None
    nearest = min(KNOWN.values(), key=lambda s: abs(s.params / 1e9 - billions))
    layers = max(1, round(nearest.layers * billions * 1e9 / nearest.params))
    return replace(nearest, layers=layers, source="name")


def resolve_shape(model: str, root: Path | None = None) -> ModelShape | None:
    """The shape of `model`: a local folder (absolute, or relative to the workspace root) with a
    config.json, else a known hub id, else estimated from the size in its name; None if unknown."""
    candidates = [Path(model).expanduser()]
    if root is not None and not Path(model).is_absolute():
        candidates.insert(0, root / model)
    for folder in candidates:
        config_file = folder / "config.json"
        try:
            if config_file.is_file():
                return shape_from_config(json.loads(config_file.read_text(encoding="utf-8")))
        except (OSError, ValueError, KeyError, TypeError):
            continue
    return shape_from_name(model)
