"""`devtune config ...`: write, show, check and launch-print the LLaMA-Factory training config.

    devtune config init [--preset NAME | --from-yaml FILE] [--gpus N --nodes N --master-addr HOST ...]
                        [--output FILE [--default]]            exit 1 when its check reports errors
    devtune config edit [--config FILE] --master-addr HOST ...   change settings, keep the rest
    devtune config show [--json]
    devtune config check [--json] [--no-llamafactory]      exit 1 when there are errors
    devtune config command [--json] [--node-rank N]        the launch command, one per node
    devtune config export FILE [--force]
    devtune config presets [--json]
"""

from __future__ import annotations

import sys

from core.i18n import _, _n
from cli.commands.config_write import (_add_setting_flags, _cached_catalog, _load, _preview_json, _print_commands,
                                       _print_findings, run_edit, run_init)
from cli.commands.output import emit_json

from core.errors import EXIT_OK, EXIT_PROBLEMS, EXIT_USAGE, BadInput


def register(sub, add_common) -> list[str]:
    p = sub.add_parser("config", help=_("step 3: the LLaMA-Factory training YAML, DeepSpeed JSON and command"),
                       description=_("Write and check the training config: LoRA/QLoRA/full/freeze, template, "
                                     "precision, DeepSpeed ZeRO-2/3, one GPU, several GPUs or several nodes, with a "
                                     "memory-fit verdict. Files land in configs/ (paths relative to the workspace "
                                     "root)."))
    add_common(p)
    verbs = p.add_subparsers(dest="config_command", metavar="ACTION")
    p.set_defaults(handler=lambda args: _usage(p))

    init = verbs.add_parser("init",
                            help=_("write configs/train.yaml from a preset or an existing LLaMA-Factory YAML"))
    add_common(init)
    src = init.add_mutually_exclusive_group()
    src.add_argument("--preset", metavar="NAME",
                     help=_("cpu-demo, lora-1gpu, qlora-70b, zero3-multi-gpu, multi-node "
                            "(default: cpu-demo when the demo model is here, else lora-1gpu)"))
    src.add_argument("--from-yaml", metavar="FILE",
                     help=_("import a LLaMA-Factory YAML (unmodelled keys are kept)"))
    init.add_argument("--output", metavar="PATH",
                      help=_("where to write (default: configs/train.yaml); another file is a side file: the "
                             "workspace's config stays as it is unless --default"))
    init.add_argument("--default", action="store_true", dest="make_default",
                      help=_("make the written file the workspace's config (what devtune train and the wizard use)"))
    init.add_argument("--force", action="store_true",
                      help=_("replace a file devtune did not write (or one edited since)"))
    _add_setting_flags(init)
    init.add_argument("--json", action="store_true", help=_("print the result as JSON"))
    init.set_defaults(handler=run_init)

    edit = verbs.add_parser("edit", help=_("change settings of an existing config, keeping the rest"),
                            description=_("Change the given settings of the config (default: the workspace's) and "
                                          "write it again; every other setting stays as it is."))
    add_common(edit)
    edit.add_argument("--config", metavar="PATH", help=_("the YAML (default: the wizard's, else configs/train.yaml)"))
    edit.add_argument("--force", action="store_true", help=_("replace the YAML even if it was edited by hand"))
    _add_setting_flags(edit)
    edit.add_argument("--json", action="store_true", help=_("print the result as JSON"))
    edit.set_defaults(handler=run_edit)

    for name, text in (("show", _("show the config, its files, memory fit and command")),
                       ("check", _("check the config with devtune's rules and LLaMA-Factory's own parser")),
                       ("command", _("print the launch command (one per node)"))):
        verb = verbs.add_parser(name, help=text)
        add_common(verb)
        verb.add_argument("--config", metavar="PATH",
                          help=_("the YAML (default: the wizard's, else configs/train.yaml)"))
        verb.add_argument("--json", action="store_true", help=_("print JSON"))
        if name == "check":
            verb.add_argument("--no-llamafactory", action="store_true",
                              help=_("skip LLaMA-Factory's parser (faster)"))
        if name == "command":
            verb.add_argument("--node-rank", type=int, metavar="N", help=_("only this node's command"))
        verb.set_defaults(handler={"show": run_show, "check": run_check, "command": run_command}[name])

    export = verbs.add_parser("export", help=_("write the config as a LLaMA-Factory YAML elsewhere"))
    add_common(export)
    export.add_argument("dest", metavar="FILE")
    export.add_argument("--config", metavar="PATH", help=_("the YAML to export (default: the wizard's)"))
    export.add_argument("--force", action="store_true", help=_("replace FILE if it exists"))
    export.set_defaults(handler=run_export)

    presets = verbs.add_parser("presets", help=_("list the presets and the GPU catalogue"))
    add_common(presets)
    presets.add_argument("--json", action="store_true", help=_("print JSON"))
    presets.set_defaults(handler=run_presets)
    return ["config"]


