"""F6 in the Playground with no server chosen starts what the eval of the newest run needs (core.eval.servers_needed,
as `devtune eval RUN`), in the background, saying each step in the Eval tab, and stops it afterwards. Here without
vLLM (the training environment as the serving one), so the run's recorded export and its base are served by the
quickest real server on a CPU, `llamafactory-cli api` (~10 s each)."""

import json
import shutil
import sys

from core.merge.export import ExportPlan, save_export_record
from core.serve.servers import list_servers, stop_server
from tests.core.test_export import make_run
from tests.processes import group_members
from tests.tui.helpers import opened, wait_until
from tui.app import DevtuneApp


async def test_f6_without_a_server_starts_the_runs_servers_and_stops_them(workspace, tiny_model, monkeypatch):
    ws = workspace
    monkeypatch.setenv("DEVTUNE_SERVE_PYTHON", sys.executable)  # no vLLM: the merged route, llamafactory api
    shutil.copytree(tiny_model, ws.models_dir / "tiny-llama3")
    rows = [{"instruction": "How long does a refund take?", "output": "3 to 5 business days."},
            {"instruction": "Do you ship internationally?", "output": "Yes, to 40 countries."}]
    (ws.data_dir / "qa.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    (ws.data_dir / "qa_test.jsonl").write_text(json.dumps({"instruction": "Can I pay by card?",
                                                           "output": "Yes, every major card."}) + "\n")
    (ws.data_dir / "dataset_info.json").write_text(json.dumps({"qa": {"file_name": "qa.jsonl"},
                                                               "qa_eval": {"file_name": "qa_test.jsonl"}}))
    run = make_run(ws, dataset="qa", model_name_or_path="models/tiny-llama3")
    shutil.copytree(tiny_model, ws.exports_dir / "qa")  # the run's export (here: the untrained model itself)
    save_export_record(ws, ExportPlan(run_id=run, base_model="models/tiny-llama3", adapter=f"saves/{run}",
                                      template="llama3", finetuning_type="lora", export_dir="exports/qa"))
    ws.update_state(lambda s: setattr(s, "current_step", "playground"))
    app = DevtuneApp(ws, watch_terminal=False)
    try:
        async with app.run_test(size=(120, 40)) as pilot:
            screen = await opened(pilot, app)
            assert not isinstance(screen.query_one("#pg-server").value, str)  # no server chosen, none running
            await pilot.press("f6")
            summary = screen.query_one("#pg-eval-summary")
            table = screen.query_one("#pg-eval-table")
            await wait_until(pilot, lambda: table.row_count > 0, timeout=300)
            assert "scores like its base on the held-out questions" in str(summary.render())
            ended = [json.loads(f.read_text()) for f in ws.servers_dir.glob("*/server.json")]
            assert len(ended) == 2 and {s["model"] for s in ended} == {"exports/qa", "models/tiny-llama3"}
            await wait_until(pilot, lambda: not list_servers(ws), timeout=60)  # both stopped after the eval
            assert all(not group_members(s["pgid"]) for s in ended)
            assert ws.load_state().eval_base_server is None
    finally:
        for record in list_servers(ws):
            stop_server(ws, record.id, grace=5)
