"""core.train.universal: the rules of a resume on another number of ranks (the conversion itself is DeepSpeed's
and runs for real in tests/e2e/test_resume_world_size.py), and the checkpoint-fit check's new rule: a ZeRO
checkpoint converted to DeepSpeed's universal checkpoint fits any number of ranks when the config loads it."""

from __future__ import annotations

import json

from core.config.presets import cpu_demo
from core.config.spec import Launch
from core.train.checkpoint_fit import checkpoint_shape, fit_problems
from core.train.universal import (deepspeed_json, loads_universal, plan_world_change, universal_folder,
                                  zero_step_folder)


def _zero3(root, ranks=2, step=20):
    ck = root / f"checkpoint-{step}"
    folder = ck / f"global_step{step}"
    folder.mkdir(parents=True)
    (ck / "adapter_config.json").write_text("{}")
    (ck / "latest").write_text(f"global_step{step}")
    for r in range(ranks):
        for kind in ("model", "optim"):
            (folder / f"zero_pp_rank_{r}_mp_rank_00_{kind}_states.pt").write_bytes(b"")
    return ck


def _converted(ck, step=20):
    """What ds_to_universal leaves: global_stepN_universal/zero/<param>/, the model states copied, then
    latest_universal naming the folder."""
    out = ck / f"global_step{step}_universal"
    (out / "zero" / "lm_head.weight").mkdir(parents=True)
    for path in (ck / f"global_step{step}").glob("*model_states.pt"):
        (out / path.name).write_bytes(b"")
    (ck / "latest_universal").write_text(out.name)


def test_the_global_batch_is_kept_where_the_new_count_divides_it():
    down = plan_world_change(2, 1, 3, per_device=4, accumulation=1)
    assert (down.universal, down.accumulation, down.batch_before, down.batch_after) == (True, 2, 8, 8)
    assert down.plan_kept and "global batch 8 kept" in down.describe()
    up = plan_world_change(2, 4, 3, per_device=4, accumulation=4)
    assert (up.accumulation, up.batch_after) == (2, 32)
    odd = plan_world_change(2, 3, 3, per_device=4, accumulation=1)
    assert (odd.accumulation, odd.batch_after, odd.plan_kept) == (1, 12, False)
    assert "from 8 to 12 rows" in odd.describe()
    nearest = plan_world_change(1, 3, 3, per_device=4, accumulation=2)  # 8 rows: 12 is nearer than 24
    assert (nearest.accumulation, nearest.batch_after) == (1, 12)
    plain = plan_world_change(2, 1, None, per_device=4, accumulation=1)
    assert not plain.universal and "no DeepSpeed" in plain.describe()  # HF's own checkpoint: nothing to convert
    same = plan_world_change(2, 2, 3, per_device=4, accumulation=1)
    assert not same.universal and same.accumulation == 1


def test_a_universal_checkpoint_fits_any_number_of_ranks_only_when_the_config_loads_it(tmp_path):
    ck = _zero3(tmp_path)
    one = cpu_demo(["support"]).model_copy(update={"zero_stage": 3, "launch": Launch(device="cpu", gpus_per_node=1)})
    refused = fit_problems(ck, one, loads_universal=True)
    assert len(refused) == 1 and "saved by 2 ranks" in refused[0] and "devtune resume RUN --gpus N" in refused[0]
    _converted(ck)
    assert universal_folder(ck) == ck / "global_step20_universal"
    assert zero_step_folder(ck) == ck / "global_step20"  # the ranks are still counted from DeepSpeed's own folder
    assert checkpoint_shape(ck).world_size == 2
    assert fit_problems(ck, one, loads_universal=True) == []
    assert len(fit_problems(ck, one, loads_universal=False)) == 1  # DeepSpeed would read `latest`: still 2 ranks only


def test_an_unfinished_conversion_is_no_universal_checkpoint(tmp_path):
    ck = _zero3(tmp_path)
    (ck / "global_step20_universal").mkdir()  # the converter died before its zero/ folder and latest_universal
    assert universal_folder(ck) is None
    (ck / "latest_universal").write_text("global_step20_universal")
    assert universal_folder(ck) is None


def test_the_deepspeed_json_says_load_universal_only_when_the_ranks_change(tmp_path):
    source = tmp_path / "ds.json"
    source.write_text(json.dumps({"zero_optimization": {"stage": 3}, "checkpoint": {"load_universal": True,
                                                                                    "tag_validation": "Warn"}}))
    on = deepspeed_json(source, tmp_path / "on.json", universal=True)
    assert json.loads(on.read_text())["checkpoint"]["load_universal"] is True and loads_universal(on)
    off = deepspeed_json(on, tmp_path / "off.json", universal=False)  # a later resume on the same count
    assert json.loads(off.read_text())["checkpoint"] == {"tag_validation": "Warn"} and not loads_universal(off)
    source.write_text(json.dumps({"zero_optimization": {"stage": 3}, "checkpoint": {"load_universal": True}}))
    bare = deepspeed_json(source, tmp_path / "bare.json", universal=False)
    assert "checkpoint" not in json.loads(bare.read_text())
    assert not loads_universal(tmp_path / "missing.json") and not loads_universal(None)
