"""core/train/rank_site/sitecustomize.py: the ranks of a run agree on a stop, so every rank ends at the same step.

Two real ranks under torchrun (gloo on this CPU) drive transformers' own CallbackHandler as the Trainer's loop
does (on_substep_end inside gradient accumulation, on_step_end at each optimizer step, a break on the stop
flags); one rank's callback asks to stop, as LLaMA-Factory's LogCallback does when SIGABRT reaches it. Without
the hook that rank alone leaves the loop (and in a real run waits on a collective the others never join). With it
every rank also asks the Trainer to save at that step (should_save: a full, resumable checkpoint-<step>)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from core.train.launch import RANK_SITE, training_env

LOOP = r"""
import os, sys, types
import torch, torch.distributed as dist
from transformers.trainer_callback import CallbackHandler, TrainerCallback, TrainerControl, TrainerState

distributed = "LOCAL_RANK" in os.environ  # under torchrun; else one process, as a single-GPU run
if distributed:
    dist.init_process_group("gloo")
rank = dist.get_rank() if distributed else 0
asker, when, where = int(sys.argv[1]), int(sys.argv[2]), sys.argv[3]

class AsksToStop(TrainerCallback):  # LLaMA-Factory's LogCallback once its rank got SIGABRT
    def on_substep_end(self, args, state, control, **kw):
        if rank == asker and where == "substep" and state.global_step + 1 >= when:
            control.should_training_stop = control.should_epoch_stop = True
    def on_step_end(self, args, state, control, **kw):
        if rank == asker and state.global_step >= when:
            control.should_training_stop = control.should_epoch_stop = True

handler = CallbackHandler([AsksToStop()], None, None, None, None)
strategy = os.environ.get("SAVE_STRATEGY", "steps")  # TrainingArguments.save_strategy (an enum whose value is this)
args = types.SimpleNamespace(device=torch.device("cpu"), save_strategy=types.SimpleNamespace(value=strategy))
state, control = TrainerState(), TrainerControl()
stopped = None
for step in range(1, 12):
    for micro in range(3):  # gradient_accumulation_steps: 3
        if micro < 2:
            control = handler.on_substep_end(args, state, control)
        else:
            state.global_step = step
            control = handler.on_step_end(args, state, control)
        if control.should_epoch_stop or control.should_training_stop:
            stopped = (step, micro, "saves" if control.should_save else "no save")
            break
    if stopped:
        break
if distributed:
    dist.barrier()
open(os.path.join(sys.argv[4], f"rank{rank}.txt"), "w").write(f"rank {rank} stopped at {stopped}")
"""


def _ranks(tmp_path, asker: int, when: int, where: str, *, synced: bool, nproc: int = 2,
           save_strategy: str = "steps") -> set[str]:
    script = tmp_path / "loop.py"
    script.write_text(LOOP)
    env = {**os.environ, "PYTHONPATH": str(RANK_SITE), "OMP_NUM_THREADS": "1"}
    env["DEVTUNE_SYNCED_STOP"] = "1" if synced else "0"
    env["SAVE_STRATEGY"] = save_strategy
    torchrun = Path(sys.executable).parent / "torchrun"
    start = [str(torchrun), "--standalone", "--nproc-per-node", str(nproc)] if nproc > 1 else [sys.executable]
    out = subprocess.run([*start, str(script), str(asker), str(when), where, str(tmp_path)], env=env,
                         capture_output=True, text=True, timeout=240)
    assert out.returncode == 0, out.stdout + out.stderr
    return {(tmp_path / f"rank{r}.txt").read_text() for r in range(nproc)}


def test_a_stop_one_rank_asks_for_ends_every_rank_at_that_step(tmp_path, uses_torch):
    assert _ranks(tmp_path, 1, 3, "step", synced=True) == {"rank 0 stopped at (3, 2, 'saves')",
                                                            "rank 1 stopped at (3, 2, 'saves')"}


def test_a_stop_asked_for_inside_gradient_accumulation_waits_for_the_steps_end(tmp_path, uses_torch):
    assert _ranks(tmp_path, 0, 5, "substep", synced=True) == {"rank 0 stopped at (5, 2, 'saves')",
                                                               "rank 1 stopped at (5, 2, 'saves')"}


def test_a_single_process_run_saves_where_it_stops(tmp_path, uses_torch):
    """One GPU, no torchrun: nothing to agree on, but the stop still writes a resumable checkpoint."""
    assert _ranks(tmp_path, 0, 4, "step", synced=True, nproc=1) == {"rank 0 stopped at (4, 2, 'saves')"}
    assert _ranks(tmp_path, 0, 4, "step", synced=False, nproc=1) == {"rank 0 stopped at (4, 2, 'no save')"}
    # a run that saves no checkpoints (save_strategy: no) gets none from a stop either
    assert _ranks(tmp_path, 0, 4, "step", synced=True, nproc=1, save_strategy="no") == {
        "rank 0 stopped at (4, 2, 'no save')"}


def test_without_the_hook_the_ranks_part(tmp_path, uses_torch):
    """What LLaMA-Factory does alone: the rank that got the signal leaves, the other trains on."""
    assert _ranks(tmp_path, 1, 3, "step", synced=False) == {"rank 0 stopped at None",
                                                             "rank 1 stopped at (3, 2, 'no save')"}


def test_every_run_gets_the_hook_and_keeps_its_own_pythonpath(workspace, monkeypatch, tmp_path):
    monkeypatch.setenv("PYTHONPATH", f"{tmp_path}/mine")
    env = training_env(workspace, {}, "saves/x", on_this_machine=False)
    assert env["DEVTUNE_SYNCED_STOP"] == "1"
    assert env["PYTHONPATH"].split(os.pathsep) == [str(RANK_SITE), f"{tmp_path}/mine"]
    assert (RANK_SITE / "sitecustomize.py").is_file()


def test_a_sitecustomize_it_shadows_still_runs(tmp_path):
    """A distribution's or a person's own sitecustomize, later on the path, runs after devtune's."""
    theirs = tmp_path / "theirs"
    theirs.mkdir()
    (theirs / "sitecustomize.py").write_text("import os\nos.environ['THEIRS_RAN'] = 'yes'\n")
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(RANK_SITE), str(theirs)]), "LOCAL_RANK": "0",
           "DEVTUNE_SYNCED_STOP": "1"}
    out = subprocess.run([sys.executable, "-c", "import os, sys; print(os.environ.get('THEIRS_RAN'), "
                          "any(type(f).__name__ == '_PatchOnImport' for f in sys.meta_path))"],
                         env=env, capture_output=True, text=True, timeout=60)
    assert out.stdout.split() == ["yes", "True"], out.stdout + out.stderr


@pytest.mark.parametrize("variable", [{"LOCAL_RANK": "0", "DEVTUNE_SYNCED_STOP": "0"}, {}])
def test_unasked_it_does_nothing(variable):
    env = {k: v for k, v in os.environ.items() if k not in ("LOCAL_RANK", "DEVTUNE_SYNCED_STOP")}
    env.update(variable, PYTHONPATH=str(RANK_SITE))
    out = subprocess.run([sys.executable, "-c", "import sys; print(any(type(f).__name__ == '_PatchOnImport' "
                          "for f in sys.meta_path))"], env=env, capture_output=True, text=True, timeout=60)
    assert out.stdout.strip() == "False", out.stdout + out.stderr
