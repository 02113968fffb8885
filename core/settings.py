"""devtune's settings in one object: the `DEVTUNE_*` environment variables and the workspace's preferences.

`Settings` (pydantic-settings) names every variable devtune reads, with its type: a wrong value stops with
an error naming the variable and what it accepts, instead of being ignored somewhere deep in a step.

    DEVTUNE_WORKSPACE       the workspace folder when -w is not given (else the current folder)
    DEVTUNE_THEME           the wizard's theme (over the one remembered by the workspace)
    DEVTUNE_DOCTOR_REPLAY   a recorded machine the doctor judges instead of this one (`doctor --record`)
    DEVTUNE_GPU_BACKEND     force the GPU sampler: amdsmi, amd-smi, rocm-smi, nvml, none, replay:<folder>
    DEVTUNE_SERVE_PYTHON    the serving environment's interpreter (else .venv-serve/bin/python)

Each process reads them once (`current()`), and the front-ends pass what they need into core: the CLI in
`cli.main`, the wizard in `tui.app`, the run supervisor in its own process. Two kinds of variable stay
out, each for its reason:

- `DEVTUNE_LANG` is read by core.i18n, because the language must be known before the argument parser is
  built (the help texts are translated), without importing pydantic for `devtune --help`.
- API keys (`DEVTUNE_EVAL_KEY`, `DEVTUNE_JUDGE_KEY`, or whatever `--api-key-env` names) are read only at
  the moment a request needs them, so a settings object can be shown or logged without a secret in it.

The workspace's preferences (`Preferences`) are the small choices the wizard remembers in
`.devtune/state.json` (`settings`): the theme and the Data step's template.
"""
from __future__ import annotations

import os
from typing import Mapping

PREFIX = "DEVTUNE_"
FIELDS = ("workspace", "theme", "doctor_replay", "gpu_backend", "serve_python")
GPU_BACKENDS = ("auto", "amdsmi", "amd-smi", "rocm-smi", "nvml", "none")
_LAZY = ("Settings", "Preferences", "load", "current", "theme")


def variables(environ: Mapping[str, str] | None = None) -> dict[str, str]:
    """The DEVTUNE_* variables devtune knows, by field name, as set in `environ` (default: this process).
    The one place the environment is read; standard library only, so the wizard's first frame and
    `devtune --help` can use it before pydantic is loaded."""
    env = os.environ if environ is None else environ
    found = {k[len(PREFIX):].lower(): v for k, v in env.items() if k.upper().startswith(PREFIX)}
    return {k: v for k, v in found.items() if k in FIELDS}


def peek(field: str, environ: Mapping[str, str] | None = None) -> str | None:
    """One variable as set (None when unset or blank), unchecked: for the first frame, as the wizard peeks
    at state.json before the full load. `current()` checks them all."""
    value = variables(environ).get(field, "").strip()
    return value or None


def __getattr__(name: str):
    if name in _LAZY:
        import importlib

        return getattr(importlib.import_module("core.settings_model"), name)
    raise AttributeError(f"module 'core.settings' has no attribute {name!r}")
