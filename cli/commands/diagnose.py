"""`devtune diagnose [RUN | LOGFILE...] [--json]`: why a training run failed, with the evidence and the fix.

With no argument: the newest failed run, a training run or a merge's export run. An argument that is not a file or folder is a run id
(or a unique prefix), as `monitor`, `stop`, `resume` and `merge` take it; the run's exit code and
whether it was stopped on request come from its record."""

from __future__ import annotations

import sys

from core.i18n import _, _n
from cli.commands.output import emit_json
from core.errors import EXIT_OK, EXIT_PROBLEMS, BadInput


def register(sub, add_common) -> list[str]:
    p = sub.add_parser(
        "diagnose",
        help=_("explain why a training run or an export failed, from its logs"),
        description=_("Read training logs (a run id, files, or run folders holding stderr.log and stdout.log; "
                      "default: the newest failed run) and list the known failures found, most likely first, "
                      "each with the log lines that show it and the fix. "
                      "Exit codes: 0 nothing found, 1 something found, 2 a file or run cannot be read."),
    )
    add_common(p)
    p.add_argument("logs", nargs="*", metavar="RUN|LOGFILE",
                   help=_("a run id or prefix, log files or run folders (default: the newest failed run)"))
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


class _NothingToDiagnose(Exception):
    pass


def _run_to_diagnose(args):
    """The run `devtune diagnose` means: the one named, or the newest failed one (None: logs were named)."""
    from pathlib import Path

    from core.train.runs import RunError, RunStatus, find_run, list_runs
    from cli.commands.output import workspace

    ws = workspace(args)
    if not args.logs:
        failed = [r for r in list_runs(ws) if r.kind in ("train", "export") and r.status is RunStatus.FAILED]
        if not failed:
            raise _NothingToDiagnose(_("no failed training or export run in {path}; `devtune runs` lists the "
                                       "runs, and `devtune diagnose RUN` reads any of them", path=str(ws.root)))
        return ws, failed[0]
    if len(args.logs) == 1 and not Path(args.logs[0]).exists():
        try:
            return ws, find_run(ws, args.logs[0])
        except RunError as exc:
            raise RunError(_("{arg} is neither a file nor a run: {error}", arg=args.logs[0], error=str(exc))) from exc
    return ws, None


def run_diagnose(args) -> int:
    from core.train.failures import diagnose_files, diagnose_record
    from core.train.runs import run_dir

    try:
        ws, record = _run_to_diagnose(args)
    except _NothingToDiagnose as exc:
        print(str(exc))
        return EXIT_OK
    try:
        if record is not None:
            directory = run_dir(ws, record.id)
            paths = [p for p in (directory / "stderr.log", directory / "stdout.log") if p.exists()]
            print(_("run {id} ({status})", id=record.id, status=_status(record)), file=sys.stderr)
            found = diagnose_record(ws, record, exit_code=args.exit_code, stop_requested=args.stopped)
        else:
            paths = _expand(args.logs)
            found = diagnose_files(paths, exit_code=args.exit_code, stop_requested=args.stopped)
    except OSError as exc:
        raise BadInput(_("cannot read {file}: {error}", file=getattr(exc, "filename", None) or "",
                         error=exc.strerror or exc) if getattr(exc, "filename", None) else str(exc)) from exc
    if args.json:
        emit_json({"diagnoses": [d.to_dict() for d in found]})
        return EXIT_PROBLEMS if found else EXIT_OK
    if not found:
        print(_n("No known failure found in {n} file.", "No known failure found in {n} files.", len(paths)))
        return EXIT_OK
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
    return EXIT_PROBLEMS


def _status(record) -> str:
    from core.train.runs import status_label

    return status_label(record.status) + (f": {record.note}" if record.note else "")
