"""Run facts: what a training run's own train YAML says (base model, template, method, datasets, output).

Read directly from the YAML the run trained with (its copy in the run folder), so merge, serve and eval
need neither the Config step nor its state:

    facts = read_train_facts(ws, find_train_run(ws, "last"))
    facts.model_name_or_path, facts.finetuning_type, facts.dataset
"""

from __future__ import annotations

from dataclasses import dataclass, field

from core.i18n import _
from core.train.runs import RunError, RunRecord, find_run
from core.workspace.layout import Workspace


class TrainFactsError(RunError):
    """The run's train YAML is missing, unreadable or names no model; the message names the file."""


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


def find_train_run(ws: Workspace, ref: str | None = None) -> RunRecord:
    """A training run by id or prefix; without one, the newest training run (export runs are skipped)."""
    return find_run(ws, ref, kind="train")


def read_train_facts(ws: Workspace, run: RunRecord) -> TrainFacts:
    import yaml

    if not run.config:
        raise TrainFactsError(_("run {id} records no train YAML", id=run.id))
    path = ws.abs(run.config)
    try:
        raw = yaml.safe_load(path.read_text(encoding="utf-8")) or {}
    except OSError as exc:
        raise TrainFactsError(_("cannot read the run's train YAML {path}: {error}", path=run.config,
                                error=exc.strerror or str(exc))) from exc
    except yaml.YAMLError as exc:
        raise TrainFactsError(_("the run's train YAML {path} is not valid YAML: {error}", path=run.config,
                                error=str(exc))) from exc
    if not isinstance(raw, dict) or not raw.get("model_name_or_path"):
        raise TrainFactsError(_("{path} has no model_name_or_path", path=run.config))
    qbit = raw.get("quantization_bit")
    return TrainFacts(
        config=run.config, model_name_or_path=str(raw["model_name_or_path"]), template=raw.get("template"),
        finetuning_type=str(raw.get("finetuning_type", "lora")), quantization_bit=int(qbit) if qbit else None,
        output_dir=run.output_dir or raw.get("output_dir"), dataset=_names(raw.get("dataset")),
        dataset_dir=str(raw.get("dataset_dir", "data")), eval_dataset=_names(raw.get("eval_dataset")),
        trust_remote_code=bool(raw.get("trust_remote_code", False)), raw=raw,
    )
