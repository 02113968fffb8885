"""The third way devtune serves a model: a GGUF (`devtune merge --gguf`) with llama.cpp's OpenAI-compatible server.

`python -m llama_cpp.server` from `.venv-gguf` (llama-cpp-python's `[server]` extra, `make gguf-env`), so chat,
verify and eval speak to it as to vLLM. What devtune sets:

- `--model_alias` the served name (the name every other command sends as `model`);
- `--chat_format chat_template.default`: the chat template embedded in the GGUF (llama.cpp's Jinja2ChatFormatter
  over `tokenizer.chat_template`, the training template the merge check proved). Left out, llama-cpp-python first
  guesses a built-in format from the metadata, which is not the GGUF's template;
- `--n_ctx` the context (2048 unless --max-model-len), `--n_gpu_layers -1` where a GPU device exists;
- the API key in the environment (`API_KEY`: llama_cpp.server's settings are pydantic settings, read from the
  environment), never in argv, which `ps` shows and server.json records; `HOST` and `PORT` too, because
  llama_cpp.server lets those two variables override its flags, and an inherited one must not.

Nothing here starts a process (core.serve.servers does) or imports llama_cpp.
"""

from __future__ import annotations

import subprocess
from functools import lru_cache
from pathlib import Path

from core.i18n import _
from core.processes.helpers import run_helper

MODULE = "llama_cpp.server"
TEMPLATE_FORMAT = "chat_template.default"  # llama-cpp-python's name for the GGUF's own tokenizer.chat_template
DEFAULT_CTX = 2048
_PROBE = ("import importlib.util as u\n"
          "print(all(u.find_spec(m) for m in ('llama_cpp', 'uvicorn', 'fastapi', 'sse_starlette', "
          "'pydantic_settings')))\n")


def gguf_python() -> Path:
    from core.merge.gguf import GGUF_ENV

    return GGUF_ENV / "bin" / "python"


@lru_cache(maxsize=4)
def _has_server(python: str) -> bool:
    try:
        return run_helper([python, "-c", _PROBE], timeout=60).stdout.strip() == "True"
    except (OSError, subprocess.TimeoutExpired):
        return False


def server_python() -> str | None:
    """`.venv-gguf`'s python when llama.cpp's server can run from it (found without importing llama_cpp here)."""
    python = gguf_python()
    return str(python) if python.is_file() and _has_server(str(python)) else None


def missing_message() -> str:
    from core.merge.gguf import GGUF_ENV, ROOT

    return _("serving a GGUF needs llama.cpp's server (llama-cpp-python with its [server] extra) in {env}: run "
             "`make gguf-env` in {root}", env=str(GGUF_ENV), root=str(ROOT))


def gguf_of(path: Path) -> Path | None:
    """The GGUF to serve for a path: the file itself, or the one a GGUF folder's Modelfile names (else its newest);
    None when the path is neither."""
    from core.merge.gguf import find_gguf

    path = Path(path)
    if path.suffix == ".gguf":
        return path if path.is_file() else None
    return find_gguf(path) if path.is_dir() and not (path / "config.json").is_file() else None


def source_model(path: Path) -> Path:
    """The merged folder a GGUF was converted from (exports/<name> for exports/<name>-gguf[/<file>.gguf]): where
    its export check report, and so its training run, are found. Any other path is returned as it is."""
    path = Path(path)
    folder = path.parent if path.suffix == ".gguf" else path
    if gguf_of(path) is None or not folder.name.endswith("-gguf"):
        return path
    return folder.with_name(folder.name[:-len("-gguf")])


def llamacpp_argv(python: str, gguf: str, served_name: str, *, host: str, port: int, n_ctx: int | None, gpu: bool,
                  extra: list[str] | None = None) -> list[str]:
    argv = [python, "-m", MODULE, "--model", gguf, "--model_alias", served_name, "--host", host, "--port", str(port),
            "--chat_format", TEMPLATE_FORMAT, "--n_ctx", str(n_ctx or DEFAULT_CTX)]
    if gpu:
        argv += ["--n_gpu_layers", "-1"]
    return argv + list(extra or [])


def llamacpp_env(host: str, port: int, api_key: str) -> dict[str, str]:
    return {"API_KEY": api_key, "HOST": host, "PORT": str(port), "PYTHONUNBUFFERED": "1"}
