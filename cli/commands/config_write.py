"""`devtune config init` and `devtune config edit`: write a training config from a preset or a YAML, or change
settings of an existing one, and the rendering of a config that `config show` shares with them."""

from __future__ import annotations

import argparse

from core.i18n import _
from cli.commands.output import emit_json, workspace

from core.errors import EXIT_OK, EXIT_PROBLEMS, BadInput


def _add_setting_flags(parser) -> None:
    """The settings `config init` puts on its preset and `config edit` on the existing config."""
    parser.add_argument("--model", metavar="PATH_OR_ID", help=_("model folder (workspace-relative) or hub id"))
    parser.add_argument("--template", metavar="NAME", help=_("LLaMA-Factory chat template"))
    parser.add_argument("--dataset", metavar="NAMES",
                      help=_("dataset name(s) from dataset_info.json, comma-separated"))
    parser.add_argument("--method", choices=("lora", "qlora", "full", "freeze"), help=_("fine-tuning method"))
    parser.add_argument("--stage", choices=("pt", "sft", "dpo", "kto"),
                      help=_("training stage: pt (raw text), sft, dpo (preference pairs), kto (tagged answers)"))
    parser.add_argument("--pref-loss", choices=("sigmoid", "orpo", "simpo"),
                      help=_("dpo loss: sigmoid (DPO), orpo or simpo (no reference model)"))
    parser.add_argument("--adapter", metavar="PATH",
                      help=_("an adapter to start from, e.g. the SFT run's folder saves/RUN"))
    parser.add_argument("--gpus", type=int, metavar="N", help=_("GPUs per node (on a CPU preset: training processes)"))
    parser.add_argument("--nodes", type=int, metavar="N", help=_("number of nodes"))
    parser.add_argument("--master-addr", metavar="HOST", help=_("address of node 0 (multi-node)"))
    parser.add_argument("--master-port", type=int, metavar="PORT", help=_("port on node 0 (default 29500)"))
    parser.add_argument("--launcher", choices=("local", "slurm"),
                      help=_("how the nodes start: local (this machine; per-node commands) or slurm (sbatch)"))
    parser.add_argument("--partition", metavar="NAME", help=_("Slurm partition"))
    parser.add_argument("--account", metavar="NAME", help=_("Slurm account"))
    parser.add_argument("--time", metavar="LIMIT", dest="time_limit", help=_("Slurm time limit, e.g. 2-00:00:00"))
    parser.add_argument("--sbatch", metavar="LINE", action="append", dest="sbatch_extra",
                      help=_("one more #SBATCH line, e.g. --qos=high (repeat for more)"))
    parser.add_argument("--requeue", action=argparse.BooleanOptionalAction, default=None,
                      help=_("Slurm: a job stopped by its time limit or a preemption saves, requeues itself and "
                             "resumes from that checkpoint"))
    parser.add_argument("--zero", choices=("none", "2", "3"), help=_("DeepSpeed ZeRO stage"))
    parser.add_argument("--offload", action="store_true", default=None, help=_("DeepSpeed CPU offload"))
    parser.add_argument("--gpu-model", metavar="ID",
                      help=_("target GPU when none is found here (see: config presets)"))
    parser.add_argument("--report-to", metavar="TRACKERS", dest="report_to",
                      help=_("experiment trackers, comma-separated: tensorboard, mlflow, swanlab, wandb (each "
                             "local or offline, no account; files in trackers/), or none"))


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
    if getattr(args, "report_to", None) is not None:
        from core.config.trackers import UnknownTracker, parse_report_to

        try:
            parse_report_to(args.report_to)
        except UnknownTracker as exc:
            raise BadInput(f"--report-to: {exc}") from None
        update["report_to"] = args.report_to
    if args.zero:
        update["zero_stage"] = None if args.zero == "none" else int(args.zero)
    if args.offload is not None:
        update["offload"] = bool(args.offload)
    for key, arg in (("gpus_per_node", args.gpus), ("nnodes", args.nodes), ("master_addr", args.master_addr),
                     ("master_port", args.master_port), ("gpu_model", args.gpu_model),
                     ("launcher", args.launcher), ("partition", args.partition), ("account", args.account),
                     ("time_limit", args.time_limit), ("sbatch_extra", args.sbatch_extra),
                     ("requeue", args.requeue)):
        if arg is not None:
            launch[key] = arg
    if launch and spec.launch.device != "cpu":
        launch.setdefault("device", "gpu")  # a CPU preset stays on the CPU: --gpus N is N processes there
    if launch:
        update["launch"] = spec.launch.model_copy(update=launch).model_dump()
    data = {**spec.model_dump(), **update}
    from core.config.eval_loss import training_rows
    from core.config.field_rules import follow_changes

    # what the form does for the same change (QLoRA bits, ZeRO JSON, eval set, stage, eval interval)
    follow_changes(data, spec, training_rows(workspace(args), spec))
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
    from core.config.workspace_config import becomes_workspace_config, recorded_config
    from core.config.gpu_catalog import gpu_model
    from core.config.presets import PRESETS, preset_spec
    from core.config.starting_preset import starting_preset
    from core.config.yaml_in import ImportProblem, import_lf_yaml

    ws = workspace(args).ensure()
    out_path = args.output or DEFAULT_CONFIG
    as_default = becomes_workspace_config(ws, ws.rel(ws.abs(out_path)), named=args.output is not None,
                                          make_default=args.make_default)
    if args.gpu_model and gpu_model(args.gpu_model) is None:
        raise BadInput(_("unknown GPU {id}; see: devtune config presets", id=args.gpu_model))
    adopted = False
    kept: list[str] = []
    notes: list[str] = []
    try:
        recorded = recorded_config(ws, args.from_yaml) if args.from_yaml else None
        if recorded is not None:  # a YAML devtune wrote: its launch settings (nodes, GPUs) are in its record
            spec, kept = recorded.spec, recorded.kept
        elif args.from_yaml:
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
    from core.config.files import config_saved, current_config_path
    from core.config.workspace_config import workspace_config_note
    from core.workspace.changes import apply_change

    rel = ws.rel(ws.abs(out_path))
    apply_change(ws, config_saved(rel, shown, workspace_config=as_default))  # as the Config step's Ctrl+S
    outcome = EXIT_PROBLEMS if shown.errors else EXIT_OK  # written, but not trainable as it is
    if args.json:
        emit_json({"config_file": out_path, "workspace_config": current_config_path(ws), "adopted": adopted,
                   "written": saved.written if saved else [], "unchanged": saved.unchanged if saved else [],
                   "kept": kept, "notes": notes, **_preview_json(shown)})
        return outcome
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
    print(workspace_config_note(ws, rel))
    if shown.errors:
        from core.data.wording import counted

        print(_("{path} is written, but its check reports {errors}: devtune train does not start it until they "
                "are fixed (devtune train --force trains it anyway)", path=rel,
                errors=counted("error", len(shown.errors))))
    return outcome


