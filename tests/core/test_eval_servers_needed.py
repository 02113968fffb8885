"""What `devtune eval RUN` needs running (core.eval.servers_needed), decided on recorded runs: the demo preset's run
(its adapter trains embed_tokens and lm_head in full: the adapter_config.json a real cpu-demo run saved) goes the
merged way, a plain LoRA run beside its base; an export recorded as the run's is reused, and so are servers that
already run. Nothing here starts a server: the servers "running" are records whose process is this test's."""

import json
import socket
import sys
from pathlib import Path

import psutil
import pytest

from core.eval.eval_report import EvalReport, TargetInfo
from core.eval.questions import EvalInputError
from core.eval.servers_needed import LORA, MERGED, EvalServers, ensure_eval_servers, eval_servers, plan_eval_servers
from core.merge.export import ExportPlan, save_export_record
from core.serve.servers import ServerRecord, read_server, write_server
from core.train.runs import ProcessRef, RunStatus
from tests.recorded_runs import place_recorded_run

ROOT = Path(__file__).resolve().parents[2]
SERVE_PYTHON = ROOT / ".venv-serve" / "bin" / "python"
ADAPTER = json.loads((ROOT / "tests" / "fixtures" / "serve" / "adapter_config_cpu_demo.json").read_text())
DEMO_RUN = "20260101-000000-cpu-demo"
needs_vllm = pytest.mark.skipif(not SERVE_PYTHON.exists(), reason="the serving environment is not installed")


@pytest.fixture
def no_vllm(monkeypatch):
    monkeypatch.setenv("DEVTUNE_SERVE_PYTHON", sys.executable)  # the training environment: no vLLM


@pytest.fixture
def vllm(monkeypatch):
    monkeypatch.setenv("DEVTUNE_SERVE_PYTHON", str(SERVE_PYTHON))


def demo_run(ws, name: str = DEMO_RUN, *, full_modules: bool = True) -> str:
    """The recorded cpu-demo run, with the adapter it saved (or, `full_modules` False, that adapter without the
    fully trained embed_tokens/lm_head: a LoRA adapter vLLM serves as a module)."""
    place_recorded_run(ws, name, "lf_sft_cpu_demo", RunStatus.FINISHED, 0, started=1.0)
    adapter = dict(ADAPTER) if full_modules else {**ADAPTER, "modules_to_save": None}
    (ws.root / "saves" / name / "adapter_config.json").write_text(json.dumps(adapter))
    base = ws.models_dir / "tiny-llama3"
    base.mkdir(parents=True, exist_ok=True)
    (base / "config.json").write_text("{}")
    return name


def export_of(ws, run_id: str, name: str) -> str:
    folder = ws.exports_dir / name
    folder.mkdir(parents=True)
    (folder / "config.json").write_text("{}")
    save_export_record(ws, ExportPlan(run_id=run_id, base_model="models/tiny-llama3", adapter=f"saves/{run_id}",
                                      template="llama3", finetuning_type="lora", export_dir=f"exports/{name}"))
    return f"exports/{name}"


def running(ws, sid: str, model: str, port: int, **extra) -> ServerRecord:
    """A server record on this machine whose process is this test process: live, and never signalled (no
    process group is recorded)."""
    me = psutil.Process()
    key = f".devtune/servers/{sid}/api_key"
    record = ServerRecord(id=sid, backend="vllm", model=model, served_name=Path(model).name, host="127.0.0.1",
                          port=port, argv=["python"], api_key_file=key, status="ready",
                          machine=socket.gethostname(), process=ProcessRef(pid=me.pid, create_time=me.create_time()),
                          **extra)
    write_server(ws, record)
    ws.abs(key).write_text("sk-test\n", encoding="utf-8")
    return record


def test_the_demo_presets_run_is_evaluated_merged_against_its_base(workspace, no_vllm):
    run = demo_run(workspace)
    plan = plan_eval_servers(workspace, run)
    assert plan.route == MERGED and plan.run == run and plan.base_model == "models/tiny-llama3"
    assert "embed_tokens, lm_head" in plan.why  # the serve plan's own refusal, said
    assert plan.merge and plan.export_dir == f"exports/{run}" and plan.missing == ["tuned", "base"]


