"""Whether a checkpoint can be resumed by a run: what the checkpoint folder says about the run that saved it
(method, DeepSpeed ZeRO stage, world size), against the spec that would resume it.

What HF Trainer / DeepSpeed write into `checkpoint-N/` (seen on real runs of LLaMA-Factory 0.9.5):

    adapter_config.json                      a LoRA / QLoRA run (a full fine-tune saves model weights instead)
    rng_state.pth | rng_state_<rank>.pth     one file per rank when there are several
    optimizer.pt                             no DeepSpeed
    global_stepN/zero_pp_rank_R_mp_rank_00_model_states.pt    ZeRO-3: the model sharded, one file per rank
    global_stepN/mp_rank_00_model_states.pt + *zero_pp_rank_R_mp_rank_00_optim_states.pt   ZeRO-1/2

DeepSpeed loads a ZeRO checkpoint only with the same number of ranks (the optimizer is sharded), unless it was
converted to DeepSpeed's universal checkpoint (global_stepN_universal/, named by latest_universal; core.train.universal)
and the DeepSpeed config loads that (`checkpoint.load_universal`): a universal checkpoint fits any number of ranks.
HF Trainer loads a DeepSpeed checkpoint only under DeepSpeed, and a non-DeepSpeed one only without it.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

from core.i18n import _

_RANK_FILE = re.compile(r"zero_pp_rank_(\d+)_mp_rank_\d+_(model|optim)_states\.pt$")


@dataclass(frozen=True)
class CheckpointShape:
    adapter: bool  # an adapter (LoRA/QLoRA) checkpoint, not full model weights
    zero_stage: int | None  # None: saved without DeepSpeed; 3, or 2 for ZeRO-1/2 (their files look alike)
    world_size: int | None  # None: not readable from the files


def checkpoint_shape(checkpoint: Path) -> CheckpointShape:
    adapter = (checkpoint / "adapter_config.json").is_file()
    from core.train.universal import zero_step_folder

    step = zero_step_folder(checkpoint)
    zero, ranks = None, set()
    if step is not None:
        sharded_model = False
        for path in step.iterdir():
            match = _RANK_FILE.search(path.name)
            if match:
                ranks.add(int(match.group(1)))
                sharded_model = sharded_model or match.group(2) == "model"
        zero = 3 if sharded_model else 2
    if not ranks:
        rng = [p.name for p in checkpoint.glob("rng_state*.pth")]
        ranks = {i for i in range(len(rng))} if rng else set()
    return CheckpointShape(adapter, zero, len(ranks) or None)


def fit_problems(checkpoint: Path, spec, *, loads_universal: bool = False) -> list[str]:
    """Why `spec` cannot resume `checkpoint` ([]: it can), each in words that say what to change.
    `loads_universal`: the spec's DeepSpeed JSON loads universal checkpoints (`checkpoint.load_universal`)."""
    from core.train.universal import universal_folder

    shape = checkpoint_shape(checkpoint)
    problems = []
    wants_adapter = spec.finetuning_type in ("lora", "qlora") or bool(getattr(spec, "is_qlora", False))
    if shape.adapter != wants_adapter:
        problems.append(_("{ck} holds {saved}, this config trains {method}: resume with the method it was saved "
                          "with, or start a new run", ck=checkpoint.name,
                          saved=_("an adapter") if shape.adapter else _("full model weights"),
                          method=spec.finetuning_type))
    stage = spec.zero_stage
    if (shape.zero_stage is None) != (stage is None) or (stage == 3) != (shape.zero_stage == 3):
        saved = _("without DeepSpeed") if shape.zero_stage is None else (
            _("with DeepSpeed ZeRO-3") if shape.zero_stage == 3 else _("with DeepSpeed ZeRO-1/2"))
        now = _("without DeepSpeed") if stage is None else _("with DeepSpeed ZeRO-{n}", n=stage)
        problems.append(_("{ck} was saved {saved}, this config runs {now}: DeepSpeed loads only the layout it "
                          "saved", ck=checkpoint.name, saved=saved, now=now))
    world = spec.launch.world_size
    universal = loads_universal and universal_folder(checkpoint) is not None  # fits any number of ranks
    if shape.zero_stage is not None and shape.world_size and shape.world_size != world and not universal:
        problems.append(_("{ck} was saved by {saved} ranks, this config runs {now}: a ZeRO checkpoint's "
                          "optimizer is sharded per rank and DeepSpeed loads it only on {saved}; `devtune resume RUN "
                          "--gpus N` (or --nodes) converts it to DeepSpeed's universal checkpoint, which any number "
                          "of ranks loads", ck=checkpoint.name, saved=shape.world_size, now=world))
    return problems
