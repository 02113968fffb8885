"""Issue 29 (a newcomer with their own data), items 1, 2, 3, 4, 6 and 7: state that changed behind the
person's back and checks that stopped nothing. Each is decided once in core; the CLI is driven as typed."""

from __future__ import annotations

import json
import time

import pytest

from core.train.runs import RunStatus, read_record, write_record
from core.workspace.layout import Workspace
from tests.core.config_workspace import fake_model, register_dataset
from tests.recorded_runs import place_recorded_run


def _state(ws: Workspace) -> dict:
    return json.loads((ws.state_dir / "state.json").read_text())


@pytest.fixture
def newcomer(workspace):
    fake_model(workspace)
    register_dataset(workspace, "kefu")
    return workspace


# ---- 1. a side file named with --output stays a side file ---------------------------------------------

def test_a_side_file_does_not_become_the_workspace_config(newcomer, devtune_cli):
    ws = str(newcomer.root)
    first = devtune_cli("-w", ws, "config", "init", "--dataset", "kefu")
    assert first.returncode == 0, first.stdout + first.stderr
    assert "configs/train.yaml is the workspace's config" in first.stdout
    side = devtune_cli("-w", ws, "config", "init", "--dataset", "kefu", "--method", "full",
                       "--output", "configs/t_full.yaml")
    assert side.returncode == 0, side.stdout + side.stderr
    assert "configs/t_full.yaml is a side file" in side.stdout and "use configs/train.yaml" in side.stdout
    assert _state(newcomer)["config_file"] == "configs/train.yaml"
    show = devtune_cli("-w", ws, "config", "show")
    assert show.stdout.startswith("configs/train.yaml: lora")
    assert "configs/train.yaml is the workspace's config" in show.stdout
    shown = devtune_cli("-w", ws, "config", "show", "--config", "configs/t_full.yaml")
    assert "configs/t_full.yaml is a side file" in shown.stdout
    # asked for: the side file becomes the workspace's config, and says so
    made = devtune_cli("-w", ws, "config", "init", "--from-yaml", "configs/t_full.yaml", "--output",
                       "configs/t_full.yaml", "--default")
    assert made.returncode == 0 and "configs/t_full.yaml is the workspace's config" in made.stdout
    assert _state(newcomer)["config_file"] == "configs/t_full.yaml"


def test_the_first_config_of_a_workspace_is_its_config_under_any_name(newcomer, devtune_cli):
    out = devtune_cli("-w", str(newcomer.root), "config", "init", "--dataset", "kefu", "--output", "configs/mine.yaml")
    assert out.returncode == 0 and "configs/mine.yaml is the workspace's config" in out.stdout
    assert _state(newcomer)["config_file"] == "configs/mine.yaml"


# ---- 6. a config whose check has errors is not trained unasked ----------------------------------------

def test_config_init_exits_1_on_an_error_and_train_refuses_it(newcomer, devtune_cli):
    ws = str(newcomer.root)
    out = devtune_cli("-w", ws, "config", "init", "--stage", "dpo", "--dataset", "kefu")
    assert out.returncode == 1, out.stdout + out.stderr
    assert "supervised rows" in out.stdout and "wrote configs/train.yaml" in out.stdout
    assert "is written, but its check reports 1 error" in out.stdout and "devtune train --force" in out.stdout
    assert (newcomer.configs_dir / "train.yaml").is_file()
    train = devtune_cli("-w", ws, "train", "--detach")
    assert train.returncode == 1, train.stdout + train.stderr
    assert "training configs/train.yaml (the workspace's config)" in train.stderr
    assert "configs/train.yaml has 1 error, so it is not trained" in train.stderr
    assert "supervised rows" in train.stderr and "devtune train --force" in train.stderr
    assert not newcomer.runs_dir.is_dir() or not any(newcomer.runs_dir.iterdir())  # nothing started
    # a side file without errors changes nothing: plain `devtune train` still means configs/train.yaml
    side = devtune_cli("-w", ws, "config", "init", "--dataset", "kefu", "--output", "configs/sft.yaml")
    assert side.returncode == 0, side.stdout
    again = devtune_cli("-w", ws, "train", "--detach")
    assert again.returncode == 1 and "training configs/train.yaml" in again.stderr