@needs_vllm
def test_the_demo_presets_run_goes_merged_with_vllm_too(workspace, vllm):
    plan = plan_eval_servers(workspace, demo_run(workspace))
    assert plan.route == MERGED and "vLLM cannot serve that as a LoRA module" in plan.why


@needs_vllm
def test_an_adapter_vllm_serves_goes_beside_its_base_on_one_server(workspace, vllm):
    run = demo_run(workspace, full_modules=False)
    plan = plan_eval_servers(workspace)  # no RUN: the newest training run
    assert plan.route == LORA and plan.run == run and plan.missing == [LORA] and not plan.merge
    assert plan.lora_options.lora_modules == {run: str(workspace.root / "saves" / run)}
    assert plan.lora_options.max_lora_rank == 16 and plan.lora_options.backend == "vllm"
    running(workspace, "lora-8001", "models/tiny-llama3", 8001, lora_modules={run: f"saves/{run}"}, lora_run=run)
    assert plan_eval_servers(workspace, run).lora_server == "lora-8001"


def test_without_vllm_even_a_plain_adapter_is_merged_first(workspace, no_vllm):
    plan = plan_eval_servers(workspace, demo_run(workspace, full_modules=False))
    assert plan.route == MERGED and "vLLM is not installed" in plan.why and plan.merge


def test_the_export_recorded_as_the_runs_is_reused_and_another_runs_is_not(workspace, no_vllm):
    run = demo_run(workspace)
    other = demo_run(workspace, "20260102-000000-other")
    export_of(workspace, other, "other-export")
    assert plan_eval_servers(workspace, run).merge  # the other run's export is not this run's
    export = export_of(workspace, run, "mine")
    plan = plan_eval_servers(workspace, run)
    assert not plan.merge and plan.export_dir == export and plan.missing == ["tuned", "base"]


def test_servers_already_running_are_used_and_never_stopped(workspace, no_vllm):
    run = demo_run(workspace)
    export = export_of(workspace, run, run)
    running(workspace, "base-8001", "models/tiny-llama3", 8001)
    plan = plan_eval_servers(workspace, run)
    assert (plan.base_server, plan.tuned_server, plan.missing) == ("base-8001", None, ["tuned"])
    running(workspace, "tuned-8002", export, 8002)
    plan = plan_eval_servers(workspace, run)
    assert (plan.base_server, plan.tuned_server, plan.missing) == ("base-8001", "tuned-8002", [])
    said = []
    with ensure_eval_servers(workspace, run, say=said.append) as servers:
        targets = servers.targets
    assert (targets.base.server_id, targets.tuned.server_id, targets.run) == ("base-8001", "tuned-8002", run)
    assert (targets.base.endpoint.model, targets.tuned.endpoint.model) == ("tiny-llama3", run)
    assert servers.started == [] and servers.close() == []
    assert any("using server base-8001, already running" in line for line in said)
    assert read_server(workspace, "base-8001").status == "ready"  # nothing was stopped


def test_a_run_ref_that_is_no_run_is_bad_input(workspace, no_vllm):
    with pytest.raises(EvalInputError, match="start one with `devtune train`"):
        plan_eval_servers(workspace)
    demo_run(workspace)
    with pytest.raises(EvalInputError, match="neither a training run nor a merged model folder"):
        eval_servers(workspace, "no-such-run")


def test_named_servers_are_resolved_as_they_are_and_nothing_is_started(workspace, no_vllm):
    run = demo_run(workspace)
    running(workspace, "base-8001", "models/tiny-llama3", 8001)
    running(workspace, "tuned-8002", export_of(workspace, run, run), 8002)
    servers = eval_servers(workspace, base_server="base-8001", tuned_server="tuned-8002")
    assert servers.started == [] and servers.targets.tuned.server_id == "tuned-8002"


def test_a_base_server_stopped_after_the_eval_is_not_remembered():
    report = EvalReport(id="e1", dataset="qa", base=TargetInfo(url="u", model="b", server="base-1"),
                        tuned=TargetInfo(url="v", model="t", server="tuned-1"))
    targets = None  # the change depends only on what was started and kept
    assert not EvalServers(targets, started=["base-1"]).state_change(report)
    assert EvalServers(targets, started=["base-1"], keep=True).state_change(report).chosen == {
        "eval_base_server": "base-1"}
    assert EvalServers(targets, started=[]).state_change(report).chosen == {"eval_base_server": "base-1"}
