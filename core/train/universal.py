"""Resuming a run on another number of ranks (`devtune resume RUN --gpus N / --nodes N`).

What each kind of checkpoint allows (transformers 5.5, DeepSpeed 0.19, seen on real runs):

- no DeepSpeed (one process, or DDP): HF Trainer saves the whole optimizer (optimizer.pt, DDP keeps a full copy
  on every rank), the scheduler and one rng_state per rank: any number of ranks loads it as it is (a rank with no
  rng file of its own starts a fresh generator, HF says so in the log);
- DeepSpeed ZeRO-1/2/3: the optimizer (and under ZeRO-3 the weights) is sharded, one file per rank, and DeepSpeed
  loads it only with the number of ranks that saved it ("Automatic adjustment of ZeRO's optimizer state
  partitioning with a new world size is not currently supported"). DeepSpeed's own converter
  (`deepspeed.checkpoint.ds_to_universal`) turns `checkpoint-N/global_stepN/` into a universal checkpoint,
  `checkpoint-N/global_stepN_universal/` (one folder per parameter, its fp32 value and Adam moments) named by
  `checkpoint-N/latest_universal`; an engine whose config says `"checkpoint": {"load_universal": true}` loads it
  on any number of ranks and re-partitions it. HF Trainer passes the DeepSpeed JSON to the engine as it is and
  calls `engine.load_checkpoint(checkpoint-N)`, which then reads `latest_universal`: nothing else is needed from
  LLaMA-Factory than the JSON (`deepspeed:` in the YAML).

The step count comes from trainer_state.json whatever the world size. The global batch (ranks x per-device batch x
gradient accumulation) is kept when the new count divides it, by changing gradient_accumulation_steps: then the
steps per epoch, the total and the learning-rate schedule are the ones the run started with. When it does not
divide, the run goes on from the same step with the new global batch, and the plan (total steps, the schedule's
length) is recomputed by HF Trainer; the resume says so.
"""

from __future__ import annotations

import json
import subprocess
from dataclasses import dataclass
from pathlib import Path

from core.errors import Failed
from core.files.atomic import write_atomic
from core.i18n import _

LATEST_UNIVERSAL = "latest_universal"  # DeepSpeed's name for the file naming the universal folder
CONVERT_LOG = "ds_to_universal.log"


class UniversalError(Failed):
    """DeepSpeed's converter failed; the message quotes what it printed."""


def zero_step_folder(checkpoint: Path) -> Path | None:
    """The ZeRO folder `global_stepN` of a checkpoint (the one `latest` names), None without DeepSpeed."""
    try:
        named = checkpoint / (checkpoint / "latest").read_text(encoding="utf-8").strip()
        if named.is_dir():
            return named
    except OSError:
        pass
    steps = sorted(d for d in checkpoint.glob("global_step*") if d.is_dir() and not d.name.endswith("_universal"))
    return steps[-1] if steps else None


def universal_folder(checkpoint: Path) -> Path | None:
    """The universal checkpoint DeepSpeed's converter wrote in `checkpoint` (None: not converted, or unfinished:
    the converter writes `latest_universal` last)."""
    try:
        folder = checkpoint / (checkpoint / LATEST_UNIVERSAL).read_text(encoding="utf-8").strip()
    except OSError:
        return None
    return folder if (folder / "zero").is_dir() else None