def test_qlora_on_a_cpu_is_refused_by_the_train_start_request(newcomer, devtune_cli):
    from core.errors import exit_code_of
    from core.train.launch import ConfigHasErrors, launch_training

    out = devtune_cli("-w", str(newcomer.root), "config", "init", "--dataset", "kefu", "--method", "qlora")
    assert out.returncode == 1 and "QLoRA (bitsandbytes 4-bit) needs a GPU" in out.stdout
    with pytest.raises(ConfigHasErrors) as refused:
        launch_training(newcomer)
    assert [f.code for f in refused.value.errors] == ["qlora.cpu"] and exit_code_of(refused.value) == 1
    assert "needs a GPU" in refused.value.question and "Train it anyway?" in refused.value.question


# ---- 7. a hint that edits a config edits that config ---------------------------------------------------

def test_the_master_addr_hint_run_as_printed_edits_the_multi_node_config(newcomer, devtune_cli):
    ws = str(newcomer.root)
    out = devtune_cli("-w", ws, "config", "init", "--preset", "multi-node", "--dataset", "kefu", "--nodes", "2",
                      "--gpus", "4", "--model", "models/tiny-llama3")
    assert out.returncode == 1
    hint = next(line.strip().removeprefix("→ ") for line in out.stdout.splitlines()
                if "--master-addr" in line and "→" in line)
    assert hint == "devtune config edit --config configs/train.yaml --master-addr HOST"
    argv = hint.replace("HOST", "10.0.0.7").split()[1:]
    edited = devtune_cli("-w", ws, *argv)
    assert edited.returncode in (0, 1), edited.stdout + edited.stderr
    assert "need the address of node 0" not in edited.stdout and "MASTER_ADDR=10.0.0.7" in edited.stdout
    spec = json.loads(devtune_cli("-w", ws, "config", "show", "--json").stdout)["spec"]
    assert spec["launch"]["nnodes"] == 2 and spec["launch"]["gpus_per_node"] == 4
    assert spec["launch"]["master_addr"] == "10.0.0.7" and spec["preset"] == "multi-node"
    assert spec["dataset"] == ["kefu"] and spec["model_name_or_path"] == "models/tiny-llama3"
    nothing = devtune_cli("-w", ws, "config", "edit")
    assert nothing.returncode == 2 and "nothing to change" in nothing.stderr


def test_from_yaml_of_a_config_devtune_wrote_keeps_its_nodes(newcomer, devtune_cli):
    ws = str(newcomer.root)
    devtune_cli("-w", ws, "config", "init", "--preset", "multi-node", "--dataset", "kefu", "--nodes", "3",
                "--master-addr", "10.0.0.9", "--output", "configs/multi.yaml")
    again = devtune_cli("-w", ws, "config", "init", "--from-yaml", "configs/multi.yaml", "--output",
                        "configs/multi.yaml", "--master-port", "29600")
    assert again.returncode in (0, 1), again.stderr
    spec = json.loads(devtune_cli("-w", ws, "config", "show", "--json", "--config", "configs/multi.yaml").stdout)
    assert spec["spec"]["launch"]["nnodes"] == 3 and spec["spec"]["launch"]["master_port"] == 29600


# ---- 2. split files belong to one dataset ----------------------------------------------------------------

ROWS = [{"instruction": f"问题 {k}: how do I do thing number {k} with my order?", "input": "",
         "output": f"Answer {k}: open the order page and press button {k}."} for k in range(20)]


