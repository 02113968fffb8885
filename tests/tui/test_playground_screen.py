"""The Playground step against the real `llamafactory-cli api` serving the tiny model (the quickest
real server on a CPU: ~10 s): start from the screen, stream a chat, compare, copy as curl, evaluate
against the base, stop; and re-attach to a server started before devtune opened."""

import json
import shutil

import pytest

from core.serve.servers import list_servers, read_server, start_server, stop_server, wait_ready
from core.serve.plan import plan_server
from core.workspace.layout import Workspace
from tests.core.test_export import make_run
from tests.tui.helpers import opened, stepper_text, wait_until
from tui.app import DevtuneApp
from tui.widgets.chat_transcript import ChatTranscript
from tests.processes import group_members




@pytest.fixture
def ws_with_model(workspace, tiny_model):
    shutil.copytree(tiny_model, workspace.models_dir / "tiny-llama3")
    workspace.update_state(lambda s: setattr(s, "current_step", "playground"))
    yield workspace
    for record in list_servers(workspace):  # never leave a server behind, also when a test fails
        stop_server(workspace, record.id, grace=5)


async def test_start_chat_compare_curl_stop(ws_with_model: Workspace):
    ws = ws_with_model
    app = DevtuneApp(ws, watch_terminal=False)
    async with app.run_test(size=(120, 40)) as pilot:
        screen = await opened(pilot, app)
        screen.query_one("#pg-model").value = "models/tiny-llama3"
        screen.query_one("#pg-backend").value = "llamafactory"
        await pilot.press("f5")
        await wait_until(pilot, lambda: any("is ready at" in line for line in screen.query_one("#pg-server-log").lines),
                         timeout=180)
        server_id = screen.query_one("#pg-server").value
        record = read_server(ws, server_id)
        assert record.backend == "llamafactory" and record.status == "ready"
        await wait_until(pilot, lambda: ws.load_state().active_server == server_id)
        assert "curl" in str(screen.query_one("#pg-commands").render())

        screen.query_one("#pg-temperature").value = "0"
        screen.query_one("#pg-max-tokens").value = "24"
        screen.query_one("#pg-question").focus()
        await pilot.press(*"Hello?")
        await pilot.press("enter")
        chat = screen.query_one("#pg-chat", ChatTranscript)
        await wait_until(pilot, lambda: len(chat.answers) == 1, timeout=120)
        assert chat.answers[0]
        assert any("TTFT" in str(s.render()) for s in chat.query(".chat-stats"))

        screen.query_one("#pg-question").value = "退款多久？"
        await pilot.press("enter")  # a second turn: the first one is its history
        await wait_until(pilot, lambda: len(chat.answers) == 2, timeout=120)
        with_history = chat.answers[1]

        await pilot.press("ctrl+l")  # a fresh conversation
        await wait_until(pilot, lambda: chat.answers == [] and not chat.query(".chat-stats"))
        screen.query_one("#pg-compare").value = server_id  # side by side (here: the same server twice)
        await wait_until(pilot, lambda: screen.query_one("#pg-chat-compare").has_class("-visible"))
        screen.query_one("#pg-question").value = "退款多久？"
        await pilot.press("enter")
        compare = screen.query_one("#pg-chat-compare", ChatTranscript)
        await wait_until(pilot, lambda: len(chat.answers) == 1 and len(compare.answers) == 1, timeout=120)
        assert compare.answers[0] == chat.answers[0]  # greedy, same model, same (empty) history: same answer
        assert chat.answers[0] != with_history  # the history was sent before, and is gone now

        screen.query_one("#pg-question").value = "How long?"
        await pilot.press("ctrl+y")
        command = str(screen.query_one("#pg-commands").render())
        key = (ws.servers_dir / server_id / "api_key").read_text().strip()
        assert command.startswith("curl -sN") and "How long?" in command and key not in command

        await pilot.press("f8")  # stop: the same key as stopping a run
        await wait_until(pilot, lambda: read_server(ws, server_id).status == "stopped", timeout=60)
        assert not group_members(record.pgid)


async def test_reattach_and_evaluate_against_the_runs_data(ws_with_model: Workspace):
    ws = ws_with_model
    rows = [{"instruction": "How long does a refund take?", "output": "3 to 5 business days."},
            {"instruction": "Do you ship internationally?", "output": "Yes, to 40 countries."}]
    (ws.data_dir / "qa.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    (ws.data_dir / "qa_test.jsonl").write_text(json.dumps({"instruction": "Can I pay by card?",
                                                           "output": "Yes, every major card."}) + "\n")
    (ws.data_dir / "dataset_info.json").write_text(json.dumps({"qa": {"file_name": "qa.jsonl"},
                                                               "qa_eval": {"file_name": "qa_test.jsonl"}}))
    make_run(ws, dataset="qa", model_name_or_path="models/tiny-llama3")
    opts, _notes = plan_server(ws, "models/tiny-llama3", backend="llamafactory")
    record = wait_ready(ws, start_server(ws, opts).id, timeout=180)  # started before devtune opens
    ws.update_state(lambda s: setattr(s, "active_server", record.id))

    app = DevtuneApp(ws, watch_terminal=False)
    async with app.run_test(size=(120, 40)) as pilot:
        screen = await opened(pilot, app)
        await wait_until(pilot, lambda: screen.query_one("#pg-server").value == record.id)
        screen.query_one("#pg-compare").value = record.id  # the base: here the same untrained model
        await pilot.press("f6")  # check: evaluate
        table = screen.query_one("#pg-eval-table")
        await wait_until(pilot, lambda: table.row_count > 0, timeout=240)
        assert table.row_count == 6  # held-out and training: base, tuned, difference
        summary = str(screen.query_one("#pg-eval-summary").render())
        assert "scores like its base on the held-out questions" in summary
        assert screen.query_one("#pg-eval-worse").row_count == 0  # the same model can not be worse than itself
        await wait_until(pilot, lambda: "Playground ✓" in stepper_text(app))
    saved = sorted((ws.state_dir / "evals").iterdir())
    assert len(saved) == 1 and {"rows.jsonl", "report.json", "report.md"} <= {p.name for p in saved[0].iterdir()}
    # quitting devtune stopped nothing
    assert read_server(ws, record.id).status == "ready" and group_members(record.pgid)
