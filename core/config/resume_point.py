"""Where a training run in an existing output_dir would start: LLaMA-Factory resumes from the folder's
last `checkpoint-N` unless overwrite_output_dir is set. A checkpoint that has already trained all the
steps the config asks for means a run that would train zero steps: `devtune train` refuses it, and the
Config step's check says so (both ask here)."""

from __future__ import annotations

import json
import math
from pathlib import Path

from core.i18n import _


def last_checkpoint_of(output_dir: Path) -> Path | None:
    """The highest `checkpoint-N` folder, as LLaMA-Factory / HF Trainer resume from."""
    best, best_n = None, -1
    if not output_dir.is_dir():
        return None
    for child in output_dir.iterdir():
        if child.is_dir() and child.name.startswith("checkpoint-") and child.name[11:].isdigit():
            if int(child.name[11:]) > best_n:
                best, best_n = child, int(child.name[11:])
    return best


def checkpoint_steps(checkpoint: Path) -> tuple[int, int, float | None] | None:
    """(global_step, max_steps, num_train_epochs) from a checkpoint's trainer_state.json."""
    try:
        state = json.loads((checkpoint / "trainer_state.json").read_text(encoding="utf-8"))
        return int(state["global_step"]), int(state["max_steps"]), state.get("num_train_epochs")
    except (OSError, ValueError, KeyError, TypeError):
        return None


def nothing_left_to_train(output_dir: Path, *, max_steps: int | None = None,
                          epochs: float | None = None) -> str | None:
    """Why a run resuming from output_dir's last checkpoint would train zero steps (None: it would train).
    `max_steps` / `epochs`: what the config asks for now (None: what the checkpoint's run planned)."""
    checkpoint = last_checkpoint_of(output_dir)
    steps = checkpoint_steps(checkpoint) if checkpoint is not None else None
    if steps is None:
        return None
    done, planned, planned_epochs = steps
    if max_steps is not None and max_steps > 0:
        planned = max_steps
    elif epochs and planned_epochs:
        planned = math.ceil(planned * float(epochs) / float(planned_epochs))
    if done < planned:
        return None
    return _("{checkpoint} has already trained {done} of the {planned} steps this config asks for: resuming "
             "from it would train zero steps", checkpoint=checkpoint.name, done=done, planned=planned)


def zero_step_reason(spec, output_dir: Path) -> str | None:
    """`nothing_left_to_train` for a TrainSpec (None also when overwrite_output_dir starts it afresh)."""
    from core.config.spec import value

    if value(spec, "overwrite_output_dir"):
        return None
    max_steps = value(spec, "max_steps")
    return nothing_left_to_train(output_dir, max_steps=max_steps if isinstance(max_steps, int) else None,
                                 epochs=value(spec, "num_train_epochs"))
