"""Step 6 commands: `devtune serve`, `servers`, `stop-server`, `chat`, `verify`."""

from __future__ import annotations

import sys

from core.i18n import _
from cli.commands.output import emit_json, err, workspace

from core.errors import EXIT_INTERRUPTED, EXIT_OK, EXIT_PROBLEMS


def register(sub, add_common) -> list[str]:
    p = sub.add_parser(
        "serve", help=_("serve a merged model with an OpenAI-compatible API (vLLM, or llamafactory-cli api)"),
        description=_("Start a server for MODEL (default: the latest merged model) detached, bound to 127.0.0.1 "
                      "with a generated API key (stored with mode 0600 in .devtune/servers/<id>/api_key), and "
                      "wait until it answers. With --json, print {id, url, model, backend, pid, ...} once it is "
                      "ready."))
    add_common(p)
    p.add_argument("model", metavar="MODEL", nargs="?",
                   help=_("merged model folder, or a GGUF folder or file (default: the latest export)"))
    p.add_argument("--lora", metavar="RUN",
                   help=_("serve a LoRA run's base model with its adapter beside it (vLLM --enable-lora): one server "
                          "answers as the base and as the tuned model, for `devtune eval`"))
    p.add_argument("--backend", choices=("vllm", "llamafactory", "llamacpp"),
                   help=_("vllm (default when installed), llamafactory (huggingface backend), or llamacpp (a GGUF "
                          "folder or file: llama.cpp's server, the default for one)"))
    p.add_argument("--tp", type=int, default=1, metavar="N",
                   help=_("tensor-parallel size: GPUs per model (default 1)"))
    p.add_argument("--port", type=int, default=0, metavar="P", help=_("port (default: a free one)"))
    p.add_argument("--host", default="127.0.0.1", help=_("address to listen on (default 127.0.0.1)"))
    p.add_argument("--dtype", help=_("bfloat16 (default on GPUs), float16, float32, auto (default on CPUs)"))
    p.add_argument("--max-model-len", type=int, metavar="N",
                   help=_("context length (default: the model's; 2048 on CPU)"))
    p.add_argument("--name", help=_("served model name (default: the folder name)"))
    p.add_argument("--chat-template", metavar="FILE",
                   help=_("chat template file for vLLM (default: the fixed one when the export check found a "
                          "mismatch)"))
    p.add_argument("--template", help=_("LLaMA-Factory template for --backend llamafactory (default: the run's)"))
    p.add_argument("--trust-remote-code", action="store_true", help=_("allow the model's own Python code to run"))
    p.add_argument("--timeout", type=float, default=900.0, metavar="S",
                   help=_("seconds to wait for readiness (900)"))
    p.add_argument("--no-wait", action="store_true", help=_("start and return at once"))
    p.add_argument("--show-key", action="store_true", help=_("print the API key too"))
    p.add_argument("--json", action="store_true", help=_("print the server as JSON once ready"))
    p.set_defaults(handler=run_serve)

    p = sub.add_parser("servers", help=_("list the servers of this workspace"))
    add_common(p)
    p.add_argument("--all", action="store_true", help=_("include stopped and failed ones"))
    p.add_argument("--json", action="store_true", help=_("print JSON"))
    p.set_defaults(handler=run_servers)

    p = sub.add_parser("stop-server", help=_("stop a server (its whole process group)"))
    add_common(p)
    p.add_argument("server", metavar="ID", help=_("server id or prefix (`devtune servers`)"))
    p.add_argument("--json", action="store_true", help=_("print JSON"))
    p.set_defaults(handler=run_stop_server)

    p = sub.add_parser("chat", help=_("ask a served model a question (the answer is streamed)"))
    add_common(p)
    p.add_argument("question", metavar="QUESTION", help=_("the question"))
    p.add_argument("--server", metavar="ID", help=_("server id or prefix (default: the active one)"))
    p.add_argument("--compare", metavar="ID",
                   help=_("ask another server too (e.g. the base model) and show both"))
    p.add_argument("--system", default="", help=_("system prompt"))
    p.add_argument("--temperature", type=float, default=0.7)
    p.add_argument("--top-p", type=float, default=1.0)
    p.add_argument("--max-tokens", type=int, default=256)
    p.add_argument("--stop", action="append", default=[], metavar="TEXT", help=_("stop sequence (repeatable)"))
    p.add_argument("--curl", action="store_true", help=_("print the equivalent curl command instead of asking"))
    p.add_argument("--json", action="store_true", help=_("print the answer and its statistics as JSON"))
    p.set_defaults(handler=run_chat)

    p = sub.add_parser(
        "verify", help=_("ask training questions and score the answers: does the model answer what it was taught?"),
        description=_("Ask N questions from the run's training data (and its eval_dataset, as held-out), score "
                      "each answer against the expected output with chrF, and give the verdict. Exit 1 when it "
                      "is negative."))
    add_common(p)
    p.add_argument("--server", metavar="ID", help=_("server id or prefix (default: the active one)"))
    p.add_argument("--run", help=_("training run whose data to ask (default: the one the served export came from)"))
    p.add_argument("--n", type=int, default=20, help=_("questions per split (default 20)"))
    p.add_argument("--json", action="store_true", help=_("print the per-question results and the score as JSON"))
    p.set_defaults(handler=run_verify)
    return ["serve", "servers", "stop-server", "chat", "verify"]


