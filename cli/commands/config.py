"""`devtune config ...`: write, show, check and launch-print the LLaMA-Factory training config.

    devtune config init [--preset NAME | --from-yaml FILE] [--gpus N --nodes N --master-addr HOST ...]
    devtune config show [--json]
    devtune config check [--json] [--no-llamafactory]      exit 1 when there are errors
    devtune config command [--json] [--node-rank N]        the launch command, one per node
    devtune config export FILE [--force]
    devtune config presets [--json]
"""

from __future__ import annotations

import sys

from core.i18n import _, _n
from cli.commands.output import emit_json, workspace

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
    init.add_argument("--output", metavar="PATH", default="configs/train.yaml",
                      help=_("where to write (default: %(default)s)"))
    init.add_argument("--force", action="store_true",
                      help=_("replace a file devtune did not write (or one edited since)"))
    init.add_argument("--model", metavar="PATH_OR_ID", help=_("model folder (workspace-relative) or hub id"))
    init.add_argument("--template", metavar="NAME", help=_("LLaMA-Factory chat template"))
    init.add_argument("--dataset", metavar="NAMES",
                      help=_("dataset name(s) from dataset_info.json, comma-separated"))
    init.add_argument("--method", choices=("lora", "qlora", "full", "freeze"), help=_("fine-tuning method"))
    init.add_argument("--stage", choices=("pt", "sft", "dpo", "kto"),
                      help=_("training stage: pt (raw text), sft, dpo (preference pairs), kto (tagged answers)"))
    init.add_argument("--pref-loss", choices=("sigmoid", "orpo", "simpo"),
                      help=_("dpo loss: sigmoid (DPO), orpo or simpo (no reference model)"))
    init.add_argument("--adapter", metavar="PATH",
                      help=_("an adapter to start from, e.g. the SFT run's folder saves/RUN"))
    init.add_argument("--gpus", type=int, metavar="N", help=_("GPUs per node (on a CPU preset: training processes)"))
    init.add_argument("--nodes", type=int, metavar="N", help=_("number of nodes"))
    init.add_argument("--master-addr", metavar="HOST", help=_("address of node 0 (multi-node)"))
    init.add_argument("--master-port", type=int, metavar="PORT", help=_("port on node 0 (default 29500)"))
    init.add_argument("--launcher", choices=("local", "slurm"),
                      help=_("how the nodes start: local (this machine; per-node commands) or slurm (sbatch)"))
    init.add_argument("--partition", metavar="NAME", help=_("Slurm partition"))
    init.add_argument("--account", metavar="NAME", help=_("Slurm account"))
    init.add_argument("--time", metavar="LIMIT", dest="time_limit", help=_("Slurm time limit, e.g. 2-00:00:00"))
    init.add_argument("--sbatch", metavar="LINE", action="append", dest="sbatch_extra",
                      help=_("one more #SBATCH line, e.g. --qos=high (repeat for more)"))
    init.add_argument("--zero", choices=("none", "2", "3"), help=_("DeepSpeed ZeRO stage"))
    init.add_argument("--offload", action="store_true", default=None, help=_("DeepSpeed CPU offload"))
    init.add_argument("--gpu-model", metavar="ID",
                      help=_("target GPU when none is found here (see: config presets)"))
    init.add_argument("--json", action="store_true", help=_("print the result as JSON"))
    init.set_defaults(handler=run_init)

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


# ---- init ----------------------------------------------------------------------------------------

