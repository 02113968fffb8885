"""core.merge.export: planning a merge from a run's train YAML, the merge YAML, refusals, and the progress
read from real export logs (recorded from `llamafactory-cli export` on the tiny model)."""

import json
from pathlib import Path

import psutil
import pytest
import yaml

from core.merge.export import (MERGE_YAML, ExportError, merge_yaml_text, plan_export, plan_of_export_run,
                               start_export, write_merge_yaml)
from core.merge.export_progress import parse_export_log
from core.train.run_facts import find_train_run
from core.train.runs import ProcessRef, RunRecord, RunStatus, write_record

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "serve"


def make_run(ws, run_id="20260101-000000-qa", kind="train", status=RunStatus.FINISHED, started=1.0, **yaml_over):
    cfg = {"model_name_or_path": "models/tiny", "finetuning_type": "lora", "template": "llama3",
           "dataset": "qa", "dataset_dir": "data", "output_dir": f"saves/{run_id}", **yaml_over}
    (ws.configs_dir / f"{run_id}.yaml").write_text(yaml.safe_dump(cfg))
    out = ws.abs(cfg["output_dir"])
    out.mkdir(parents=True, exist_ok=True)
    if cfg["finetuning_type"] in ("lora", "oft"):
        (out / "adapter_config.json").write_text("{}")
    d = ws.runs_dir / run_id
    d.mkdir(parents=True)
    me = psutil.Process()  # an active run needs a live supervisor: this test process stands in
    write_record(d, RunRecord(id=run_id, kind=kind, argv=["llamafactory-cli", "train"], cwd=str(ws.root),
                              config=f"configs/{run_id}.yaml", output_dir=cfg["output_dir"], status=status,
                              started=started, supervisor=ProcessRef(pid=me.pid, create_time=me.create_time())))
    return run_id


def test_plan_reads_the_train_yaml(workspace):
    run = make_run(workspace)
    plan = plan_export(workspace, run)
    assert (plan.base_model, plan.adapter, plan.template, plan.finetuning_type) == \
           ("models/tiny", f"saves/{run}", "llama3", "lora")
    assert plan.export_dir == f"exports/{run}" and plan.warnings == []
    assert plan.yaml_dict() == {"model_name_or_path": "models/tiny", "adapter_name_or_path": f"saves/{run}",
                                "template": "llama3", "finetuning_type": "lora", "export_dir": f"exports/{run}",
                                "export_size": 5, "export_device": "cpu", "export_legacy_format": False}


def test_qlora_merges_onto_the_unquantized_base_and_a_quantized_base_is_flagged(workspace):
    run = make_run(workspace, quantization_bit=4)
    plan = plan_export(workspace, run)
    assert "quantization_bit" not in plan.yaml_dict()
    assert any("QLoRA adapter (4-bit" in w for w in plan.warnings)
    base = workspace.root / "models" / "tiny"
    base.mkdir(parents=True)
    (base / "config.json").write_text(json.dumps({"quantization_config": {"quant_method": "bitsandbytes",
                                                                          "load_in_4bit": True}}))
    plan = plan_export(workspace, run)
    assert any("is quantized (bitsandbytes)" in w and "--base" in w for w in plan.warnings)


def test_full_finetuning_is_resaved_without_an_adapter(workspace):
    run = make_run(workspace, finetuning_type="full")
    plan = plan_export(workspace, run)
    assert plan.adapter is None and plan.base_model == f"saves/{run}"
    assert "adapter_name_or_path" not in plan.yaml_dict()


def test_refusals_say_what_to_do(workspace):
    with pytest.raises(Exception, match="no training runs"):
        plan_export(workspace)
    run = make_run(workspace, status=RunStatus.RUNNING)
    with pytest.raises(ExportError, match="still running"):
        plan_export(workspace, run)
    other = make_run(workspace, "20260101-000001-x", started=2.0)
    (workspace.abs(f"saves/{other}") / "adapter_config.json").unlink()
    with pytest.raises(ExportError, match="no adapter_config.json"):
        plan_export(workspace, other)
    with pytest.raises(ExportError, match="plain folder name"):
        plan_export(workspace, other, name="../elsewhere")


def test_the_newest_training_run_is_chosen_and_export_runs_are_skipped(workspace):
    make_run(workspace, "20260101-000000-old", started=1.0)
    make_run(workspace, "20260101-000001-new", started=2.0)
    make_run(workspace, "20260101-000002-export", kind="export", started=3.0)
    assert find_train_run(workspace).id == "20260101-000001-new"
    assert plan_export(workspace).run_id == "20260101-000001-new"


