"""The Playground's "compare with" starts on the base server the last eval compared against (issue 29, item 10):
the one workspace state remembers (`eval_base_server`) and a plain `devtune eval` compares against too
(core.eval.targets.remembered_base). A server that serves its base beside a LoRA adapter needs none."""

from __future__ import annotations

from core.eval.targets import resolve_targets
from core.serve.servers import ServerRecord, write_server
from tests.tui.helpers import opened, wait_until
from tui.app import DevtuneApp


def _server(ws, sid: str, port: int, **extra) -> ServerRecord:
    key = f".devtune/servers/{sid}/api_key"
    record = ServerRecord(id=sid, backend="vllm", model=f"exports/{sid}", served_name=sid, host="127.0.0.1",
                          port=port, argv=["python"], api_key_file=key, status="ready",
                          machine="another-host", **extra)  # not refreshed against this machine's processes
    write_server(ws, record)
    ws.abs(key).write_text("sk-test\n", encoding="utf-8")
    return record


def _remember(ws, active: str, base: str) -> None:
    def apply(s) -> None:
        s.current_step, s.active_server, s.eval_base_server = "playground", active, base

    ws.update_state(apply)


async def test_compare_with_starts_on_the_remembered_base_server(workspace):
    _server(workspace, "base-8001", 8001)
    _server(workspace, "kefu-8002", 8002)
    _remember(workspace, "kefu-8002", "base-8001")
    app = DevtuneApp(workspace, watch_terminal=False)
    async with app.run_test(size=(120, 40)) as pilot:
        screen = await opened(pilot, app)
        await wait_until(pilot, lambda: screen.query_one("#pg-server").value == "kefu-8002")
        await wait_until(pilot, lambda: screen.query_one("#pg-compare").value == "base-8001")
        assert screen.query_one("#pg-chat-compare").has_class("-visible")  # side by side, as when chosen by hand
        assert resolve_targets(workspace).base.server_id == "base-8001"  # what `devtune eval` compares against

        screen.query_one("#pg-compare").clear()  # the person's own choice stands: a reload does not undo it
        await pilot.pause()
        screen.action_reload()
        await wait_until(pilot, lambda: screen.query_one("#pg-server").value == "kefu-8002")
        await pilot.pause()
        assert not isinstance(screen.query_one("#pg-compare").value, str)


async def test_a_lora_server_compares_with_no_other_server(workspace):
    _server(workspace, "base-8001", 8001)
    _server(workspace, "lora-8003", 8003, lora_modules={"kefu": "saves/kefu"})
    _remember(workspace, "lora-8003", "base-8001")
    app = DevtuneApp(workspace, watch_terminal=False)
    async with app.run_test(size=(120, 40)) as pilot:
        screen = await opened(pilot, app)
        await wait_until(pilot, lambda: screen.query_one("#pg-server").value == "lora-8003")
        await pilot.pause()
        assert not isinstance(screen.query_one("#pg-compare").value, str)
        assert not screen.query_one("#pg-chat-compare").has_class("-visible")
