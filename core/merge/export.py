"""Step 5, Merge: `llamafactory-cli export` for a training run, detached, with progress.

`plan_export` reads the run's train YAML (core.train.run_facts: base model, template, finetuning type,
quantization) and decides the merge: a LoRA/QLoRA adapter merges onto the unquantized base; a full or
freeze run is re-saved as is. `start_export` writes `configs/merge.yaml` (LLaMA-Factory's export YAML; a person's
own or edited file is never replaced unless asked) and launches `llamafactory-cli export
configs/merge.yaml` through core.train.runs (kind "export", cwd = the workspace), so it survives SSH drops.
Its progress, read from the export's logs, is core.merge.export_progress.
"""

from __future__ import annotations

import hashlib
import json
import sys
from dataclasses import dataclass, field
from pathlib import Path

from core.errors import BadInput
from core.files.atomic import write_atomic
from core.i18n import _
from core.train.run_facts import find_train_run, read_train_facts
from core.train.runs import RunRecord, RunStatus, list_runs, start_run, status_label
from core.workspace.layout import Workspace

MERGE_YAML = "configs/merge.yaml"
MARKER = "# written by devtune merge; sha256:"
WEIGHT_PATTERNS = ("*.safetensors", "*.bin", "*.safetensors.index.json", "*.bin.index.json", "*.pt")
ADAPTER_TYPES = ("lora", "oft")


class ExportError(BadInput):
    """The export cannot be planned or started as asked; the message says what to do."""


@dataclass
class ExportPlan:
    run_id: str
    base_model: str  # model_name_or_path for the export
    adapter: str | None  # adapter_name_or_path (None for full / freeze)
    template: str | None
    finetuning_type: str
    export_dir: str  # workspace-relative
    export_size: int = 5
    export_device: str = "cpu"
    trust_remote_code: bool = False
    warnings: list[str] = field(default_factory=list)

    def yaml_dict(self) -> dict:
        """LLaMA-Factory's export YAML (as examples/merge_lora/llama3_lora_sft.yaml). Never a
        quantization_bit: a QLoRA adapter merges onto the unquantized base."""
        d: dict = {"model_name_or_path": self.base_model}
        if self.adapter:
            d["adapter_name_or_path"] = self.adapter
        if self.template:
            d["template"] = self.template
        d["finetuning_type"] = self.finetuning_type
        if self.trust_remote_code:
            d["trust_remote_code"] = True
        d.update(export_dir=self.export_dir, export_size=self.export_size, export_device=self.export_device,
                 export_legacy_format=False)
        return d


