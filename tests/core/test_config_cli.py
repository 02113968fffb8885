"""`devtune config ...` as a person types it: files, exit codes, JSON."""

import json

from tests.core.config_workspace import FIXTURES, fake_model, register_dataset


def test_init_show_command_check_on_a_demo_workspace(devtune_cli, workspace):
    fake_model(workspace)
    ws = str(workspace.root)
    out = devtune_cli("-w", ws, "config", "init")
    assert out.returncode == 1, out.stderr  # written, but no dataset is registered yet: an error, said
    assert "is written, but its check reports 1 error" in out.stdout
    assert "wrote configs/train.yaml" in out.stdout and "OMP_NUM_THREADS=1 llamafactory-cli train" in out.stdout
    state = json.loads((workspace.state_dir / "state.json").read_text())
    assert state["config_file"] == "configs/train.yaml" and state["steps"]["config"]["status"] == "attention"

    cmd = devtune_cli("-w", ws, "config", "command")
    assert cmd.returncode == 0 and cmd.stdout.strip() == "OMP_NUM_THREADS=1 llamafactory-cli train configs/train.yaml"
    assert "cd " in cmd.stderr

    check = devtune_cli("-w", ws, "config", "check", "--no-llamafactory")
    assert check.returncode == 1 and "dataset_info.json" in check.stdout  # no dataset registered yet
    register_dataset(workspace)
    check = devtune_cli("-w", ws, "config", "check", "--no-llamafactory", "--json")
    assert check.returncode == 0, check.stdout
    assert json.loads(check.stdout)["ok"] is True

    show = json.loads(devtune_cli("-w", ws, "config", "show", "--json").stdout)
    assert show["spec"]["preset"] == "cpu-demo" and show["fit"]["verdict"] == "fits"
    assert show["commands"][0]["env"] == {"OMP_NUM_THREADS": "1"} and "lora_rank: 16" in show["yaml"]


def test_multi_node_prints_one_command_per_node(devtune_cli, workspace):
    ws = str(workspace.root)
    out = devtune_cli("-w", ws, "config", "init", "--preset", "multi-node", "--master-addr", "10.0.0.7",
                      "--nodes", "3", "--gpus", "4")
    assert out.returncode == 1 and "dataset_info.json not found" in out.stdout, out.stderr  # no data yet
    assert (workspace.configs_dir / "ds_z3_config.json").exists()
    lines = devtune_cli("-w", ws, "config", "command").stdout.splitlines()
    commands = [ln for ln in lines if not ln.startswith("#")]
    assert commands == [f"FORCE_TORCHRUN=1 NPROC_PER_NODE=4 NNODES=3 NODE_RANK={r} MASTER_ADDR=10.0.0.7 "
                        "MASTER_PORT=29500 llamafactory-cli train configs/train.yaml" for r in range(3)]
    one = devtune_cli("-w", ws, "config", "command", "--node-rank", "2", "--json")
    assert [c["node_rank"] for c in json.loads(one.stdout)["commands"]] == [2]
    assert devtune_cli("-w", ws, "config", "command", "--node-rank", "5").returncode == 2


def test_import_keeps_and_reports_unmodelled_keys_and_export_writes_them_back(devtune_cli, workspace, tmp_path):
    ws = str(workspace.root)
    out = devtune_cli("-w", ws, "config", "init", "--from-yaml", str(FIXTURES / "llama3_lora_sft.yaml"), "--gpus", "2",
                      "--zero", "3")
    assert out.returncode == 1 and "dataset_info.json not found" in out.stdout, out.stderr  # no data yet
    assert "kept as imported" in out.stdout and "ddp_timeout" in out.stdout
    written = (workspace.configs_dir / "train.yaml").read_text()
    assert "ddp_timeout: 180000000" in written and "deepspeed: configs/ds_z3_config.json" in written
    dest = tmp_path / "exported.yaml"
    assert devtune_cli("-w", ws, "config", "export", str(dest)).returncode == 0
    assert "ddp_timeout: 180000000" in dest.read_text()
    assert devtune_cli("-w", ws, "config", "export", str(dest)).returncode == 2  # not replaced unasked
    merge = devtune_cli("-w", ws, "config", "init", "--from-yaml", str(FIXTURES / "merge_llama3_lora_sft.yaml"),
                        "--force")
    assert merge.returncode == 2 and "export" in merge.stderr


def test_a_persons_own_yaml_is_adopted_not_rewritten_and_never_replaced_unasked(devtune_cli, workspace):
    ws = str(workspace.root)
    own = workspace.configs_dir / "train.yaml"
    own.write_text((FIXTURES / "qwen3_lora_sft.yaml").read_text())
    before = own.read_bytes()
    adopt = devtune_cli("-w", ws, "config", "init", "--from-yaml", "configs/train.yaml")
    assert adopt.returncode == 1 and "adopted" in adopt.stdout and own.read_bytes() == before  # 1: no data yet
    replaced = devtune_cli("-w", ws, "config", "init", "--preset", "lora-1gpu")
    assert replaced.returncode == 1 and "wrote configs/train.yaml" in replaced.stdout  # adopted: devtune knows the file as it was, so it may rewrite it
    own.write_text("model_name_or_path: mine\noutput_dir: saves/mine\n")
    refused = devtune_cli("-w", ws, "config", "init", "--preset", "lora-1gpu")
    assert refused.returncode == 2 and "--force" in refused.stderr
    assert own.read_text().startswith("model_name_or_path: mine")
    assert "wrote configs/train.yaml" in devtune_cli("-w", ws, "config", "init", "--preset", "lora-1gpu",
                                                      "--force").stdout


def test_usage_errors_exit_2(devtune_cli, workspace):
    ws = str(workspace.root)
    assert devtune_cli("-w", ws, "config", "init", "--preset", "nope").returncode == 2
    assert devtune_cli("-w", ws, "config", "init", "--gpu-model", "nope").returncode == 2
    assert devtune_cli("-w", ws, "config", "show").returncode == 2  # no config yet
    assert devtune_cli("-w", ws, "config").returncode == 2
    presets = json.loads(devtune_cli("-w", ws, "config", "presets", "--json").stdout)
    assert set(presets["presets"]) == {"cpu-demo", "lora-1gpu", "qlora-70b", "zero3-multi-gpu", "multi-node"}
    assert {"mi300x", "mi250-gcd", "mi325x", "mi355x", "h100-80", "a100-40", "a100-80", "l40s"} <= \
        {g["id"] for g in presets["gpus"]}
