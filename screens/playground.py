"""Step 6, Playground: serve the merged model (vLLM, or `llamafactory-cli api`), chat with it with
streaming answers and their TTFT and tokens/s, side by side with another server (the base model)
when one is chosen, copy a question as `curl`, and evaluate: the held-out and training questions asked to
the tuned model and to its base, every answer scored (core.eval, as `devtune eval`), shown in the Eval tab.

Servers are detached processes: leaving the step or quitting devtune stops none of them, and the step
re-attaches to the live ones."""

from __future__ import annotations

import asyncio
from dataclasses import dataclass

from textual import on
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Horizontal, Vertical
from textual.reactive import var
from textual.widgets import Button, Checkbox, Input, Log, Select, Static, TabbedContent, TabPane

from core.i18n import _
from screens.base import Job, StepScreen, step_binding
from screens.playground_eval import start_eval_with_servers
from tui.widgets.chat_params import ChatParamsForm
from tui.widgets.chat_transcript import ChatTranscript
from tui.widgets.titled import TitledSelect, titled
from tui.widgets.eval_results import EvalResults


class PlaygroundScreen(StepScreen):
    STEP_ID = "playground"
    BINDINGS = [
        step_binding("playground", "run", "start_server", _("Start a server")),
        step_binding("playground", "stop", "stop_server", _("Stop the server")),
        step_binding("playground", "check", "evaluate", _("Eval: the tuned model against its base")),
        step_binding("playground", "refresh", "reload", _("Reload the servers")),
        Binding("ctrl+y", "copy_curl", _("Copy the question as curl"), id="playground.curl"),
        Binding("ctrl+l", "clear_chat", _("Clear the chat"), id="playground.clear"),
    ]
    CSS_PATH = "../tui/styles/playground.tcss"

    # what the screen shows follows this
    servers: var[list] = var(list)  # core.serve.servers.ServerRecord of the live servers

    @dataclass
    class ChatText:
        target: str  # transcript id
        text: str
        stats: str | None = None  # set on the last update of an answer
        error: str | None = None

    @dataclass
    class Started:
        record: object  # core.serve.servers.ServerRecord of the server started
        notes: list[str]  # what the plan chose, said

    @dataclass
    class Ready:
        record: object  # the server, as it ended its wait
        commands: object  # the equivalent commands, when it is ready (else None)

    @property
    def INTRO(self) -> str:  # noqa: N802 - StepScreen's attribute, translated when shown
        return _("Serve the merged model, chat with it, and check that it beats its base. F5 starts a server, F8 "
                 "stops it, F6 evaluates it against its base; servers keep running when devtune quits.")

    def __init__(self) -> None:
        super().__init__()
        # transcript id -> core.serve.chat.Conversation; changed on the event loop only
        self.conversations: dict[str, object] = {}
        self._base_preselected = False  # "compare with" took the remembered base server (once per visit)

    @property
    def records(self) -> dict[str, object]:
        return {r.id: r for r in self.servers}

    def compose_body(self) -> ComposeResult:
        with Horizontal(id="pg-columns"):
            with Vertical(id="pg-left"):
                yield titled(Input(placeholder=_("default: the latest export"), id="pg-model"), _("model folder"))
                with Horizontal(id="pg-server-row"):
                    yield Select([(_("backend: vLLM"), "vllm"), (_("backend: llamafactory api"), "llamafactory"),
                                  (_("backend: llama.cpp (GGUF)"), "llamacpp")],  # core.serve.backend_llamacpp
                                 prompt=_("backend: auto"), id="pg-backend")
                    yield titled(Input("1", id="pg-tp", type="integer"), _("GPUs"))
                    yield titled(Input(placeholder=_("auto"), id="pg-port", type="integer"), _("port"))
                yield Checkbox(_("trust remote code"), id="pg-trust")
                with Horizontal(id="pg-buttons"):
                    yield Button(_("Start"), id="pg-start", variant="primary")
                    yield Button(_("Stop"), id="pg-stop")
                yield titled(TitledSelect([], prompt=_("none yet"), id="pg-server"), _("server"))
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
                    yield titled(Input(placeholder=_("ask a question, Enter sends"), id="pg-question"),
                                 _("question"))
                with TabPane(_("Eval"), id="pg-tab-eval"):
                    yield EvalResults(id="pg-eval-results")

    def on_mount(self) -> None:
        self.query_one("#pg-server-log", Log).border_title = _("server log")
        # not a text field: arriving here, 1-6 and [ ] still move between steps
        self.query_one("#pg-start", Button).focus()
        self.load_servers(self.state.active_server)
        self.run_background(self._latest_eval, self.ws, group="pg-eval", description=_("Reading the last eval"),
                            done=self._show_eval)

    # ------------------------------------------------------------ servers

    def action_reload(self) -> None:
        server = self.query_one("#pg-server", Select).value
        self.load_servers(server if isinstance(server, str) else None)

    def load_servers(self, select: str | None = None) -> None:
        self.run_background(self._list_servers, self.ws, group="pg-servers", description=_("Listing servers"),
                            done=lambda servers: self._show_servers(servers, select))

    @staticmethod
    def _list_servers(job: Job, ws) -> list:
        from core.serve.servers import list_servers

        return list_servers(ws)

    def _show_servers(self, servers: list, select: str | None) -> None:
        self.servers = servers
        if select in self.records:
            self.query_one("#pg-server", Select).value = select
        if not self._base_preselected:
            self._preselect_base()

    def _preselect_base(self) -> None:
        """Once, when the servers are first listed: "compare with" the base server the last eval compared against
        (remembered in the workspace; the one a plain `devtune eval` compares against too, core.eval.targets)."""
        from core.eval.targets import remembered_base

        server = self.query_one("#pg-server", Select).value
        compare = self.query_one("#pg-compare", Select)
        base = remembered_base(self.state.eval_base_server, self.records.get(server) if isinstance(server, str)
                               else None)
        if base in self.records and not isinstance(compare.value, str):
            self._base_preselected = True
            compare.value = base

    def watch_servers(self, servers: list) -> None:
        from core.serve.servers import status_label

        for select_id, label in (("#pg-server", "{id} ({status})"), ("#pg-compare", _("compare with: {id} ({status})"))):
            select = self.query_one(select_id, Select)
            value = select.value
            with select.prevent(Select.Changed):
                select.set_options([(label.format(id=r.id, status=status_label(r.status)), r.id) for r in servers])
                if isinstance(value, str) and any(r.id == value for r in servers):
                    select.value = value

    @on(Select.Changed, "#pg-server")
    def _server_chosen(self, event: Select.Changed) -> None:
        record = self.records.get(event.value) if isinstance(event.value, str) else None
        self.conversations.pop("pg-chat", None)
        if record is None:
            return
        self.app.remember(active_server=record.id)
        if record.status == "starting":
            self._wait(record.id)
        self.run_background(self._commands_of, self.ws, record.id, group="pg-cmds",
                            description=_("Reading the server"), done=self._show_commands)

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
        self.run_background(self._start, self.ws, self.query_one("#pg-model", Input).value.strip() or None,
                            backend if isinstance(backend, str) else None, number("#pg-tp", 1),
                            number("#pg-port", 0), self.query_one("#pg-trust", Checkbox).value,
                            group="pg-start", description=_("Starting the server"), done=self._started,
                            failed=self._failed)

    @staticmethod
    def _start(job: Job, ws, model: str | None, backend: str | None, tp: int, port: int, trust: bool):
        from core.serve.plan import plan_server
        from core.serve.servers import start_server

        # core's own errors (a plan refused: ServePlanError; a launch refused: LaunchRefused) reach the error
        # box as they are, as devtune serve says them
        opts, notes = plan_server(ws, model, backend=backend, port=port, tensor_parallel=tp, trust_remote_code=trust)
        return PlaygroundScreen.Started(start_server(ws, opts), notes)

    def _started(self, result: Started) -> None:
        record, notes = result.record, result.notes
        self._log(notes + [_("starting {backend} server {id} on {url}", backend=record.backend, id=record.id,
                             url=record.url)])
        self._show_servers([r for r in self.servers if r.id != record.id] + [record], record.id)
        self._wait(record.id)

    def _wait(self, server_id: str) -> None:
        self.run_background(self._wait_ready, self.ws, server_id, group="pg-start",
                            description=_("Waiting for the server"), progress=self._log, done=self._ready,
                            failed=self._failed)

    @staticmethod
    def _wait_ready(job: Job, ws, server_id: str):
        from core.serve.servers import equivalent_commands, wait_ready

        record = wait_ready(ws, server_id, on_line=lambda line: job.report_soon(line[-240:]),
                            cancelled=lambda: job.cancelled)
        return PlaygroundScreen.Ready(record, equivalent_commands(ws, record) if record.status == "ready" else None)

    def _ready(self, result: Ready) -> None:
        record, commands = result.record, result.commands
        if commands is None:
            return
        self.query_one("#pg-server-log", Log).write_line(_("server {id} is ready at {url}", id=record.id,
                                                          url=record.url))
        self._show_commands(commands)
        self.app.apply_change(record.state_change())
        self.load_servers(record.id)

    def _log(self, lines: list[str]) -> None:
        if lines:
            self.query_one("#pg-server-log", Log).write_lines(lines)

    def _failed(self, error: Exception) -> None:  # a DevtuneError from core, shown as it is
        self._log(str(error).splitlines()[:3])
        self.load_servers()

    @staticmethod
    def _commands_of(job: Job, ws, server_id: str) -> dict:
        from core.serve.servers import equivalent_commands, read_server

        return equivalent_commands(ws, read_server(ws, server_id))

    def _show_commands(self, commands: dict) -> None:
        lines = [commands["vllm"]] if "vllm" in commands else [commands["run"]]
        self.query_one("#pg-commands", Static).update("\n".join(lines + [commands["curl"]]))

    @on(Button.Pressed, "#pg-stop")
    def action_stop_server(self) -> None:
        server = self.query_one("#pg-server", Select).value
        if isinstance(server, str):
            self.run_background(self._stop, self.ws, server, group="pg-stop", description=_("Stopping the server"),
                                done=self._stopped)

    @staticmethod
    def _stop(job: Job, ws, server_id: str) -> str:
        from core.serve.servers import status_label, stop_server

        record = stop_server(ws, server_id)
        return _("server {id}: {status}", id=record.id, status=status_label(record.status))

    def _stopped(self, line: str) -> None:
        self._log([line])
        self.load_servers()

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
        self.run_background(self._chat, question, targets, self._params(), group="pg-chat",
                            description=_("Asking the model"), progress=self._chat_text)

    async def _chat(self, job: Job, question: str, targets: list[tuple[str, str]], params) -> None:
        """An async worker, on the event loop: it streams over httpx.AsyncClient, and the conversations
        it keeps are only ever changed here and by the screen's handlers, never from a thread."""
        from core.serve.chat import ChatDone, ChatError, Conversation
        from core.serve.servers import ServerError, endpoint, read_server

        for transcript, server_id in targets:
            try:
                conversation = self.conversations.get(transcript)
                if conversation is None or conversation.endpoint.label != server_id:
                    record = await asyncio.to_thread(read_server, self.ws, server_id)
                    conversation = Conversation(await asyncio.to_thread(endpoint, self.ws, record))
                    self.conversations[transcript] = conversation
                conversation.params = params
                text = ""
                async for event in conversation.aask(question):
                    if isinstance(event, ChatDone):
                        job.flush()  # the answer so far, then the whole answer with its figures
                        job.report(self.ChatText(transcript, event.text, stats=event.stats.line()))
                        break
                    text += event.text
                    job.report_soon(self.ChatText(transcript, text))  # at a human rate (base.HUMAN_RATE)
            except (ChatError, ServerError, OSError) as exc:
                job.flush()
                job.report(self.ChatText(transcript, "", error=str(exc)))

    def _chat_text(self, update: ChatText | list[ChatText]) -> None:
        """An answer's end (or error), or a batch of the answers so far: only each one's newest counts."""
        if isinstance(update, list):
            for message in {m.target: m for m in update}.values():
                self.query_one(f"#{message.target}", ChatTranscript).update_answer(message.text)
            return
        message = update
        chat = self.query_one(f"#{message.target}", ChatTranscript)
        if message.error:
            self.show_error(message.error)
            chat.fail_answer(message.error.splitlines()[0])
        elif message.stats is not None:
            chat.finish_answer(message.text, message.stats)
        else:
            chat.update_answer(message.text)

    def action_clear_chat(self) -> None:
        self.workers.cancel_group(self, "pg-chat")  # an answer still streaming joins no history
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

    # ------------------------------------------------------------ eval

    @staticmethod
    def _latest_eval(job: Job, ws):  # -> core.eval.eval_report.EvalResult | None
        from core.eval.eval_report import latest_eval, load_eval

        found = latest_eval(ws)
        try:
            return load_eval(ws, found) if found else None
        except (OSError, ValueError):
            return None  # a damaged report: the next F6 writes a new one

    def action_evaluate(self) -> None:
        server = self.query_one("#pg-server", Select).value
        compare = self.query_one("#pg-compare", Select).value
        if not isinstance(server, str):  # core starts what the eval needs, and stops it afterwards
            return start_eval_with_servers(self)
        self.query_one("#pg-tabs", TabbedContent).active = "pg-tab-eval"
        results = self.query_one(EvalResults)
        results.start(_("asking the held-out and training questions…"))
        self.run_background(self._evaluate, self.ws, server, compare if isinstance(compare, str) else None,
                            group="pg-eval", description=_("Evaluating"), progress=results.progress,
                            done=self._evaluated, failed=lambda error: results.failed(str(error)))

    @staticmethod
    def _evaluate(job: Job, ws, server_id: str, compare_id: str | None):
        """The chosen server against its base: the same server when it serves a LoRA run beside its base, else
        the "compare with" server as the base."""
        from core.eval.compare import EvalOptions, run_eval
        from core.eval.questions import EvalInputError
        from core.eval.targets import resolve_targets
        from core.merge.export import ExportError
        from core.train.run_facts import find_train_run, read_train_facts
        from core.serve.servers import read_server
        from core.serve.verify import run_of_server
        from core.train.runs import RunError

        record = read_server(ws, server_id)
        if not record.lora_modules and not compare_id:
            from core.eval.targets import lora_server_hint

            raise EvalInputError(_("choose the base model's server in “compare with”, or: {how}",
                                   how=lora_server_hint(ws, run_of_server(ws, record))))
        if record.lora_modules:
            targets = resolve_targets(ws, server=server_id)
        else:
            targets = resolve_targets(ws, base_server=compare_id, tuned_server=server_id)
        try:  # the dataset of the run behind the server (else the newest run), else the Data step's choice
            facts = read_train_facts(ws, find_train_run(ws, targets.run or run_of_server(ws, record)))
        except (ExportError, RunError):
            facts = None
        dataset = (facts.dataset[0] if facts and facts.dataset else None) or ws.load_state().dataset_name
        if not dataset:
            raise EvalInputError(_("no dataset to ask: choose one in the Data step, or train a run on one"))
        return run_eval(ws, targets, dataset, EvalOptions(), progress=lambda p: job.report_soon(p.line()),
                        cancelled=lambda: job.cancelled)

    def _show_eval(self, result) -> None:
        """The last saved eval (core.eval.eval_report.EvalResult), or None when there is none."""
        if result is not None:
            self.query_one(EvalResults).show(result.report, result.rows)

    def _evaluated(self, result, change=None) -> None:
        """F6's EvalResult: shown, its state change (or core's `change` for it) applied, its verdict on the stepper."""
        report = result.report
        self.query_one(EvalResults).show(report, result.rows)
        self.app.apply_change(report.state_change() if change is None else change)  # the base, for a plain eval
        verdict = report.verdict  # core's: which questions count, the band, worse / same / better
        self.set_status("done" if verdict.ok else "attention", verdict.mark)