def _overrides(args, spec):
    from core.config.spec import TrainSpec

    update: dict = {}
    launch: dict = {}
    if args.model:
        update["model_name_or_path"] = args.model
        if not args.template:
            update["template"] = _model_template(args)
    if args.template:
        update["template"] = args.template
    if args.dataset:
        update["dataset"] = [d.strip() for d in args.dataset.split(",") if d.strip()]
    if args.method:
        update["finetuning_type"] = args.method
    if args.zero:
        update["zero_stage"] = None if args.zero == "none" else int(args.zero)
    if args.offload is not None:
        update["offload"] = bool(args.offload)
    for key, arg in (("gpus_per_node", args.gpus), ("nnodes", args.nodes), ("master_addr", args.master_addr),
                     ("master_port", args.master_port), ("gpu_model", args.gpu_model),
                     ("launcher", args.launcher), ("partition", args.partition), ("account", args.account),
                     ("time_limit", args.time_limit), ("sbatch_extra", args.sbatch_extra)):
        if arg is not None:
            launch[key] = arg
    if launch and spec.launch.device != "cpu":
        launch.setdefault("device", "gpu")  # a CPU preset stays on the CPU: --gpus N is N processes there
    if launch:
        update["launch"] = spec.launch.model_copy(update=launch).model_dump()
    data = {**spec.model_dump(), **update}
    from core.config.field_rules import follow_changes

    follow_changes(data, spec)  # what the form does for the same change (QLoRA bits, ZeRO JSON, eval set)
    spec = TrainSpec.model_validate(data)
    if args.stage or args.pref_loss or args.adapter:
        from core.config.stages import with_stage

        spec = with_stage(spec, args.stage or ("dpo" if args.pref_loss else spec.stage), pref_loss=args.pref_loss,
                          adapter=args.adapter)
        update["stage"] = spec.stage
    return spec, bool(update)


def _cached_catalog(ws):
    """LLaMA-Factory's template list as last read (`config check` refreshes it), else the built-in one."""
    from core.config.templates import load_catalog

    return load_catalog(ws.cache_dir / "lf_templates.json", cached_only=True)


def _model_template(args) -> str | None:
    """The model's own template (LLaMA-Factory's map when cached, else devtune's rules); None if unknown."""
    from core.config.templates import default_template

    ws = workspace(args)
    return default_template(args.model, _cached_catalog(ws), ws.root)


def run_init(args) -> int:
    from pydantic import ValidationError

    from core.config.files import DEFAULT_CONFIG, preview, record_sidecar, save_config
    from core.config.gpu_catalog import gpu_model
    from core.config.presets import PRESETS, preset_spec
    from core.config.starting_preset import starting_preset
    from core.config.yaml_in import ImportProblem, import_lf_yaml

    ws = workspace(args).ensure()
    out_path = args.output or DEFAULT_CONFIG
    if args.gpu_model and gpu_model(args.gpu_model) is None:
        raise BadInput(_("unknown GPU {id}; see: devtune config presets", id=args.gpu_model))
    adopted = False
    kept: list[str] = []
    notes: list[str] = []
    try:
        if args.from_yaml:
            source = ws.abs(args.from_yaml)
            result = import_lf_yaml(source, root=ws.root)
            spec, kept, notes = result.spec, result.kept, result.notes
        else:
            name = args.preset or starting_preset(ws)
            if name not in PRESETS:
                raise BadInput(_("unknown preset {name}; choose one of {names}", name=name, names=", ".join(PRESETS)))
            state = ws.load_state()
            spec = preset_spec(name, [state.dataset_name] if state.dataset_name else None)
        spec, changed = _overrides(args, spec)
        if not (args.from_yaml and ws.abs(out_path).resolve() == ws.abs(args.from_yaml).resolve() and not changed):
            from core.config.eval_loss import wire_eval_loss

            spec = wire_eval_loss(ws, spec)  # the held-out set of the dataset, for the eval loss
        if args.from_yaml and ws.abs(out_path).resolve() == ws.abs(args.from_yaml).resolve() and not changed:
            record_sidecar(ws, spec, out_path)  # the person's own file, adopted as it is
            adopted = True
            saved = None
        else:
            saved = save_config(ws, spec, out_path, force=args.force)
    except ImportProblem as exc:
        raise BadInput(_("cannot import {path}: {error}", path=args.from_yaml, error=str(exc))) from exc
    except ValidationError as exc:
        first = exc.errors()[0]
        raise BadInput(_("{key}: {error}", key=".".join(str(p) for p in first["loc"]), error=first["msg"])) from exc
    shown = preview(ws, spec, out_path, catalog=_cached_catalog(ws))
    from core.config.files import config_saved
    from core.workspace.changes import apply_change

    apply_change(ws, config_saved(ws.rel(ws.abs(out_path)), shown))  # as the Config step's Ctrl+S
    if args.json:
        emit_json({"config_file": out_path, "adopted": adopted, "written": saved.written if saved else [],
                   "unchanged": saved.unchanged if saved else [], "kept": kept, "notes": notes,
                   **_preview_json(shown)})
        return EXIT_OK
    if adopted:
        print(_("adopted {path} as it is (not rewritten)", path=out_path))
    else:
        for path in saved.written:
            print(_("wrote {path}", path=path))
        for path in saved.unchanged:
            print(_("unchanged {path}", path=path))
    if kept:
        print(_("kept as imported (devtune does not model them): {keys}", keys=", ".join(kept)))
    for note in notes:
        print(f"  {note}")
    _print_findings(shown.findings, brief=True)
    _print_commands(ws, shown.commands)
    return EXIT_OK


