"""Start `llamafactory-cli train` for the workspace's config as a detached run (core.train.runs).

The environment devtune adds (and records in run.json) is the config's launch environment
(core.config.files.launch_env: FORCE_TORCHRUN, NPROC_PER_NODE, NNODES..., OMP_NUM_THREADS), plus:

- LLAMABOARD_ENABLED=1 and LLAMABOARD_WORKDIR=<output_dir>, so a graceful stop (SIGABRT) makes
  LLaMA-Factory stop after the step and save the adapter;
- PYTHONUNBUFFERED=1, so stdout reaches the log as it happens;
- PATH with the environment's bin first, so DeepSpeed's launcher finds `torchrun`;
- HF_DATASETS_CACHE and TORCH_EXTENSIONS_DIR inside the workspace, unless already set;
- DS_ACCELERATOR=cpu on a machine without a GPU.

Secrets such as HF_TOKEN are inherited by the trainer but never recorded.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

from core.i18n import _
from core.setup.torch_build import detect_hardware
from core.train.runs import RunRecord, list_runs, start_run
from core.workspace.layout import Workspace


class LaunchError(Exception):
    pass


def venv_bin() -> Path:
    return Path(sys.executable).parent


def training_env(ws: Workspace, spec_env: dict[str, str], output_dir: str) -> dict[str, str]:
    env = dict(spec_env)
    env["LLAMABOARD_ENABLED"] = "1"
    env["LLAMABOARD_WORKDIR"] = output_dir
    env["PYTHONUNBUFFERED"] = "1"
    path = os.environ.get("PATH", "")
    if str(venv_bin()) not in path.split(os.pathsep):
        env["PATH"] = f"{venv_bin()}{os.pathsep}{path}"
    if "HF_DATASETS_CACHE" not in os.environ:
        env["HF_DATASETS_CACHE"] = str(ws.cache_dir / "datasets")
    if "TORCH_EXTENSIONS_DIR" not in os.environ:
        env["TORCH_EXTENSIONS_DIR"] = str(ws.cache_dir / "torch_extensions")
    if "DS_ACCELERATOR" not in os.environ and detect_hardware().kind == "cpu":
        env["DS_ACCELERATOR"] = "cpu"  # said up front, instead of DeepSpeed warning about it in the log
    return env


def launch_training(ws: Workspace, config_path: str | None = None) -> RunRecord:
    """Start the training run for `config_path` (default: the wizard's config) and return at once."""
    from core.config.files import (
        ConfigMissing,
        current_config_path,
        launch_argv,
        launch_env,
        load_spec,
    )

    rel = ws.rel(config_path) if config_path else current_config_path(ws)
    try:
        spec = load_spec(ws, rel)
    except ConfigMissing as exc:
        raise LaunchError(str(exc)) from exc
    except (OSError, ValueError) as exc:
        raise LaunchError(_("cannot read the training config {path}: {error}", path=rel, error=str(exc))) from exc
    output_dir = spec.output_dir
    if not output_dir:
        raise LaunchError(_("{path} has no output_dir; set one (e.g. saves/my-run)", path=rel))
    busy = [r for r in list_runs(ws) if r.active and r.output_dir == output_dir]
    if busy:
        raise LaunchError(_("run {id} is already writing to {dir}; stop it or choose another output_dir",
                            id=busy[0].id, dir=output_dir))
    from core.config.resume_point import zero_step_reason

    done = zero_step_reason(spec, ws.abs(output_dir))  # LLaMA-Factory would resume from the last checkpoint
    if done:
        raise LaunchError(_("not started: {output_dir} holds a finished run and LLaMA-Factory would resume "
                            "it ({reason}). Set another output_dir in {path}, or overwrite_output_dir: true to "
                            "train again from the start", output_dir=output_dir, reason=done, path=rel))
    argv = launch_argv(spec, rel)
    argv[0] = str(venv_bin() / argv[0]) if (venv_bin() / argv[0]).exists() else argv[0]
    env = training_env(ws, launch_env(spec), output_dir)
    label = Path(output_dir).name or "train"
    return start_run(ws, argv, env=env, label=label, config=rel, output_dir=output_dir, kind="train")
