"""Step 5, Merge: `llamafactory-cli export` for a training run, detached, with progress.

`plan_export` reads the run's train YAML (base model, template, finetuning type, quantization) and
decides the merge: a LoRA/QLoRA adapter merges onto the unquantized base; a full or freeze run is
re-saved as is. `start_export` writes `configs/merge.yaml` (LLaMA-Factory's export YAML; a person's
own or edited file is never replaced unless asked) and launches `llamafactory-cli export
configs/merge.yaml` through core.train.runs (kind "export", cwd = the workspace), so it survives SSH drops.
`export_progress` maps the export's log lines (LLaMA-Factory's INFO lines, the "Loading weights"
and "Writing model shards" tqdm bars) to stages.
"""

from __future__ import annotations

import hashlib
import json
import re
import sys
from dataclasses import dataclass, field
from pathlib import Path

from core.files.atomic import write_atomic
from core.i18n import _
from core.train.runs import (
    RunRecord,
    RunStatus,
    find_run,
    list_runs,
    read_record,
    refresh,
    run_dir,
    start_run,
    status_label,
)
from core.workspace.layout import Workspace

MERGE_YAML = "configs/merge.yaml"
MARKER = "# written by devtune merge; sha256:"
WEIGHT_PATTERNS = ("*.safetensors", "*.bin", "*.safetensors.index.json", "*.bin.index.json", "*.pt")
ADAPTER_TYPES = ("lora", "oft")


class ExportError(Exception):
    """The export cannot be planned or started as asked; the message says what to do."""


@dataclass
class TrainFacts:
    """What the train YAML of a run says (read directly: the Config step is not needed)."""

    config: str  # workspace-relative YAML path
    model_name_or_path: str
    template: str | None
    finetuning_type: str
    quantization_bit: int | None
    output_dir: str | None
    dataset: list[str]
    dataset_dir: str
    eval_dataset: list[str]
    trust_remote_code: bool
    raw: dict = field(default_factory=dict)


def _names(value) -> list[str]:
    if not value:
        return []
    if isinstance(value, (list, tuple)):
        return [str(v).strip() for v in value if str(v).strip()]
    return [v.strip() for v in str(value).split(",") if v.strip()]


def read_train_facts(ws: Workspace, run: RunRecord) -> TrainFacts:
    import yaml

    if not run.config:
        raise ExportError(_("run {id} records no train YAML", id=run.id))
    path = ws.abs(run.config)
    try:
        raw = yaml.safe_load(path.read_text(encoding="utf-8")) or {}
    except OSError as exc:
        raise ExportError(_("cannot read the run's train YAML {path}: {error}", path=run.config,
                            error=exc.strerror or str(exc))) from exc
    except yaml.YAMLError as exc:
        raise ExportError(_("the run's train YAML {path} is not valid YAML: {error}", path=run.config,
                            error=str(exc))) from exc
    if not isinstance(raw, dict) or not raw.get("model_name_or_path"):
        raise ExportError(_("{path} has no model_name_or_path", path=run.config))
    qbit = raw.get("quantization_bit")
    return TrainFacts(
        config=run.config, model_name_or_path=str(raw["model_name_or_path"]), template=raw.get("template"),
        finetuning_type=str(raw.get("finetuning_type", "lora")), quantization_bit=int(qbit) if qbit else None,
        output_dir=run.output_dir or raw.get("output_dir"), dataset=_names(raw.get("dataset")),
        dataset_dir=str(raw.get("dataset_dir", "data")), eval_dataset=_names(raw.get("eval_dataset")),
        trust_remote_code=bool(raw.get("trust_remote_code", False)), raw=raw,
    )


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


def find_train_run(ws: Workspace, ref: str | None = None) -> RunRecord:
    """A training run by id or prefix; without one, the newest training run (export runs are skipped)."""
    return find_run(ws, ref, kind="train")


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
                          id=run.id, status=run.status.value))
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
    return start_run(ws, [llamafactory_cli(), "export", config], env=lf_env(ws),
                     label=f"export-{Path(plan.export_dir).name}"[:40], config=config,
                     output_dir=plan.export_dir, kind="export")


# ---------------------------------------------------------------- progress from the logs

STAGES = ("starting", "loading", "merging", "converting", "writing", "tokenizer", "done")
_STAGE_SPAN = {"starting": (0.0, 0.02), "loading": (0.02, 0.30), "merging": (0.30, 0.45),
               "converting": (0.45, 0.50), "writing": (0.50, 0.95), "tokenizer": (0.95, 1.0), "done": (1.0, 1.0)}
