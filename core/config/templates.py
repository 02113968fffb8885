"""LLaMA-Factory's chat templates: the full list, and the default template of a model.

Read from the installed LLaMA-Factory (`TEMPLATES` in llamafactory/data/template.py; `DEFAULT_TEMPLATE`
and `SUPPORTED_MODELS` in llamafactory/extras/constants.py) in a subprocess, because importing it
takes seconds; the result is cached per LLaMA-Factory version. Without LLaMA-Factory, the built-in
list (LLaMA-Factory 0.9.5) and a few family rules stand in.

A model's default: a local folder's `devtune_model.json` "template" (the tiny demo model), else
LLaMA-Factory's own map from hub id (only -Instruct/-Chat models have one; base models are trained
with a template chosen by the person, e.g. `default`), else the family rules.
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path

from core.files.atomic import write_atomic
from core.processes.helpers import run_helper

BUILTIN_VERSION = "0.9.5"
BUILTIN_TEMPLATES: tuple[str, ...] = (
    "aeva", "alpaca", "bailing", "bailing_v2", "breeze", "chatglm3", "chatml", "chatml_de", "cohere", "cpm4",
    "dbrx", "deepseek", "deepseek3", "deepseekcoder", "deepseekr1", "default", "dots_ocr", "empty", "ernie",
    "ernie_nothink", "ernie_vl", "exaone", "falcon", "falcon_h1", "fewshot", "gemma", "gemma2", "gemma3",
    "gemma3n", "gemma4", "gemma4n", "glm4", "glm4_5v", "glm4_7", "glm4_moe", "glm4v", "glm_ocr", "glmz1",
    "gpt_oss", "granite3", "granite3_vision", "granite4", "hunyuan", "hunyuan_small", "hy3", "index", "intern2",
    "intern_s1", "intern_vl", "keye_vl", "kimi_vl", "lfm2", "lfm2_vl", "llama2", "llama2_zh", "llama3", "llama4",
    "llava", "llava_next", "llava_next_llama3", "llava_next_mistral", "llava_next_qwen", "llava_next_video",
    "llava_next_video_mistral", "llava_next_video_yi", "llava_next_yi", "mimo", "mimo_v2", "mimo_vl",
    "minicpm_o", "minicpm_v", "minicpm_v_4_6", "minimax1", "minimax2", "ministral", "ministral3", "mistral",
    "mistral_small", "mllama", "moonlight", "olmo", "openchat", "openchat-3.6", "opencoder", "paligemma",
    "paligemma_chat", "phi", "phi4", "phi4_mini", "phi_small", "pixtral", "qwen", "qwen2_audio", "qwen2_omni",
    "qwen2_vl", "qwen3", "qwen3_5", "qwen3_5_nothink", "qwen3_6", "qwen3_nothink", "qwen3_omni",
    "qwen3_omni_nothink", "qwen3_vl", "qwen3_vl_nothink", "sailor", "seed_coder", "seed_oss", "smollm", "smollm2",
    "solar", "starchat", "telechat2", "vicuna", "video_llava", "xuanyuan", "yi", "yi_vl", "youtu", "youtu_vl",
    "yuan", "zephyr",
)

# family rules when LLaMA-Factory's own map is not at hand (instruct/chat models only, like its map)
FAMILY_RULES: tuple[tuple[str, str], ...] = (
    (r"qwen-?3.*instruct-2507|qwen-?3.*2507.*instruct", "qwen3_nothink"),
    (r"qwen-?3(?![.\d])", "qwen3"),
    (r"qwen-?2(\.5)?.*(instruct|chat)", "qwen"),
    (r"llama-?4", "llama4"),
    (r"llama-?3.*(instruct|chat)", "llama3"),
    (r"llama-?2.*chat", "llama2"),
    (r"mistral.*instruct", "mistral"),
    (r"gemma-?3.*-it\b", "gemma3"),
    (r"gemma-?2.*-it\b", "gemma2"),
    (r"gemma.*-it\b", "gemma"),
    (r"phi-?4", "phi4"),
    (r"deepseek-r1", "deepseekr1"),
    (r"yi-.*chat", "yi"),
)

_SCRIPT = r"""
import json
from llamafactory.data.template import TEMPLATES
from llamafactory.extras.constants import DEFAULT_TEMPLATE, SUPPORTED_MODELS, DownloadSource
hub = {}
for name, sources in SUPPORTED_MODELS.items():
    if name in DEFAULT_TEMPLATE:
        for path in sources.values():
            hub[str(path)] = DEFAULT_TEMPLATE[name]
