"""Runs side by side: the Train step's table of runs and the comparison of two or more of them.

`runs_table(ws)` is the list both front-ends show: per training run its status, last loss, best and last eval loss,
the tuned model's chrF when an eval was made of it, tokens/s and duration, and a column per hyperparameter whose
value differs between the runs (read from each run's own YAML copy, LLaMA-Factory's names). `compare_runs(ws, ids,
align)` adds the loss and eval-loss curves aligned by step, tokens seen (LLaMA-Factory's total_tokens) or epoch,
the losses at a few shared points of that axis, the eval-score diff and the rows where the tuned models disagree
(core.train.run_compare_evals). `devtune runs compare` prints its text (core.train.run_compare_text) or
`to_json()`; the Train step draws the same.
"""

from __future__ import annotations

import bisect
import math
import time
from dataclasses import dataclass, field, replace
from typing import Any

from core.errors import BadInput
from core.i18n import _
from core.train.run_compare_evals import RunEval, disagreements, latest_evals, run_eval_of, score_diff
from core.train.runs import RunError, RunRecord, find_run, list_runs, run_dir, status_label, trainer_log_source
from core.workspace.layout import Workspace

ALIGNMENTS = ("step", "tokens", "epoch")
RUN_OWN_KEYS = ("output_dir", "run_name", "logging_dir")  # each run has its own: never a difference worth showing
COLUMNS = ("id", "status", "last_loss", "best_eval_loss", "last_eval_loss", "eval_chrf", "tokens_per_s",
           "duration_s")
AT_POINTS = 6  # the shared points of the axis the text gives the losses at


def column_label(column: str) -> str:
    return {"id": _("run"), "status": _("status"), "last_loss": _("last loss"), "best_eval_loss": _("best eval loss"),
            "last_eval_loss": _("last eval loss"), "eval_chrf": _("eval chrF"), "tokens_per_s": _("tokens/s"),
            "duration_s": _("duration")}.get(column, column)


def align_label(align: str) -> str:
    return {"step": _("step"), "tokens": _("tokens seen"), "epoch": _("epoch")}[align]


@dataclass
class Point:
    step: int
    epoch: float | None
    tokens: int | None
    value: float

    def x(self, align: str) -> float | None:
        return {"step": self.step, "tokens": self.tokens, "epoch": self.epoch}[align]


@dataclass
class RunSummary:
    """One run as the table and the comparison show it."""

    id: str
    status: str
    started: float
    duration_s: float  # the trainer's clock over its logged steps; the wall clock when it logged none
    config: str | None
    params: dict[str, Any] | None  # the meaning of its YAML copy (None: the copy cannot be read)
    steps: int = 0
    last_loss: float | None = None
    best_eval_loss: float | None = None
    best_eval_step: int | None = None
    last_eval_loss: float | None = None
    tokens_per_s: float | None = None
    eval: RunEval | None = None
    loss: list[Point] = field(default_factory=list, repr=False)
    eval_loss: list[Point] = field(default_factory=list, repr=False)

    def value(self, column: str) -> Any:
        if column == "eval_chrf":
            return self.eval.scores.get("chrf") if self.eval else None
        if column in COLUMNS:
            return getattr(self, column)
        return param_value(self.params, column)

    def cell(self, column: str) -> str:
        """The value as both front-ends write it in the table."""
        value = self.value(column)
        if column == "status":
            return status_label(value)
        if column == "duration_s":
            from core.train.snapshot import format_duration

            return format_duration(value)
        return format_value(value)

    def to_json(self) -> dict:
        return {"id": self.id, "status": self.status, "started": self.started, "duration_s": round(self.duration_s, 1),
                "config": self.config, "steps": self.steps, "last_loss": self.last_loss,
                "best_eval_loss": self.best_eval_loss, "best_eval_step": self.best_eval_step,
                "last_eval_loss": self.last_eval_loss, "tokens_per_s": self.tokens_per_s,
                "eval": self.eval.to_json() if self.eval else None}


def format_value(value: Any) -> str:
    if value is None:
        return "-"
    if isinstance(value, bool):
        return str(value).lower()
    if isinstance(value, float):
        if not math.isfinite(value):
            return str(value)
        return f"{value:.0f}" if abs(value) >= 1000 else f"{value:.4g}"
    return str(value)


def param_value(params: dict | None, key: str) -> Any:
    """A hyperparameter in effect: the YAML's value, else LLaMA-Factory's default (None: unknown)."""
    from core.config.spec import LF_DEFAULTS

    if params is None:
        return None
    return params.get(key, LF_DEFAULTS.get(key))


def read_params(ws: Workspace, record: RunRecord) -> dict | None:
    """What the run's own YAML copy means (core.config.yaml_in: LLaMA-Factory's reading, defaults dropped)."""
    from core.config.yaml_in import ImportProblem, load_lf_yaml_text, meaning

    if not record.config:
        return None
    try:
        return meaning(load_lf_yaml_text(ws.abs(record.config).read_text(encoding="utf-8")))
    except (OSError, UnicodeDecodeError, ImportProblem):
        return None


