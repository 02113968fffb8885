"""LLaMA-Factory's own example YAMLs go through import and export unchanged in meaning; the YAML
devtune writes is read back by LLaMA-Factory's loader as the same values."""

import pytest
from hypothesis import given
from hypothesis import strategies as st

from core.config.yaml_out import lf_args, render_yaml, yaml_scalar
from core.config.spec import TrainSpec
from core.config.yaml_in import ImportProblem, import_lf_args, import_lf_yaml, load_lf_yaml_text, meaning
from tests.core.config_workspace import FIXTURES

TRAIN_EXAMPLES = sorted(p for p in FIXTURES.glob("*.yaml") if not p.name.startswith("merge_"))


def test_the_fixtures_are_there():
    names = {p.name for p in TRAIN_EXAMPLES}
    assert {"llama3_lora_sft.yaml", "qwen3_lora_sft.yaml", "qwen3_lora_sft_ds3.yaml", "llama3_lora_sft_otfq.yaml",
            "llama3_full_sft.yaml", "llama3_freeze_sft.yaml"} <= names


@pytest.mark.parametrize("path", TRAIN_EXAMPLES, ids=lambda p: p.name)
def test_upstream_example_round_trips_unchanged_in_meaning(path):
    original = load_lf_yaml_text(path.read_text())
    imported = import_lf_yaml(path)
    exported = load_lf_yaml_text(render_yaml(imported.spec))
    assert meaning(exported) == meaning(original)
    # stricter: the same keys with the same values and types, only explicit nulls may go
    assert exported == {k: v for k, v in original.items() if v is not None}
    assert all(type(exported[k]) is type(v) for k, v in exported.items())
    # and exporting what was exported changes nothing
    again = import_lf_args(exported)
    assert render_yaml(again.spec) == render_yaml(imported.spec)


def test_llama3_example_keys_are_modelled_or_kept_and_reported():
    result = import_lf_yaml(FIXTURES / "llama3_lora_sft.yaml")
    spec = result.spec
    assert result.kept == ["overwrite_cache", "dataloader_num_workers", "save_only_model", "ddp_timeout"]
    assert spec.extra["ddp_timeout"] == 180000000
    assert (spec.finetuning_type, spec.template, spec.precision) == ("lora", "llama3", "bf16")
    assert spec.dataset == ["identity", "alpaca_en_demo"]
    assert spec.learning_rate == 1e-4 and isinstance(spec.learning_rate, float)


def test_qlora_and_deepspeed_examples_are_understood():
    qlora = import_lf_yaml(FIXTURES / "llama3_lora_sft_otfq.yaml").spec
    assert qlora.finetuning_type == "qlora" and qlora.quantization_bit == 4
    assert lf_args(qlora)["finetuning_type"] == "lora"
    ds3 = import_lf_yaml(FIXTURES / "qwen3_lora_sft_ds3.yaml")
    assert ds3.spec.zero_stage == 3 and ds3.spec.deepspeed == "examples/deepspeed/ds_z3_config.json"
    assert any("read from its name" in n for n in ds3.notes)


def test_deepspeed_settings_are_read_from_the_file_when_it_is_there(tmp_path):
    (tmp_path / "examples" / "deepspeed").mkdir(parents=True)
    (tmp_path / "examples" / "deepspeed" / "ds_z3_config.json").write_text(
        (FIXTURES / "deepspeed" / "ds_z3_offload_config.json").read_text())  # the name says no offload
    spec = import_lf_yaml(FIXTURES / "qwen3_lora_sft_ds3.yaml", root=tmp_path).spec
    assert (spec.zero_stage, spec.offload) == (3, True)


def test_merge_config_is_refused_with_a_reason():
    with pytest.raises(ImportProblem, match="export"):
        import_lf_yaml(FIXTURES / "merge_llama3_lora_sft.yaml")


def test_unknown_keys_are_kept_in_a_last_section_and_bad_values_refused():
    result = import_lf_args({"model_name_or_path": "m", "output_dir": "saves/x", "my_new_flag": [1, 2],
                             "neftune_noise_alpha": 5})
    assert result.kept == ["my_new_flag", "neftune_noise_alpha"]
    text = render_yaml(result.spec)
    assert "### other" in text and "my_new_flag: [1, 2]" in text
    assert load_lf_yaml_text(text)["my_new_flag"] == [1, 2]
    with pytest.raises(ImportProblem, match="lora_rank"):
        import_lf_args({"model_name_or_path": "m", "output_dir": "saves/x", "lora_rank": "many"})
    with pytest.raises(ImportProblem, match="output_dir"):
        import_lf_args({"model_name_or_path": "m"})


def test_precision_and_method_keys_are_written_as_llamafactory_reads_them():
    base = dict(model_name_or_path="m", output_dir="saves/x")
    assert lf_args(TrainSpec(**base, precision="fp32"))["bf16"] is False
    assert lf_args(TrainSpec(**base, precision="pure_bf16"))["pure_bf16"] is True
    assert "bf16" not in lf_args(TrainSpec(**base))
    q = lf_args(TrainSpec(**base, finetuning_type="qlora"))
    assert (q["finetuning_type"], q["quantization_bit"], q["quantization_method"]) == ("lora", 4, "bnb")
    z = lf_args(TrainSpec(**base, zero_stage=2, offload=True))
    assert z["deepspeed"] == "configs/ds_z2_offload_config.json"


def test_small_floats_are_written_in_the_examples_style():
    assert yaml_scalar(1e-4) == "1.0e-4"
    assert yaml_scalar(2.5e-05) == "2.5e-5"
    assert yaml_scalar(3.0) == "3.0"
    assert load_lf_yaml_text("lr: 1e-4")["lr"] == 1e-4  # OmegaConf reads this as a float, PyYAML would not


@given(st.floats(allow_nan=False, allow_infinity=True, width=64))
def test_any_float_reads_back_the_same(value):
    assert load_lf_yaml_text(f"v: {yaml_scalar(value)}")["v"] == value


@pytest.mark.parametrize("value", ["0E0", "1e-4", "-2E+3", "1_000.5", "3.", "1:30.5", ".5e+1"])
def test_strings_that_omegaconf_reads_as_floats_are_quoted(value):
    """Found by the property test below on a clean CI-like run: PyYAML writes "0E0" plain (to PyYAML it
    is a string), LLaMA-Factory's loader reads it back as 0.0."""
    assert load_lf_yaml_text(f"v: {yaml_scalar(value)}")["v"] == value


@given(st.text(min_size=0, max_size=30))
def test_any_string_reads_back_the_same(value):
    import yaml

    assert yaml.safe_load(f"v: {yaml_scalar(value)}")["v"] == value
    assert load_lf_yaml_text(f"v: {yaml_scalar(value)}")["v"] == value
