"""`devtune eval`: base against tuned on the held-out and training questions, and lm-evaluation-harness tasks."""

from __future__ import annotations

import sys
import time

from core.i18n import _
from cli.commands.output import emit_json, err, workspace

from core.errors import EXIT_INTERRUPTED, EXIT_OK, EXIT_PROBLEMS, EXIT_USAGE, BadInput


def register(sub, add_common) -> list[str]:
    p = sub.add_parser(
        "eval", help=_("the tuned model against its base: held-out and training questions scored, optional judge "
                       "and lm-eval tasks"),
        description=_("Ask every held-out question of the dataset (N_eval, made by `devtune data register FILE "
                      "--name N --holdout 0.1`) and a seeded sample of its training questions to the tuned model and "
                      "to its base, concurrently, and score every answer against the reference: chrF, BLEU, ROUGE-L "
                      "and exact match, and optionally a judge model's 1-5 grade. Base and tuned come from one vLLM "
                      "server that serves a LoRA run beside its base (`devtune serve --lora RUN`), or from two "
                      "servers (--base-server, --tuned-server: ids or URLs). For a RUN with no server running, "
                      "devtune starts what it needs (the base with the adapter beside it where vLLM can serve it, "
                      "else the merged export and the base, merging first) and stops them afterwards "
                      "(--keep-servers leaves them running). Per-row answers and scores are kept in "
                      ".devtune/evals/<id>/ with report.md; --show prints a saved one again. Exit 0 when the tuned "
                      "model is not worse than its base (by more than 0.05 chrF) on the held-out questions (the "
                      "training ones when no held-out question was asked) and every answer came back; 1 when it "
                      "is worse or was not measured; 2 for bad input or no server."))
    add_common(p)
    p.add_argument("ref", metavar="RUN_OR_MODEL", nargs="?",
                   help=_("a training run (the server that serves its adapter) or a merged model folder (its "
                          "server and its base's)"))
    p.add_argument("--dataset", metavar="N", help=_("the registered dataset (default: the run's training dataset)"))
    p.add_argument("--train-sample", type=int, default=20, metavar="K",
                   help=_("training questions to ask, drawn with --seed (default 20)"))
    p.add_argument("--seed", type=int, default=0, help=_("seed of the training sample (default 0)"))
    p.add_argument("--server", metavar="ID", help=_("a server that serves the base and the adapter (--lora)"))
    p.add_argument("--base-server", metavar="ID_OR_URL", help=_("the base model's server: a server id or a URL"))
    p.add_argument("--tuned-server", metavar="ID_OR_URL", help=_("the tuned model's server: a server id or a URL"))
    p.add_argument("--keep-servers", action="store_true",
                   help=_("leave the servers this eval starts running afterwards (default: stopped)"))
    p.add_argument("--base-model", metavar="NAME", help=_("the model name to ask at --base-server"))
    p.add_argument("--tuned-model", metavar="NAME", help=_("the model name to ask at --tuned-server"))
    p.add_argument("--api-key-env", metavar="VAR", default="DEVTUNE_EVAL_KEY",
                   help=_("the variable that holds the key for server URLs (default DEVTUNE_EVAL_KEY)"))
    p.add_argument("--concurrency", type=int, default=8, metavar="N", help=_("requests at a time (default 8)"))
    p.add_argument("--judge-url", metavar="URL", help=_("an OpenAI-compatible server whose model grades the answers"))
    p.add_argument("--judge-model", metavar="M", help=_("the judge's model name"))
    p.add_argument("--judge-temperature", type=float, default=0.0, metavar="T",
                   help=_("the judge's sampling temperature (default 0: greedy)"))
    p.add_argument("--judge-key-env", metavar="VAR", default="DEVTUNE_JUDGE_KEY",
                   help=_("the variable that holds the judge's key (default DEVTUNE_JUDGE_KEY)"))
    p.add_argument("--lm-eval", metavar="TASKS", help=_("lm-evaluation-harness tasks, comma-separated (ceval-valid, "
                                                        "cmmlu, or your own with --include-path)"))
    p.add_argument("--include-path", metavar="DIR", help=_("a folder of your own lm-eval task YAML files"))
    p.add_argument("--lm-eval-api", choices=("completions", "chat"), default="completions",
                   help=_("completions (multiple-choice and generation tasks) or chat (generation tasks only)"))
    p.add_argument("--lm-eval-limit", type=int, metavar="N", help=_("rows per lm-eval task (default: all)"))
    p.add_argument("--lm-eval-tokenizer", metavar="DIR",
                   help=_("a local tokenizer folder for lm-eval (default: the served model's folder)"))
    p.add_argument("--show", nargs="?", const="latest", metavar="ID",
                   help=_("print a saved evaluation (default: the latest) and exit by its verdict; asks nothing"))
    p.add_argument("--json", action="store_true", help=_("print the report as JSON"))
    p.set_defaults(handler=run_eval_command)
    return ["eval"]


