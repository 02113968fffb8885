"""The Data step's "From documents" view in the real app: documents named, chunks listed, the server picked,
pairs generated (by the fault-injecting server on 127.0.0.1, registered as a workspace server), reviewed —
accepted, rejected, edited beside their source chunk — and written; the written file opens and is linted."""

import json
import os
import time

import psutil
import pytest
from textual.widgets import Button, DataTable, Input, Static, TabbedContent, TextArea

from core.serve.servers import ServerRecord, write_server
from core.train.runs import ProcessRef
from screens.data import DataScreen
from screens.data_synth import DocumentsPane
from tests.synth_documents import write_all
from tests.synth_server import FaultServer
from tests.tui.helpers import wait_until
from tui.app import DevtuneApp
from tui.widgets.data_synth import DataSynth, ReviewTable


@pytest.fixture
def served(workspace):
    server = FaultServer()
    port = int(server.url.rsplit(":", 1)[1])
    key_file = workspace.servers_dir / "fake-1" / "api_key"
    key_file.parent.mkdir(parents=True)
    key_file.write_text("k")
    me = psutil.Process(os.getpid())
    write_server(workspace, ServerRecord(id="fake-1", backend="vllm", model="models/x", served_name="fake-model",
                                         host="127.0.0.1", port=port, argv=["x"], api_key_file=str(
                                             key_file.relative_to(workspace.root)),
                                         process=ProcessRef(pid=me.pid, create_time=me.create_time()),
                                         status="ready", started=time.time()))
    write_all(workspace.root / "docs")
    yield workspace, server
    server.close()


def pane(screen) -> DocumentsPane:
    """The step's "From documents" pane: the view and the work behind it."""
    return screen.query_one(DocumentsPane)


def status(screen) -> str:
    return str(screen.query_one("#synth-status", Static).render())


async def _click(pilot, selector: str) -> None:
    """Click a button of the view once it takes clicks: Textual ignores a click on a button still showing its
    last press (the `-active` effect, 0.2 s), so a second click on Generate that soon — a Generate refused for
    a bad field, then the corrected one — would be lost and its run never start."""
    button = pilot.app.screen.query_one(selector, Button)
    await wait_until(pilot, lambda: not button.has_class("-active"))
    await pilot.click(selector)


async def test_documents_to_reviewed_pairs_to_an_open_linted_file(served):
    ws, server = served
    app = DevtuneApp(ws, watch_terminal=False)
    async with app.run_test(size=(140, 50)) as pilot:
        await wait_until(pilot, lambda: isinstance(app.screen, DataScreen) and app.screen.is_mounted)
        screen = app.screen
        await pilot.press("d")  # the step's key for the view, wherever the focus is
        assert screen.query_one("#data-tabs", TabbedContent).active == "tab-synth"
        view = screen.query_one(DataSynth)
        await wait_until(pilot, lambda: view.query_one("#synth-server").value == "fake-1")
        view.query_one("#synth-sources", Input).value = "docs"
        view.query_one("#synth-output", Input).value = "data/docs_qa.jsonl"
        await _click(pilot, "#synth-chunks-button")
        chunks = view.query_one("#synth-chunks", DataTable)
        await wait_until(pilot, lambda: chunks.row_count >= 10)
        assert "chunks from 5 documents" in status(screen)
        await _click(pilot, "#synth-generate")
        review = view.query_one(ReviewTable)
        await wait_until(pilot, lambda: pane(screen).synth is not None and review.row_count > 0, timeout=60)
        assert "pairs pass the filters" in status(screen)
        total = len(pane(screen).synth.candidates)
        kept_before = sum(c.kept for c in pane(screen).synth.candidates)
        assert kept_before > 0 and review.row_count == total
        # the highlighted pair is shown beside its source chunk
        first = pane(screen).synth.candidates[0]
        source = str(view.query_one("#synth-source-text", Static).render())
        assert first.pair.question in source and first.chunk.text.splitlines()[0] in source
        # reject the first, edit the second
        review.focus()
        review.move_cursor(row=0)
        await pilot.press("x")
        assert pane(screen).synth.candidates[0].decision == "rejected" and not pane(screen).synth.candidates[0].kept
        review.move_cursor(row=1)
        await pilot.press("e")
        await wait_until(pilot, lambda: view.editing == 1)
        view.query_one("#synth-edit-question", TextArea).text = "How long is the warranty on a phone?"
        view.query_one("#synth-edit-answer", TextArea).text = "Every device has a two-year warranty."
        await pilot.pause()
        await _click(pilot, "#synth-edit-save")
        edited = pane(screen).synth.candidates[1]
        assert edited.edited and edited.kept and edited.pair.question == "How long is the warranty on a phone?"
        view.query_one("#synth-write").scroll_visible(animate=False)
        await pilot.pause()
        await _click(pilot, "#synth-write")
        out = ws.data_dir / "docs_qa.jsonl"
        await wait_until(pilot, lambda: screen.path == out and screen.report is not None, timeout=30)
        rows = [json.loads(x) for x in out.read_text().splitlines()]
        assert len(rows) == sum(c.kept for c in pane(screen).synth.candidates)
        assert {"instruction": "How long is the warranty on a phone?", "input": "",
                "output": "Every device has a two-year warranty."} in rows
        prov = [json.loads(x) for x in (ws.data_dir / "docs_qa.provenance.jsonl").read_text().splitlines()]
        assert any(p["edited"] for p in prov)
        rejects = [json.loads(x) for x in (ws.data_dir / "docs_qa.rejects.jsonl").read_text().splitlines()]
        assert any(r["reason"] == "reviewer" for r in rejects)
        assert screen.report.errors == 0  # the written file flows into lint like any other