print("DEVTUNE-TEMPLATES " + json.dumps({"names": sorted(TEMPLATES), "hub": hub}))
"""


@dataclass(frozen=True)
class TemplateCatalog:
    names: tuple[str, ...]
    hub_defaults: dict[str, str] = field(default_factory=dict)  # hub id -> template
    source: str = "built-in"  # built-in | llamafactory
    version: str = BUILTIN_VERSION

    def __contains__(self, name: object) -> bool:
        return name in self.names


BUILTIN = TemplateCatalog(BUILTIN_TEMPLATES)


def installed_llamafactory_version() -> str | None:
    """The version of llamafactory installed beside devtune (read from its metadata; nothing imported)."""
    from importlib import metadata

    try:
        return metadata.version("llamafactory")
    except metadata.PackageNotFoundError:
        return None


def load_catalog(cache_file: Path | None = None, *, python: str | None = None, timeout: float = 180,
                 cached_only: bool = False) -> TemplateCatalog:
    """The installed LLaMA-Factory's templates (cached in `cache_file` per version), else the built-in list.
    `cached_only`: never start the subprocess (the built-in list when nothing is cached yet)."""
    version = installed_llamafactory_version()
    if version is None:
        return BUILTIN
    if cache_file is not None:
        try:
            cached = json.loads(Path(cache_file).read_text(encoding="utf-8"))
            if cached.get("version") == version:
                return TemplateCatalog(tuple(cached["names"]), dict(cached["hub"]), "llamafactory", version)
        except (OSError, ValueError, KeyError, TypeError):
            pass
    if cached_only:
        return BUILTIN
    try:
        proc = run_helper([python or sys.executable, "-c", _SCRIPT], timeout=timeout, env=_quiet_env())
    except (OSError, subprocess.TimeoutExpired):
        return BUILTIN
    line = next((ln for ln in proc.stdout.splitlines() if ln.startswith("DEVTUNE-TEMPLATES ")), None)
    if proc.returncode != 0 or line is None:
        return BUILTIN
    data = json.loads(line.split(" ", 1)[1])
    if cache_file is not None:
        try:
            write_atomic(cache_file, json.dumps({"version": version, **data}) + "\n")
        except OSError:
            pass
    return TemplateCatalog(tuple(data["names"]), dict(data["hub"]), "llamafactory", version)


def _quiet_env() -> dict[str, str]:
    import os

    return {**os.environ, "OMP_NUM_THREADS": "1", "HF_HUB_OFFLINE": "1", "TRANSFORMERS_VERBOSITY": "error",
            "LLAMAFACTORY_VERBOSITY": "ERROR", "DISABLE_VERSION_CHECK": "1"}


def default_template(model: str, catalog: TemplateCatalog = BUILTIN, root: Path | None = None) -> str | None:
    """The template `model` is meant to be trained with, when known."""
    folder = Path(model).expanduser()
    if root is not None and not folder.is_absolute():
        folder = root / folder
    try:
        meta = json.loads((folder / "devtune_model.json").read_text(encoding="utf-8"))
        if isinstance(meta.get("template"), str):
            return meta["template"]
    except (OSError, ValueError, AttributeError):
        pass
    if model in catalog.hub_defaults:
        return catalog.hub_defaults[model]
    low = model.lower().rstrip("/")
    by_lower = {k.lower(): v for k, v in catalog.hub_defaults.items()}
    if low in by_lower:
        return by_lower[low]
    base = low.rsplit("/", 1)[-1]
    for hub_id, template in by_lower.items():
        if hub_id.rsplit("/", 1)[-1] == base:
            return template
    for pattern, template in FAMILY_RULES:
        if re.search(pattern, base) and template in catalog.names:
            return template
    return None