def test_merge_yaml_replaces_its_own_file_but_keeps_a_persons(workspace):
    plan = plan_export(workspace, make_run(workspace))
    path = write_merge_yaml(workspace, plan)
    assert path.read_text().startswith("# written by devtune merge; sha256:")
    assert yaml.safe_load(path.read_text()) == plan.yaml_dict()
    plan.export_size = 2
    write_merge_yaml(workspace, plan)  # devtune's own, unedited: replaced
    assert yaml.safe_load(path.read_text())["export_size"] == 2
    path.write_text(path.read_text().replace("export_size: 2", "export_size: 3"))  # the person edits it
    with pytest.raises(ExportError, match="is kept. Pass --force"):
        write_merge_yaml(workspace, plan)
    assert "export_size: 3" in path.read_text()
    write_merge_yaml(workspace, plan, force=True)
    assert yaml.safe_load(path.read_text())["export_size"] == 2
    assert merge_yaml_text(plan) == path.read_text()


def test_a_non_empty_export_dir_is_refused_unless_forced(workspace, monkeypatch):
    import core.merge.export as export

    plan = plan_export(workspace, make_run(workspace))
    target = workspace.abs(plan.export_dir)
    target.mkdir(parents=True)
    (target / "model-00001-of-00002.safetensors").write_text("old")
    (target / "notes.txt").write_text("mine")
    with pytest.raises(ExportError, match="is not empty"):
        start_export(workspace, plan)
    assert not workspace.abs(MERGE_YAML).exists()
    started = []
    monkeypatch.setattr(export, "start_run", lambda ws, argv, **kw: started.append((argv, kw)) or "record")
    assert start_export(workspace, plan, force=True) == "record"
    assert not (target / "model-00001-of-00002.safetensors").exists() and (target / "notes.txt").exists()
    argv, kw = started[0]
    assert argv[1:] == ["export", MERGE_YAML] and argv[0].endswith("llamafactory-cli")
    assert kw["kind"] == "export" and kw["output_dir"] == plan.export_dir and kw["config"] == MERGE_YAML
    assert kw["env"]["PYTHONUNBUFFERED"] == "1"


def test_the_plan_of_a_running_export_is_read_back(workspace):
    run = make_run(workspace)
    plan = plan_export(workspace, run, name="merged")
    write_merge_yaml(workspace, plan)
    d = workspace.runs_dir / "20260101-000009-export-merged"
    d.mkdir()
    record = RunRecord(id=d.name, kind="export", argv=["llamafactory-cli", "export", MERGE_YAML], cwd=str(workspace.root),
                       config=MERGE_YAML, output_dir="exports/merged", status=RunStatus.RUNNING)
    again = plan_of_export_run(workspace, record)
    assert (again.run_id, again.export_dir, again.template, again.adapter) == (run, "exports/merged", "llama3",
                                                                                f"saves/{run}")


def test_progress_of_a_real_export_log():
    out = (FIXTURES / "export_stdout.log").read_text()
    err = (FIXTURES / "export_stderr.log").read_text()
    assert parse_export_log("", "").stage == "starting"
    loading = parse_export_log("", err[:err.index("Loading weights")])
    assert loading.stage == "loading" and loading.fraction < 0.1
    after_weights = parse_export_log("", err[:err.index("loading configuration file /tmp/dt7/tiny/generation")])
    assert after_weights.stage == "loading" and after_weights.detail == "Loading weights 21/21"
    assert after_weights.fraction == pytest.approx(0.30)
    writing = parse_export_log(out[:out.index("Ollama")], err[:err.index("Model weights saved")])
    assert writing.stage == "writing" and writing.detail == "Writing model shards 1/1"
    assert writing.fraction == pytest.approx(0.95)
    done = parse_export_log(out, err, "finished")
    assert (done.stage, done.fraction, done.error) == ("done", 1.0, None)


def test_a_failed_export_gives_its_error_line():
    err = (FIXTURES / "export_failed_stderr.log").read_text()
    progress = parse_export_log("", err, "failed")
    assert progress.error == "ValueError: Can't find 'adapter_config.json' at 'saves/nope'"


def test_a_failed_export_is_diagnosed_by_the_failure_rules(workspace, capsys):
    """A real `llamafactory-cli export` failure (the adapter folder missing), in an export run's folder: the
    progress carries the rule's cause and fix, and `devtune diagnose` with no argument reads that export."""
    import shutil

    from core.merge.export_progress import export_progress
    from cli.main import main

    logs = Path(__file__).resolve().parents[1] / "fixtures" / "logs" / "lf_export_adapter_missing"
    run_id = make_run(workspace, "20260101-000010-export-x", kind="export", status=RunStatus.FAILED)
    for name in ("stderr.log", "stdout.log"):
        shutil.copy(logs / name, workspace.runs_dir / run_id / name)
    progress = export_progress(workspace, run_id)
    assert progress.error == "ValueError: Can't find 'adapter_config.json' at 'saves/nope'"
    assert progress.diagnosis is not None and progress.diagnosis.id == "adapter-not-found"
    assert not any("step" in e.text for e in progress.diagnosis.evidence)  # its bars load weights: no steps
    text = progress.failure_text()
    assert progress.error in text and progress.diagnosis.fix in text
    assert main(["diagnose", "--workspace", str(workspace.root)]) == 1
    out = capsys.readouterr().out
    assert progress.diagnosis.title in out and progress.diagnosis.fix in out
