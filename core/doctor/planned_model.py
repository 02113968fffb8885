"""The model the person plans to train, for judging disk and RAM against it.

Read from the workspace: state.config_file -> the train YAML's `model_name_or_path`; its size
from the local folder's weight files, else its parameter count from config.json (the local
folder or the Hugging Face cache), else from the name ("Qwen2.5-7B-Instruct" -> 7 B). With no
plan, the doctor judges against a generic 7B LoRA and says so.
"""

from __future__ import annotations

import json
import os
import re
from pathlib import Path
from typing import Any, Mapping

from core.doctor.hf_cache import hf_cache_dir

GENERIC_PARAMS = 7_000_000_000
WEIGHT_SUFFIXES = (".safetensors", ".bin", ".pt", ".pth", ".gguf")


def planned_model(workspace, env: Mapping[str, str]) -> dict[str, Any]:
    generic = {"source": "generic", "model": "7B", "params": GENERIC_PARAMS, "params_source": "generic",
               "finetuning_type": "lora", "weights_bytes": None, "local": False}
    if workspace is None:
        return generic
    try:
        state = workspace.load_state()
    except Exception:  # a damaged state is the workspace's business; judge generically
        return generic
    if not state.config_file:
        return generic
    config_path = workspace.abs(state.config_file)
    try:
        import yaml

        config = yaml.safe_load(config_path.read_text(encoding="utf-8")) or {}
    except (OSError, ValueError, yaml.YAMLError) as exc:
        return {**generic, "config_error": f"{workspace.rel(config_path)}: {type(exc).__name__}"}
    if not isinstance(config, dict) or not config.get("model_name_or_path"):
        return generic
    model = str(config["model_name_or_path"])
    plan: dict[str, Any] = {
        "source": "config", "config_file": workspace.rel(config_path), "model": model,
        "finetuning_type": str(config.get("finetuning_type") or "lora"),
        "quantization_bit": config.get("quantization_bit"),
        "deepspeed": str(config.get("deepspeed") or "") or None,
        "params": None, "params_source": None, "weights_bytes": None, "local": False,
    }
    folder = Path(model).expanduser()
    if not folder.is_absolute():
        folder = workspace.root / folder
    if folder.is_dir():
        plan["local"] = True
        plan["weights_bytes"] = weights_size(folder) or None
        params = params_from_config(folder / "config.json")
        if params:
            plan["params"], plan["params_source"] = params, "config.json"
    else:
        cached = cached_config(model, env)
        plan["cached"] = cached is not None
        params = params_from_config(cached) if cached else None
        if params:
            plan["params"], plan["params_source"] = params, "config.json (Hugging Face cache)"
        else:
            params = params_from_name(model)
            if params:
                plan["params"], plan["params_source"] = params, "name"
    if plan["params"] is None and plan["weights_bytes"] is None:
        plan["params"], plan["params_source"] = GENERIC_PARAMS, "generic"
    return plan


def weights_size(folder: Path) -> int:
    total = 0
    for path in folder.rglob("*"):
        if path.suffix in WEIGHT_SUFFIXES and path.is_file() and "checkpoint-" not in str(path):
            total += path.stat().st_size
    return total


def cached_config(model: str, env: Mapping[str, str]) -> Path | None:
    if "/" not in model:
        return None
    repo = Path(hf_cache_dir(env)) / ("models--" + model.replace("/", "--")) / "snapshots"
    try:
        found = sorted(repo.glob("*/config.json"), key=os.path.getmtime)
    except OSError:
        return None
    return found[-1] if found else None


def params_from_name(name: str) -> int | None:
    """'Qwen2.5-7B-Instruct' -> 7e9, 'Qwen2.5-0.5B' -> 5e8, 'Mixtral-8x7B' -> 56e9 (an upper bound)."""
    base = name.rstrip("/").rsplit("/", 1)[-1]
    m = re.search(r"(?<![\d.])(\d+)x(\d+(?:\.\d+)?)[bB](?![a-zA-Z])", base)
    if m:
        return int(int(m.group(1)) * float(m.group(2)) * 1e9)
    m = re.search(r"(?<![\d.])(\d+(?:\.\d+)?)[bB](?![a-zA-Z])", base)
    if m:
        return int(float(m.group(1)) * 1e9)
    m = re.search(r"(?<![\d.])(\d+(?:\.\d+)?)[mM](?![a-zA-Z])", base)
    if m:
        return int(float(m.group(1)) * 1e6)
    return None


def params_from_config(path: Path | None) -> int | None:
    """The parameter count of a decoder-only transformer from its config.json (an estimate)."""
    try:
        cfg = json.loads(Path(path).read_text(encoding="utf-8")) if path else None
    except (OSError, ValueError):
        return None
    if not isinstance(cfg, dict):
        return None
    cfg = cfg.get("text_config") if isinstance(cfg.get("text_config"), dict) else cfg
    try:
        h = int(cfg["hidden_size"])
        layers = int(cfg["num_hidden_layers"])
        vocab = int(cfg["vocab_size"])
        inter = int(cfg.get("intermediate_size") or 4 * h)
        heads = int(cfg.get("num_attention_heads") or 1)
    except (KeyError, TypeError, ValueError):
        return None
    kv = int(cfg.get("num_key_value_heads") or heads)
    head_dim = int(cfg.get("head_dim") or h // heads)
    attn = 2 * h * heads * head_dim + 2 * h * kv * head_dim
    experts = int(cfg.get("num_local_experts") or cfg.get("num_experts") or 1)
    moe_inter = int(cfg.get("moe_intermediate_size") or inter)
    mlp = 3 * h * (moe_inter * experts if experts > 1 else inter)
    embeddings = vocab * h * (1 if cfg.get("tie_word_embeddings") else 2)
    return embeddings + layers * (attn + mlp + 2 * h)