def stage_label(stage: str) -> str:
    """An export stage (or "check", the merged folder's check) in words for people."""
    return {"starting": _("starting"), "loading": _("loading"), "merging": _("merging"),
            "converting": _("converting"), "writing": _("writing"), "tokenizer": _("tokenizer"),
            "done": _("done"), "check": _("check")}.get(stage, stage)


_TQDM = re.compile(r"(Loading weights|Writing model shards)[^|]*\|[^|]*\|\s*(\d+)/(\d+)")
_MARKS = (
    ("tokenizer", ("Ollama modelfile saved", "tokenizer config file saved", "Model weights saved in")),
    ("writing", ("Writing model shards", "Configuration saved in")),
    ("converting", ("Convert model dtype to",)),
    ("merging", ("Merged ", "Loaded adapter(s)")),
    ("loading", ("loading configuration file", "Loading weights", "loading weights file", "Add <|")),
)


@dataclass
class ExportProgress:
    stage: str
    fraction: float  # 0..1 over the whole export
    detail: str  # the latest meaningful line
    status: str  # the run's status
    error: str | None = None
    diagnosis: object | None = None  # core.train.failures.Diagnosis: the cause of a failed export, and its fix

    def failure_text(self) -> str | None:
        """The error, then its cause and fix when the diagnosis knows them (what the CLI and the screen say)."""
        if self.diagnosis is None:
            return self.error
        return _("{error} — {cause}. Fix: {fix}", error=self.error or "", cause=self.diagnosis.title,
                 fix=self.diagnosis.fix)


def _last_error(stderr: str) -> str | None:
    lines = [line.strip() for line in stderr.replace("\r", "\n").splitlines() if line.strip()]
    for line in reversed(lines):
        if re.match(r"^[A-Za-z_.]*(Error|Exception)\b.*:", line) or line.startswith(("RuntimeError", "ValueError")):
            return line
    return lines[-1] if lines else None


def parse_export_log(stdout: str, stderr: str, status: str = "running") -> ExportProgress:
    lines = (stderr + "\n" + stdout).replace("\r", "\n").splitlines()
    stage, detail = "starting", ""
    for name, needles in _MARKS:  # the furthest stage reached, with its latest line
        hits = [line.strip() for line in lines if any(n in line for n in needles)]
        if hits:
            stage, detail = name, hits[-1]
            break
    text = "\n".join(lines)
    low, high = _STAGE_SPAN[stage]
    fraction = low
    bars = [(m.group(1), int(m.group(2)), int(m.group(3))) for m in _TQDM.finditer(text)]
    if bars and stage in ("loading", "writing"):
        wanted = "Loading weights" if stage == "loading" else "Writing model shards"
        mine = [b for b in bars if b[0] == wanted]
        if mine and mine[-1][2]:
            fraction = low + (high - low) * mine[-1][1] / mine[-1][2]
            detail = f"{wanted} {mine[-1][1]}/{mine[-1][2]}"
    error = None
    if status == RunStatus.FINISHED.value:
        stage, fraction = "done", 1.0
    elif status in (RunStatus.FAILED.value, RunStatus.STOPPED.value):
        error = _last_error(stderr) or _("the export ended with status {status}", status=status)
    return ExportProgress(stage=stage, fraction=min(1.0, fraction), detail=detail[-200:], status=status, error=error)


def _read_tail(path: Path, limit: int = 200_000) -> str:
    try:
        with open(path, "rb") as fh:
            fh.seek(0, 2)
            size = fh.tell()
            fh.seek(max(0, size - limit))
            return fh.read().decode("utf-8", errors="replace")
    except OSError:
        return ""


def export_progress(ws: Workspace, run_id: str) -> ExportProgress:
    """The export's progress; for a failed export, the first diagnosis of its logs (the failure rules)."""
    directory = run_dir(ws, run_id)
    record = refresh(directory)
    progress = parse_export_log(_read_tail(directory / "stdout.log"), _read_tail(directory / "stderr.log"),
                                record.status.value)
    if record.status is RunStatus.FAILED:
        from core.train.failures import diagnose_run

        found = diagnose_run(directory, exit_code=record.exit_code, training=False)
        progress.diagnosis = found[0] if found else None
    return progress


def wait_export(ws: Workspace, run_id: str, *, on_progress=None, interval: float = 0.5,
                cancelled=None) -> RunRecord:
    """Block until the export run ends, reporting each change of progress."""
    import time

    last = None
    directory = run_dir(ws, run_id)
    while True:
        progress = export_progress(ws, run_id)
        key = (progress.stage, round(progress.fraction, 3), progress.status in ("starting", "running"))
        if on_progress and key != last:
            on_progress(progress)
            last = key
        record = read_record(directory)
        if not record.active:
            return refresh(directory)
        if cancelled and cancelled():
            return record
        time.sleep(interval)
