"""core.config.trackers: report_to as LLaMA-Factory and transformers take it, each tracker's local mode in the
workspace, and the config check (a tracker not installed stops nothing later: it is an error now)."""

from __future__ import annotations

import json

import pytest

from core.config.presets import preset_spec
from core.config.trackers import (TRACKERS, UnknownTracker, chosen, launch_env, parse_report_to, report_to_value,
                                  rule_trackers)
from core.config.yaml_in import import_lf_args
from core.config.yaml_out import lf_args, render_yaml


def test_names_are_read_once_each_in_order_and_none_is_nothing():
    assert parse_report_to("TensorBoard, mlflow,tensorboard") == ["tensorboard", "mlflow"]
    assert parse_report_to("none") == parse_report_to(None) == parse_report_to("") == []
    assert parse_report_to(["wandb", "swanlab"]) == ["wandb", "swanlab"]
    with pytest.raises(UnknownTracker, match="tensorbord.*tensorboard, mlflow, swanlab, wandb"):
        parse_report_to("tensorbord")


def test_several_trackers_are_a_list_in_the_yaml_and_read_back_the_same():
    spec = preset_spec("cpu-demo", ["support"]).model_copy(update={"report_to": "tensorboard,mlflow"})
    assert lf_args(spec)["report_to"] == ["tensorboard", "mlflow"]  # transformers takes no "a,b" string
    text = render_yaml(spec)
    assert "report_to: [tensorboard, mlflow]" in text
    import yaml

    back = import_lf_args(yaml.safe_load(text)).spec
    assert back.report_to == "tensorboard,mlflow" and lf_args(back)["report_to"] == ["tensorboard", "mlflow"]
    one = spec.model_copy(update={"report_to": "mlflow"})
    assert lf_args(one)["report_to"] == "mlflow"


def test_swanlab_is_llamafactorys_use_swanlab_in_local_mode():
    from core.config.field_rules import follow_changes

    base = preset_spec("cpu-demo", ["support"])
    data = {**base.model_dump(), "report_to": "swanlab,tensorboard"}
    follow_changes(data, base)
    assert data["report_to"] == "tensorboard"  # LLaMA-Factory's parser takes swanlab out of report_to
    assert data["extra"]["use_swanlab"] is True and data["extra"]["swanlab_mode"] == "local"
    assert chosen(data["report_to"], data["extra"]) == ["tensorboard", "swanlab"]
    again = {**data, "report_to": "none"}
    follow_changes(again, base.model_validate(data))
    assert again["report_to"] == "none" and not any("swanlab" in k for k in again["extra"])
    assert report_to_value([]) == "none"


def test_each_run_writes_into_the_workspace_under_its_own_id(tmp_path):
    env = launch_env(tmp_path, ["tensorboard", "mlflow", "wandb"], "cpu-demo-3")
    assert env["TENSORBOARD_LOGGING_DIR"] == str(tmp_path / "trackers" / "tensorboard" / "cpu-demo-3")
    assert env["MLFLOW_TRACKING_URI"] == f"sqlite:///{tmp_path}/trackers/mlflow.db"
    assert json.loads(env["MLFLOW_TAGS"]) == {"devtune.run": "cpu-demo-3"}
    assert env["WANDB_MODE"] == "offline" and env["WANDB_DIR"] == str(tmp_path / "trackers" / "wandb")
    assert launch_env(tmp_path, [], "x") == {}


class _Ctx:
    pass


def test_the_check_names_a_tracker_that_is_not_installed_and_says_where_the_others_write(monkeypatch):
    import importlib.util

    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec", lambda name, *a: None if name == "wandb" else real(name, *a))
    spec = preset_spec("cpu-demo", ["support"]).model_copy(update={"report_to": "tensorboard,wandb"})
    found = {f.code: f for f in rule_trackers(spec, _Ctx())}
    assert found["trackers.missing"].severity == "error" and "wandb" in found["trackers.missing"].message
    assert "pip install wandb" in found["trackers.missing"].fix
    where = found["trackers.where"]
    assert where.severity == "info" and TRACKERS["tensorboard"].open_command() in where.message


def test_a_tracker_devtune_does_not_set_up_is_passed_on_with_a_warning():
    spec = preset_spec("cpu-demo", ["support"]).model_copy(update={"report_to": "comet_ml"})
    (finding,) = rule_trackers(spec, _Ctx())
    assert finding.severity == "warning" and "comet_ml" in finding.message


def test_config_init_report_to(workspace, devtune_cli):
    from tests.core.config_workspace import fake_model, register_dataset

    fake_model(workspace)
    register_dataset(workspace)
    ws = ["-w", str(workspace.root)]
    out = devtune_cli(*ws, "config", "init", "--preset", "cpu-demo", "--report-to", "tensorboard,mlflow")
    assert out.returncode == 0, out.stderr
    assert "report_to: [tensorboard, mlflow]" in (workspace.configs_dir / "train.yaml").read_text()
    out = devtune_cli(*ws, "config", "check", "--no-llamafactory")
    assert "tensorboard --logdir trackers/tensorboard" in out.stdout + out.stderr
    bad = devtune_cli(*ws, "config", "init", "--preset", "cpu-demo", "--report-to", "tensorbord", "--force")
    assert bad.returncode == 2 and "tensorbord" in bad.stderr
