"""Config for the pt / dpo / kto stages: the stage's keys, the check that the dataset's kind fits the
stage (refused with the reason), the SFT adapter as a DPO run's start, and the reference model in the
memory fit."""

import pytest

from core.config.memfit import estimate
from core.config.model_shapes import shape_from_name
from core.config.rule_context import RuleContext
from core.config.rules_stage import rule_stage
from core.config.spec import TrainSpec
from core.config.stages import with_stage

DPO_ENTRY = {"file_name": "d.json", "formatting": "sharegpt", "ranking": True,
             "columns": {"messages": "conversations", "chosen": "chosen", "rejected": "rejected"}}
KTO_ENTRY = {"file_name": "k.json", "formatting": "sharegpt", "columns": {"messages": "messages", "kto_tag": "label"}}
INFO = {"sft": {"file_name": "s.jsonl"}, "dpo": DPO_ENTRY, "kto": KTO_ENTRY,
        "c4": {"file_name": "c.jsonl", "columns": {"prompt": "text"}}}


def _spec(**kw) -> TrainSpec:
    return TrainSpec(model_name_or_path="meta-llama/Llama-3.1-8B-Instruct", output_dir="saves/run", **kw)


def _ids(spec, tmp_path):
    return {f.code: f for f in rule_stage(spec, RuleContext(root=tmp_path, dataset_info=INFO))}


@pytest.mark.parametrize("stage,fits,refused", [
    ("sft", ["sft"], ["dpo", "kto", "c4"]), ("dpo", ["dpo"], ["sft", "kto", "c4"]),
    ("kto", ["kto"], ["sft", "dpo", "c4"]), ("pt", ["sft", "dpo", "kto", "c4"], [])])
def test_the_dataset_kind_must_fit_the_stage(stage, fits, refused, tmp_path):
    for name in fits:
        assert "stage.dataset_kind" not in _ids(with_stage(_spec(dataset=[name]), stage), tmp_path), (stage, name)
    for name in refused:
        found = _ids(with_stage(_spec(dataset=[name]), stage), tmp_path)["stage.dataset_kind"]
        assert found.severity == "error" and found.fix, (stage, name)


def test_dpo_on_sft_rows_says_why(tmp_path):
    found = _ids(with_stage(_spec(dataset=["sft"]), "dpo"), tmp_path)["stage.dataset_kind"]
    assert "supervised" in found.message and "ranking" in found.fix


def test_with_stage_writes_the_stages_keys_and_folder():
    dpo = with_stage(_spec(pref_ftx=None), "dpo", pref_loss="simpo", adapter="saves/run")
    assert (dpo.stage, dpo.pref_loss, dpo.pref_beta, dpo.simpo_gamma) == ("dpo", "simpo", 0.1, 0.5)
    assert dpo.output_dir == "saves/run-dpo" and dpo.adapter_name_or_path == "saves/run"
    kto = with_stage(dpo, "kto")
    assert (kto.pref_loss, kto.simpo_gamma, kto.pref_beta, kto.output_dir) == (None, None, 0.1, "saves/run-kto")
    assert with_stage(kto, "sft").output_dir == "saves/run" and with_stage(kto, "sft").pref_beta is None


def test_adapter_and_unused_keys(tmp_path):
    spec = with_stage(_spec(dataset=["dpo"]), "dpo", adapter="saves/sft")
    assert "stage.adapter_missing" in _ids(spec, tmp_path)
    (tmp_path / "saves" / "sft").mkdir(parents=True)
    (tmp_path / "saves" / "sft" / "adapter_config.json").write_text("{}")
    ids = _ids(spec, tmp_path)
    assert "stage.adapter_missing" not in ids and "stage.from_base" not in ids
    assert "stage.from_base" in _ids(with_stage(_spec(dataset=["dpo"]), "dpo"), tmp_path)
    assert "stage.unused_key" in _ids(_spec(dataset=["sft"], pref_beta=0.2), tmp_path)


def test_memory_fit_counts_the_reference_model():
    shape = shape_from_name("meta-llama/Llama-3.1-8B-Instruct")
    sft_full = _spec(finetuning_type="full")
    dpo_full = with_stage(sft_full, "dpo")
    dpo_lora = with_stage(_spec(), "dpo")
    orpo_full = with_stage(sft_full, "dpo", pref_loss="orpo")
    assert estimate(dpo_full, shape, None).part("reference") > 0.9 * shape.params * 2
    assert estimate(dpo_lora, shape, None).part("reference") == 0  # the base, adapter off, is the reference
    assert estimate(orpo_full, shape, None).part("reference") == 0  # reference-free loss
    assert estimate(sft_full, shape, None).part("reference") == 0
    # the chosen and rejected rows run together: twice the activations of the same batch
    assert estimate(dpo_lora, shape, None).part("activations") == 2 * estimate(_spec(), shape, None).part(
        "activations")


def test_the_form_sets_the_stage_and_its_keys():
    from core.config.form import form_values, spec_from_form

    spec = _spec(dataset=["dpo"])
    values = form_values(spec)
    assert values["stage"] == "sft" and values["pref_loss"] == "" and values["adapter_name_or_path"] == ""
    dpo, errors = spec_from_form(spec, {**values, "stage": "dpo", "pref_loss": "orpo", "pref_beta": "0.2",
                                        "adapter_name_or_path": "saves/sft"})
    assert not errors
    assert (dpo.stage, dpo.pref_loss, dpo.pref_beta, dpo.adapter_name_or_path) == ("dpo", "orpo", 0.2, "saves/sft")
    back, errors = spec_from_form(dpo, {**form_values(dpo), "stage": ""})
    assert not errors and back.stage == "sft"
