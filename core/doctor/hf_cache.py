"""Where the Hugging Face hub cache is, from the environment, as huggingface_hub resolves it."""

from __future__ import annotations

import os
from typing import Mapping


def hf_cache_dir(env: Mapping[str, str]) -> str:
    if env.get("HF_HUB_CACHE"):
        return env["HF_HUB_CACHE"]
    if env.get("HF_HOME"):
        return os.path.join(env["HF_HOME"], "hub")
    cache = env.get("XDG_CACHE_HOME") or os.path.join(env.get("HOME") or os.path.expanduser("~"), ".cache")
    return os.path.join(cache, "huggingface", "hub")