def _dataset(ws, args, targets) -> str:
    if args.dataset:
        return args.dataset
    from core.eval.questions import EvalInputError
    from core.merge.export import ExportError
    from core.train.run_facts import find_train_run, read_train_facts
    from core.train.runs import RunError

    try:
        facts = read_train_facts(ws, find_train_run(ws, targets.run or args.ref))
    except (ExportError, RunError) as exc:
        raise EvalInputError(_("name the dataset with --dataset N (no training run to read it from: {error})",
                               error=str(exc))) from exc
    if not facts.dataset:
        raise EvalInputError(_("the run's train YAML names no dataset; name one with --dataset N"))
    return facts.dataset[0]


class _Progress:
    def __init__(self) -> None:
        self.tty = sys.stderr.isatty()
        self.last = 0.0
        self.phase = ""

    def __call__(self, p) -> None:
        now = time.monotonic()
        if p.phase == self.phase and now - self.last < (0.2 if self.tty else 5.0) and p.done < p.total:
            return
        self.last, self.phase = now, p.phase
        end = "" if self.tty and p.phase == "ask" else "\n"
        print(("\r  " if self.tty else "  ") + p.line() + "   ", end=end, file=sys.stderr, flush=True)


def _render(report, args) -> int:
    """The report as text or JSON; the exit code is core's verdict (EvalVerdict.ok)."""
    if args.json:
        emit_json(report.to_json())
    else:
        print("\n".join(report.lines()))
        print(_("report: {file}", file=f"{report.folder}/report.md"))
    return EXIT_OK if report.verdict.ok else EXIT_PROBLEMS


def _show_saved(args) -> int:
    from core.eval.eval_report import saved_eval

    return _render(saved_eval(workspace(args), None if args.show == "latest" else args.show).report, args)


def run_eval_command(args) -> int:
    from core.eval.questions import EvalInputError
    from core.eval.servers_needed import eval_servers

    if args.show:
        return _show_saved(args)
    if args.train_sample < 0 or args.concurrency < 1:
        raise BadInput(_("--train-sample must be 0 or more and --concurrency at least 1"))
    if bool(args.judge_url) != bool(args.judge_model):
        raise BadInput(_("name the judge with both --judge-url and --judge-model"))
    ws = workspace(args)
    from core.workspace.changes import apply_change

    say = lambda m: print(m, file=sys.stderr, flush=True)  # noqa: E731 - what it starts, on stderr (--json too)
    try:
        servers = eval_servers(ws, args.ref, server=args.server, base_server=args.base_server,
                               tuned_server=args.tuned_server, base_model=args.base_model,
                               tuned_model=args.tuned_model, key_env=args.api_key_env, keep=args.keep_servers,
                               say=say)
        for change in servers.changes:  # a merge made for this eval: the workspace's export, as `devtune merge`
            apply_change(ws, change)
        with servers:
            report = _evaluate(ws, args, servers.targets)
        apply_change(ws, servers.state_change(report))
    except EvalInputError as exc:
        print(file=sys.stderr)
        err(str(exc))
        return EXIT_USAGE
    except KeyboardInterrupt:
        err(_("interrupted; nothing was saved"))
        return EXIT_INTERRUPTED
    print(file=sys.stderr)
    return _render(report, args)


def _evaluate(ws, args, targets):
    from core.eval.ask import Judge
    from core.eval.compare import EvalOptions, run_eval
    from core.eval.harness import HarnessOptions
    from core.eval.judge import judge_endpoint, judge_prompt_file, load_rubric

    dataset = _dataset(ws, args, targets)
    judge = None
    if args.judge_url:
        rubric_file = judge_prompt_file(ws.configs_dir)
        judge = Judge(judge_endpoint(args.judge_url, args.judge_model, args.judge_key_env), load_rubric(rubric_file),
                      ws.rel(rubric_file), temperature=args.judge_temperature)
    harness = HarnessOptions(tasks=[t for t in args.lm_eval.split(",") if t.strip()],
                             include_path=args.include_path, api=args.lm_eval_api, limit=args.lm_eval_limit,
                             tokenizer=args.lm_eval_tokenizer) if args.lm_eval else None
    options = EvalOptions(train_sample=args.train_sample, seed=args.seed, concurrency=args.concurrency,
                          judge=judge, harness=harness)
    print(_("base: {base} · tuned: {tuned} · dataset {dataset}", base=f"{targets.base.endpoint.model} "
            f"({targets.base.endpoint.url})", tuned=f"{targets.tuned.endpoint.model} "
            f"({targets.tuned.endpoint.url})", dataset=dataset), file=sys.stderr)
    if judge:
        print(_("judge: {model} at {url}; rubric {file}", model=judge.endpoint.model, url=judge.endpoint.url,
                file=judge.rubric_file), file=sys.stderr)
    return run_eval(ws, targets, dataset, options, progress=_Progress()).report
