"""Eval loss while training: the held-out set registered beside a dataset (`N_eval`, made by
`devtune data register FILE --name N --holdout F`, core.data.holdout) wired into the training config,
and devtune's checks of the eval settings.

Wiring sets LLaMA-Factory 0.9.5's own arguments (hparams/data_args.py, transformers' TrainingArguments):

    eval_dataset: N_eval                  DataArguments.eval_dataset (comma-separated names)
    eval_strategy: steps                  evaluate every eval_steps optimizer steps
    eval_steps: K                         about TARGET_EVALS evaluations over the run, a multiple of logging_steps
    per_device_eval_batch_size: B         the training batch per device (no gradients: it fits)

LLaMA-Factory then logs `eval_loss` into trainer_log.jsonl at those steps (LogCallback.on_log), which
the Train step charts beside the training loss and watches for overfitting (core.train.anomalies).
A config that already says how to evaluate (its own eval_dataset, val_size, or eval_strategy: no) is
left as it is.
"""

from __future__ import annotations

from typing import Any

from core.config.rule_context import ConfigFinding, RuleContext, steps_per_epoch
from core.config.spec import TrainSpec, value
from core.data.holdout import EVAL_SUFFIX
from core.i18n import _, _n

TARGET_EVALS = 10


def heldout_sets(spec: TrainSpec, dataset_info: dict[str, Any] | None) -> list[str]:
    """The registered held-out sets (`N_eval`) of the datasets the spec trains on."""
    info = dataset_info or {}
    return [name + EVAL_SUFFIX for name in spec.dataset if isinstance(info.get(name + EVAL_SUFFIX), dict)]


def total_steps(spec: TrainSpec, rows: int | None) -> int | None:
    """Optimizer steps of the run: max_steps, else epochs × steps per epoch (None when the rows are unknown)."""
    max_steps = value(spec, "max_steps")
    if isinstance(max_steps, int) and max_steps > 0:
        return max_steps
    if not rows:
        return None
    return max(1, round(float(value(spec, "num_train_epochs")) * steps_per_epoch(spec, rows)))


def eval_steps_for(spec: TrainSpec, rows: int | None) -> int:
    """About TARGET_EVALS evaluations over the run, on logging steps (the chart has a training loss to
    show beside each eval loss); save_steps when the run's length is unknown."""
    logging = int(value(spec, "logging_steps"))
    total = total_steps(spec, rows)
    if total is None:
        return int(value(spec, "save_steps"))
    return max(logging, round(total / TARGET_EVALS / logging) * logging)


def _says_how_to_evaluate(spec: TrainSpec) -> bool:
    return bool(spec.eval_dataset or spec.val_size or spec.eval_strategy is not None
                or "eval_dataset" in spec.extra)


def with_eval_loss(spec: TrainSpec, dataset_info: dict[str, Any] | None, rows: int | None) -> TrainSpec:
    """The spec with the eval loss on the datasets' held-out sets, when they have some and the spec does
    not already say how to evaluate; else the spec as it is."""
    held = heldout_sets(spec, dataset_info)
    if not held or _says_how_to_evaluate(spec):
        return spec
    return TrainSpec.model_validate({
        **spec.model_dump(), "eval_dataset": held, "eval_strategy": "steps", "eval_steps": eval_steps_for(spec, rows),
        "per_device_eval_batch_size": int(value(spec, "per_device_train_batch_size"))})


def follow_datasets(old: TrainSpec, new: TrainSpec, dataset_info: dict[str, Any] | None,
                    rows: int | None) -> TrainSpec:
    """After the datasets changed (the Config form): an eval set that was the old datasets' held-out sets
    follows to the new datasets' (or goes, when they have none)."""
    if new.dataset == old.dataset or not old.eval_dataset or old.eval_dataset != heldout_sets(old, dataset_info) \
            or new.eval_dataset != old.eval_dataset:
        return with_eval_loss(new, dataset_info, rows)
    cleared = TrainSpec.model_validate({**new.model_dump(), "eval_dataset": [], "eval_strategy": None,
                                        "eval_steps": None, "per_device_eval_batch_size": None})
    return with_eval_loss(cleared, dataset_info, rows)


def wire_eval_loss(ws, spec: TrainSpec, old: TrainSpec | None = None) -> TrainSpec:
    """with_eval_loss (or follow_datasets from `old`) with the workspace's dataset_info.json and the Data
    step's row counts."""
    from core.data.dataset_info import DatasetInfoError, read_dataset_info

    try:
        info = read_dataset_info(ws.root / str(value(spec, "dataset_dir")))
    except DatasetInfoError:
        return spec
    rows = training_rows(ws, spec)
    return follow_datasets(old, spec, info, rows) if old is not None else with_eval_loss(spec, info, rows)


def training_rows(ws, spec: TrainSpec) -> int | None:
    """The rows of the spec's datasets as the Data step counted them (None when one is not counted)."""
    from core.data.summary import load_summary

    summaries = [load_summary(ws.root, name) for name in spec.dataset]
    return sum(s.rows for s in summaries if s is not None) if summaries and all(summaries) else None


def rule_eval(spec: TrainSpec, ctx: RuleContext) -> list[ConfigFinding]:
    """The eval set is registered, is not trained on, and LLaMA-Factory accepts the combination."""
    info = ctx.dataset_info or {}
    out: list[ConfigFinding] = []
    strategy = spec.eval_strategy or "no"
    if spec.eval_dataset and spec.val_size:
        out.append(ConfigFinding("error", "eval.both", _("eval_dataset and val_size are both set; LLaMA-Factory "
                                                         "refuses the pair"), "val_size",
                                 _("keep the held-out set (eval_dataset) and clear val_size")))
    for name in spec.eval_dataset:
        if ctx.dataset_info is not None and not isinstance(info.get(name), dict):
            out.append(ConfigFinding("error", "eval.unregistered", _("eval_dataset {name} is not registered in "
                                                                     "dataset_info.json", name=name), "eval_dataset",
                                     _("register a held-out set in the Data step (register with a held-out "
                                       "share), or clear the field")))
        if name in spec.dataset:
            out.append(ConfigFinding("warning", "eval.trained_on", _("eval_dataset {name} is also trained on: its "
                                                                     "loss shows memorisation, not learning",
                                                                     name=name), "eval_dataset"))
    if strategy != "no" and not spec.eval_dataset and not spec.val_size:
        out.append(ConfigFinding("error", "eval.no_set", _("eval_strategy {strategy} needs an eval set",
                                                           strategy=strategy), "eval_dataset",
                                 _("name a held-out set (eval_dataset), or clear eval_strategy")))
    held = heldout_sets(spec, ctx.dataset_info)
    if held and not spec.eval_dataset and not spec.val_size:
        out.append(ConfigFinding("info", "eval.off", _n(
            "held-out set {names} is registered but not evaluated: no eval loss while training",
            "held-out sets {names} are registered but not evaluated: no eval loss while training", len(held),
            names=", ".join(held)), "eval_dataset", _("put {names} in the eval set field", names=",".join(held))))
    elif spec.eval_dataset and strategy != "no":
        steps = spec.eval_steps or value(spec, "logging_steps")
        out.append(ConfigFinding("info", "eval.on", _("eval loss on {names} every {steps} steps, beside the "
                                                      "training loss; the Train step warns when it rises while "
                                                      "the training loss falls", names=", ".join(spec.eval_dataset),
                                                      steps=steps), "eval_dataset"))
    return out
