"""The llamacpp backend: a GGUF folder or file (`devtune merge --gguf`) planned for llama.cpp's server, its launch
line (the GGUF's own chat template, the served name, the key in the environment), and the refusal without
.venv-gguf (a real probe of an interpreter that has no llama_cpp)."""

import os
import sys
from pathlib import Path

import pytest

from core.serve import backend_llamacpp as lc
from core.serve.backends import LaunchRefused, launch_plan
from core.serve.plan import ServePlanError, plan_server


def gguf_folder(ws, name: str, quants=("q8_0",)) -> Path:
    merged = ws.exports_dir / name
    merged.mkdir(parents=True)
    (merged / "config.json").write_text("{}")
    folder = ws.exports_dir / f"{name}-gguf"
    folder.mkdir()
    for q in quants:
        (folder / f"{name}-{q}.gguf").write_bytes(b"GGUF")
    (folder / "Modelfile").write_text(f"FROM ./{name}-{quants[0]}.gguf\n")
    return folder


def test_a_gguf_folder_is_served_by_llama_cpp_with_its_own_template_and_the_key_kept_out_of_argv(workspace,
                                                                                                   monkeypatch):
    folder = gguf_folder(workspace, "qa", quants=("f16", "q8_0"))  # the Modelfile names the one to serve
    opts, notes = plan_server(workspace, "exports/qa-gguf", port=8123)
    assert opts.backend == "llamacpp" and opts.served_name == "qa-gguf" and notes == []
    monkeypatch.setattr(lc, "server_python", lambda: "/env/bin/python")
    plan = launch_plan(opts, "SECRET")
    assert plan.argv == ["/env/bin/python", "-m", "llama_cpp.server", "--model", str(folder / "qa-f16.gguf"),
                         "--model_alias", "qa-gguf", "--host", "127.0.0.1", "--port", "8123",
                         "--chat_format", "chat_template.default", "--n_ctx", "2048"]
    assert plan.env["API_KEY"] == "SECRET" and "SECRET" not in plan.argv
    assert plan.env["HOST"] == "127.0.0.1" and plan.env["PORT"] == "8123"  # an inherited HOST/PORT must not win
    assert "API_KEY" not in plan.recordable_env()

    opts, _notes = plan_server(workspace, "exports/qa-gguf/qa-q8_0.gguf", max_model_len=4096, served_name="tuned")
    argv = launch_plan(opts, "K").argv
    assert argv[argv.index("--model") + 1].endswith("qa-q8_0.gguf") and argv[argv.index("--n_ctx") + 1] == "4096"
    assert argv[argv.index("--model_alias") + 1] == "tuned"


def test_the_backend_alone_serves_the_newest_gguf_and_other_backends_are_refused_for_one(workspace):
    with pytest.raises(ServePlanError, match="merge --gguf"):
        plan_server(workspace, backend="llamacpp")
    gguf_folder(workspace, "old")
    newest = gguf_folder(workspace, "new")
    os.utime(newest, (2e9, 2e9))
    opts, _notes = plan_server(workspace, backend="llamacpp")
    assert opts.model == str(newest) and opts.served_name == "new-gguf"
    with pytest.raises(ServePlanError, match="--backend llamacpp"):
        plan_server(workspace, "exports/new-gguf", backend="vllm")
    with pytest.raises(ServePlanError, match="not a GGUF"):
        plan_server(workspace, "exports/new", backend="llamacpp")  # a merged folder is no GGUF


def test_the_merged_folder_beside_a_gguf_is_its_source(workspace):
    folder = gguf_folder(workspace, "qa")
    assert lc.source_model(folder) == workspace.exports_dir / "qa"
    assert lc.source_model(folder / "qa-q8_0.gguf") == workspace.exports_dir / "qa"
    assert lc.source_model(workspace.exports_dir / "qa") == workspace.exports_dir / "qa"


def test_without_llama_cpps_server_the_launch_is_refused_naming_make_gguf_env(workspace, monkeypatch):
    gguf_folder(workspace, "qa")
    monkeypatch.setattr(lc, "gguf_python", lambda: Path(sys.executable))  # the training env: no llama_cpp
    assert lc.server_python() is None
    opts, _notes = plan_server(workspace, "exports/qa-gguf")
    with pytest.raises(LaunchRefused, match="make gguf-env"):
        launch_plan(opts, "K")
    monkeypatch.setattr(lc, "gguf_python", lambda: workspace.root / "no-env" / "bin" / "python")
    with pytest.raises(LaunchRefused, match="make gguf-env"):
        launch_plan(opts, "K")