async def test_no_server_and_bad_documents_are_said_in_the_view(workspace, tmp_path):
    (workspace.root / "docs").mkdir()
    (workspace.root / "docs" / "scan.pdf").write_bytes(b"%PDF-1.4 nothing")
    app = DevtuneApp(workspace, watch_terminal=False)
    async with app.run_test(size=(140, 50)) as pilot:
        screen = await _documents_view(pilot, app)
        view = screen.query_one(DataSynth)
        view.query_one("#synth-sources", Input).value = "docs"
        await _click(pilot, "#synth-generate")
        await wait_until(pilot, lambda: "no server to ask" in status(screen))
        await _click(pilot, "#synth-chunks-button")
        await wait_until(pilot, lambda: "scan.pdf" in status(screen))
        assert "-error" in view.query_one("#synth-status").classes


async def _documents_view(pilot, app) -> DataScreen:
    """The Data step once open, with its "From documents" view chosen by its key (`d`)."""
    await wait_until(pilot, lambda: isinstance(app.screen, DataScreen) and app.screen.is_mounted)
    screen = app.screen
    await pilot.press("d")
    return screen


async def _generate(pilot, screen, sources: str, output: str = "data/docs_qa.jsonl", **fields):
    view = screen.query_one(DataSynth)
    await wait_until(pilot, lambda: view.query_one("#synth-server").value == "fake-1")
    view.query_one("#synth-sources", Input).value = sources
    view.query_one("#synth-output", Input).value = output
    for name, value in fields.items():
        view.query_one(f"#synth-{name.replace('_', '-')}", Input).value = value
    pane(screen).synth = None
    await _click(pilot, "#synth-generate")
    await wait_until(pilot, lambda: pane(screen).synth is not None and not pane(screen).synth_running, timeout=60)
    return view


async def test_a_review_survives_quitting_and_comes_back_with_the_pairs(served):
    ws, server = served
    app = DevtuneApp(ws, watch_terminal=False)
    async with app.run_test(size=(140, 50)) as pilot:
        screen = await _documents_view(pilot, app)
        view = await _generate(pilot, screen, "docs/policy.md docs/warranty.docx")
        review = view.query_one(ReviewTable)
        review.focus()
        review.move_cursor(row=0)
        await pilot.press("x")
        review.move_cursor(row=1)
        await pilot.press("a")
        pane(screen).synth.candidates[2].edit("Is a phone covered?", "Every device has a two-year warranty.")
        pane(screen)._save_review()
        saved = ws.data_dir / ".docs_qa.jsonl.synth-review"
        await wait_until(pilot, lambda: saved.is_file() and "Is a phone covered?" in saved.read_text())
        first = [(c.key, c.decision, c.pair.question) for c in pane(screen).synth.candidates[:3]]
    sent = server.requests
    # the wizard quit (or the SSH session dropped); a new one generates the same documents again
    app = DevtuneApp(ws, watch_terminal=False)
    async with app.run_test(size=(140, 50)) as pilot:
        screen = await _documents_view(pilot, app)
        await _generate(pilot, screen, "docs/policy.md docs/warranty.docx")
        assert server.requests == sent, "every reply came from the journal"
        assert [(c.key, c.decision, c.pair.question) for c in pane(screen).synth.candidates[:3]] == first
        assert pane(screen).synth.candidates[2].edited and pane(screen).synth.restored == 3
        assert "3 review decisions restored" in status(screen)
        # un-deciding a pair is saved too; the decisions of other documents stay in the file
        await _generate(pilot, screen, "docs/policy.md")
        review = screen.query_one(ReviewTable)
        review.focus()
        review.move_cursor(row=0)
        await pilot.press("x")  # x again on a rejected pair: back to the filters' verdict
        assert pane(screen).synth.candidates[0].decision == ""
        await wait_until(pilot, lambda: first[0][0] not in saved.read_text())
        assert first[2][0] in saved.read_text()


