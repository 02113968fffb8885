"""Step 6, Playground: serve the merged model (vLLM, or `llamafactory-cli api`), chat with it with
streaming answers and their TTFT and tokens/s, side by side with another server (the base model)
when one is chosen, copy a question as `curl`, and run the closed-loop check: training questions
asked, answers scored against the expected outputs.

Servers are detached processes: leaving the step or quitting devtune stops none of them, and the step
re-attaches to the live ones."""

from __future__ import annotations

import time
from dataclasses import dataclass

from textual import on, work
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Horizontal, Vertical
from textual.message import Message
from textual.widgets import Button, Checkbox, Input, Log, Select, Static, TabbedContent, TabPane
from textual.worker import get_current_worker

from core.i18n import _
from screens.base import StepScreen
from tui.widgets.chat_params import ChatParamsForm
from tui.widgets.chat_transcript import ChatTranscript
from tui.widgets.verify_results import VerifyResults

REDRAW_SECONDS = 0.25  # streamed text reaches the screen at most 4 times a second


class PlaygroundScreen(StepScreen):
    STEP_ID = "playground"
    BINDINGS = [
        Binding("f5", "start_server", _("Start a server"), id="playground.start"),
        Binding("f6", "stop_server", _("Stop the server"), id="playground.stop"),
        Binding("f7", "verify", _("Verify: ask the training questions"), id="playground.verify"),
        Binding("ctrl+y", "copy_curl", _("Copy the question as curl"), id="playground.curl"),
        Binding("ctrl+l", "clear_chat", _("Clear the chat"), id="playground.clear"),
    ]
    DEFAULT_CSS = """
    PlaygroundScreen #pg-columns { height: 1fr; }
    PlaygroundScreen #pg-left { width: 46; padding-right: 1; }
    PlaygroundScreen #pg-tabs { width: 1fr; }
    PlaygroundScreen #pg-server-row { height: auto; }
    PlaygroundScreen #pg-backend { width: 22; }
    PlaygroundScreen #pg-tp { width: 9; }
    PlaygroundScreen #pg-port { width: 1fr; }
    PlaygroundScreen #pg-buttons { height: auto; }
    PlaygroundScreen #pg-buttons Button { width: 1fr; }
    PlaygroundScreen #pg-server-log { height: 1fr; min-height: 4; border: round $panel-lighten-2; }
    PlaygroundScreen #pg-commands { height: auto; max-height: 8; color: $text-muted; }
    PlaygroundScreen #pg-transcripts { height: 1fr; }
    PlaygroundScreen #pg-chat-compare { display: none; }
    PlaygroundScreen #pg-chat-compare.-visible { display: block; }
    """

    @dataclass
    class Servers(Message):
        servers: list  # ServerRecord, live ones
        select: str | None

    @dataclass
    class ServerLog(Message):
        lines: list[str]

    @dataclass
    class ServerReady(Message):
        record: object
        commands: dict

    @dataclass
    class ChatText(Message):
        target: str  # transcript id
        text: str
        stats: str | None = None  # set on the last update of an answer
        error: str | None = None

    @dataclass
    class Failed(Message):
        error: str

    @dataclass
    class VerifyRow(Message):
        result: object  # core.serve.verify.QuestionResult

    @dataclass
    class VerifyDone(Message):
        report: object | None
        error: str | None = None

    @property
    def INTRO(self) -> str:  # noqa: N802 - StepScreen's attribute, translated when shown
        return _("Serve the merged model, chat with it, and check that it answers what it was taught. F5 starts a "
                 "server, F6 stops it, F7 asks the training questions; servers keep running when devtune quits.")

    def __init__(self) -> None:
        super().__init__()
        self.conversations: dict[str, object] = {}  # transcript id -> core.serve.chat.Conversation
        self.records: dict[str, object] = {}  # server id -> ServerRecord

    def compose_body(self) -> ComposeResult:
        with Horizontal(id="pg-columns"):
            with Vertical(id="pg-left"):
                yield Input(placeholder=_("model folder (default: the latest export)"), id="pg-model")
                with Horizontal(id="pg-server-row"):
                    yield Select([("vLLM", "vllm"), ("llamafactory api", "llamafactory")], prompt=_("backend: auto"),
                                 id="pg-backend")
                    yield Input("1", placeholder="tp", id="pg-tp", type="integer")
                    yield Input(placeholder=_("port"), id="pg-port", type="integer")
                yield Checkbox(_("trust remote code"), id="pg-trust")
                with Horizontal(id="pg-buttons"):
                    yield Button(_("Start"), id="pg-start", variant="primary")
                    yield Button(_("Stop"), id="pg-stop")
                yield Select([], prompt=_("server"), id="pg-server")
                yield Select([], prompt=_("compare with: none"), id="pg-compare")
                yield Log(max_lines=300, id="pg-server-log", auto_scroll=True)
                yield Static("", id="pg-commands")
            with TabbedContent(id="pg-tabs"):
                with TabPane(_("Chat"), id="pg-tab-chat"):
                    yield ChatParamsForm(id="pg-chat-params")
                    with Horizontal(id="pg-transcripts"):
                        yield ChatTranscript(_("model"), empty=_("Start or choose a server, then ask below."),
                                             id="pg-chat")
                        yield ChatTranscript(_("compare"), id="pg-chat-compare")
                    yield Input(placeholder=_("ask a question, Enter sends"), id="pg-question")
                with TabPane(_("Verify"), id="pg-tab-verify"):
                    yield VerifyResults(id="pg-verify-results")

    def on_mount(self) -> None:
        self.query_one("#pg-server-log", Log).border_title = _("server log")
        self.load_servers(self.state.active_server)

    # ------------------------------------------------------------ servers

    @work(thread=True, exclusive=True, exit_on_error=False, group="pg-servers", description=_("Listing servers"))
    def load_servers(self, select: str | None = None) -> None:
        from core.serve.servers import list_servers

        self.post_message(self.Servers(list_servers(self.ws), select))

    def on_playground_screen_servers(self, message: Servers) -> None:
        self.records = {r.id: r for r in message.servers}
        from core.serve.servers import status_label

        options = [(f"{r.id} ({status_label(r.status)})", r.id) for r in message.servers]
        for select_id in ("#pg-server", "#pg-compare"):
            self.query_one(select_id, Select).set_options(options)
        if message.select in self.records:
            self.query_one("#pg-server", Select).value = message.select

    @on(Select.Changed, "#pg-server")
    def _server_chosen(self, event: Select.Changed) -> None:
        record = self.records.get(event.value) if isinstance(event.value, str) else None
        self.conversations.pop("pg-chat", None)
        if record is None:
            return
        self.app.remember(active_server=record.id)
        if record.status == "starting":
            self.follow_start(record.id)
        self.show_commands(record.id)

    @on(Select.Changed, "#pg-compare")
    def _compare_chosen(self, event: Select.Changed) -> None:
        self.conversations.pop("pg-chat-compare", None)
        self.query_one("#pg-chat-compare").set_class(isinstance(event.value, str), "-visible")

    @on(Button.Pressed, "#pg-start")
    def action_start_server(self) -> None:
        def number(widget_id: str, default: int) -> int:
            try:
                return int(self.query_one(widget_id, Input).value or default)
            except ValueError:
                return default

        backend = self.query_one("#pg-backend", Select).value
        self.clear_error()
        self.query_one("#pg-server-log", Log).clear()
        self.start(self.query_one("#pg-model", Input).value.strip() or None,
                   backend if isinstance(backend, str) else None, number("#pg-tp", 1), number("#pg-port", 0),
                   self.query_one("#pg-trust", Checkbox).value)

    @work(thread=True, exclusive=True, exit_on_error=False, group="pg-start", description=_("Starting the server"))
    def start(self, model: str | None, backend: str | None, tp: int, port: int, trust: bool) -> None:
        from core.serve.servers import ServerError, start_server
        from core.serve.plan import ServePlanError, plan_server

        try:
            opts, notes = plan_server(self.ws, model, backend=backend, port=port, tensor_parallel=tp,
                                      trust_remote_code=trust)
            record = start_server(self.ws, opts)
        except (ServePlanError, ServerError, ValueError) as exc:
            self.post_message(self.Failed(str(exc)))
            return
        self.post_message(self.ServerLog(notes + [_("starting {backend} server {id} on {url}", backend=record.backend,
                                                    id=record.id, url=record.url)]))
        self.post_message(self.Servers(list(self.records.values()) + [record], record.id))
        self._wait(record.id)

    @work(thread=True, exclusive=True, exit_on_error=False, group="pg-start", description=_("Waiting for the server"))
    def follow_start(self, server_id: str) -> None:
        self._wait(server_id)

    def _wait(self, server_id: str) -> None:
        from core.serve.servers import ServerError, equivalent_commands, wait_ready

        worker = get_current_worker()
        pending: list[str] = []
        last = [time.monotonic()]

        def on_line(line: str) -> None:
            pending.append(line[-240:])
            if time.monotonic() - last[0] >= REDRAW_SECONDS:
                self.post_message(self.ServerLog(pending[:]))
                pending.clear()
                last[0] = time.monotonic()

        try:
            record = wait_ready(self.ws, server_id, on_line=on_line, cancelled=lambda: worker.is_cancelled)
        except ServerError as exc:
            self.post_message(self.ServerLog(pending[:]))
            self.post_message(self.Failed(str(exc)))
            self.app.call_from_thread(self.load_servers)
            return
        self.post_message(self.ServerLog(pending[:]))
        if record.status == "ready":
            self.post_message(self.ServerReady(record, equivalent_commands(self.ws, record)))

    def on_playground_screen_server_log(self, message: ServerLog) -> None:
        if message.lines:
            self.query_one("#pg-server-log", Log).write_lines(message.lines)

    def on_playground_screen_failed(self, message: Failed) -> None:
        self.show_error(message.error)
        self.query_one("#pg-server-log", Log).write_lines(message.error.splitlines()[:3])
        self.set_status("attention", message.error.splitlines()[0][:120])

    def on_playground_screen_server_ready(self, message: ServerReady) -> None:
        record = message.record
        self.records[record.id] = record
        self.query_one("#pg-server-log", Log).write_line(_("server {id} is ready at {url}", id=record.id,
                                                          url=record.url))
        self._show_commands(message.commands)
        self.app.remember(active_server=record.id)
        self.load_servers(record.id)

    @work(thread=True, exclusive=True, exit_on_error=False, group="pg-cmds", description=_("Reading the server"))
    def show_commands(self, server_id: str) -> None:
        from core.serve.servers import equivalent_commands, read_server

        commands = equivalent_commands(self.ws, read_server(self.ws, server_id))
        self.app.call_from_thread(self._show_commands, commands)

    def _show_commands(self, commands: dict) -> None:
        lines = [commands["vllm"]] if "vllm" in commands else [commands["run"]]
        self.query_one("#pg-commands", Static).update("\n".join(lines + [commands["curl"]]))

    @on(Button.Pressed, "#pg-stop")
    def action_stop_server(self) -> None:
        server = self.query_one("#pg-server", Select).value
        if isinstance(server, str):
            self.stop(server)

    @work(thread=True, exclusive=True, exit_on_error=False, group="pg-stop", description=_("Stopping the server"))
    def stop(self, server_id: str) -> None:
        from core.serve.servers import status_label, stop_server

        record = stop_server(self.ws, server_id)
        self.post_message(self.ServerLog([_("server {id}: {status}", id=record.id,
                                            status=status_label(record.status))]))
        self.app.call_from_thread(self.load_servers)

    # ------------------------------------------------------------ chat

    def _params(self):
        return self.query_one(ChatParamsForm).params()

    def _targets(self) -> list[tuple[str, str]]:
        pairs = []
        for transcript, select_id in (("pg-chat", "#pg-server"), ("pg-chat-compare", "#pg-compare")):
            value = self.query_one(select_id, Select).value
            if isinstance(value, str):
                pairs.append((transcript, value))
        return pairs

    @on(Input.Submitted, "#pg-question")
    def _ask(self, event: Input.Submitted) -> None:
        question = event.value.strip()
        targets = self._targets()
        if not question:
            return
        if not targets:
            self.show_error(_("start or choose a server first"))
            return
        event.input.value = ""
        self.clear_error()
        for transcript, _server in targets:
            chat = self.query_one(f"#{transcript}", ChatTranscript)
            chat.add_question(question)
            chat.start_answer()
        self.ask(question, targets, self._params())

    @work(thread=True, exclusive=True, exit_on_error=False, group="pg-chat", description=_("Asking the model"))
    def ask(self, question: str, targets: list[tuple[str, str]], params) -> None:
        from core.serve.chat import ChatDone, ChatError, Conversation
        from core.serve.servers import ServerError, endpoint, read_server

        for transcript, server_id in targets:
            try:
                conversation = self.conversations.get(transcript)
                if conversation is None or conversation.endpoint.label != server_id:
                    conversation = Conversation(endpoint(self.ws, read_server(self.ws, server_id)))
                    self.conversations[transcript] = conversation
                conversation.params = params
                text, last = "", time.monotonic()
                for event in conversation.ask(question):
                    if isinstance(event, ChatDone):
                        self.post_message(self.ChatText(transcript, event.text, stats=event.stats.line()))
                        break
                    text += event.text
                    if time.monotonic() - last >= REDRAW_SECONDS:
                        self.post_message(self.ChatText(transcript, text))
                        last = time.monotonic()
            except (ChatError, ServerError, OSError) as exc:
                self.post_message(self.ChatText(transcript, "", error=str(exc)))

    def on_playground_screen_chat_text(self, message: ChatText) -> None:
        chat = self.query_one(f"#{message.target}", ChatTranscript)
        if message.error:
            self.show_error(message.error)
            chat.fail_answer(message.error.splitlines()[0])
        elif message.stats is not None:
            chat.finish_answer(message.text, message.stats)
        else:
            chat.update_answer(message.text)

    def action_clear_chat(self) -> None:
        self.conversations.clear()
        for chat in self.query(ChatTranscript):
            chat.clear()

    def action_copy_curl(self) -> None:
        from core.serve.chat import build_messages, curl_command
        from core.serve.servers import endpoint, read_server

        server = self.query_one("#pg-server", Select).value
        if not isinstance(server, str):
            self.show_error(_("start or choose a server first"))
            return
        question = self.query_one("#pg-question", Input).value.strip() or _("Hello!")
        params = self._params()
        record = read_server(self.ws, server)
        command = curl_command(endpoint(self.ws, record), build_messages(question, system=params.system), params,
                               key_file=record.api_key_file)
        self.app.copy_to_clipboard(command)
        self.query_one("#pg-commands", Static).update(command)
        self.app.notify(_("copied the curl command (the key is read from its file)"), timeout=4)

    # ------------------------------------------------------------ verify

    def action_verify(self) -> None:
        server = self.query_one("#pg-server", Select).value
        if not isinstance(server, str):
            self.show_error(_("start or choose a server first"))
            return
        self.query_one("#pg-tabs", TabbedContent).active = "pg-tab-verify"
        self.query_one(VerifyResults).start()
        self.verify(server)

    @work(thread=True, exclusive=True, exit_on_error=False, group="pg-verify", description=_("Verifying"))
    def verify(self, server_id: str) -> None:
        from core.merge.export import ExportError
        from core.train.runs import RunError
        from core.serve.servers import ServerError, endpoint, read_server
        from core.serve.verify import VerifyError, run_of_server, run_questions, verify

        worker = get_current_worker()
        try:
            record = read_server(self.ws, server_id)
            questions = run_questions(self.ws, run_of_server(self.ws, record))
        except (ServerError, VerifyError, ExportError, RunError) as exc:
            self.post_message(self.VerifyDone(None, str(exc)))
            return
        report = verify(endpoint(self.ws, record), questions, server_id=server_id,
                        on_result=lambda r: self.post_message(self.VerifyRow(r)),
                        cancelled=lambda: worker.is_cancelled)
        self.post_message(self.VerifyDone(report))

    def on_playground_screen_verify_row(self, message: VerifyRow) -> None:
        self.query_one(VerifyResults).add_result(message.result)

    def on_playground_screen_verify_done(self, message: VerifyDone) -> None:
        report = message.report
        self.query_one(VerifyResults).finish(report, message.error)
        if report is None:
            self.show_error(message.error or "")
            return
        self.set_status("done" if report.verdict else "attention", _("verify: chrF {score:.2f}", score=report.score))
