"""Step 3, Config: the LLaMA-Factory training YAML, the DeepSpeed JSON and the launch command(s).

Files (paths relative to the workspace root, which is the cwd the Train step launches from, and the
base LLaMA-Factory resolves model, dataset_dir, output_dir and deepspeed paths against):

    configs/train.yaml              what `llamafactory-cli train` reads (plain LLaMA-Factory keys)
    configs/ds_z{2,3}[_offload]_config.json   the DeepSpeed JSON it points to, when ZeRO is on
    .devtune/configs/train.json     the TrainSpec (with its launch settings) and the hashes of the
                                    files above; a YAML edited by hand is re-imported, never lost

API for the other steps (the Train step launches with these):

    load_spec(ws, path=None) -> TrainSpec          the saved spec (state's config_file, else configs/train.yaml)
    render_yaml(spec) -> str                       the YAML text
    render_deepspeed(spec) -> str | None           the DeepSpeed JSON text devtune writes, if ZeRO is on
    launch_env(spec, node_rank=0) -> dict          FORCE_TORCHRUN, NPROC_PER_NODE, NNODES, NODE_RANK,
                                                   MASTER_ADDR, MASTER_PORT, OMP_NUM_THREADS as needed
    launch_argv(spec, config_path) -> list[str]    ["llamafactory-cli", "train", "configs/train.yaml"]
    node_commands(spec, config_path) -> list[NodeCommand]   the exact command for every node
    save_config(ws, spec, path=..., force=False)   writes the files atomically (never a user's own file
                                                   unless force)
    preview(ws, spec, found=...) -> ConfigPreview  YAML, JSON, commands, findings and memory fit
    core.config.full_check.check_config(ws, spec, ...)  preview's findings + LLaMA-Factory's own parser
"""

from __future__ import annotations

import hashlib
import json
import shlex
from dataclasses import dataclass, field
from pathlib import Path

from core.errors import Unavailable
from core.config.deepspeed import render_ds_json
from core.config.gpu_catalog import GpuTarget, target_from_catalog, targets_from_found
from core.config.rule_context import ConfigFinding, RuleContext
from core.config.rules import check_rules
from core.config.spec import Launch, TrainSpec
from core.config.templates import BUILTIN, TemplateCatalog
from core.config.yaml_out import deepspeed_path
from core.config.yaml_out import render_yaml as _render_yaml
from core.files.atomic import FileExistsRefused, write_atomic
from core.i18n import _, said, said_n
from core.workspace.layout import Workspace

DEFAULT_CONFIG = "configs/train.yaml"
GPUS_FILE = "gpus.json"  # .devtune/gpus.json: [{"name": ..., "memory_bytes": ...}] written by the doctor


class ConfigMissing(Unavailable, FileNotFoundError):
    """No training config in the workspace yet."""


@dataclass(frozen=True)
class NodeCommand:
    node_rank: int
    env: dict[str, str]
    argv: list[str]

    @property
    def text(self) -> str:
        prefix = " ".join(f"{k}={shlex.quote(v)}" for k, v in self.env.items())
        return f"{prefix} {shlex.join(self.argv)}".strip()


@dataclass
class LoadedConfig:
    spec: TrainSpec
    path: str  # workspace-relative YAML path
    edited_by_hand: bool = False  # the YAML changed since devtune wrote it (re-imported)
    kept: list[str] = field(default_factory=list)


@dataclass
class SavedConfig:
    yaml_path: str
    deepspeed_path: str | None
    written: list[str] = field(default_factory=list)
    unchanged: list[str] = field(default_factory=list)


@dataclass
class ConfigPreview:
    spec: TrainSpec
    yaml: str
    deepspeed_path: str | None
    deepspeed_json: str | None  # devtune's JSON; None when off or when the spec points to the person's file
    commands: list[NodeCommand]
    findings: list[ConfigFinding]
    fit: object | None  # core.config.memfit.FitEstimate
    advice: list
    targets: list[GpuTarget]

    @property
    def errors(self) -> list[ConfigFinding]:
        return [f for f in self.findings if f.severity == "error"]


# ---- rendering and launching ----------------------------------------------------------------------

def render_yaml(spec: TrainSpec, config_path: str = DEFAULT_CONFIG) -> str:
    cmds = node_commands(spec, config_path)
    header = [f"LLaMA-Factory training config written by devtune{f' (preset {spec.preset})' if spec.preset else ''}.",
              "Paths are relative to the workspace root; run from there:", f"  {cmds[0].text}"]
    if len(cmds) > 1:
        header.append(f"  (one command per node: devtune config command; this is node 0 of {len(cmds)})")
    return _render_yaml(spec, header="\n".join(header))


