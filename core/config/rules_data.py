"""Config checks about the data: datasets registered in dataset_info.json and linted clean by the Data
step, cutoff_len against their token lengths, and the effective batch against the number of rows."""

from __future__ import annotations

import math

from core.config.rule_context import (
    ConfigFinding,
    RuleContext,
    steps_per_epoch,
    train_rows,
)
from core.config.spec import TrainSpec, effective_batch, value
from core.i18n import _, _n


def rule_data(spec: TrainSpec, ctx: RuleContext) -> list[ConfigFinding]:
    out: list[ConfigFinding] = []
    dataset_dir = str(value(spec, "dataset_dir"))
    if not spec.dataset:
        return [ConfigFinding("error", "data.none", _("no dataset chosen"), "dataset",
                        _("register one in the Data step, then choose it here"))]
    if ctx.dataset_info is None:
        return [ConfigFinding("error", "data.no_info", ctx.dataset_info_error or _("{path}/dataset_info.json not found",
                                                                             path=dataset_dir), "dataset_dir",
                        _("the Data step registers datasets there"))]
    for name in spec.dataset:
        entry = ctx.dataset_info.get(name)
        if not isinstance(entry, dict):
            out.append(ConfigFinding("error", "data.unregistered", _("dataset {name} is not registered in "
                                                              "{path}/dataset_info.json", name=name, path=dataset_dir),
                               "dataset", _("register it in the Data step")))
            continue
        file_name = entry.get("file_name")
        if isinstance(file_name, str) and not (ctx.root / dataset_dir / file_name).exists():
            out.append(ConfigFinding("error", "data.file_missing", _("dataset {name}: {path} not found", name=name,
                                                              path=f"{dataset_dir}/{file_name}"), "dataset"))
            continue
        summary = ctx.summaries.get(name)
        if summary is None:
            if isinstance(file_name, str):
                out.append(ConfigFinding("warning", "data.unchecked", _("dataset {name} was not checked by the Data step "
                                                                 "(lint and token lengths)", name=name), "dataset",
                                   _("open it in the Data step (or: devtune data lint)")))
            continue
        if summary.is_stale(ctx.root):
            out.append(ConfigFinding("warning", "data.stale", _("dataset {name} changed since the Data step checked it",
                                                          name=name), "dataset",
                               _("check it again in the Data step, or: `devtune data register {file} --name {name}`",
                                 file=summary.file, name=name)))
        if summary.lint_errors:
            out.append(ConfigFinding("error", "data.lint", _n("dataset {name} has {n} lint error", "dataset {name} has {n} lint errors",
                                                        summary.lint_errors, name=name), "dataset",
                               _("fix them in the Data step")))
        elif summary.lint_warnings:
            out.append(ConfigFinding("info", "data.lint_warnings", _n("dataset {name}: {n} lint warning", "dataset {name}: {n} lint warnings",
                                                                summary.lint_warnings, name=name), "dataset"))
        out += _cutoff(spec, name, summary)
    return out


def _cutoff(spec: TrainSpec, name: str, summary) -> list[ConfigFinding]:
    pct = summary.token_percentiles or {}
    cutoff = int(value(spec, "cutoff_len"))
    longest = pct.get("max")
    if not longest or value(spec, "stage") == "pt" and value(spec, "packing") is not False:
        return []  # stage pt packs the text into blocks of cutoff_len (LLaMA-Factory's default there): none is cut
    estimate = "" if summary.tokenizer else _(" (token counts estimated from characters)")
    if cutoff < longest:
        over = summary.over_cutoff.get(str(cutoff))
        if over is None:
            share = next((1 - int(k[1:]) / 100 for k in ("p50", "p90", "p95", "p99") if pct.get(k, 0) > cutoff), 0.01)
            over = max(1, round(summary.rows * share))
            approx = "~"
        else:
            approx = ""
        severity = "warning" if over > max(1, summary.rows // 100) else "info"
        return [ConfigFinding(severity, "data.truncated", _("cutoff_len {cutoff} is below the longest row of {name} "
                                                      "({longest} tokens): {approx}{n} of {rows} rows are truncated"
                                                      "{estimate}", cutoff=cutoff, name=name, longest=longest,
                                                      approx=approx, n=over, rows=summary.rows, estimate=estimate),
                        "cutoff_len", _("cutoff_len {n}", n=_round_up(pct.get("p99", longest))))]
    if cutoff >= 4 * longest and cutoff > 512:
        return [ConfigFinding("info", "data.cutoff_large", _("the longest row of {name} has {longest} tokens; cutoff_len "
                                                       "{cutoff} is more than needed{estimate}", name=name,
                                                       longest=longest, cutoff=cutoff, estimate=estimate),
                        "cutoff_len", _("cutoff_len {n}", n=_round_up(longest)))]
    return []


def _steps_text(rows: int, per_epoch: int, total: int) -> str:
    """"; 29 training rows: 8 steps per epoch, 640 steps in all", each count with its own plural."""
    return (_n("; {n} training row", "; {n} training rows", rows)
            + _n(": {n} step per epoch", ": {n} steps per epoch", per_epoch)
            + _n(", {n} step in all", ", {n} steps in all", total))


def _round_up(n: int) -> int:
    return max(64, -(-int(n) // 64) * 64)


def rule_batch(spec: TrainSpec, ctx: RuleContext) -> list[ConfigFinding]:
    batch = int(value(spec, "per_device_train_batch_size"))
    accum = int(value(spec, "gradient_accumulation_steps"))
    gpus = spec.launch.world_size
    eff = effective_batch(spec)
    text = _n("effective batch {eff} = {batch} per device × {accum} accumulation × {n} process",
              "effective batch {eff} = {batch} per device × {accum} accumulation × {n} processes",
              gpus, eff=eff, batch=batch, accum=accum)
    rows = sum(s.rows for n in spec.dataset if (s := ctx.summaries.get(n)) is not None)
    if not rows:
        return [ConfigFinding("info", "batch.effective", text, "per_device_train_batch_size")]
    out: list[ConfigFinding] = []
    per_epoch = steps_per_epoch(spec, rows)
    max_steps = int(value(spec, "max_steps") or -1)
    epochs = float(value(spec, "num_train_epochs"))
    total = max_steps if max_steps > 0 else math.ceil(per_epoch * epochs)
    out.append(ConfigFinding("info", "batch.effective", text + _steps_text(train_rows(spec, rows), per_epoch, total),
                       "per_device_train_batch_size"))
    if eff > train_rows(spec, rows) > 0:
        out.append(ConfigFinding("warning", "batch.too_large", _("the effective batch {eff} is larger than the {rows} "
                                                           "training rows", eff=eff, rows=train_rows(spec, rows)),
                           "gradient_accumulation_steps", _("lower the batch or the accumulation")))
    save = int(value(spec, "save_steps"))
    if save > total:
        out.append(ConfigFinding("info", "batch.no_checkpoint", _("save_steps {save} > {total} steps: no checkpoint "
                                                            "before the end, so an interrupted run cannot resume",
                                                            save=save, total=total), "save_steps"))
    val = float(value(spec, "val_size") or 0)
    if 0 < val < 1 and rows * val < 1:
        out.append(ConfigFinding("warning", "batch.val_empty", _("val_size {val} of {rows} rows leaves no validation row",
                                                           val=val, rows=rows), "val_size"))
    return out