def run_edit(args) -> int:
    """The settings given, on the config as it is (not on a preset): what a hint such as
    `devtune config edit --config configs/train.yaml --master-addr HOST` promises."""
    from core.config.files import config_saved, current_config_path, preview, save_config
    from core.config.workspace_config import workspace_config_note
    from core.workspace.changes import apply_change

    ws, loaded = _load(args)
    spec, changed = _overrides(args, loaded.spec)
    if not changed:
        raise BadInput(_("nothing to change: give the settings to change, e.g. --master-addr HOST "
                         "(devtune config edit --help)"))
    saved = save_config(ws, spec, loaded.path, force=args.force)
    shown = preview(ws, spec, loaded.path, catalog=_cached_catalog(ws))
    is_current = ws.abs(current_config_path(ws)).resolve() == ws.abs(loaded.path).resolve()
    apply_change(ws, config_saved(loaded.path, shown, workspace_config=is_current))
    outcome = EXIT_PROBLEMS if shown.errors else EXIT_OK
    if args.json:
        emit_json({"config_file": loaded.path, "written": saved.written, "unchanged": saved.unchanged,
                   **_preview_json(shown)})
        return outcome
    for path in saved.written:
        print(_("wrote {path}", path=path))
    for path in saved.unchanged:
        print(_("unchanged {path}", path=path))
    _print_findings(shown.findings, brief=True)
    _print_commands(ws, shown.commands)
    print(workspace_config_note(ws, loaded.path))
    return outcome


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