def differing_keys(summaries: list[RunSummary]) -> list[str]:
    """The hyperparameters whose values differ between the runs whose YAML could be read, in name order."""
    known = [s.params for s in summaries if s.params is not None]
    if len(known) < 2:
        return []
    keys = sorted({k for p in known for k in p} - set(RUN_OWN_KEYS))
    return [k for k in keys if len({repr(param_value(p, k)) for p in known}) > 1]


def summarize_run(ws: Workspace, record: RunRecord, run_eval: RunEval | None = None) -> RunSummary:
    from core.train.metrics import MetricsTail, RunMetrics
    from core.train.watch import run_speed

    path, start = trainer_log_source(run_dir(ws, record.id), record)
    summary = RunSummary(record.id, record.status.value, record.started,
                         (record.ended or time.time()) - record.started, record.config, read_params(ws, record),
                         eval=run_eval)
    tokens: list[tuple[int, int]] = []  # (step, total_tokens) of the loss lines
    records = MetricsTail(path, start).poll()
    metrics = RunMetrics()
    metrics.add_records(records)
    elapsed = metrics.snapshot().elapsed_s  # the trainer's clock, every segment of a resumed run together
    if elapsed is not None:
        summary.duration_s = elapsed
    for r in records:
        summary.steps = r.step  # the last logged (a resume counts on from its checkpoint)
        if r.total_tokens is not None:
            _cut(tokens, r.step, lambda t: t[0])
            tokens.append((r.step, r.total_tokens))
        if r.loss is not None and math.isfinite(r.loss):
            _cut(summary.loss, r.step, lambda p: p.step)  # a resume logs its steps again: the later value wins
            summary.loss.append(Point(r.step, r.epoch, r.total_tokens, r.loss))
        if r.eval_loss is not None and math.isfinite(r.eval_loss):
            _cut(summary.eval_loss, r.step, lambda p: p.step)
            at = bisect.bisect_right([t[0] for t in tokens], r.step) - 1
            summary.eval_loss.append(Point(r.step, r.epoch, tokens[at][1] if at >= 0 else None, r.eval_loss))
    if summary.loss:
        summary.last_loss = summary.loss[-1].value
    if summary.eval_loss:
        best = min(summary.eval_loss, key=lambda p: p.value)
        summary.best_eval_loss, summary.best_eval_step = best.value, best.step
        summary.last_eval_loss = summary.eval_loss[-1].value
    speed = run_speed(ws, record)
    summary.tokens_per_s = speed.rate.tokens_per_s if speed is not None else None
    return summary


def _cut(points: list, step: int, step_of) -> None:
    while points and step_of(points[-1]) >= step:
        points.pop()


# ---------------------------------------------------------------- the table

@dataclass
class RunsTable:
    rows: list[RunSummary]
    params: list[str]  # the hyperparameter columns: those that differ between the rows

    @property
    def columns(self) -> list[str]:
        return list(COLUMNS) + self.params

    def sorted_by(self, column: str, descending: bool = False) -> list[RunSummary]:
        """The rows ordered by a column; a run without that value goes last either way."""
        known = [r for r in self.rows if r.value(column) is not None]
        unknown = [r for r in self.rows if r.value(column) is None]
        return sorted(known, key=lambda r: _order(r.value(column)), reverse=descending) + unknown

    def to_json(self) -> dict:
        return {"columns": self.columns, "params": self.params,
                "runs": [{**r.to_json(), "params": {k: r.value(k) for k in self.params}} for r in self.rows]}


def _order(value: Any) -> tuple:
    return (0, value, "") if isinstance(value, (int, float)) and not isinstance(value, bool) else (1, 0, str(value))


def runs_table(ws: Workspace) -> RunsTable:
    """Every training run of the workspace, newest first, with the columns of what differs between them."""
    records = [r for r in list_runs(ws) if r.kind == "train"]
    evals = latest_evals(ws, [r.id for r in records])
    rows = [summarize_run(ws, r, run_eval_of(ws, evals[r.id], with_rows=False) if r.id in evals else None)
            for r in records]
    return RunsTable(rows, differing_keys(rows))


# ---------------------------------------------------------------- the comparison

