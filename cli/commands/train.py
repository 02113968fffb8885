"""Step 4 commands: `devtune train`, `runs`, `monitor`, `stop`, `resume`."""

from __future__ import annotations

import sys

from core.i18n import _
from cli.commands.output import emit_json, workspace
from core.errors import EXIT_OK, EXIT_PROBLEMS


def register(sub, add_common) -> list[str]:
    p = sub.add_parser("train", help=_("start a training run (detached; survives SSH drops)"),
                       description=_("Start `llamafactory-cli train` on the config, detached under a supervisor. "
                                     "Without --detach, follow it with a progress bar and exit with its outcome; "
                                     "Ctrl-C leaves it running."))
    add_common(p)
    p.add_argument("--config", metavar="FILE",
                   help=_("the train YAML (default: the wizard's, else configs/train.yaml)"))
    p.add_argument("--detach", action="store_true", help=_("start and return at once"))
    p.add_argument("--force", action="store_true",
                   help=_("train even though the config's check reports errors (devtune config check)"))
    p.set_defaults(handler=run_train)

    p = sub.add_parser("runs", help=_("list training runs"),
                       description=_("List the training runs; `devtune runs compare RUN RUN...` puts two or more "
                                     "side by side."))
    add_common(p)
    p.add_argument("--json", action="store_true", help=_("print JSON"))
    p.set_defaults(handler=run_runs)
    actions = p.add_subparsers(dest="runs_action", metavar="{compare}")
    c = actions.add_parser("compare", help=_("compare two or more runs side by side"),
                           description=_("The runs' status, losses, eval scores, tokens/s and duration, the "
                                         "hyperparameters that differ between them, their loss and eval-loss curves "
                                         "aligned by step, tokens seen or epoch, and where their tuned models' "
                                         "answers disagree."))
    add_common(c)
    c.add_argument("runs", metavar="RUN", nargs="+", help=_("run ids or prefixes (two or more)"))
    c.add_argument("--json", action="store_true", help=_("print JSON (with the whole curves)"))
    c.add_argument("--align", choices=("step", "tokens", "epoch"), default="step",
                   help=_("the curves' axis: step, tokens seen or epoch (default: step)"))
    c.set_defaults(handler=run_runs_compare)

    p = sub.add_parser("monitor", help=_("follow a run's progress"),
                       description=_("Print a run's progress; with --json, one JSON object per update."))
    add_common(p)
    p.add_argument("run", metavar="RUN", nargs="?", help=_("run id or prefix (default: the newest)"))
    p.add_argument("--json", action="store_true", help=_("one JSON object per update"))
    p.add_argument("--follow", action="store_true", help=_("keep following until the run ends"))
    p.set_defaults(handler=run_monitor)

    p = sub.add_parser("stop", help=_("stop a run gracefully (the adapter is saved)"))
    add_common(p)
    p.add_argument("run", metavar="RUN", help=_("run id or prefix"))
    p.add_argument("--timeout", type=float, default=120.0,
                   help=_("seconds to wait for the graceful stop (default 120)"))
    p.set_defaults(handler=run_stop)

    p = sub.add_parser("resume", help=_("resume a stopped or failed run from its last checkpoint"))
    add_common(p)
    p.add_argument("run", metavar="RUN", help=_("run id or prefix"))
    p.add_argument("--detach", action="store_true", help=_("start and return at once"))
    p.add_argument("--gpus", type=int, metavar="N",
                   help=_("resume on N GPUs (processes) per node; a ZeRO checkpoint saved by another number is "
                          "converted to DeepSpeed's universal checkpoint"))
    p.add_argument("--nodes", type=int, metavar="N", help=_("resume on N nodes (a Slurm run)"))
    p.set_defaults(handler=run_resume)
    return ["train", "runs", "monitor", "stop", "resume"]


def _record_json(ws, record) -> dict:
    return {
        "id": record.id,
        "status": record.status.value,
        "started": record.started,
        "ended": record.ended,
        "config": record.config,
        "source_config": record.source_config,
        "output_dir": record.output_dir,
        "exit_code": record.exit_code,
        "note": record.note,
        "resume_of": record.resume_of,
        "pid": record.trainer.pid if record.trainer else None,
        "host": record.host,
        "launcher": record.launcher,
        "job_id": record.job_id,
        "nodes": record.nodes,
        "stop_reason": record.stop_reason,  # the cluster asked it to save and stop: time-limit / preempted
        "segments": [s.model_dump() for s in record.segments],  # a Slurm job's starts: nodes, start, end, why
        "throughput": _speed(ws, record),
    }


