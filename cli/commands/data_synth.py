"""`devtune data synth`: question–answer pairs generated from documents by a server (core/data/synth), the
`data` command's subcommand that has the most options of its own."""

from __future__ import annotations

import sys
import time

from core.i18n import _
from cli.commands.output import emit_json, err, given_path as _path


def synth_parser(dsub, add_common) -> None:
    syn = dsub.add_parser(
        "synth", help=_("question–answer pairs generated from documents (md, txt, html, docx, pptx, epub, xlsx, pdf) by a server"),
        description=_("Read the documents (folders are walked), cut them into chunks by headings and a token "
                      "budget, ask an OpenAI-compatible server for the questions a customer would ask about each "
                      "chunk and an answer grounded in it (JSON-schema structured output), keep the good pairs and "
                      "write alpaca JSON Lines, a rejects file with reasons and a provenance file. Every reply is "
                      "journaled beside OUT: an interrupted run, run again, sends nothing twice. Prompts are "
                      "WORKSPACE/configs/synth/*.md. Exit 0 when rows were written, 1 when none passed, 2 for bad "
                      "input (an unreadable document named, nothing readable at all, no server); an unreadable document inside a "
                      "folder is skipped, with its reason."))
    add_common(syn)
    syn.add_argument("sources", nargs="+", metavar="SRC", help=_("documents or folders of documents"))
    syn.add_argument("-o", "--output", metavar="OUT", help=_("the JSON Lines file to write, e.g. data/NAME.jsonl"))
    syn.add_argument("--server", metavar="ID", help=_("a server devtune started (default: the active one)"))
    syn.add_argument("--api-base", metavar="URL", help=_("any OpenAI-compatible server instead, e.g. "
                                                         "http://host:8000/v1"))
    syn.add_argument("--model", metavar="NAME", help=_("the model name to ask (default: the server's only one)"))
    syn.add_argument("--api-key-env", metavar="VAR", default="OPENAI_API_KEY",
                     help=_("the environment variable that holds the key for --api-base (default OPENAI_API_KEY)"))
    syn.add_argument("--concurrency", type=int, default=8, metavar="N", help=_("requests at a time (default 8)"))
    syn.add_argument("--max-requests", type=int, metavar="N", help=_("stop after N requests (every attempt counts)"))
    syn.add_argument("--max-tokens", type=int, metavar="N",
                     help=_("stop before prompt + completion tokens pass N (the server's usage)"))
    syn.add_argument("--reply-tokens", type=int, default=512, metavar="N",
                     help=_("max_tokens of one reply (default 512)"))
    syn.add_argument("--questions", type=int, default=3, metavar="N", help=_("questions per chunk (default 3)"))
    syn.add_argument("--temperature", type=float, default=0.7, metavar="T", help=_("sampling temperature (0.7)"))
    syn.add_argument("--seed", type=int, metavar="N", help=_("the server's sampling seed, for replies that repeat"))
    syn.add_argument("--chunk-tokens", type=int, default=512, metavar="N",
                     help=_("token budget of a chunk (default 512)"))
    syn.add_argument("--overlap", type=int, default=48, metavar="N",
                     help=_("tokens a long section's chunks share (default 48)"))
    syn.add_argument("--min-grounding", type=float, default=0.5, metavar="S",
                     help=_("drop answers whose grounding score (share of their terms found in the chunk) is below "
                            "S (default 0.5)"))
    syn.add_argument("--chunks", action="store_true", help=_("only list the chunks (nothing is sent)"))
    syn.add_argument("--force", action="store_true", help=_("replace OUT if it exists (the journal is kept)"))
    syn.add_argument("--json", action="store_true", help=_("print the summary as JSON"))
    syn.set_defaults(handler=run_synth)


class _SynthProgress:
    """chunks done, pairs, tokens/s and errors on stderr: one line redrawn on a terminal, a line every
    five seconds otherwise."""

    def __init__(self) -> None:
        self.tty = sys.stderr.isatty()
        self.last = 0.0

    def __call__(self, p) -> None:
        now = time.monotonic()
        if now - self.last < (0.2 if self.tty else 5.0):
            return
        self.last = now
        if self.tty:
            print("\r  " + p.line() + "   ", end="", file=sys.stderr, flush=True)
        else:
            print("  " + p.line(), file=sys.stderr, flush=True)

    def done(self, p=None) -> None:
        if self.tty:
            print("\r" + " " * 100 + "\r", end="", file=sys.stderr)
        if p is not None:
            print("  " + p.line(), file=sys.stderr, flush=True)


