"""devtune's hook in each rank of a training run: every rank stops at the same step.

core.train.launch puts this folder first on the trainer's PYTHONPATH (with DEVTUNE_SYNCED_STOP=1), so Python
runs this file when each of the run's processes starts. It does nothing unless the variable asks for it; in a
process that never trains (torchrun, llamafactory-cli's launcher) the patched handler is simply never called.

Why: LLaMA-Factory's graceful stop (SIGABRT with LLAMABOARD_ENABLED, its LogCallback) sets a flag in the rank
that received the signal, and the trainer ends its loop at that rank's next step end. The signal reaches
every rank, but not at the same point of the step: one rank can end step N and start saving (ZeRO-3 gathers
the weights, DDP waits at a barrier) while another has begun step N+1, and the two wait on different
collectives until torchrun ends the job (exit 143, no adapter saved; seen in CI on 2 cores).

The fix is the stop decision made by all ranks together, as accelerate's set_trigger / check_trigger does:
after the callbacks' on_step_end, transformers' CallbackHandler returns a control whose stop flags are the
maximum over the ranks (one all_reduce of one number per optimizer step, on the rank's device). A stop asked
for in the middle of gradient accumulation (on_substep_end) waits for that step's end, where it is agreed.

A stop also saves a full checkpoint: the agreed stop sets should_save, so the Trainer's _maybe_log_save_evaluate
(right after on_step_end) writes checkpoint-<step> (weights or adapter, optimizer, scheduler, RNG) on every rank
at that same step (ZeRO-3's save is collective), and a resume goes on from the stopped step itself instead of the
last save_steps checkpoint. LLaMA-Factory's own stop saves only the adapter. A single process (one GPU) too.

Any other sitecustomize on the path (a distribution's own) is run after this one, so it is not shadowed."""

from __future__ import annotations

import os
import sys


def _agreed(control, args) -> object:
    """control with should_training_stop / should_epoch_stop true on every rank when true on any, and
    should_save with them (a stop writes a resumable checkpoint)."""
    import torch
    import torch.distributed as dist

    if not (dist.is_available() and dist.is_initialized()) or dist.get_world_size() < 2:
        return _saves_on_stop(control, args)
    device = getattr(args, "device", None)
    if dist.get_backend() == "gloo" or device is None:
        device = torch.device("cpu")
    flags = torch.tensor([int(bool(control.should_training_stop)), int(bool(control.should_epoch_stop))],
                         dtype=torch.int32, device=device)
    dist.all_reduce(flags, op=dist.ReduceOp.MAX)
    training, epoch = (bool(v) for v in flags.tolist())
    control.should_training_stop, control.should_epoch_stop = training, epoch
    return _saves_on_stop(control, args)


def _saves_on_stop(control, args=None) -> object:
    strategy = getattr(args, "save_strategy", None)
    if str(getattr(strategy, "value", strategy)) == "no":
        return control  # the run saves no checkpoints (save_strategy: no): a stop does not either
    if control.should_training_stop or control.should_epoch_stop:
        control.should_save = True
    return control


def patch(module) -> None:
    """Wrap transformers.trainer_callback.CallbackHandler's on_step_end and on_substep_end."""
    handler = module.CallbackHandler
    if getattr(handler, "_devtune_synced_stop", False):
        return
    step_end, substep_end = handler.on_step_end, handler.on_substep_end

    def on_step_end(self, args, state, control):
        return _agreed(step_end(self, args, state, control), args)

    def on_substep_end(self, args, state, control):
        control = substep_end(self, args, state, control)
        if control.should_training_stop or control.should_epoch_stop:
            # in the middle of gradient accumulation: the ranks agree at this step's end (the flag that asked,
            # LLaMA-Factory's LogCallback.aborted, stays set and asks again there)
            control.should_training_stop = control.should_epoch_stop = False
        return control

    handler.on_step_end, handler.on_substep_end = on_step_end, on_substep_end
    handler._devtune_synced_stop = True
    if os.environ.get("RANK", "0") == "0" and "LOCAL_RANK" in os.environ:  # once in the run's log: the evidence that the hook is in place
        print("[devtune] a stop is agreed by every rank (core/train/rank_site/sitecustomize.py)", file=sys.stderr,
              flush=True)


class _PatchOnImport:
    """A meta-path finder that lets transformers.trainer_callback load as usual, then patches it (nothing is
    imported early: a rank imports transformers when LLaMA-Factory does)."""

    NAME = "transformers.trainer_callback"

    def find_spec(self, name, path=None, target=None):
        if name != self.NAME:
            return None
        import importlib.util

        sys.meta_path.remove(self)  # once: the module's own spec, found as if this finder were not here
        spec = importlib.util.find_spec(name)
        if spec is None or spec.loader is None:
            return spec
        loader, exec_module = spec.loader, spec.loader.exec_module

        def exec_and_patch(module):
            exec_module(module)
            patch(module)

        loader.exec_module = exec_and_patch
        return spec


def _install() -> None:
    if os.environ.get("DEVTUNE_SYNCED_STOP") != "1":
        return
    module = sys.modules.get(_PatchOnImport.NAME)
    if module is not None:
        patch(module)
    else:
        sys.meta_path.insert(0, _PatchOnImport())


def _run_the_next_sitecustomize() -> None:
    """The sitecustomize this one shadows (the first on sys.path after this folder), if there is one."""
    import importlib.util

    here = os.path.dirname(os.path.abspath(__file__))
    for entry in sys.path:
        if not entry or os.path.abspath(entry) == here:
            continue
        candidate = os.path.join(entry, "sitecustomize.py")
        if os.path.isfile(candidate):
            spec = importlib.util.spec_from_file_location("_devtune_next_sitecustomize", candidate)
            if spec is not None and spec.loader is not None:
                spec.loader.exec_module(importlib.util.module_from_spec(spec))
            return


_install()
_run_the_next_sitecustomize()