def _print_commands(ws, record) -> None:
    from core.serve.servers import equivalent_commands

    cmds = equivalent_commands(ws, record)
    if "vllm" in cmds:
        print(_("equivalent: {cmd}", cmd=cmds["vllm"]))
    else:
        print(_("command: {cmd}", cmd=cmds["run"]))
    print(_("try it: {cmd}", cmd=cmds["curl"]))


def run_serve(args) -> int:
    from core.errors import BadInput
    from core.serve.plan import plan_lora_server, plan_server
    from core.serve.servers import read_api_key, start_server, stop_server, wait_ready

    ws = workspace(args)
    lora_run = None
    # core's own errors pass as they are: a plan refused (ServePlanError, exit 2), a launch refused
    # (LaunchRefused, exit 1); the Playground says the same ones
    if args.lora:
        if args.model or args.backend not in (None, "vllm"):
            raise BadInput(_("--lora serves the run's own base model with vLLM; leave out MODEL and --backend"))
        opts, lora_run, notes = plan_lora_server(ws, args.lora, port=args.port, host=args.host, dtype=args.dtype,
                                                 max_model_len=args.max_model_len,
                                                 trust_remote_code=args.trust_remote_code)
    else:
        opts, notes = plan_server(ws, args.model, backend=args.backend, port=args.port, host=args.host,
                                  tensor_parallel=args.tp, dtype=args.dtype, max_model_len=args.max_model_len,
                                  served_name=args.name, chat_template=args.chat_template, template=args.template,
                                  trust_remote_code=args.trust_remote_code)
    for note in notes:
        err(note)
    record = start_server(ws, opts, lora_run=lora_run)
    err(_("starting {backend} server {id} for {model} on {url}", backend=record.backend, id=record.id,
          model=record.model, url=record.url))
    if args.no_wait:
        if args.json:
            emit_json(record.summary())
        return EXIT_OK
    from cli.commands.output import StderrProgress

    # The server's own log is its progress (vLLM loads for a minute): relayed whole, --json or not.
    progress = StderrProgress(_("waiting for server {id} to answer", id=record.id), every=10.0)
    try:
        record = wait_ready(ws, record.id, timeout=args.timeout, on_line=progress.line, on_wait=progress.waiting)
    except KeyboardInterrupt:
        stop_server(ws, record.id, grace=5.0)
        err(_("start-up interrupted; server {id} stopped", id=record.id))
        return EXIT_INTERRUPTED
    from core.workspace.changes import apply_change

    apply_change(ws, record.state_change())  # as the Playground does once its server answers
    if args.json:
        data = record.summary()
        if args.show_key:
            data["api_key"] = read_api_key(ws, record)
        emit_json(data)
        return EXIT_OK
    print(_("server {id} is ready at {url}", id=record.id, url=record.url))
    print(_("model: {name}   backend: {backend}   pid: {pid}", name=record.served_name, backend=record.backend,
            pid=record.process.pid if record.process else "-"))
    print(_("API key: in {file} (mode 0600)", file=record.api_key_file))
    if args.show_key:
        print(_("API key: {key}", key=read_api_key(ws, record)))
    _print_commands(ws, record)
    return EXIT_OK


