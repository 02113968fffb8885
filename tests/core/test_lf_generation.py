"""LLaMA-Factory's v1 (USE_V1=1) given to devtune, which drives v0 (issue 28): a v1 config and a v1
dataset_info.yaml get a message naming what devtune supports, wherever devtune reads them."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from core.config.files import load_config, rule_context
from core.config.lf_generation import v1_keys
from core.config.rules import check_rules
from core.config.yaml_in import ImportProblem, import_lf_yaml, load_lf_yaml_text
from core.data.dataset_info import is_v1_dataset_list, read_dataset_info, v1_dataset_list
from core.data.register import RegisterError, register_dataset
from core.workspace.layout import Workspace

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "lf_v1"


@pytest.mark.parametrize("name", ["train_lora_sft.yaml", "train_full_deepspeed.yaml"])
def test_a_v1_config_is_refused_naming_what_devtune_drives(name):
    with pytest.raises(ImportProblem) as info:
        import_lf_yaml(FIXTURES / name)
    message = str(info.value)
    assert "LLaMA-Factory v1 config" in message and "USE_V1=1" in message
    assert "model_class" in message and "dist_config" in message and "train_dataset" in message
    assert "LLaMA-Factory 0.9.x (v0)" in message and "model_name_or_path" in message
    assert "has no" not in message  # not the v0 'the file has no model_name_or_path'


def test_a_v0_config_is_not_taken_for_v1():
    args = load_lf_yaml_text((FIXTURES / "v0_qwen3_lora_sft.yaml").read_text())
    assert v1_keys(args) == []
    assert import_lf_yaml(FIXTURES / "v0_qwen3_lora_sft.yaml").spec.model_name_or_path == "Qwen/Qwen3-4B-Instruct-2507"
    assert v1_keys({"model": "x"}) == []  # one unknown key alone is not a schema


def test_the_workspace_config_and_the_cli_say_the_same(tmp_path, devtune_cli):
    ws = Workspace(tmp_path).ensure()
    shutil.copy(FIXTURES / "train_lora_sft.yaml", ws.root / "configs" / "train.yaml")
    with pytest.raises(ImportProblem, match="LLaMA-Factory v1 config"):
        load_config(ws)
    out = devtune_cli("-w", str(tmp_path), "config", "check")
    assert out.returncode == 2 and "LLaMA-Factory v1 config" in out.stderr, out.stderr
    out = devtune_cli("-w", str(tmp_path), "train")
    assert out.returncode == 2 and "LLaMA-Factory v1 config" in out.stderr, out.stderr


def test_a_v1_dataset_list_is_recognised():
    assert is_v1_dataset_list(FIXTURES / "v1_sft_demo.yaml")  # by its entries
    assert not is_v1_dataset_list(FIXTURES / "v0_qwen3_lora_sft.yaml")  # a YAML, but no dataset list
    assert is_v1_dataset_list(Path("data/dataset_info.yaml"))  # by its name


def test_registering_a_v1_dataset_list_says_what_devtune_reads(tmp_path):
    data = tmp_path / "data"
    data.mkdir()
    shutil.copy(FIXTURES / "v1_sft_demo.yaml", data / "dataset_info.yaml")
    with pytest.raises(RegisterError) as info:
        register_dataset(data / "dataset_info.yaml", "demo", data)
    assert "LLaMA-Factory v1 dataset list" in str(info.value) and "dataset_info.json" in str(info.value)
    assert "devtune data register FILE --name NAME" in str(info.value)
    assert read_dataset_info(data) == {}  # v0's registry is still empty, not an error: register can create it


def test_config_check_names_a_v1_dataset_list_where_dataset_info_json_should_be(tmp_path):
    ws = Workspace(tmp_path).ensure()
    shutil.copy(FIXTURES / "v1_sft_demo.yaml", ws.root / "data" / "dataset_info.yaml")
    spec = import_lf_yaml(FIXTURES / "v0_qwen3_lora_sft.yaml").spec
    assert v1_dataset_list(ws.root / "data") == ws.root / "data" / "dataset_info.yaml"
    findings = {f.code: f for f in check_rules(spec, rule_context(ws, spec, found=[]))}
    assert "data/dataset_info.yaml is a LLaMA-Factory v1 dataset list" in findings["data.no_info"].message
    (ws.root / "data" / "dataset_info.yaml").unlink()
    findings = {f.code: f for f in check_rules(spec, rule_context(ws, spec, found=[]))}
    assert findings["data.no_info"].message == "data/dataset_info.json not found"