def _usage(parser) -> int:
    parser.print_help(sys.stderr)
    return EXIT_USAGE


# ---- show / check / command / export -------------------------------------------------------------

def run_show(args) -> int:
    from core.config.files import preview, summary_line
    from core.config.memfit import human_bytes

    ws, loaded = _load(args)
    shown = preview(ws, loaded.spec, loaded.path, catalog=_cached_catalog(ws))
    if args.json:
        emit_json({"config_file": loaded.path, "edited_by_hand": loaded.edited_by_hand, **_preview_json(shown)})
        return EXIT_OK
    from core.config.workspace_config import workspace_config_note

    print(f"{loaded.path}: {summary_line(shown)}")
    print("  " + workspace_config_note(ws, loaded.path))
    if loaded.edited_by_hand:
        print(_("  (edited by hand since devtune wrote it: re-read from the file)"))
    if shown.deepspeed_path:
        print(_("  DeepSpeed: {path}", path=shown.deepspeed_path))
    if shown.fit is not None:
        parts = ", ".join(f"{p.label} {human_bytes(p.bytes)}" for p in shown.fit.parts)
        print(_("  memory per device: {parts}", parts=parts))
    print()
    print(shown.yaml, end="")
    print()
    _print_findings(shown.findings)
    _print_commands(ws, shown.commands)
    return EXIT_OK


def run_check(args) -> int:
    from core.config.full_check import check_config
    from core.config.templates import load_catalog

    ws, loaded = _load(args)
    if not args.no_llamafactory:  # a few seconds: said on stderr, --json too
        print(_("checking with LLaMA-Factory's own parser (a few seconds)..."), file=sys.stderr)
    catalog = load_catalog(ws.cache_dir / "lf_templates.json", cached_only=args.no_llamafactory)
    checked = check_config(ws, loaded.spec, loaded.path, catalog=catalog, with_llamafactory=not args.no_llamafactory)
    findings = checked.findings
    if args.json:
        from dataclasses import asdict

        emit_json({"config_file": loaded.path, "ok": not checked.errors, "findings": [asdict(f) for f in findings]})
    else:
        _print_findings(findings)
        errors = len(checked.errors)
        print(_n("{n} error", "{n} errors", errors) if errors else _("no errors"))
    return EXIT_PROBLEMS if checked.errors else EXIT_OK


def run_command(args) -> int:
    from core.config.files import node_commands

    ws, loaded = _load(args)
    commands = node_commands(loaded.spec, loaded.path)
    if args.node_rank is not None:
        if not 0 <= args.node_rank < len(commands):
            raise BadInput(_("node rank must be between 0 and {last}", last=len(commands) - 1))
        commands = [commands[args.node_rank]]
    if args.json:
        emit_json({"cwd": str(ws.root), "commands": [{"node_rank": c.node_rank, "env": c.env, "argv": c.argv,
                                                      "text": c.text} for c in commands]})
        return EXIT_OK
    print(_("# run from the workspace root: cd {root}", root=ws.root), file=sys.stderr)
    for cmd in commands:
        if len(commands) > 1 or args.node_rank is not None:
            print(_("# node {rank}", rank=cmd.node_rank))
        print(cmd.text)
    return EXIT_OK


def run_export(args) -> int:
    from pathlib import Path

    from core.config.files import export_yaml
    from core.config.yaml_out import deepspeed_path

    ws, loaded = _load(args)
    dest = Path(args.dest).expanduser()
    export_yaml(ws, loaded.spec, dest, force=args.force)
    print(_("wrote {path}", path=str(dest)))
    if loaded.spec.zero_stage is not None:
        print(_("  its deepspeed: {path} is relative to the workspace root", path=deepspeed_path(loaded.spec)))
    return EXIT_OK


def run_presets(args) -> int:
    from core.config.gpu_catalog import CATALOG, GIB
    from core.config.presets import PRESETS

    if args.json:
        emit_json({"presets": {n: p.description for n, p in PRESETS.items()},
                   "gpus": [{"id": g.id, "name": g.name, "memory_bytes": g.memory_bytes, "bf16": g.bf16}
                            for g in CATALOG]})
        return EXIT_OK
    print(_("presets:"))
    for name, preset in PRESETS.items():
        print(f"  {name:<16} {preset.description}")
    print(_("target GPUs (--gpu-model):"))
    for g in CATALOG:
        no_bf16 = "" if g.bf16 else "  " + _("(no bf16)")
        print(f"  {g.id:<10} {g.name:<38} {g.memory_bytes / GIB:>6.0f} GiB{no_bf16}")
    return EXIT_OK