def render_deepspeed(spec: TrainSpec) -> str | None:
    """devtune's DeepSpeed JSON for the spec (None: no ZeRO, or the spec points to the person's own file)."""
    if spec.zero_stage is None or spec.deepspeed:
        return None
    return render_ds_json(spec.zero_stage, spec.offload and spec.zero_stage in (2, 3))


def launch_env(spec: TrainSpec, node_rank: int = 0) -> dict[str, str]:
    """The environment `llamafactory-cli train` needs for this spec (only these variables)."""
    launch = spec.launch
    env: dict[str, str] = {}
    torchrun = spec.zero_stage is not None or launch.distributed
    if torchrun:
        env["FORCE_TORCHRUN"] = "1"
        env["NPROC_PER_NODE"] = str(launch.gpus_per_node)
    if launch.nnodes > 1:
        env.update(NNODES=str(launch.nnodes), NODE_RANK=str(node_rank),
                   MASTER_ADDR=launch.master_addr or "<address-of-node-0>", MASTER_PORT=str(launch.master_port))
    if launch.device == "cpu" or launch.omp_threads:
        env["OMP_NUM_THREADS"] = str(launch.omp_threads or 1)
    return env


def launch_argv(spec: TrainSpec, config_path: str = DEFAULT_CONFIG) -> list[str]:
    return ["llamafactory-cli", "train", config_path]


def node_commands(spec: TrainSpec, config_path: str = DEFAULT_CONFIG) -> list[NodeCommand]:
    nodes = spec.launch.nnodes
    return [NodeCommand(rank, launch_env(spec, rank), launch_argv(spec, config_path)) for rank in range(nodes)]


# ---- the workspace's files ------------------------------------------------------------------------

def _sha(text: str | bytes) -> str:
    return hashlib.sha256(text.encode() if isinstance(text, str) else text).hexdigest()


def sidecar_path(ws: Workspace, config_path: str) -> Path:
    stem = config_path.replace("\\", "/").strip("/").replace("/", "__").removesuffix(".yaml").removesuffix(".yml")
    return ws.state_dir / "configs" / f"{stem}.json"


