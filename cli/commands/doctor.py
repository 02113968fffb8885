"""`devtune doctor`: every environment check, with what was seen and the exact fix."""

from __future__ import annotations

import sys

from core.i18n import _
from cli.commands.output import emit_json, workspace
from core.errors import EXIT_OK, EXIT_PROBLEMS, BadInput


def register(sub, add_common) -> list[str]:
    p = sub.add_parser(
        "doctor",
        help=_("check the GPU environment (driver, groups, ROCm, torch build, libraries, vLLM, disk, shm)"),
        description=_("Run every environment check (device access, amdgpu driver, amd-smi, gfx arch, ROCm, the "
                      "torch build, HSA/HIP/ROCR variables, flash-attn, bitsandbytes, DeepSpeed, vLLM, RCCL, "
                      "toolchain, /dev/shm, disk and RAM against the planned model, Hugging Face cache; the NVIDIA "
                      "equivalents on NVIDIA). Each check shows what was found and the exact command that fixes it."),
        epilog=_("Exit codes: 0 nothing fails, 1 a check fails, 2 usage error. Categories: platform, access, "
                 "rocm, nvidia, torch, env, libraries, serving, multigpu, toolchain, system."),
    )
    add_common(p)
    p.add_argument("--json", action="store_true",
                   help=_('print {"checks": [...], "summary": {...}} on stdout'))
    p.add_argument("--only", metavar="CATEGORY", action="append", default=[],
                   help=_("run only these categories (repeat, or separate with commas)"))
    p.add_argument("--check", metavar="ID", action="append", default=[],
                   help=_("run only these checks, e.g. access.groups (repeat, or separate with commas)"))
    p.add_argument("--save", action="store_true",
                   help=_("also write the report as doctor-report-<time>.md in the workspace"))
    p.add_argument("--record", metavar="DIR",
                   help=_("also write everything the probes saw into DIR (to replay it, or attach to a ticket)"))
    p.add_argument("--replay", metavar="DIR",
                   help=_("judge a recorded machine from DIR instead of this one (nothing here is probed)"))
    p.set_defaults(handler=run_doctor_command)
    return ["doctor"]


def _split(values: list[str]) -> list[str]:
    return [part.strip() for value in values for part in value.split(",") if part.strip()]


def run_doctor_command(args) -> int:
    from core.doctor.model import CATEGORIES
    from core.doctor.registry import all_verdicts

    only, checks = _split(args.only), _split(args.check)
    unknown = [c for c in only if c not in CATEGORIES]
    if unknown:
        raise BadInput(_("unknown category {names}; choose from {choices}", names=", ".join(unknown),
                         choices=", ".join(CATEGORIES)))
    ids = {v.id for v in all_verdicts()}
    unknown = [c for c in checks if c not in ids]
    if unknown:
        raise BadInput(_("unknown check {names}; `devtune doctor --json` lists every check id",
                         names=", ".join(unknown)))

    from core.doctor.replay import run_doctor
    from core.doctor.report import render_text, save_report
    from core.doctor.runner import DoctorFinished, ProbeFinished, select_verdicts

    ws = workspace(args)
    verdicts = select_verdicts(only, checks)
    show_progress = sys.stderr.isatty()  # --json too: stdout holds only the report
    report = ev = None
    # --replay DIR, or $DEVTUNE_DOCTOR_REPLAY as in the wizard: the same run as the Doctor step's
    for event in run_doctor(ws if ws.root.is_dir() else None, verdicts, replay=args.replay):
        if isinstance(event, ProbeFinished) and show_progress:
            left = ", ".join(event.remaining)
            text = (_("probing... {n} left: {names}", n=len(event.remaining), names=left) if left
                    else _("probing... {n} left", n=len(event.remaining)))
            sys.stderr.write(f"\r\033[K{text}"[:200])
            sys.stderr.flush()
        elif isinstance(event, DoctorFinished):
            report, ev = event.report, event.evidence
    if show_progress:
        sys.stderr.write("\r\033[K")
    if args.record:
        try:
            ev.save(args.record)
        except OSError as exc:
            raise BadInput(_("could not record the evidence: {error}", error=exc)) from exc
        print(_("evidence recorded in {dir} (replay: devtune doctor --replay {dir})", dir=args.record),
              file=sys.stderr)
    if args.json:
        emit_json(report.to_dict())
    else:
        sys.stdout.write(render_text(report))
    if args.save:
        try:
            path = save_report(ws.root, report, ev)
        except OSError as exc:
            raise BadInput(_("could not save the report: {error}", error=exc)) from exc
        print(_("report saved: {path}", path=path), file=sys.stderr)
    return EXIT_PROBLEMS if report.failed else EXIT_OK
