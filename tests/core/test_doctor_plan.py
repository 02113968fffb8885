"""The planned model, read from the workspace, that disk and RAM are judged against."""

import json

import pytest

from core.doctor.planned_model import GENERIC_PARAMS, params_from_config, params_from_name, planned_model

LLAMA2_7B = {"hidden_size": 4096, "intermediate_size": 11008, "num_attention_heads": 32, "num_hidden_layers": 32,
             "num_key_value_heads": 32, "vocab_size": 32000, "tie_word_embeddings": False}
QWEN25_7B = {"hidden_size": 3584, "intermediate_size": 18944, "num_attention_heads": 28, "num_hidden_layers": 28,
             "num_key_value_heads": 4, "vocab_size": 152064, "tie_word_embeddings": False}


@pytest.mark.parametrize("config, low, high", [(LLAMA2_7B, 6.6e9, 6.8e9), (QWEN25_7B, 7.5e9, 7.7e9)])
def test_params_from_config_match_published_sizes(tmp_path, config, low, high):
    path = tmp_path / "config.json"
    path.write_text(json.dumps(config))
    assert low < params_from_config(path) < high


def test_params_from_a_multimodal_config_use_the_text_model(tmp_path):
    path = tmp_path / "config.json"
    path.write_text(json.dumps({"model_type": "qwen2_vl", "text_config": LLAMA2_7B}))
    assert 6.6e9 < params_from_config(path) < 6.8e9
    path.write_text("{}")
    assert params_from_config(path) is None


@pytest.mark.parametrize("name, params", [
    ("Qwen/Qwen2.5-7B-Instruct", 7e9), ("Qwen/Qwen2.5-0.5B", 5e8), ("mistralai/Mixtral-8x7B-v0.1", 56e9),
    ("HuggingFaceTB/SmolLM2-135M", 135e6), ("gpt2", None), ("meta-llama/Llama-3.1-70B", 70e9),
])
def test_params_from_name(name, params):
    assert params_from_name(name) == (int(params) if params else None)


def test_no_workspace_or_no_plan_is_a_generic_7b_lora(workspace):
    assert planned_model(None, {})["source"] == "generic"
    plan = planned_model(workspace, {})
    assert plan["source"] == "generic" and plan["params"] == GENERIC_PARAMS and plan["finetuning_type"] == "lora"


def _plan_config(workspace, text: str):
    (workspace.configs_dir / "train.yaml").write_text(text)
    workspace.update_state(lambda s: setattr(s, "config_file", "configs/train.yaml"))


def test_local_model_folder_from_the_train_yaml(workspace, tiny_model):
    _plan_config(workspace, f"model_name_or_path: {tiny_model}\nfinetuning_type: lora\nquantization_bit: 4\n")
    plan = planned_model(workspace, {})
    assert plan["source"] == "config" and plan["local"] is True and plan["config_file"] == "configs/train.yaml"
    assert plan["quantization_bit"] == 4
    assert 0 < plan["weights_bytes"] < 20 * 1024 ** 2  # the tiny model is a few MB
    assert plan["params_source"] == "config.json" and plan["params"] < 1e6


def test_hub_model_uses_the_cached_config_then_the_name(workspace, tmp_path):
    _plan_config(workspace, "model_name_or_path: Qwen/Qwen2.5-7B-Instruct\nfinetuning_type: full\n"
                            "deepspeed: configs/ds_z3_offload.json\n")
    plan = planned_model(workspace, {"HF_HOME": str(tmp_path / "hf")})
    assert plan["params_source"] == "name" and plan["params"] == 7e9 and plan["cached"] is False
    assert plan["finetuning_type"] == "full" and "offload" in plan["deepspeed"]
    snapshot = tmp_path / "hf" / "hub" / "models--Qwen--Qwen2.5-7B-Instruct" / "snapshots" / "abc123"
    snapshot.mkdir(parents=True)
    (snapshot / "config.json").write_text(json.dumps(QWEN25_7B))
    plan = planned_model(workspace, {"HF_HOME": str(tmp_path / "hf")})
    assert plan["params_source"].startswith("config.json") and plan["cached"] is True
    assert 7.5e9 < plan["params"] < 7.7e9


def test_unreadable_train_yaml_falls_back_to_generic(workspace):
    _plan_config(workspace, "model_name_or_path: [unclosed\n")
    plan = planned_model(workspace, {})
    assert plan["source"] == "generic" and "configs/train.yaml" in plan["config_error"]
