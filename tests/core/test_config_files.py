"""The files the Config step writes, what the Train step reads back, and the launch commands."""

import json

import pytest

from core.files.atomic import FileExistsRefused
from core.config.files import (ConfigMissing, launch_argv, launch_env, load_config, load_spec, node_commands,
                         render_deepspeed, render_yaml, save_config)
from core.config.form import form_values, spec_from_form
from core.config.presets import PRESETS, preset_spec
from core.config.yaml_in import import_lf_args, load_lf_yaml_text


@pytest.mark.parametrize("name", list(PRESETS))
def test_presets_render_and_read_back(name, workspace):
    spec = preset_spec(name)
    text = render_yaml(spec)
    args = load_lf_yaml_text(text)
    again = import_lf_args(args, launch=spec.launch).spec
    assert render_yaml(again.model_copy(update={"preset": spec.preset})) == text
    assert args["stage"] == "sft" and args["do_train"] is True and args["output_dir"].startswith("saves/")


def test_cpu_demo_is_what_the_lead_measured():
    args = load_lf_yaml_text(render_yaml(preset_spec("cpu-demo")))
    assert args == {
        "model_name_or_path": "models/tiny-llama3", "stage": "sft", "do_train": True, "finetuning_type": "lora",
        "lora_rank": 16, "lora_alpha": 32, "lora_target": "all", "additional_target": "embed_tokens,lm_head",
        "dataset": "support", "dataset_dir": "data", "template": "llama3", "cutoff_len": 256,
        "preprocessing_num_workers": 1, "output_dir": "saves/cpu-demo", "logging_steps": 5, "save_steps": 100,
        "plot_loss": False, "overwrite_output_dir": False, "report_to": "none", "per_device_train_batch_size": 4,
        "gradient_accumulation_steps": 1, "learning_rate": 0.01, "num_train_epochs": 80.0,
        "lr_scheduler_type": "cosine", "warmup_ratio": 0.05, "max_grad_norm": 10.0, "bf16": False,
        "include_num_input_tokens_seen": True,  # tokens/s measured by LLaMA-Factory (issue 19)
    }


def test_launch_environment_and_commands():
    cpu = preset_spec("cpu-demo")
    assert launch_env(cpu) == {"OMP_NUM_THREADS": "1"}
    assert launch_argv(cpu, "configs/train.yaml") == ["llamafactory-cli", "train", "configs/train.yaml"]
    assert node_commands(cpu)[0].text == "OMP_NUM_THREADS=1 llamafactory-cli train configs/train.yaml"
    assert launch_env(preset_spec("lora-1gpu")) == {}
    z3 = preset_spec("zero3-multi-gpu")
    assert node_commands(z3)[0].text == "FORCE_TORCHRUN=1 NPROC_PER_NODE=8 llamafactory-cli train configs/train.yaml"
    multi = preset_spec("multi-node")
    multi = multi.model_copy(update={"launch": multi.launch.model_copy(update={"master_addr": "10.0.0.1"})})
    texts = [c.text for c in node_commands(multi)]
    assert texts == [f"FORCE_TORCHRUN=1 NPROC_PER_NODE=8 NNODES=2 NODE_RANK={r} MASTER_ADDR=10.0.0.1 MASTER_PORT=29500 "
                     "llamafactory-cli train configs/train.yaml" for r in (0, 1)]
    # DeepSpeed needs torchrun even on one device (LLaMA-Factory: "Please use FORCE_TORCHRUN=1")
    one = preset_spec("lora-1gpu").model_copy(update={"zero_stage": 2})
    assert launch_env(one) == {"FORCE_TORCHRUN": "1", "NPROC_PER_NODE": "1"}


def test_save_writes_yaml_and_deepspeed_and_load_gives_the_spec_back(workspace):
    spec = preset_spec("zero3-multi-gpu")
    saved = save_config(workspace, spec)
    assert saved.written == ["configs/ds_z3_config.json", "configs/train.yaml"]
    assert json.loads((workspace.configs_dir / "ds_z3_config.json").read_text()) == json.loads(render_deepspeed(spec))
    assert load_spec(workspace) == spec
    assert save_config(workspace, spec).written == []  # nothing changed, nothing rewritten
    loaded_args = load_lf_yaml_text((workspace.configs_dir / "train.yaml").read_text())
    assert loaded_args["deepspeed"] == "configs/ds_z3_config.json"


def test_a_file_devtune_did_not_write_is_never_replaced_unasked(workspace):
    own = workspace.configs_dir / "train.yaml"
    own.write_text("model_name_or_path: mine\noutput_dir: saves/mine\n")
    with pytest.raises(FileExistsRefused):
        save_config(workspace, preset_spec("cpu-demo"))
    assert own.read_text().startswith("model_name_or_path: mine")
    save_config(workspace, preset_spec("cpu-demo"), force=True)
    assert "tiny-llama3" in own.read_text()


def test_a_yaml_edited_by_hand_is_read_back_with_its_launch_settings(workspace):
    spec = preset_spec("zero3-multi-gpu")
    save_config(workspace, spec)
    path = workspace.configs_dir / "train.yaml"
    path.write_text(path.read_text().replace("learning_rate: 1.0e-4", "learning_rate: 3.0e-5")
                    + "neftune_noise_alpha: 5\n")
    loaded = load_config(workspace)
    assert loaded.edited_by_hand and loaded.kept == ["neftune_noise_alpha"]
    assert loaded.spec.learning_rate == 3e-5 and loaded.spec.launch.gpus_per_node == 8
    assert loaded.spec.zero_stage == 3
    with pytest.raises(FileExistsRefused):
        save_config(workspace, loaded.spec)


def test_no_config_yet(workspace):
    with pytest.raises(ConfigMissing):
        load_spec(workspace)


def test_the_form_round_trips_and_reports_bad_fields():
    spec = preset_spec("cpu-demo")
    again, errors = spec_from_form(spec, form_values(spec))
    assert errors == {} and again == spec
    values = {**form_values(spec), "lora_rank": "abc", "launch.gpus_per_node": "0"}
    bad, errors = spec_from_form(spec, values)
    assert bad is None and set(errors) == {"lora_rank"}
    bad, errors = spec_from_form(spec, {**form_values(spec), "launch.gpus_per_node": "0"})
    assert bad is None and "launch.gpus_per_node" in errors
    q = preset_spec("qlora-70b")
    lora, _ = spec_from_form(q, {**form_values(q), "finetuning_type": "lora"})
    assert lora.quantization_bit is None and "quantization_bit" not in render_yaml(lora)
    z, _ = spec_from_form(spec, {**form_values(spec), "zero_stage": "2", "offload": True})
    assert z.zero_stage == 2 and z.offload and z.deepspeed is None
    same, _ = spec_from_form(spec, {**form_values(spec), "max_steps": ""})
    assert same.max_steps is None and "max_steps" not in render_yaml(same)