@dataclass
class RunComparison:
    align: str
    runs: list[RunSummary]
    params: list[str]  # the differing hyperparameters
    curves: dict[str, dict[str, tuple[list[float], list[float]]]]  # run -> loss / eval_loss -> (xs, ys)
    at: list[dict]  # the losses at shared points of the axis: {"x", "loss": {run: v}, "eval_loss": {run: v}}
    eval_scores: list[dict]  # run_compare_evals.score_diff
    disagreements: list[dict]  # run_compare_evals.disagreements
    notes: list[str]

    def param_diff(self) -> dict[str, dict[str, Any]]:
        return {k: {r.id: param_value(r.params, k) for r in self.runs} for k in self.params}

    def aligned(self, align: str) -> RunComparison:
        """The same runs on another axis (no file is read again)."""
        if align not in ALIGNMENTS:
            raise BadInput(_("--align is one of {choices}, not {value}", choices=", ".join(ALIGNMENTS), value=align))
        curves = {r.id: {"loss": curve(r.loss, align), "eval_loss": curve(r.eval_loss, align)} for r in self.runs}
        notes = [n for n in self.notes if n not in _axis_notes(self.runs, self.curves, self.align)]
        return replace(self, align=align, curves=curves, at=shared_points(curves, align),
                       notes=notes + _axis_notes(self.runs, curves, align))

    def to_json(self) -> dict:
        return {"align": self.align, "runs": [r.to_json() for r in self.runs], "params": self.param_diff(),
                "curves": {run: {name: {"x": xs, "y": ys} for name, (xs, ys) in c.items()}
                           for run, c in self.curves.items()},
                "at": self.at, "eval_scores": self.eval_scores, "disagreements": self.disagreements,
                "notes": self.notes}


def _axis_notes(runs: list[RunSummary], curves: dict, align: str) -> list[str]:
    return [_("run {id} logged no {what}, so it has no curve on that axis; align by step instead",
              id=r.id, what={"tokens": "total_tokens", "epoch": "epoch"}.get(align, align))
            for r in runs if r.loss and not curves[r.id]["loss"][0]]


def curve(points: list[Point], align: str) -> tuple[list[float], list[float]]:
    xs, ys = [], []
    for p in points:
        x = p.x(align)
        if x is not None and (not xs or x > xs[-1]):
            xs.append(float(x))
            ys.append(p.value)
    return xs, ys


def shared_points(curves: dict[str, dict], align: str, n: int = AT_POINTS) -> list[dict]:
    """`n` points spread over the part of the axis every run's loss curve covers, each run's loss (and eval
    loss) as of that point: its latest value at or before it."""
    spans = [c["loss"][0] for c in curves.values() if c["loss"][0]]
    if len(spans) < 2:
        return []
    lo, hi = max(xs[0] for xs in spans), min(xs[-1] for xs in spans)
    if hi < lo:
        return []
    wanted = [lo + (hi - lo) * i / (n - 1) for i in range(n)] if hi > lo else [lo]
    if align == "step" or align == "tokens":
        wanted = [float(round(x)) for x in wanted]
    out, seen = [], set()
    for x in wanted:
        if x in seen:
            continue
        seen.add(x)
        out.append({"x": x, **{name: {run: _as_of(c[name], x) for run, c in curves.items()}
                               for name in ("loss", "eval_loss")}})
    return out


def _as_of(series: tuple[list[float], list[float]], x: float) -> float | None:
    xs, ys = series
    at = bisect.bisect_right(xs, x) - 1
    return ys[at] if at >= 0 else None


def compare_runs(ws: Workspace, ids: list[str], align: str = "step") -> RunComparison:
    """Two or more runs (ids or unique prefixes) side by side; BadInput names a run that does not exist."""
    if align not in ALIGNMENTS:
        raise BadInput(_("--align is one of {choices}, not {value}", choices=", ".join(ALIGNMENTS), value=align))
    records: list[RunRecord] = []
    for ref in ids:
        try:
            record = find_run(ws, ref, kind=None)
        except RunError as exc:
            raise BadInput(str(exc)) from exc
        if all(r.id != record.id for r in records):
            records.append(record)
    if len(records) < 2:
        raise BadInput(_("name two or more runs to compare (`devtune runs` lists them)"))
    evals = latest_evals(ws, [r.id for r in records])
    loaded = {r.id: run_eval_of(ws, evals[r.id], with_rows=True) for r in records if r.id in evals}
    runs = [summarize_run(ws, r, loaded.get(r.id)) for r in records]
    notes = [_("run {id}: its config copy {path} cannot be read, so its hyperparameters are not compared",
               id=r.id, path=r.config or "-") for r in runs if r.params is None]
    with_evals = {r.id: r.eval for r in runs if r.eval is not None}
    if len(with_evals) < len(runs) and with_evals:
        notes.append(_("no eval was made of {ids}: `devtune eval RUN` makes one",
                       ids=", ".join(r.id for r in runs if r.eval is None)))
    both = len(with_evals) >= 2
    unaligned = RunComparison(align, runs, differing_keys(runs), {r.id: {"loss": ([], []), "eval_loss": ([], [])}
                                                                  for r in runs}, [],
                              score_diff(with_evals) if both else [], disagreements(with_evals) if both else [], notes)
    return unaligned.aligned(align)