def test_a_second_holdout_name_never_changes_the_first_datasets_rows(workspace, devtune_cli):
    ws = str(workspace.root)
    source = workspace.data_dir / "kefu_clean.jsonl"
    source.write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in ROWS), encoding="utf-8")
    first = devtune_cli("-w", ws, "data", "register", "data/kefu_clean.jsonl", "--name", "kefu", "--holdout", "0.2")
    assert first.returncode == 0, first.stdout + first.stderr
    kefu_train, kefu_held = workspace.data_dir / "kefu.train.jsonl", workspace.data_dir / "kefu.heldout.jsonl"
    before = kefu_train.read_bytes(), kefu_held.read_bytes()
    second = devtune_cli("-w", ws, "data", "register", "data/kefu_clean.jsonl", "--name", "kefu_b",
                         "--holdout", "0.3")
    assert second.returncode == 0, second.stdout + second.stderr
    assert (kefu_train.read_bytes(), kefu_held.read_bytes()) == before
    info = json.loads((workspace.data_dir / "dataset_info.json").read_text())
    assert info["kefu"]["file_name"] == "kefu.train.jsonl" and info["kefu_eval"]["file_name"] == "kefu.heldout.jsonl"
    assert info["kefu_b"]["file_name"] == "kefu_b.train.jsonl"
    assert info["kefu_b_eval"]["file_name"] == "kefu_b.heldout.jsonl"
    assert len((workspace.data_dir / "kefu_b.heldout.jsonl").read_text().splitlines()) == 6
    assert len(kefu_held.read_text().splitlines()) == 4
    # a person's own file under a part's name is never replaced
    mine = workspace.data_dir / "kefu_c.heldout.jsonl"
    mine.write_text('{"instruction": "mine", "input": "", "output": "keep me"}\n')
    refused = devtune_cli("-w", ws, "data", "register", "data/kefu_clean.jsonl", "--name", "kefu_c",
                          "--holdout", "0.2")
    assert refused.returncode == 1 and "kefu_c.heldout.jsonl" in refused.stderr
    assert "keep me" in mine.read_text()


# ---- 3. an export is checked against the run it came from ------------------------------------------------

def _run_with_own_config(ws: Workspace, run_id: str, started: float, model: str, status=RunStatus.FINISHED,
                         resume_of: str | None = None):
    place_recorded_run(ws, run_id, "lf_normal", status, 0, started=started)
    d = ws.runs_dir / run_id
    (d / "train.yaml").write_text(f"model_name_or_path: {model}\ntemplate: llama3\nfinetuning_type: lora\n")
    (ws.root / "saves" / run_id / "adapter_config.json").write_text("{}")
    record = read_record(d)
    record.config, record.resume_of = ws.rel(d / "train.yaml"), resume_of
    write_record(d, record)


def test_check_export_uses_the_run_recorded_for_the_export_not_the_newest(workspace, devtune_cli):
    from core.merge.export import load_export_record, plan_export, save_export_record

    fake_model(workspace)
    fake_model(workspace, "other-model")
    now = time.time()
    _run_with_own_config(workspace, "20260101-000000-kefu-w", now - 300, "models/tiny-llama3")
    plan = plan_export(workspace, "20260101-000000-kefu-w", name="kefu-w")
    save_export_record(workspace, plan)  # what start_export records as the export starts
    export = workspace.root / "exports" / "kefu-w"
    export.mkdir(parents=True)
    (export / "config.json").write_text("{}")
    # another run, stopped and resumed since: the newest training run
    _run_with_own_config(workspace, "20260102-000000-other", now - 200, "models/other-model", RunStatus.STOPPED)
    _run_with_own_config(workspace, "20260103-000000-other-r", now - 100, "models/other-model",
                         resume_of="20260102-000000-other")
    assert load_export_record(workspace, "exports/kefu-w").run_id == "20260101-000000-kefu-w"
    out = devtune_cli("-w", str(workspace.root), "check-export", "exports/kefu-w", "--no-numeric", "--json")
    report = json.loads(out.stdout)
    assert report["run_id"] == "20260101-000000-kefu-w", report
    # an explicit --run is still honoured
    out = devtune_cli("-w", str(workspace.root), "check-export", "exports/kefu-w", "--no-numeric", "--json",
                      "--run", "20260103-000000-other-r")
    assert json.loads(out.stdout)["run_id"] == "20260103-000000-other-r"


