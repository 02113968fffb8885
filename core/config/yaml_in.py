"""An existing LLaMA-Factory YAML (e.g. examples/train_lora/llama3_lora_sft.yaml) -> TrainSpec.

The file is read as LLaMA-Factory reads it (PyYAML with OmegaConf's float rule, so `1e-4` is a number).
Every key devtune models becomes a TrainSpec field; every other key is kept in `spec.extra`, written
back unchanged by core.config.yaml_out and listed in `ImportResult.kept`: nothing is dropped. `meaning(args)`
is what two argument dicts are compared by: LLaMA-Factory's defaults and nulls removed, lists joined.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from core.errors import BadInput
from core.config.deepspeed import describe_ds, stage_from_filename
from core.config.spec import LF_DEFAULTS, Launch, TrainSpec
from core.config.yaml_out import MODELED_KEYS, OMEGACONF_FLOAT
from core.i18n import _

PRECISION_KEYS = ("pure_bf16", "bf16", "fp16")
LIST_KEYS = ("dataset", "eval_dataset", "lora_target", "additional_target", "freeze_trainable_modules")


class ImportProblem(BadInput, ValueError):
    """The file cannot be imported as it is (the message says which key and why)."""


@dataclass
class ImportResult:
    spec: TrainSpec
    kept: list[str] = field(default_factory=list)  # keys devtune does not model, kept as they were
    notes: list[str] = field(default_factory=list)
    source: dict[str, Any] = field(default_factory=dict)  # the file's arguments as read


def load_lf_yaml_text(text: str) -> dict[str, Any]:
    """A LLaMA-Factory YAML as LLaMA-Factory reads it (OmegaConf's loader rules: 1e-4 is a float)."""
    import yaml

    class Loader(yaml.SafeLoader):
        pass

    Loader.add_implicit_resolver("tag:yaml.org,2002:float", OMEGACONF_FLOAT, list("-+0123456789."))
    Loader.yaml_implicit_resolvers = {
        key: [(tag, rx) for tag, rx in resolvers if tag != "tag:yaml.org,2002:timestamp"]
        for key, resolvers in Loader.yaml_implicit_resolvers.items()
    }
    try:
        data = yaml.load(text, Loader=Loader)  # noqa: S506 - a SafeLoader subclass
    except yaml.YAMLError as exc:
        raise ImportProblem(_("not valid YAML: {error}", error=str(exc).splitlines()[0])) from exc
    if data is None:
        return {}
    if not isinstance(data, dict):
        raise ImportProblem(_("a LLaMA-Factory config is a mapping of keys to values, not a {kind}",
                              kind=type(data).__name__))
    return {str(k): v for k, v in data.items()}


def import_lf_yaml(path: Path, *, root: Path | None = None, launch: Launch | None = None) -> ImportResult:
    try:
        text = Path(path).read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise ImportProblem(_("cannot read {path}: {error}", path=str(path), error=str(exc))) from exc
    return import_lf_args(load_lf_yaml_text(text), root=root, base=Path(path).parent, launch=launch)


def _joined(value: Any) -> Any:
    if isinstance(value, (list, tuple)):
        return ",".join(str(v).strip() for v in value)
    return value


def import_lf_args(data: dict[str, Any], *, root: Path | None = None, base: Path | None = None,
                   launch: Launch | None = None) -> ImportResult:
    """LLaMA-Factory arguments -> TrainSpec (+ the kept keys and notes)."""
    from core.config.lf_generation import v1_config_message, v1_keys

    if keys := v1_keys(data):  # LLaMA-Factory v1's schema: said as such, before any v0 key is missed
        raise ImportProblem(v1_config_message(keys))
    original = dict(data)
    data = dict(data)
    fields: dict[str, Any] = {}
    extra: dict[str, Any] = {}
    notes: list[str] = []

    flags = {k: data.pop(k) for k in PRECISION_KEYS if k in data}
    on = [k for k in PRECISION_KEYS if flags.get(k) is True]
    if on:
        fields["precision"] = on[0]
        extra.update({k: True for k in on[1:]})
    elif flags:
        fields["precision"] = "fp32"

    ftype = data.pop("finetuning_type", None)
    qbit, qmethod = data.pop("quantization_bit", None), data.pop("quantization_method", None)
    if ftype in (None, "lora") and qbit in (4, 8) and qmethod in (None, "bnb"):
        fields.update(finetuning_type="qlora", quantization_bit=qbit, quantization_method=qmethod)
    else:
        if ftype is not None:
            fields["finetuning_type"] = ftype
        fields.update(quantization_bit=qbit, quantization_method=qmethod)

    ds_path = data.pop("deepspeed", None)
    if ds_path is not None:
        fields["deepspeed"] = str(ds_path)
        stage, offload, how = _deepspeed_stage(str(ds_path), root, base)
        if stage in (0, 2, 3):
            fields.update(zero_stage=stage, offload=offload)
        notes.append(how)

    for key, val in data.items():
        if key in MODELED_KEYS:
            fields[key] = _joined(val) if key in LIST_KEYS and key != "dataset" else val
        else:
            extra[key] = val
    fields["extra"] = extra
    if launch is not None:
        fields["launch"] = launch
    if "export_dir" in extra and not fields.get("output_dir"):
        raise ImportProblem(_("this is an export (merge) config, for `llamafactory-cli export` and the Merge "
                              "step, not a training config"))
    if "output_dir" not in fields or not fields.get("output_dir"):
        raise ImportProblem(_("the file has no output_dir; LLaMA-Factory needs one"))
    if not fields.get("model_name_or_path"):
        raise ImportProblem(_("the file has no model_name_or_path; LLaMA-Factory needs one"))
    fields["do_train"] = fields.get("do_train")
    try:
        spec = TrainSpec.model_validate({k: v for k, v in fields.items() if v is not None or k == "do_train"})
    except ValidationError as exc:
        first = exc.errors()[0]
        where = ".".join(str(p) for p in first.get("loc", ()))
        raise ImportProblem(_("{key}: {error}", key=where, error=first.get("msg", ""))) from exc
    if ds_path is not None and launch is None:
        notes.append(_("the file does not say how many GPUs: set them (devtune config edit --gpus N)"))
    return ImportResult(spec, kept=list(extra), notes=notes, source=original)


def _deepspeed_stage(path: str, root: Path | None, base: Path | None) -> tuple[int | None, bool, str]:
    for folder in (root, base):
        if folder is None:
            continue
        candidate = Path(path) if Path(path).is_absolute() else folder / path
        try:
            stage, offload = describe_ds(json.loads(candidate.read_text(encoding="utf-8")))
            return stage, offload, _("DeepSpeed settings read from {path}", path=path)
        except (OSError, ValueError):
            continue
    stage, offload = stage_from_filename(path)
    return stage, offload, _("{path} is not in the workspace; its ZeRO stage was read from its name",
                             path=path)


def meaning(args: dict[str, Any]) -> dict[str, Any]:
    """What a set of LLaMA-Factory arguments means: defaults and nulls dropped, list-like values joined."""
    out: dict[str, Any] = {}
    for key, val in args.items():
        if key in LIST_KEYS:
            val = _joined(val)
            if isinstance(val, str):
                val = ",".join(part.strip() for part in val.split(","))
        if val is None:
            continue
        if key in LF_DEFAULTS:
            default = LF_DEFAULTS[key]
            if (isinstance(val, bool) == isinstance(default, bool)) and val == default:
                continue
        out[key] = val
    return out
