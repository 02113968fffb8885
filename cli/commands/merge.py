"""Step 5 commands: `devtune merge` (export a run's adapter into a full model, then check it) and
`devtune check-export` (check a merged folder again)."""

from __future__ import annotations

import sys

from core.i18n import _
from cli.commands.output import emit_json, err, workspace

from core.errors import EXIT_INTERRUPTED, EXIT_OK, EXIT_PROBLEMS


def register(sub, add_common) -> list[str]:
    p = sub.add_parser(
        "merge", help=_("merge a run's adapter into a full model (llamafactory-cli export) and check it"),
        description=_("Write configs/merge.yaml for the run (its base model, adapter, template and finetuning "
                      "type) and run `llamafactory-cli export` detached; follow its progress, then check the "
                      "merged folder: files, the chat template against the training template, and on small "
                      "models the merged logits. Ctrl-C leaves the export running. Exit 1 when the check finds "
                      "a problem."))
    add_common(p)
    p.add_argument("run", metavar="RUN", nargs="?", help=_("training run id or prefix (default: the newest)"))
    p.add_argument("--name", help=_("folder name under exports/ (default: the run id)"))
    p.add_argument("--base", metavar="MODEL",
                   help=_("base model to merge onto (default: the run's model_name_or_path)"))
    p.add_argument("--size", type=int, default=5, metavar="GB", help=_("export_size: shard size in GB (default 5)"))
    p.add_argument("--device", choices=("cpu", "auto"), default="cpu",
                   help=_("export_device: where the merge runs (default cpu)"))
    p.add_argument("--config", default="configs/merge.yaml", metavar="FILE",
                   help=_("where to write the merge YAML (default configs/merge.yaml)"))
    p.add_argument("--force", action="store_true",
                   help=_("export into a non-empty folder, and replace a merge YAML that is not devtune's"))
    p.add_argument("--no-numeric", action="store_true", help=_("skip the logits comparison"))
    p.add_argument("--detach", action="store_true", help=_("start the export and return at once"))
    p.add_argument("--gguf", action="store_true",
                   help=_("also convert the merged model to a GGUF for llama.cpp and Ollama (exports/<name>-gguf/, "
                          "with a Modelfile), and check its template and answers against the merged model"))
    p.add_argument("--quant", default="q8_0", choices=("f16", "bf16", "q8_0", "q5_k_m", "q4_k_m"),
                   help=_("the GGUF's type (default q8_0; q4_k_m and q5_k_m through llama.cpp's quantize)"))
    p.add_argument("--json", action="store_true", help=_("print the outcome as JSON"))
    p.set_defaults(handler=run_merge)

    p = sub.add_parser("check-export", help=_("check a merged model folder (files, chat template, merge numbers)"),
                       description=_("Check a merged folder against the training run it came from. A GGUF folder "
                                     "(exports/<name>-gguf) is checked against the merged folder beside it: its "
                                     "chat template, its tokens and its answers."))
    add_common(p)
    p.add_argument("export", metavar="EXPORT", nargs="?", help=_("the merged folder (default: the wizard's latest)"))
    p.add_argument("--run", help=_("check it against this training run (default: the run it was exported from, as "
                                     "recorded then)"))
    p.add_argument("--no-numeric", action="store_true", help=_("skip the logits comparison"))
    p.add_argument("--json", action="store_true", help=_("print the report as JSON"))
    p.set_defaults(handler=run_check_export)
    return ["merge", "check-export"]


def _print_report(report) -> None:
    marks = {"ok": _("ok"), "warning": _("warning"), "error": _("FAIL")}
    for f in report.findings:
        print(f"  {marks.get(f.level, f.level):<7} {f.what}" + (f": {f.detail}" if f.detail else ""))
        if f.fix:
            print("        " + _("fix: {fix}", fix=f.fix))
    from core.merge.export_check import verdict_label

    print(_("verdict: {verdict}", verdict=verdict_label(report.verdict)))


def _report_json(report) -> dict:
    data = report.model_dump(mode="json")
    data["verdict"] = report.verdict
    return data


def _print_gguf(report) -> None:
    print(_("GGUF: {path} ({mb:.1f} MB)", path=report.path, mb=report.size_bytes / 1e6))
    if report.modelfile:
        print(_("Modelfile: {path} (ollama create NAME -f {path})", path=report.modelfile))
    _print_report(report)


def _gguf_json(report) -> dict:
    return {**report.model_dump(mode="json"), "verdict": report.verdict}