# ---- 4. --yes confirms fixes; replacing a file needs --force ------------------------------------------

def test_fix_yes_does_not_replace_an_existing_output(workspace, devtune_cli):
    from tests.core.config_workspace import ROWS as GOOD

    ws = str(workspace.root)
    src = workspace.data_dir / "kefu.jsonl"
    src.write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in GOOD * 2), encoding="utf-8")
    mine = workspace.data_dir / "mine.jsonl"
    mine.write_text('{"instruction": "mine", "input": "", "output": "keep me"}\n')
    out = devtune_cli("-w", ws, "data", "fix", "data/kefu.jsonl", "-o", "data/mine.jsonl", "--yes")
    assert out.returncode == 2 and "mine.jsonl already exists" in out.stderr and "--force" in out.stderr
    assert "keep me" in mine.read_text()
    forced = devtune_cli("-w", ws, "data", "fix", "data/kefu.jsonl", "-o", "data/mine.jsonl", "--yes", "--force")
    assert forced.returncode == 0, forced.stdout + forced.stderr
    assert "keep me" not in mine.read_text()


def test_the_wizards_fix_action_asks_before_replacing(workspace):
    from core.data import actions
    from tests.core.config_workspace import ROWS as GOOD

    src = workspace.data_dir / "kefu.jsonl"
    src.write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in GOOD), encoding="utf-8")
    mine = workspace.data_dir / "mine.jsonl"
    mine.write_text('{"instruction": "mine", "input": "", "output": "keep me"}\n')
    kw = {"output": "data/mine.jsonl", "yes": True, "ws_root": workspace.root, "dataset_dir": workspace.data_dir}
    asked = actions.run("fix", src, write=True, **kw)
    assert asked.error and asked.confirm and "mine.jsonl already exists. Replace it" in asked.confirm
    assert "keep me" in mine.read_text()
    preview = actions.run("fix", src, write=False, **kw)
    assert not preview.error and preview.confirm is None
    done = actions.run("fix", src, write=True, replace=True, **kw)
    assert not done.error and "keep me" not in mine.read_text()


def test_a_split_an_older_devtune_named_after_the_source_is_still_that_datasets(workspace, devtune_cli):
    ws = str(workspace.root)
    source = workspace.data_dir / "kefu_clean.jsonl"
    source.write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in ROWS), encoding="utf-8")
    (workspace.data_dir / "kefu_clean.train.jsonl").write_text(source.read_text())
    (workspace.data_dir / "kefu_clean.split.json").write_text(json.dumps(
        {"train": {"file": "kefu_clean.train.jsonl", "name": "kefu"}, "heldout": {"name": "kefu_eval"}}))
    (workspace.data_dir / "dataset_info.json").write_text(json.dumps({"kefu": {"file_name": "kefu_clean.train.jsonl"}}))
    out = devtune_cli("-w", ws, "data", "register", "data/kefu_clean.jsonl", "--name", "kefu", "--holdout", "0.2")
    assert out.returncode == 0, out.stdout + out.stderr
    info = json.loads((workspace.data_dir / "dataset_info.json").read_text())
    assert info["kefu"]["file_name"] == "kefu.train.jsonl"
    (workspace.data_dir / "dataset_info.json").write_text(json.dumps({"kefu_x": {"file_name": "kefu_clean.train.jsonl"}}))
    taken = devtune_cli("-w", ws, "data", "register", "data/kefu_clean.jsonl", "--name", "kefu_x", "--holdout", "0.2")
    assert taken.returncode == 1 and "already registered" in taken.stderr  # a part recorded for another name
