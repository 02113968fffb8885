"""Check training arguments with the installed LLaMA-Factory's own parser, in a subprocess.

`check_with_llamafactory(args, cwd=...)` runs `python -m core.config.lf_argcheck` with the arguments as JSON
on stdin. The child calls `llamafactory.hparams.get_train_args` - the real HfArgumentParser over
LLaMA-Factory's dataclasses plus every check it makes before a model is loaded (unknown keys, method
and quantization combinations, DeepSpeed, output_dir / resume, required packages such as matplotlib
for plot_loss) - and prints one JSON line. No model or dataset is loaded. Importing LLaMA-Factory
takes seconds, which is why it never happens in devtune's own process.

Two things of the launch are stood in for, since no launcher runs: a run devtune starts with
torchrun (several GPUs or DeepSpeed) is parsed as distributed, and bf16 on a machine without it is
reported as a hardware finding and the rest checked with bf16 off.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from core.processes.helpers import run_helper

MARK = "DEVTUNE-LFCHECK "
HARDWARE_BF16 = "doesn't support bf16"


@dataclass
class LfCheck:
    ran: bool  # False: LLaMA-Factory is not installed, or the check could not run (reason says why)
    ok: bool = False
    error: str | None = None  # LLaMA-Factory's own message
    hardware: str | None = None  # bf16 not available on this machine
    unknown_keys: list[str] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)  # LLaMA-Factory's warnings while parsing
    resume_from: str | None = None
    version: str | None = None
    reason: str | None = None


def check_with_llamafactory(args: dict[str, Any], *, cwd: Path, distributed: bool = False,
                            deepspeed_json: str | None = None, python: str | None = None,
                            timeout: float = 300) -> LfCheck:
    """Parse `args` (LLaMA-Factory keys) as `llamafactory-cli train` would, from `cwd` (the workspace)."""
    from core.config.templates import installed_llamafactory_version
    from core.i18n import _

    version = installed_llamafactory_version()
    if version is None:
        return LfCheck(ran=False, reason=_("LLaMA-Factory is not installed here"))
    payload = json.dumps({"args": args, "distributed": distributed, "deepspeed_json": deepspeed_json})
    env = {**os.environ, "OMP_NUM_THREADS": "1", "HF_HUB_OFFLINE": "1", "HF_DATASETS_OFFLINE": "1",
           "TRANSFORMERS_VERBOSITY": "error", "PYTHONPATH": _pythonpath()}
    try:
        proc = run_helper([python or sys.executable, "-m", "core.config.lf_argcheck"], input=payload,
                          timeout=timeout, cwd=cwd, env=env)
    except subprocess.TimeoutExpired:
        return LfCheck(ran=False, version=version, reason=_("the check took longer than {n} s", n=int(timeout)))
    except OSError as exc:
        return LfCheck(ran=False, version=version, reason=str(exc))
    line = next((ln for ln in reversed(proc.stdout.splitlines()) if ln.startswith(MARK)), None)
    if line is None:
        tail = (proc.stderr or proc.stdout).strip().splitlines()[-3:]
        return LfCheck(ran=False, version=version,
                       reason=" | ".join(tail) or _("exit code {code}", code=proc.returncode))
    data = json.loads(line[len(MARK):])
    return LfCheck(ran=True, version=version, **data)


def _pythonpath() -> str:
    here = str(Path(__file__).resolve().parents[2])
    old = os.environ.get("PYTHONPATH")
    return here if not old else f"{here}{os.pathsep}{old}"


# ---- the child process ------------------------------------------------------------------------

def _child(payload: dict[str, Any]) -> dict[str, Any]:
    import tempfile

    args = dict(payload["args"])
    if payload.get("deepspeed_json") is None:
        return _parse(args, bool(payload.get("distributed")))
    with tempfile.TemporaryDirectory(prefix="devtune-ds-") as tmp:
        ds_file = os.path.join(tmp, "ds_config.json")
        with open(ds_file, "w", encoding="utf-8") as fh:
            fh.write(payload["deepspeed_json"])
        args["deepspeed"] = ds_file
        return _parse(args, bool(payload.get("distributed")))


def _parse(args: dict[str, Any], distributed: bool) -> dict[str, Any]:
    import logging

    from llamafactory.hparams import get_train_args
    from llamafactory.hparams.training_args import TrainingArguments
    from transformers.training_args import ParallelMode

    if distributed:  # torchrun will be the launcher: parse as one of its processes
        TrainingArguments.parallel_mode = property(lambda self: ParallelMode.DISTRIBUTED)

    class Collect(logging.Handler):
        def __init__(self) -> None:
            super().__init__(logging.WARNING)
            self.messages: list[str] = []

        def emit(self, record: logging.LogRecord) -> None:
            self.messages.append(record.getMessage())

    collect = Collect()
    logging.getLogger("llamafactory").addHandler(collect)
    result: dict[str, Any] = {"ok": False, "error": None, "hardware": None, "unknown_keys": [],
                              "warnings": [], "resume_from": None}
    for attempt in range(2):
        try:
            parsed = get_train_args(args)
        except (ValueError, AssertionError, ImportError, RuntimeError, TypeError, KeyError) as exc:
            message = str(exc).strip() or type(exc).__name__
            if HARDWARE_BF16 in message and attempt == 0:
                result["hardware"] = message
                args.update(bf16=False, pure_bf16=False)
                collect.messages.clear()
                continue
            result["error"] = message
            if "not used by the HfArgumentParser" in message:
                result["unknown_keys"] = _keys_in(message)
            break
        else:
            result["ok"] = True
            result["resume_from"] = parsed[2].resume_from_checkpoint
            break
    if result["hardware"]:  # bf16 was switched off only to check the rest: its advice is not the person's
        collect.messages = [m for m in collect.messages if "mixed precision" not in m]
    result["warnings"] = list(dict.fromkeys(collect.messages))
    return result


def _keys_in(message: str) -> list[str]:
    import ast

    start, end = message.find("["), message.rfind("]")
    try:
        return [str(k) for k in ast.literal_eval(message[start:end + 1])]
    except (ValueError, SyntaxError):
        return []


def main() -> None:
    payload = json.loads(sys.stdin.read())
    result = _child(payload)
    sys.stdout.write("\n" + MARK + json.dumps(result) + "\n")
    sys.stdout.flush()


if __name__ == "__main__":
    main()