def run_servers(args) -> int:
    import time

    from core.serve.servers import list_servers

    ws = workspace(args)
    servers = list_servers(ws, include_ended=args.all)
    if args.json:
        emit_json({"servers": [s.summary() for s in servers]})
        return EXIT_OK
    if not servers:
        print(_("no server is running; start one with `devtune serve`"))
        return EXIT_OK
    for s in servers:
        started = time.strftime("%Y-%m-%d %H:%M", time.localtime(s.started))
        pid = s.process.pid if s.process else "-"
        print(f"{s.id:<32} {s.status:<8} {s.backend:<12} {s.url:<24} pid {pid:<7} {started}  {s.model}")
    return EXIT_OK


def run_stop_server(args) -> int:
    from core.serve.servers import find_server, stop_server

    ws = workspace(args)
    record = stop_server(ws, find_server(ws, args.server).id)
    if args.json:
        emit_json(record.summary())
    else:
        from core.serve.servers import status_label

        print(_("server {id}: {status}", id=record.id, status=status_label(record.status)))
    return EXIT_OK


def _stream_answer(endpoint, messages, params, *, show: bool):
    from core.serve.chat import ChatDone, stream_chat

    done = None
    for event in stream_chat(endpoint, messages, params):
        if isinstance(event, ChatDone):
            done = event
        elif show:
            sys.stdout.write(event.text)
            sys.stdout.flush()
    if show:
        sys.stdout.write("\n")
    return done


def run_chat(args) -> int:
    from core.serve.chat import ChatParams, build_messages, curl_command
    from core.serve.servers import endpoint, find_server

    ws = workspace(args)
    records = [find_server(ws, args.server)]
    if args.compare:
        records.append(find_server(ws, args.compare))
    params = ChatParams(system=args.system, temperature=args.temperature, top_p=args.top_p,
                        max_tokens=args.max_tokens, stop=list(args.stop))
    messages = build_messages(args.question, system=args.system)
    if args.curl:
        for record in records:
            print(curl_command(endpoint(ws, record), messages, params, key_file=record.api_key_file))
        return EXIT_OK
    answers = []
    for record in records:
        ep = endpoint(ws, record)
        if len(records) > 1 and not args.json:
            print(f"── {record.id} ({record.served_name})")
        done = _stream_answer(ep, messages, params, show=not args.json)
        answers.append((record, done))
        if not args.json:
            print(done.stats.line(), file=sys.stderr)
    if args.json:
        out = [{"server": r.id, "model": r.served_name, "answer": d.text, "ttft_s": d.stats.ttft_s,
                "total_s": d.stats.total_s, "tokens": d.stats.tokens, "tokens_per_s": d.stats.tokens_per_s,
                "finish_reason": d.stats.finish_reason} for r, d in answers]
        emit_json(out[0] if len(out) == 1 else {"answers": out})
    elif not answers[0][1].text:
        err(_("the model returned an empty answer"))
    return EXIT_OK


def run_verify(args) -> int:
    from core.serve.servers import endpoint, find_server
    from core.serve.verify import run_of_server, run_questions, verify

    ws = workspace(args)
    record = find_server(ws, args.server)
    questions = run_questions(ws, args.run or run_of_server(ws, record), n=args.n)

    asked = [0]

    def show(r) -> None:
        asked[0] += 1
        if args.json:  # progress on stderr; stdout holds only the report
            print(_("answered {n} of {total}", n=asked[0], total=len(questions)), file=sys.stderr, flush=True)
            return
        mark = "✓" if r.passed else "✗"
        flat = lambda text, n: " ".join(text.split())[:n]  # noqa: E731
        print(f"{mark} {r.score:.2f}  [{r.split}] {flat(r.question, 70)}")
        print("      " + _("expected: {text}", text=flat(r.expected, 110)))
        print("      " + _("answer:   {text}", text=flat(r.error or r.answer, 110)))

    report = verify(endpoint(ws, record), questions, server_id=record.id, on_result=show)
    if args.json:
        emit_json(report)
    else:
        if report.held_out_score is not None:
            print(_("held-out questions: mean chrF {score:.2f} (not part of the verdict)", score=report.held_out_score))
        print(_("score {score:.2f} — {summary}", score=report.score, summary=report.summary))
    return EXIT_OK if report.verdict else EXIT_PROBLEMS