async def test_write_during_a_running_generate_refuses_instead_of_writing_the_last_run(served):
    ws, server = served
    app = DevtuneApp(ws, watch_terminal=False)
    async with app.run_test(size=(140, 50)) as pilot:
        screen = await _documents_view(pilot, app)
        view = await _generate(pilot, screen, "docs/policy.md", concurrency="1")
        previous = pane(screen).synth
        server.delay = 0.3
        view.query_one("#synth-sources", Input).value = "docs"
        await _click(pilot, "#synth-generate")
        await wait_until(pilot, lambda: pane(screen).synth_running)
        view.query_one("#synth-write").scroll_visible(animate=False)
        await pilot.pause()
        await _click(pilot, "#synth-write")
        await wait_until(pilot, lambda: any("still being generated" in n.message for n in app._notifications))
        assert not (ws.data_dir / "docs_qa.jsonl").exists() and pane(screen).synth is previous
        await _click(pilot, "#synth-generate")
        await wait_until(pilot, lambda: any("being generated already" in n.message for n in app._notifications))
        server.delay = 0
        await _click(pilot, "#synth-stop")
        await wait_until(pilot, lambda: pane(screen).synth is not previous and not pane(screen).synth_running, timeout=60)
        assert server.max_in_flight == 1  # the concurrency field reached the run


async def test_the_run_settings_are_checked_and_reach_the_filters(served):
    ws, server = served
    app = DevtuneApp(ws, watch_terminal=False)
    async with app.run_test(size=(140, 50)) as pilot:
        screen = await _documents_view(pilot, app)
        view = screen.query_one(DataSynth)
        await wait_until(pilot, lambda: view.query_one("#synth-server").value == "fake-1")
        view.query_one("#synth-sources", Input).value = "docs/policy.md"
        view.query_one("#synth-min-grounding", Input).value = "1.5"
        await _click(pilot, "#synth-generate")
        assert "min grounding: '1.5' is not a number from 0 to 1" in status(screen)
        view = await _generate(pilot, screen, "docs/policy.md", min_grounding="1", max_requests="2")
        assert pane(screen).synth.min_grounding == 1.0 and server.requests == 2
        assert pane(screen).synth.progress.stopped == "max-requests" and "request cap reached" in status(screen)


async def test_an_unreadable_document_in_the_folder_is_listed_not_fatal(served):
    ws, _server = served
    (ws.root / "docs" / "broken.docx").write_bytes(b"not a zip")
    app = DevtuneApp(ws, watch_terminal=False)
    async with app.run_test(size=(140, 50)) as pilot:
        screen = await _documents_view(pilot, app)
        view = screen.query_one(DataSynth)
        view.query_one("#synth-sources", Input).value = "docs"
        await _click(pilot, "#synth-chunks-button")
        await wait_until(pilot, lambda: "chunks from 5 documents" in status(screen))
        assert "skipped 1 document that cannot be read" in status(screen) and "broken.docx" in status(screen)
        assert "-error" not in view.query_one("#synth-status").classes


async def test_the_server_list_is_read_again_when_the_step_is_shown_again(served):
    ws, server = served
    app = DevtuneApp(ws, watch_terminal=False)
    async with app.run_test(size=(140, 50)) as pilot:
        screen = await _documents_view(pilot, app)
        select = screen.query_one("#synth-server")
        await wait_until(pilot, lambda: select.value == "fake-1")
        record = json.loads((ws.servers_dir / "fake-1" / "server.json").read_text())
        (ws.servers_dir / "fake-2").mkdir()
        (ws.servers_dir / "fake-2" / "server.json").write_text(json.dumps({**record, "id": "fake-2"}))
        app.action_goto_step("merge")
        await wait_until(pilot, lambda: app.screen is not screen)
        app.action_goto_step("data")
        await wait_until(pilot, lambda: [v for _label, v in select._options if v != select.NULL] == ["fake-1", "fake-2"])
        assert select.value == "fake-1"  # the choice made stays