def run_merge(args) -> int:
    from core.merge.export import plan_export, start_export
    from core.merge.export_check import check_export
    from core.merge.export_progress import stage_label, wait_export
    from core.train.runs import RunStatus

    ws = workspace(args)
    if args.gguf:
        from core.errors import BadInput
        from core.merge.gguf_check import preflight

        if args.detach:
            raise BadInput(_("--gguf converts the merged folder once the export ends: it cannot go with --detach"))
        preflight(args.quant)  # no llama.cpp: refused before the merge, not after it
    plan = plan_export(ws, args.run, name=args.name, export_size=args.size, export_device=args.device,
                       base_model=args.base)
    for warning in plan.warnings:
        err(_("warning: {text}", text=warning))
    record = start_export(ws, plan, force=args.force, config=args.config)
    say = lambda m: print(m, file=sys.stderr)  # noqa: E731 - progress on stderr, --json too (stdout: the report)
    say(_("export {id}: {argv}", id=record.id, argv=" ".join(record.argv)))
    if args.detach:
        if args.json:
            emit_json({"export_run": record.id, "export_dir": plan.export_dir, "status": record.status.value})
        else:
            print(_("the export runs in the background; check it later with `devtune check-export {dir}`",
                    dir=plan.export_dir))
        return EXIT_OK
    try:
        final = wait_export(ws, record.id, on_progress=lambda p: say(
            f"  [{p.fraction:4.0%}] {stage_label(p.stage):<10} {p.detail[:90]}"))
    except KeyboardInterrupt:
        err(_("stopped following; the export goes on (run {id}). Check it later with `devtune check-export {dir}`",
              id=record.id, dir=plan.export_dir))
        return EXIT_INTERRUPTED
    if final.status is not RunStatus.FINISHED:
        from core.merge.export_progress import export_progress

        progress = export_progress(ws, record.id)
        problem = progress.error or final.note
        if args.json:
            cause = progress.diagnosis.to_dict() if progress.diagnosis is not None else None
            emit_json({"export_run": record.id, "export_dir": plan.export_dir, "status": final.status.value,
                       "error": problem, "diagnosis": cause, "logs": ws.rel(ws.runs_dir / record.id)})
        else:
            err(_("the export failed: {error}", error=problem))
            if progress.diagnosis is not None:
                err(_("cause: {title}", title=progress.diagnosis.title))
                err(_("fix: {fix}", fix=progress.diagnosis.fix))
                err(_("details: devtune diagnose {id}", id=record.id))
            err(_("logs: {dir}", dir=ws.rel(ws.runs_dir / record.id)))
        return EXIT_PROBLEMS
    report = check_export(ws, plan.export_dir, template=plan.template, base_model=plan.base_model,
                          adapter=plan.adapter, run_id=plan.run_id, numeric=not args.no_numeric, progress=say)
    from core.workspace.changes import apply_change

    apply_change(ws, report.state_change())  # as the Merge step: the workspace's export, the step's mark
    gguf = None
    if args.gguf and report.verdict == "error":
        err(_("no GGUF: the merged folder's check failed; fix it and run `devtune merge --gguf` again"))
    if args.gguf and report.verdict != "error":
        from core.merge.gguf_check import make_gguf

        gguf = make_gguf(ws, plan.export_dir, args.quant, template=plan.template, run_id=plan.run_id,
                         progress=lambda p: say(f"  [{p.fraction:4.0%}] GGUF {p.stage:<9} {p.detail[:90]}"),
                         message=say)
    if args.json:
        emit_json({"export_run": record.id, "export_dir": plan.export_dir, "status": final.status.value,
                   "warnings": plan.warnings, **_report_json(report),
                   **({"gguf": _gguf_json(gguf)} if gguf is not None else {})})
    else:
        print(_("merged into {dir}", dir=plan.export_dir))
        _print_report(report)
        if gguf is not None:
            _print_gguf(gguf)
        if report.verdict != "error":
            print(_("next: devtune serve {dir}", dir=plan.export_dir))
    failed = report.verdict == "error" or (gguf is not None and gguf.verdict == "error")
    return EXIT_PROBLEMS if failed else EXIT_OK


def run_check_export(args) -> int:
    from core.merge.export_check import check_for_run
    from core.serve.plan import default_model

    from core.merge.gguf_check import check_gguf_target, is_gguf_target

    ws = workspace(args)
    target = args.export or default_model(ws)
    if is_gguf_target(ws, target):
        report = check_gguf_target(ws, target, args.run, progress=lambda m: print(m, file=sys.stderr))
        if args.json:
            emit_json(_gguf_json(report))
        else:
            _print_gguf(report)
        return EXIT_PROBLEMS if report.verdict == "error" else EXIT_OK
    report = check_for_run(ws, target, args.run, numeric=not args.no_numeric,
                           progress=lambda m: print(m, file=sys.stderr))
    if args.json:
        emit_json(_report_json(report))
    else:
        _print_report(report)
    return EXIT_PROBLEMS if report.verdict == "error" else EXIT_OK