def quantization_of(model_dir: Path) -> str | None:
    """The quantization method recorded in a local model's config.json (bnb, gptq, awq, ...), if any."""
    try:
        config = json.loads((model_dir / "config.json").read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    q = config.get("quantization_config")
    if not q:
        return None
    return str(q.get("quant_method") or ("bitsandbytes" if q.get("load_in_4bit") or q.get("load_in_8bit") else "?"))


def plan_export(ws: Workspace, run_ref: str | None = None, *, name: str | None = None, export_size: int = 5,
                export_device: str = "cpu", base_model: str | None = None) -> ExportPlan:
    if name is not None and ("/" in name or name in ("", ".", "..")):
        raise ExportError(_("the export name {name} must be a plain folder name", name=name))
    run = find_train_run(ws, run_ref)
    if run.kind != "train":
        raise ExportError(_("run {id} is a {kind} run, not a training run", id=run.id, kind=run.kind))
    if run.active:
        raise ExportError(_("run {id} is still {status}; merge it when it has finished",
                            id=run.id, status=status_label(run.status)))
    facts = read_train_facts(ws, run)
    warnings: list[str] = []
    if run.status is not RunStatus.FINISHED:
        warnings.append(_("run {id} ended as {status}: the adapter is the last one it saved",
                          id=run.id, status=status_label(run.status)))
    if not facts.output_dir or not ws.abs(facts.output_dir).is_dir():
        raise ExportError(_("the run's output_dir {dir} does not exist: nothing to merge", dir=facts.output_dir))
    base = base_model or facts.model_name_or_path
    if facts.finetuning_type in ADAPTER_TYPES:
        if not (ws.abs(facts.output_dir) / "adapter_config.json").exists():
            raise ExportError(_("no adapter_config.json in {dir}: the run saved no adapter", dir=facts.output_dir))
        adapter, model = facts.output_dir, base
        if facts.quantization_bit:
            warnings.append(_("QLoRA adapter ({bits}-bit training): it is merged onto the unquantized base "
                              "{model} in 16-bit, as LLaMA-Factory requires", bits=facts.quantization_bit, model=base))
    else:
        adapter, model = None, facts.output_dir  # full / freeze: the run's output is the whole model
    method = quantization_of(ws.abs(model)) if ws.abs(model).is_dir() else None
    if method:
        warnings.append(_("the base model {model} is quantized ({method}): LLaMA-Factory cannot merge an adapter "
                          "into it. Give the full-precision original with --base", model=model, method=method))
    export_name = name or run.id
    return ExportPlan(run_id=run.id, base_model=model, adapter=adapter, template=facts.template,
                      finetuning_type=facts.finetuning_type, export_dir=f"exports/{export_name}",
                      export_size=export_size, export_device=export_device,
                      trust_remote_code=facts.trust_remote_code, warnings=warnings)


def export_record_path(ws: Workspace, export_dir: str | Path) -> Path:
    """.devtune/exports/<name>/export.json: the plan an export was made with (its source run, base model,
    adapter, template). It is what `check-export` and the Merge step's F6 check the folder against: the
    newest run, or another run resumed since, is not where it came from."""
    return ws.state_dir / "exports" / Path(export_dir).name / "export.json"


def save_export_record(ws: Workspace, plan: ExportPlan) -> Path:
    from dataclasses import asdict

    record = {k: v for k, v in asdict(plan).items() if k != "warnings"}
    return write_atomic(export_record_path(ws, plan.export_dir), json.dumps(record, indent=2) + "\n")


def load_export_record(ws: Workspace, export_dir: str | Path) -> ExportPlan | None:
    """The plan recorded when the export into `export_dir` started (None: none recorded, or unreadable)."""
    from dataclasses import fields

    try:
        data = json.loads(export_record_path(ws, export_dir).read_text(encoding="utf-8"))
        known = {f.name for f in fields(ExportPlan)} - {"warnings"}
        plan = ExportPlan(**{k: v for k, v in data.items() if k in known})
    except (OSError, ValueError, TypeError, AttributeError):
        return None
    return plan if plan.export_dir and ws.abs(plan.export_dir).resolve() == ws.abs(export_dir).resolve() else None


def train_runs(ws: Workspace) -> list[RunRecord]:
    """Training runs, newest first (what the Merge step offers)."""
    return [r for r in list_runs(ws) if r.kind == "train"]


def active_export(ws: Workspace) -> RunRecord | None:
    """An export still running (the Merge step re-attaches to it)."""
    return next((r for r in list_runs(ws) if r.kind == "export" and r.active), None)


def plan_of_export_run(ws: Workspace, record: RunRecord) -> ExportPlan:
    """The plan an export run was started with, read back from its merge YAML."""
    import yaml

    try:
        raw = yaml.safe_load(ws.abs(record.config or MERGE_YAML).read_text(encoding="utf-8")) or {}
    except (OSError, yaml.YAMLError) as exc:
        raise ExportError(_("cannot read the export's YAML {path}: {error}", path=record.config, error=str(exc))) from exc
    adapter = raw.get("adapter_name_or_path")
    origin = next((r.id for r in train_runs(ws) if adapter and r.output_dir == adapter), "")
    return ExportPlan(run_id=origin, base_model=str(raw.get("model_name_or_path", "")), adapter=adapter,
                      template=raw.get("template"), finetuning_type=str(raw.get("finetuning_type", "lora")),
                      export_dir=str(raw.get("export_dir") or record.output_dir),
                      export_size=int(raw.get("export_size", 5)), export_device=str(raw.get("export_device", "cpu")))


# ---------------------------------------------------------------- the YAML and the launch

def merge_yaml_text(plan: ExportPlan) -> str:
    import yaml

    body = yaml.safe_dump(plan.yaml_dict(), sort_keys=False, allow_unicode=True)
    return f"{MARKER}{hashlib.sha256(body.encode()).hexdigest()}\n{body}"


def merge_yaml_preview(plan: ExportPlan) -> str:
    """The merge YAML as a person reads it (without devtune's marker line)."""
    return merge_yaml_text(plan).split("\n", 1)[1]


def _ours_and_unedited(path: Path) -> bool:
    """A merge YAML devtune wrote and nobody changed since (its body still matches the recorded hash)."""
    try:
        text = path.read_text(encoding="utf-8")
    except OSError:
        return False
    first, _sep, body = text.partition("\n")
    if not first.startswith(MARKER):
        return False
    return first[len(MARKER):].strip() == hashlib.sha256(body.encode()).hexdigest()


def write_merge_yaml(ws: Workspace, plan: ExportPlan, *, path: str = MERGE_YAML, force: bool = False) -> Path:
    target = ws.abs(path)
    text = merge_yaml_text(plan)
    if target.exists() and not force and not _ours_and_unedited(target):
        if target.read_text(encoding="utf-8", errors="replace") != text:
            raise ExportError(_("{path} exists and is not devtune's (or was edited); it is kept. Pass --force to "
                                "replace it, or --config to write another file", path=path))
    write_atomic(target, text)
    return target


def export_dir_contents(ws: Workspace, plan: ExportPlan) -> list[str]:
    d = ws.abs(plan.export_dir)
    return sorted(p.name for p in d.iterdir()) if d.is_dir() else []


def _clear_weights(directory: Path) -> None:
    """Remove the old weights before a forced re-export (a different shard count would leave strays)."""
    for pattern in WEIGHT_PATTERNS:
        for p in directory.glob(pattern):
            if p.is_file():
                p.unlink()


def lf_env(ws: Workspace) -> dict[str, str]:
    """What devtune adds to the export's environment (recorded in run.json: no secrets)."""
    import os

    env = {"PYTHONUNBUFFERED": "1"}
    cache = ws.cache_dir
    for var, value in (("HF_HOME", cache / "hf"), ("XDG_CACHE_HOME", cache),
                       ("TORCH_EXTENSIONS_DIR", cache / "torch_extensions")):
        if not os.environ.get(var):
            env[var] = str(value)
    return env


def llamafactory_cli() -> str:
    candidate = Path(sys.executable).parent / "llamafactory-cli"
    return str(candidate) if candidate.exists() else "llamafactory-cli"


def start_export(ws: Workspace, plan: ExportPlan, *, force: bool = False, config: str = MERGE_YAML) -> RunRecord:
    """Write the merge YAML and launch the export detached. Refuses a non-empty export_dir unless `force`."""
    existing = export_dir_contents(ws, plan)
    if existing and not force:
        raise ExportError(_("{dir} is not empty ({files}); pass --force to export into it anyway, or choose "
                            "another --name", dir=plan.export_dir, files=", ".join(existing[:5])))
    if existing:
        _clear_weights(ws.abs(plan.export_dir))
    write_merge_yaml(ws, plan, path=config, force=force)
    save_export_record(ws, plan)
    return start_run(ws, [llamafactory_cli(), "export", config], env=lf_env(ws),
                     label=f"export-{Path(plan.export_dir).name}"[:40], config=config,
                     output_dir=plan.export_dir, kind="export")
