"""One model per report (issue 21): each report is computed once and the text and the JSON render it, so
the facts in one are the facts in the other. Each test runs a command both ways on the same workspace and
checks that every fact of the JSON is in the text."""

from __future__ import annotations

import json

import pytest

from core.train.runs import RunStatus
from tests.core.config_workspace import fake_model, register_dataset
from tests.recorded_runs import place_recorded_run
from cli.main import main

RECORDED = [("lf_normal", RunStatus.FINISHED, 0), ("lf_nan_loss", RunStatus.FINISHED, 0),
            ("lf_loss_zero", RunStatus.STOPPED, 0), ("lf_unknown_template", RunStatus.FAILED, 1),
            ("lf_demo_cpu", RunStatus.FINISHED, 0), ("lf_resume", RunStatus.FINISHED, 0)]


def both(capsys, *argv: str) -> tuple[str, dict]:
    capsys.readouterr()
    main(list(argv))
    text = capsys.readouterr()
    main([*argv, "--json"])
    data = json.loads(capsys.readouterr().out)
    return text.out + text.err, data


@pytest.fixture
def runs_workspace(workspace):
    for n, (fixture, status, code) in enumerate(RECORDED):
        place_recorded_run(workspace, f"2026010{n}-000000-{fixture}", fixture, status, code, started=float(n))
    return workspace


@pytest.mark.parametrize("fixture", [r[0] for r in RECORDED])
def test_monitor_text_and_json_say_the_same(runs_workspace, capsys, fixture):
    run = next(p.name for p in runs_workspace.runs_dir.iterdir() if p.name.endswith(fixture))
    text, data = both(capsys, "monitor", run, "-w", str(runs_workspace.root))
    total = data["total"] if data["total"] is not None else "?"
    assert f"step {data['step']}/{total}" in text
    if data["loss"] is not None:
        assert f"loss {data['loss']:.4f}" in text
    rate = data["throughput"]["steps_per_s"]
    assert (f"{rate:.2f} steps/s" in text) if rate is not None else ("steps/s" not in text)
    assert sorted(line[2:] for line in text.splitlines() if line.startswith("! ")) == \
        sorted(a["message"] for a in data["anomalies"])
    assert all(d["title"] in text for d in data["diagnoses"])
    assert f"{run}: " in text and (data["note"] in text)


def test_runs_text_and_json_say_the_same(runs_workspace, capsys):
    from core.train.runs import status_label

    text, data = both(capsys, "runs", "-w", str(runs_workspace.root))
    lines = text.splitlines()
    assert len(lines) == len(data["runs"])
    for row in data["runs"]:
        line = next(x for x in lines if x.startswith(row["id"]))
        assert status_label(row["status"]) in line and (row["output_dir"] or "") in line and row["note"] in line


def test_config_check_text_and_json_say_the_same(workspace, capsys):
    fake_model(workspace)
    register_dataset(workspace, lint_errors=1)
    assert main(["config", "init", "--preset", "lora-1gpu", "--model", "models/tiny-llama3",
                 "-w", str(workspace.root)]) == 1  # written; the dataset's lint error is an error of the config
    text, data = both(capsys, "config", "check", "--no-llamafactory", "-w", str(workspace.root))
    assert data["findings"]
    for finding in data["findings"]:
        assert finding["message"] in text and (finding["fix"] or "") in text


def test_check_export_text_and_json_say_the_same(runs_workspace, capsys):
    (runs_workspace.root / "configs").mkdir(exist_ok=True)
    (runs_workspace.root / "configs" / "train.yaml").write_text(
        "model_name_or_path: models/tiny-llama3\ntemplate: llama3\nfinetuning_type: lora\n")
    fake_model(runs_workspace)
    out = runs_workspace.root / "saves" / "20260100-000000-lf_normal"
    (out / "adapter_config.json").write_text("{}")
    export = runs_workspace.root / "exports" / "half"
    export.mkdir(parents=True)
    (export / "config.json").write_text("{}")  # a model folder with no weights and no tokenizer
    text, data = both(capsys, "check-export", "exports/half", "--run", "20260100-000000-lf_normal", "--no-numeric",
                      "-w", str(runs_workspace.root))
    assert data["findings"] and data["verdict"] == "error"
    for finding in data["findings"]:
        assert finding["what"] in text and finding["detail"] in text and finding["fix"] in text
    assert "verdict: error" in text


def test_json_mode_keeps_progress_on_stderr(runs_workspace, capsys):
    """Issue 21, finding 10: --json silenced the progress of long work; stdout holds only the report."""
    (runs_workspace.root / "configs").mkdir(exist_ok=True)
    (runs_workspace.root / "configs" / "train.yaml").write_text(
        "model_name_or_path: models/tiny-llama3\ntemplate: llama3\nfinetuning_type: lora\n")
    fake_model(runs_workspace)
    (runs_workspace.root / "saves" / "20260100-000000-lf_normal" / "adapter_config.json").write_text("{}")
    export = runs_workspace.root / "exports" / "half"
    export.mkdir(parents=True)
    (export / "config.json").write_text("{}")
    capsys.readouterr()
    main(["check-export", "exports/half", "--run", "20260100-000000-lf_normal", "--no-numeric", "--json",
          "-w", str(runs_workspace.root)])
    out = capsys.readouterr()
    json.loads(out.out)
    assert "checking the files" in out.err
