"""`devtune diagnose LOGFILE... [--json]`: why a training run failed, with the evidence and the fix."""

from __future__ import annotations

import sys

from core.i18n import _
from tui.commands.output import emit_json, err


def register(sub, add_common) -> list[str]:
    p = sub.add_parser(
        "diagnose",
        help=_("explain why a training run failed, from its logs"),
        description=_("Read training logs (files, or run folders holding stderr.log and stdout.log) and list the "
                      "known failures found, most likely first, each with the log lines that show it and the fix. "
                      "Exit codes: 0 nothing found, 1 something found, 2 a file cannot be read."),
    )
    add_common(p)
    p.add_argument("logs", nargs="+", metavar="LOGFILE", help=_("log files or run folders"))
    p.add_argument("--json", action="store_true",
                   help=_('print {"diagnoses": [{"id", "title", "evidence", "fix"}]}'))
    p.add_argument("--exit-code", type=int, metavar="N", help=_("the trainer's exit status (137 = SIGKILL, ...)"))
    p.add_argument("--stopped", action="store_true",
                   help=_("the run was stopped on request (its abort is no failure)"))
    p.set_defaults(handler=run_diagnose)
    return ["diagnose"]


def _expand(args_logs: list[str]) -> list:
    from pathlib import Path

    paths = []
    for arg in args_logs:
        path = Path(arg)
        if path.is_dir():
            inside = [path / name for name in ("stderr.log", "stdout.log", "running_log.txt") if (path / name).exists()]
            if not inside:
                raise OSError(_("{path}: no stderr.log, stdout.log or running_log.txt in this folder", path=path))
            paths += inside
        else:
            paths.append(path)
    return paths


def run_diagnose(args) -> int:
    from core.train.failures import diagnose_files

    try:
        paths = _expand(args.logs)
        found = diagnose_files(paths, exit_code=args.exit_code, stop_requested=args.stopped)
    except OSError as exc:
        err(_("cannot read {file}: {error}", file=getattr(exc, "filename", None) or "", error=exc.strerror or exc)
            if getattr(exc, "filename", None) else str(exc))
        return 2
    if args.json:
        emit_json({"diagnoses": [d.to_dict() for d in found]})
        return 1 if found else 0
    if not found:
        print(_("No known failure found in {n} file(s).", n=len(paths)))
        return 0
    out = sys.stdout
    for n, d in enumerate(found, 1):
        out.write(f"{n}. {d.title}  [{d.id}]\n")
        for e in d.evidence:
            where = f"{e.file}:{e.line}" if e.line is not None else e.file
            out.write(f"   {where}: {e.text}\n")
        out.write(f"   {_('why')}: {d.explanation}\n")
        out.write(f"   {_('fix')}: {d.fix}\n")
        for command in d.commands:
            out.write(f"     $ {command}\n")
        out.write("\n")
    return 1
