"""The DeepSpeed JSONs devtune writes are LLaMA-Factory's own, and DeepSpeed's own config classes accept them."""

import json

import pytest

from core.config.deepspeed import describe_ds, ds_config, ds_filename, render_ds_json, stage_from_filename
from tests.core.config_workspace import FIXTURES

CASES = [(0, False), (2, False), (2, True), (3, False), (3, True)]


@pytest.mark.parametrize("stage,offload", CASES)
def test_same_as_llamafactory_examples(stage, offload):
    upstream = json.loads((FIXTURES / "deepspeed" / ds_filename(stage, offload)).read_text())
    assert json.loads(render_ds_json(stage, offload)) == upstream
    assert describe_ds(upstream) == (stage, offload)
    assert stage_from_filename(f"examples/deepspeed/{ds_filename(stage, offload)}") == (stage, offload)


def test_stage3_keeps_the_settings_of_ds_z3_config():
    zero = ds_config(3)["zero_optimization"]
    assert zero["stage3_gather_16bit_weights_on_model_save"] is True
    assert zero["stage3_max_live_parameters"] == 1e9 and zero["overlap_comm"] is False


def test_refuses_what_deepspeed_has_no_meaning_for():
    with pytest.raises(ValueError):
        ds_config(1)
    with pytest.raises(ValueError):
        ds_config(0, offload=True)


def _filled(config: dict, hidden: int = 4096) -> dict:
    """Fill "auto" as the HF Trainer does (transformers.integrations.deepspeed): batch sizes and clipping from
    the training arguments, bucket sizes from the model's hidden size."""
    cfg = json.loads(json.dumps(config))
    cfg.update(train_micro_batch_size_per_gpu=2, gradient_accumulation_steps=4, train_batch_size=8,
               gradient_clipping=1.0)
    cfg["fp16"]["enabled"] = False
    cfg["bf16"]["enabled"] = True
    zero = cfg["zero_optimization"]
    for key, val in {"reduce_bucket_size": hidden * hidden, "stage3_prefetch_bucket_size": int(0.9 * hidden * hidden),
                     "stage3_param_persistence_threshold": 10 * hidden}.items():
        if zero.get(key) == "auto":
            zero[key] = val
    return cfg


@pytest.mark.parametrize("stage,offload", CASES)
def test_deepspeed_own_config_classes_accept_them(stage, offload, uses_torch):
    pytest.importorskip("deepspeed")
    from deepspeed.runtime.config import DeepSpeedConfig
    from deepspeed.runtime.zero.offload_config import OffloadDeviceEnum

    parsed = DeepSpeedConfig(_filled(ds_config(stage, offload)))
    assert parsed.zero_optimization_stage == stage
    assert parsed.bfloat16_config.enabled and parsed.train_batch_size == 8
    zero = parsed.zero_config
    if offload:
        assert zero.offload_optimizer.device == OffloadDeviceEnum.cpu
        if stage == 3:
            assert zero.offload_param.device == OffloadDeviceEnum.cpu
    else:
        assert zero.offload_optimizer is None or zero.offload_optimizer.device == OffloadDeviceEnum.none
    if stage == 3:
        assert zero.gather_16bit_weights_on_model_save is True