def _sources(args) -> list:
    from pathlib import Path

    from cli.commands.output import workspace

    out = []
    for src in args.sources:
        p = Path(src).expanduser()
        if not p.is_absolute() and not p.exists():
            candidate = workspace(args).abs(p)
            p = candidate if candidate.exists() else p
        out.append(p)
    return out


def run_synth(args) -> int:
    """Flags → a `SynthRequest`; the generation is core's (`synthesize`); its errors are said once by main()."""
    from core.data.synth.generate import SynthOptions
    from core.data.synth.pipeline import SynthRequest, plan_chunks, skipped_lines, synthesize
    from core.data.wording import counted
    from core.errors import EXIT_INTERRUPTED, EXIT_OK, EXIT_PROBLEMS, BadInput
    from cli.commands.output import workspace

    for name in ("concurrency", "reply_tokens", "questions"):
        if getattr(args, name) < 1:
            raise BadInput(_("--{name} must be at least 1", name=name.replace("_", "-")))
    if args.chunks:
        plan = plan_chunks(_sources(args), budget=args.chunk_tokens, overlap=args.overlap)
        for line in skipped_lines(plan.skipped):
            print(line, file=sys.stderr)
        return _print_chunks(args, plan)
    if not args.output:
        raise BadInput(_("name the file to write with -o data/NAME.jsonl (or list the chunks with --chunks)"))
    options = SynthOptions(questions=args.questions, concurrency=args.concurrency, max_requests=args.max_requests,
                           max_tokens=args.max_tokens, reply_tokens=args.reply_tokens, temperature=args.temperature,
                           seed=args.seed)
    request = SynthRequest(_sources(args), _path(args, "output"), options, args.min_grounding, server=args.server,
                           api_base=args.api_base, model=args.model, key_env=args.api_key_env,
                           budget=args.chunk_tokens, overlap=args.overlap)
    progress = _SynthProgress()
    asking = []

    def started(start) -> None:
        asking.append(start)
        for line in skipped_lines(start.plan.skipped):
            print(line, file=sys.stderr)
        print(_("{chunks} from {docs} → {model} at {url} ({n} at a time); prompts in {prompts}",
                chunks=counted("chunk", len(start.plan.chunks)), docs=counted("document", len(start.plan.documents)),
                model=start.endpoint.model, url=start.endpoint.url, n=options.concurrency,
                prompts=start.prompts.folder), file=sys.stderr)

    try:
        report = synthesize(workspace(args), request, force=args.force, started=started, progress=progress)
    except KeyboardInterrupt:
        progress.done()
        if not asking:
            raise  # nothing was asked yet: main() says "interrupted"
        err(_("interrupted; every reply so far is in the journal — run the same command again to carry on"))
        return EXIT_INTERRUPTED
    except BaseException:
        progress.done()
        raise
    progress.done(report.progress)
    if args.json:
        emit_json(report.to_json())
    else:
        print("\n".join(report.lines()))
    return EXIT_OK if report.rows else EXIT_PROBLEMS


def _print_chunks(args, plan) -> int:
    from core.data.wording import counted
    from core.errors import EXIT_OK

    if args.json:
        emit_json({"documents": [{"file": d.path, "kind": d.kind, "chars": len(d.text), "pages": len(d.pages) or None,
                                  "chunks": n} for d, n in zip(plan.documents, plan.per_document().values())],
                   "chunks": [{"file": c.doc, "index": c.index, "heading": c.heading, "tokens": c.tokens,
                               "page": c.page, "language": c.language, "start": c.start, "end": c.end,
                               "text": c.text} for c in plan.chunks],
                   "skipped": [{"file": f, "reason": why} for f, why in plan.skipped]})
        return EXIT_OK
    for d, n in zip(plan.documents, plan.per_document().values()):
        print(_("{file}: {kind} · {chars} · {chunks}", file=d.path, kind=d.kind,
                chars=counted("character", len(d.text)), chunks=counted("chunk", n)))
    for c in plan.chunks:
        page = f" p.{c.page}" if c.page else ""
        print(f"  {c.index:>4} {c.tokens:>5}t{page:<6} {c.heading[:40]:<40}  {c.preview(60)}")
    return EXIT_OK