# ---- show / check / command / export -------------------------------------------------------------

def _load(args):
    """The workspace and its config; a missing or unreadable config is core's error (exit 2, said by main)."""
    from core.config.files import load_config

    ws = workspace(args)
    return ws, load_config(ws, getattr(args, "config", None))


def _preview_json(shown) -> dict:
    import json
    from dataclasses import asdict

    from core.config.files import summary_line

    fit = shown.fit
    return {
        "summary": summary_line(shown),
        "spec": shown.spec.model_dump(mode="json"),
        "yaml": shown.yaml,
        "deepspeed_file": shown.deepspeed_path,
        "deepspeed": json.loads(shown.deepspeed_json) if shown.deepspeed_json else None,
        "commands": [{"node_rank": c.node_rank, "env": c.env, "argv": c.argv, "text": c.text} for c in shown.commands],
        "fit": None if fit is None else {
            "verdict": fit.verdict, "per_device_bytes": fit.per_device_bytes, "capacity_bytes": fit.capacity_bytes,
            "device": fit.device, "devices": fit.devices, "seq_len": fit.seq_len, "micro_batch": fit.micro_batch,
            "host_bytes": fit.host_bytes, "trainable_params": fit.trainable_params, "total_params": fit.total_params,
            "parts": {p.key: p.bytes for p in fit.parts},
            "advice": [{"key": a.key, "text": a.text, "verdict": a.estimate.verdict,
                        "per_device_bytes": a.estimate.per_device_bytes} for a in shown.advice]},
        "findings": [asdict(f) for f in shown.findings],
    }


def _print_findings(findings, *, brief: bool = False) -> None:

    marks = {"error": _("error"), "warning": _("warning"), "info": _("info")}
    for f in findings:
        if brief and f.severity == "info" and not f.code.startswith(("fit.", "eval.")):
            continue
        print(f"  [{marks[f.severity]}] {f.message}")
        if f.fix:
            print(f"      → {f.fix}")


def _print_commands(ws, commands) -> None:

    print(_("run from the workspace root ({root}):", root=ws.root))
    for cmd in commands:
        print(f"  {cmd.text}")


def run_show(args) -> int:
    from core.config.files import preview, summary_line
    from core.config.memfit import human_bytes

    ws, loaded = _load(args)
    shown = preview(ws, loaded.spec, loaded.path, catalog=_cached_catalog(ws))
    if args.json:
        emit_json({"config_file": loaded.path, "edited_by_hand": loaded.edited_by_hand, **_preview_json(shown)})
        return EXIT_OK
    print(f"{loaded.path}: {summary_line(shown)}")
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