def _read_sidecar(ws: Workspace, config_path: str) -> dict | None:
    try:
        return json.loads(sidecar_path(ws, config_path).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None


def _sidecar_of_content(ws: Workspace, sha: str) -> dict | None:
    """The record of a YAML devtune wrote with exactly this content, under any name."""
    folder = ws.state_dir / "configs"
    for path in sorted(folder.glob("*.json")) if folder.is_dir() else []:
        try:
            side = json.loads(path.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            continue
        if isinstance(side, dict) and side.get("yaml_sha256") == sha and "spec" in side:
            return side
    return None


def current_config_path(ws: Workspace) -> str:
    try:
        return ws.load_state().config_file or DEFAULT_CONFIG
    except Exception:  # noqa: BLE001 - a damaged state must not hide the config
        return DEFAULT_CONFIG


def load_config(ws: Workspace, path: str | None = None) -> LoadedConfig:
    from core.config.yaml_in import import_lf_yaml

    rel = path or current_config_path(ws)
    yaml_file = ws.abs(rel)
    try:
        raw = yaml_file.read_bytes()
    except FileNotFoundError as exc:
        raise ConfigMissing(_("no training config at {path} yet: devtune config init", path=rel)) from exc
    side = _read_sidecar(ws, rel)
    if side and side.get("yaml_sha256") == _sha(raw):
        return LoadedConfig(TrainSpec.model_validate(side["spec"]), rel)
    twin = _sidecar_of_content(ws, _sha(raw)) if side is None else None
    if twin is not None:  # a copy of a YAML devtune wrote: the same settings, so the same verdicts
        return LoadedConfig(TrainSpec.model_validate(twin["spec"]), rel)
    launch = Launch.model_validate(side["spec"]["launch"]) if side and "spec" in side else None
    imported = import_lf_yaml(yaml_file, root=ws.root, launch=launch)
    if side and "spec" in side:
        imported.spec.preset = side["spec"].get("preset")
    return LoadedConfig(imported.spec, rel, edited_by_hand=side is not None, kept=imported.kept)


def load_spec(ws: Workspace, path: str | None = None) -> TrainSpec:
    """The training spec of the workspace (re-imported from the YAML if it was edited by hand)."""
    return load_config(ws, path).spec


def _ours(file: Path, recorded_sha: str | None) -> bool:
    try:
        return recorded_sha is not None and _sha(file.read_bytes()) == recorded_sha
    except OSError:
        return False


def save_config(ws: Workspace, spec: TrainSpec, path: str = DEFAULT_CONFIG, *, force: bool = False) -> SavedConfig:
    """Write the YAML (and DeepSpeed JSON) atomically. A file devtune did not write, or one edited since,
    is refused (FileExistsRefused) unless `force`."""
    ws.ensure()
    side = _read_sidecar(ws, path) or {}
    saved = SavedConfig(path, deepspeed_path(spec))
    ds_text = render_deepspeed(spec)
    ds_sha = None
    if ds_text is not None and saved.deepspeed_path:
        ds_file = ws.abs(saved.deepspeed_path)
        ds_sha = _sha(ds_text)
        if ds_file.exists() and _sha(ds_file.read_bytes()) == ds_sha:
            saved.unchanged.append(saved.deepspeed_path)
        else:
            if ds_file.exists() and not force and not _ours(ds_file, side.get("deepspeed_sha256")):
                raise FileExistsRefused(ds_file)
            write_atomic(ds_file, ds_text)
            saved.written.append(saved.deepspeed_path)
    text = render_yaml(spec, path)
    yaml_file = ws.abs(path)
    if yaml_file.exists() and _sha(yaml_file.read_bytes()) == _sha(text):
        saved.unchanged.append(path)
    else:
        if yaml_file.exists() and not force and not _ours(yaml_file, side.get("yaml_sha256")):
            raise FileExistsRefused(yaml_file)
        write_atomic(yaml_file, text)
        saved.written.append(path)
    record_sidecar(ws, spec, path, yaml_sha=_sha(text), ds_sha=ds_sha)
    return saved


def record_sidecar(ws: Workspace, spec: TrainSpec, path: str, *, yaml_sha: str | None = None,
                   ds_sha: str | None = None) -> None:
    """Remember the spec for `path` (its launch settings are nowhere else). `yaml_sha` None: the file as it is
    now (adopting a person's own YAML without rewriting it)."""
    if yaml_sha is None:
        yaml_sha = _sha(ws.abs(path).read_bytes())
    record = {"schema": 1, "config_file": path, "yaml_sha256": yaml_sha, "deepspeed_file": deepspeed_path(spec),
              "deepspeed_sha256": ds_sha, "spec": spec.model_dump(mode="json")}
    write_atomic(sidecar_path(ws, path), json.dumps(record, indent=2, ensure_ascii=False) + "\n")


def export_yaml(ws: Workspace, spec: TrainSpec, dest: Path, *, force: bool = False) -> Path:
    """Write the LLaMA-Factory YAML of `spec` to any path (a person's file: refused if it exists, unless force)."""
    return write_atomic(dest, render_yaml(spec), overwrite=force)


# ---- checks ------------------------------------------------------------------------------------------

def found_gpus(ws: Workspace) -> list[tuple[str, int]]:
    """The GPUs the doctor found on this machine, as (name, memory bytes) per device ([] when none/unknown)."""
    try:
        data = json.loads((ws.state_dir / GPUS_FILE).read_text(encoding="utf-8"))
        items = data.get("gpus", []) if isinstance(data, dict) else data
        return [(str(g["name"]), int(g["memory_bytes"])) for g in items]
    except (OSError, ValueError, KeyError, TypeError, AttributeError):
        return []


def doctor_looked_for_gpus(ws: Workspace) -> bool:
    """Whether the doctor has run here and recorded what GPUs it found (possibly none)."""
    try:
        return isinstance(json.loads((ws.state_dir / GPUS_FILE).read_text(encoding="utf-8")), dict)
    except (OSError, ValueError):
        return False


def registered_datasets(ws: Workspace, dataset_dir: str = "data") -> list[str]:
    """The dataset names in <dataset_dir>/dataset_info.json ([] when absent or unreadable)."""
    from core.data.dataset_info import DatasetInfoError, read_dataset_info

    try:
        return sorted(read_dataset_info(ws.root / dataset_dir))
    except DatasetInfoError:
        return []


def fit_targets(spec: TrainSpec, found: list[tuple[str, int]]) -> list[GpuTarget]:
    """What the memory fit is judged against: host RAM on a CPU, the doctor's GPUs, else the chosen model."""
    if spec.launch.device == "cpu":
        import psutil

        return [GpuTarget(_("CPU (host memory)"), psutil.virtual_memory().total, 1, False, "host")]
    if found:
        return targets_from_found(found)
    if spec.launch.gpu_model:
        try:
            return [target_from_catalog(spec.launch.gpu_model, spec.launch.gpus_per_node)]
        except KeyError:
            return []
    return []


def rule_context(ws: Workspace, spec: TrainSpec, *, found: list[tuple[str, int]] | None = None,
                 catalog: TemplateCatalog | None = None, path: str = DEFAULT_CONFIG) -> RuleContext:
    from core.config.memfit import estimate
    from core.config.memfit_advice import advise
    from core.config.model_shapes import resolve_shape
    from core.config.spec import value
    from core.data.dataset_info import (
        DatasetInfoError,
        info_file,
        read_dataset_info,
        v1_dataset_list,
        v1_dataset_list_message,
    )
    from core.data.summary import load_summary

    found = found_gpus(ws) if found is None else found
    ctx = RuleContext(ws.root, catalog or BUILTIN, fit_targets(spec, found), len(found),
                      doctor_ran=bool(found) or doctor_looked_for_gpus(ws), config_path=path)
    dataset_dir = ws.root / str(value(spec, "dataset_dir"))
    try:  # None when there is no dataset_info.json (the data.no_info finding)
        ctx.dataset_info = read_dataset_info(dataset_dir) if info_file(dataset_dir).is_file() else None
    except DatasetInfoError as exc:
        ctx.dataset_info, ctx.dataset_info_error = None, str(exc)
    if ctx.dataset_info is None and ctx.dataset_info_error is None and (v1 := v1_dataset_list(dataset_dir)):
        ctx.dataset_info_error = v1_dataset_list_message(ws.rel(v1))
    ctx.summaries = {name: load_summary(ws.root, name) for name in spec.dataset}
    shape = resolve_shape(spec.model_name_or_path, ws.root)
    if shape is not None:
        seq, p99 = _seq_len(spec, ctx)
        target = ctx.targets[0] if ctx.targets else None
        ctx.fit = estimate(spec, shape, target, seq_len=seq)
        ctx.advice = advise(spec, shape, target, seq_len=seq, p99=p99)
        if spec.zero_stage == 3 and spec.launch.world_size > 1 and target is not None:
            ctx.zero2_fit = estimate(spec.model_copy(update={"zero_stage": 2, "deepspeed": None}), shape, target,
                                     seq_len=seq)
    return ctx


TEMPLATE_TOKENS = 32  # what a chat template adds around a row (role headers, BOS/EOS), at most


def _seq_len(spec: TrainSpec, ctx: RuleContext) -> tuple[int, int | None]:
    """The longest sequence a batch can have: cutoff_len, or the longest row (+ the template's tokens) when
    the Data step measured it and packing is off."""
    from core.config.spec import value

    cutoff = int(value(spec, "cutoff_len"))
    pcts = [s.token_percentiles for s in ctx.summaries.values() if s is not None and s.token_percentiles]
    if not pcts or len(pcts) < len(spec.dataset) or value(spec, "packing"):
        return cutoff, None
    longest = max(p.get("max", cutoff) for p in pcts)
    p99 = max(p.get("p99", longest) for p in pcts)
    return min(cutoff, longest + TEMPLATE_TOKENS), p99


def preview(ws: Workspace, spec: TrainSpec, path: str = DEFAULT_CONFIG, *,
            found: list[tuple[str, int]] | None = None, catalog: TemplateCatalog | None = None) -> ConfigPreview:
    """Everything the Config step shows for `spec`, without writing anything (fast: no LLaMA-Factory)."""
    ctx = rule_context(ws, spec, found=found, catalog=catalog, path=path)
    return ConfigPreview(spec, render_yaml(spec, path), deepspeed_path(spec), render_deepspeed(spec),
                         node_commands(spec, path), check_rules(spec, ctx), ctx.fit, ctx.advice, ctx.targets)


def config_saved(path: str, shown: ConfigPreview, *, workspace_config: bool = True):
    """What saving a config implies for both front-ends: it is the workspace's config (`devtune train` and the
    Train step start it), and the Config step is done, or needs attention when the config has errors. A side
    file (`workspace_config` False, core.config.files.becomes_workspace_config) changes nothing."""
    from core.workspace.changes import StateChange, StepMark
    from core.workspace.step_status import StepStatus

    if not workspace_config:
        return StateChange()
    return StateChange(chosen={"config_file": path},
                       steps={"config": StepMark(StepStatus.ATTENTION if shown.errors else StepStatus.DONE,
                                                 summary_line(shown))})


def summary_line(shown: ConfigPreview) -> str:
    """One line for the stepper and `devtune config show` (kept as data, core.i18n.Said: the Config step's
    saved summary is said in the reader's language)."""
    from core.config.memfit import gib, verdict_label

    spec = shown.spec
    where = ((said("CPU") if spec.launch.world_size == 1 else
              said_n("CPU, {n} process", "CPU, {n} processes", spec.launch.world_size))
             if spec.launch.device == "cpu" else
             f"{spec.launch.nnodes}×{spec.launch.gpus_per_node} GPU" if spec.launch.nnodes > 1 else
             f"{spec.launch.gpus_per_node} GPU")
    zero = f" ZeRO-{spec.zero_stage}{'+offload' if spec.offload else ''}" if spec.zero_stage is not None else ""
    fit = shown.fit
    fit_text = (said(" · {verdict} ({size})", verdict=verdict_label(fit.verdict), size=gib(fit.per_device_bytes))
                if fit is not None else "")
    return said("{method} · {template} · {where}{zero}{fit}", method=spec.finetuning_type,
                template=spec.template or "?", where=where, zero=zero, fit=fit_text)