def _speed(ws, record) -> dict | None:
    """The speed monitor and the Train step say (the run's snapshot): over the whole run once it ended, over the
    last minute while it goes ("over": "run" / "window")."""
    from core.train.watch import run_speed

    speed = run_speed(ws, record)
    return speed.to_json() if speed is not None else None


def run_runs(args) -> int:
    """One list of facts per run (`_record_json`); the table and the JSON are two renderings of it."""
    from core.train.runs import list_runs, status_label

    ws = workspace(args)
    rows = [_record_json(ws, r) for r in list_runs(ws) if r.kind == "train"]
    if args.json:
        emit_json({"runs": rows})
        return EXIT_OK
    if not rows:
        print(_("no runs yet; start one with `devtune train`"))
        return EXIT_OK
    import time

    for row in rows:
        started = time.strftime("%Y-%m-%d %H:%M", time.localtime(row["started"]))
        resumed = "  " + _("(resumes {id})", id=row["resume_of"]) if row["resume_of"] else ""
        print(f"{row['id']:<40} {_pad(status_label(row['status']), 9)} {started}  {row['output_dir'] or ''}  "
              f"{row['note']}{resumed}".rstrip())
    return EXIT_OK


def run_runs_compare(args) -> int:
    """core.train.run_compare decides what differs; the text and the JSON are two renderings of it."""
    from core.train.run_compare import compare_runs

    comparison = compare_runs(workspace(args), args.runs, args.align)
    if args.json:
        emit_json(comparison.to_json())
        return EXIT_OK
    from core.train.run_compare_text import comparison_lines

    print("\n".join(comparison_lines(comparison)))
    return EXIT_OK


def _pad(text: str, width: int) -> str:
    """Left-justify to `width` terminal columns (a CJK character takes two)."""
    import unicodedata

    used = sum(2 if unicodedata.east_asian_width(c) in "WF" else 1 for c in text)
    return text + " " * max(0, width - used)


def run_stop(args) -> int:
    from core.train.run_control import stop_run
    from core.train.runs import find_run, status_label

    ws = workspace(args)
    record = find_run(ws, args.run)
    if not record.active:
        print(_("{id} is not running ({status})", id=record.id, status=status_label(record.status)))
        return EXIT_OK
    final = stop_run(ws, record.id, graceful_timeout=args.timeout, progress=lambda m: print(m, file=sys.stderr))
    print(f"{final.id}: {status_label(final.status)}" + (f" — {final.note}" if final.note else ""))
    return EXIT_OK if not final.active else EXIT_PROBLEMS


def run_train(args) -> int:
    from core.train.launch import launch_training

    ws = workspace(args)
    record = launch_training(ws, args.config, say=lambda m: print(m, file=sys.stderr), force=args.force)
    return _started(ws, record, args.detach)


def run_resume(args) -> int:
    from core.train.run_control import resume_run
    from core.train.runs import find_run

    ws = workspace(args)
    record = resume_run(ws, find_run(ws, args.run).id, gpus=args.gpus, nodes=args.nodes,
                        progress=lambda m: print(m, file=sys.stderr))
    print(_("resuming from {checkpoint}", checkpoint=record.resume_checkpoint))
    return _started(ws, record, args.detach)


def _started(ws, record, detach: bool) -> int:
    print(_("started run {id} (output: {dir})", id=record.id, dir=record.output_dir))
    print("  " + _("logs: {dir}/stdout.log, stderr.log", dir=ws.rel(ws.runs_dir / record.id)))
    if detach:
        print("  " + _("follow it: devtune monitor {id} --follow    stop it: devtune stop {id}", id=record.id))
        return EXIT_OK
    from cli.commands.follow import follow_run

    return follow_run(ws, record.id, as_json=False, until_end=True, exit_with_outcome=True)


def run_monitor(args) -> int:
    from cli.commands.follow import follow_run
    from core.train.runs import find_run

    ws = workspace(args)
    record = find_run(ws, args.run)
    return follow_run(ws, record.id, as_json=args.json, until_end=args.follow, exit_with_outcome=False)

