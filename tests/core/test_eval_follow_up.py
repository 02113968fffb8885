"""What the eval says and remembers follows core (issue 29, item 10): the base server chosen once is the one a
plain `devtune eval` compares against, and the hint to serve base and adapter together is the serve plan's."""

import json
import time

from core.eval.eval_report import EvalReport, TargetInfo
from core.eval.targets import lora_server_hint, resolve_targets
from core.serve.servers import ServerRecord, write_server
from core.train.runs import RunStatus
from core.workspace.changes import apply_change
from tests.recorded_runs import place_recorded_run


def _server(ws, sid: str, port: int) -> ServerRecord:
    key = f".devtune/servers/{sid}/api_key"
    record = ServerRecord(id=sid, backend="vllm", model=f"exports/{sid}", served_name=sid, host="127.0.0.1",
                          port=port, argv=["python"], api_key_file=key, status="ready",
                          machine="another-host")  # not refreshed against this machine's processes
    write_server(ws, record)
    ws.abs(key).write_text("sk-test\n", encoding="utf-8")
    return record


def _report(base: str, tuned: str) -> EvalReport:
    return EvalReport(id="e1", dataset="kefu", base=TargetInfo(url="http://127.0.0.1:8001", model=base, server=base),
                      tuned=TargetInfo(url="http://127.0.0.1:8002", model=tuned, server=tuned))


def test_a_plain_eval_compares_against_the_base_chosen_before(workspace):
    _server(workspace, "base-8001", 8001)
    _server(workspace, "kefu-8002", 8002)
    workspace.update_state(lambda s: setattr(s, "active_server", "kefu-8002"))
    apply_change(workspace, _report("base-8001", "kefu-8002").state_change())  # the wizard's F6 (or an eval)
    assert workspace.load_state().eval_base_server == "base-8001"
    targets = resolve_targets(workspace)  # `devtune eval` with no server named
    assert (targets.base.server_id, targets.tuned.server_id) == ("base-8001", "kefu-8002")


def test_one_lora_server_remembers_no_base(workspace):
    assert not _report("lora-8003", "lora-8003").state_change()


def test_the_hint_for_an_adapter_that_trains_embeddings_is_not_serve_lora(workspace):
    run = place_recorded_run(workspace, "20261202-010000-kefu", "lf_sft_cpu_demo", RunStatus.FINISHED, 0,
                             time.time())
    adapter = workspace.abs(run.output_dir)
    (adapter / "adapter_config.json").write_text(json.dumps({"r": 16, "modules_to_save": ["embed_tokens", "lm_head"]}))
    hint = lora_server_hint(workspace, run.id)
    assert "--lora" not in hint and "devtune merge" in hint and "embed_tokens" in hint