def convert(checkpoint: Path, python: str, log: Path, *, env: dict[str, str] | None = None,
            timeout: float = 3600) -> Path:
    """Run DeepSpeed's ds_to_universal on `checkpoint` with the training environment's `python` (a subprocess: no
    torch in devtune's process); its output goes to `log`. Returns the universal folder (an existing one at once).
    `--inject_missing_state`: a ZeRO-1/2 checkpoint of a Hugging Face model has no universal_checkpoint_info of
    its own (Megatron-DeepSpeed writes it); DeepSpeed's docs give this flag for that case."""
    done = universal_folder(checkpoint)
    if done is not None:
        return done
    source = zero_step_folder(checkpoint)
    if source is None:
        raise UniversalError(_("{ck} has no DeepSpeed global_step* folder to convert", ck=checkpoint.name))
    target = checkpoint / f"{source.name}_universal"
    argv = [python, "-W", "ignore::RuntimeWarning", "-m", "deepspeed.checkpoint.ds_to_universal",
            "--input_folder", str(source), "--output_folder", str(target), "--num_extract_workers", "1",
            "--num_merge_workers", "1", "--inject_missing_state"]
    import os

    with open(log, "ab") as out:
        try:
            proc = subprocess.run(argv, stdin=subprocess.DEVNULL, stdout=out, stderr=subprocess.STDOUT,
                                  env={**os.environ, "DS_ACCELERATOR": os.environ.get("DS_ACCELERATOR", "cpu"),
                                       **(env or {})}, timeout=timeout)
            code = proc.returncode
        except (OSError, subprocess.TimeoutExpired) as exc:
            code, tail = None, str(exc)
    if code != 0 or universal_folder(checkpoint) is None:
        if code is not None:
            lines = log.read_text(encoding="utf-8", errors="replace").strip().splitlines()
            tail = "\n".join(lines[-6:])
        raise UniversalError(_("DeepSpeed's ds_to_universal could not convert {ck} (exit {code}; the whole output "
                               "is in {log}):\n{tail}", ck=checkpoint.name, code=code, log=str(log), tail=tail))
    return target


def deepspeed_json(source: Path, dest: Path, *, universal: bool) -> Path:
    """A copy of the run's DeepSpeed JSON that loads the universal checkpoint (or, `universal` False, the plain one:
    a later resume on the same count must not look for a `latest_universal` the new checkpoints do not have)."""
    config = json.loads(source.read_text(encoding="utf-8"))
    checkpoint = dict(config.get("checkpoint") or {})
    if universal:
        checkpoint["load_universal"] = True
    else:
        checkpoint.pop("load_universal", None)
    if checkpoint:
        config["checkpoint"] = checkpoint
    else:
        config.pop("checkpoint", None)
    write_atomic(dest, json.dumps(config, indent=2) + "\n")
    return dest


def loads_universal(ds_json: Path | None) -> bool:
    try:
        config = json.loads(ds_json.read_text(encoding="utf-8")) if ds_json else {}
    except (OSError, ValueError):
        return False
    return bool((config.get("checkpoint") or {}).get("load_universal")) if isinstance(config, dict) else False


@dataclass(frozen=True)
class WorldChange:
    """What a resume on `now` ranks of a checkpoint saved by `saved` ranks does."""

    saved: int  # the ranks that saved the checkpoint
    now: int  # the ranks of the resume
    zero_stage: int | None  # None: no DeepSpeed
    universal: bool  # the ZeRO checkpoint is converted and loaded as DeepSpeed's universal checkpoint
    accumulation: int  # gradient_accumulation_steps of the resume
    batch_before: int  # the global batch, in rows per optimizer step
    batch_after: int

    @property
    def plan_kept(self) -> bool:
        return self.batch_before == self.batch_after

    def describe(self) -> str:
        how = (_("DeepSpeed ZeRO-{n}: the checkpoint is converted to DeepSpeed's universal checkpoint "
                 "(ds_to_universal) and re-partitioned", n=self.zero_stage) if self.universal else
               _("no DeepSpeed: HF Trainer's checkpoint holds the whole optimizer and loads on any number of ranks"))
        if self.plan_kept:
            batch = _("global batch {b} kept (gradient_accumulation_steps {ga}): the same steps and learning-rate "
                      "schedule", b=self.batch_after, ga=self.accumulation)
        else:
            batch = _("the global batch goes from {a} to {b} rows ({now} ranks x the per-device batch do not divide {a}): the step count goes "
                      "on, the total steps and the schedule's length are recomputed for the new batch",
                      a=self.batch_before, b=self.batch_after, now=self.now)
        return _("from {saved} to {now} ranks: {how}; {batch}", saved=self.saved, now=self.now, how=how, batch=batch)


def plan_world_change(saved: int, now: int, zero_stage: int | None, per_device: int, accumulation: int) -> WorldChange:
    """The resume's gradient accumulation: the one that keeps the global batch when `now` divides it, else the one
    that comes nearest to it."""
    per_device, accumulation = max(1, per_device), max(1, accumulation)
    before = saved * per_device * accumulation
    kept, left = divmod(before, now * per_device)
    new_accumulation = kept if kept and not left else max(1, round(before / (now * per_device)))
    return WorldChange(saved, now, zero_stage, zero_stage is not None and saved != now, new_accumulation, before,
                       now * per_device * new_accumulation)
