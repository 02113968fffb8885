"""core.train.checkpoint_fit: what a checkpoint folder says about the run that saved it (the layouts are the
ones real LLaMA-Factory 0.9.5 runs wrote here: one process, two processes with ZeRO-3), and a resume refused
with the reason when the config does not fit it."""

from __future__ import annotations

from pathlib import Path

import pytest

from core.config.spec import Launch
from core.config.presets import cpu_demo
from core.train.checkpoint_fit import checkpoint_shape, fit_problems


def _checkpoint(root: Path, *, adapter: bool, zero: int | None, ranks: int) -> Path:
    ck = root / "checkpoint-12"
    ck.mkdir(parents=True)
    if adapter:
        (ck / "adapter_config.json").write_text("{}")
    names = ["rng_state.pth"] if ranks == 1 else [f"rng_state_{r}.pth" for r in range(ranks)]
    if zero is None:
        names.append("optimizer.pt")
    else:
        step = ck / "global_step12"
        step.mkdir()
        for r in range(ranks):
            (step / f"zero_pp_rank_{r}_mp_rank_00_optim_states.pt").write_bytes(b"")
            if zero == 3:
                (step / f"zero_pp_rank_{r}_mp_rank_00_model_states.pt").write_bytes(b"")
        if zero != 3:
            (step / "mp_rank_00_model_states.pt").write_bytes(b"")
    for name in names:
        (ck / name).write_bytes(b"")
    return ck


@pytest.mark.parametrize("adapter,zero,ranks", [(True, None, 1), (True, 3, 2), (False, 2, 4), (True, None, 2)])
def test_the_shape_is_read_from_the_files(tmp_path, adapter, zero, ranks):
    shape = checkpoint_shape(_checkpoint(tmp_path, adapter=adapter, zero=zero, ranks=ranks))
    assert (shape.adapter, shape.zero_stage, shape.world_size) == (adapter, zero, ranks)


def test_a_fitting_config_resumes(tmp_path):
    spec = cpu_demo(["support"]).model_copy(update={"zero_stage": 3, "launch": Launch(device="cpu", gpus_per_node=2)})
    assert fit_problems(_checkpoint(tmp_path, adapter=True, zero=3, ranks=2), spec) == []


def test_each_misfit_is_named(tmp_path):
    ck = _checkpoint(tmp_path, adapter=True, zero=3, ranks=2)
    one = cpu_demo(["support"])  # one process, no DeepSpeed
    problems = fit_problems(ck, one)
    assert len(problems) == 2 and "ZeRO-3" in problems[0] and "without DeepSpeed" in problems[0]
    assert "2 ranks" in problems[1] and "runs 1" in problems[1]
    four = one.model_copy(update={"zero_stage": 3, "launch": Launch(device="cpu", gpus_per_node=4)})
    assert any("2 ranks" in p and "runs 4" in p for p in fit_problems(ck, four))
    full = one.model_copy(update={"finetuning_type": "full", "zero_stage": 3,
                                  "launch": Launch(device="cpu", gpus_per_node=2)})
    assert any("an adapter" in p and "full" in p for p in fit_problems(ck, full))
