"""Training metrics from LLaMA-Factory's files: series for the chart, a progress snapshot, anomalies.

`trainer_log.jsonl` (one line per logging step, written by LogCallback on rank 0) is the source of
truth; the trainer's stdout adds grad_norm (not in the log), stderr adds tqdm's live rate and ETA.

    {"current_steps": 5, "total_steps": 93, "loss": 5.7013, "lr": 1e-06, "epoch": 0.16,
     "percentage": 5.38, "elapsed_time": "0:02:03", "remaining_time": "0:36:15",
     "throughput": 13061.0, "total_tokens": 1614784}

Real-life details handled here: `NaN`/`Infinity` are written bare by json.dumps (orjson refuses
them); eval lines repeat a step with `eval_loss`; the last line has no loss; a resumed run appends
steps again from its checkpoint (mixed history: the later value of a step wins and the resume point
is kept); `overwrite_output_dir` deletes the file (the tail starts over); elapsed_time is
`str(timedelta)` ("1 day, 2:03:04") and restarts at a resume.

    poller = MetricsPoller(output_dir / "trainer_log.jsonl", run_dir / "stdout.log", run_dir / "stderr.log")
    if poller.poll():                      # cheap when nothing changed: one stat per file
        snap = poller.metrics.snapshot()   # ProgressSnapshot
        poller.metrics.loss.xs, .ys        # what the chart draws
"""

from __future__ import annotations

import bisect
import json
import math
import re
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path

from core.files.tail import LineTail
from core.train.anomalies import Anomaly, AnomalyDetector, RunContext
from core.train.output import LossDict, StderrTail, StdoutTail, TqdmProgress

_DURATION = re.compile(r"^(?:(\d+) days?, )?(\d+):(\d{2}):(\d{2})(?:\.\d+)?$")


@dataclass(frozen=True, slots=True)
class LogRecord:
    step: int
    total: int | None = None
    loss: float | None = None
    eval_loss: float | None = None
    lr: float | None = None
    epoch: float | None = None
    percentage: float | None = None
    elapsed_s: float | None = None
    remaining_s: float | None = None
    throughput: float | None = None  # tokens/s (only when num_input_tokens_seen is tracked)
    total_tokens: int | None = None


def parse_duration(text) -> float | None:
    """LLaMA-Factory's str(timedelta): '0:02:03', '1 day, 2:03:04' -> seconds."""
    if not isinstance(text, str):
        return None
    return _duration(text)


@lru_cache(maxsize=8192)  # consecutive lines repeat the same few strings
def _duration(text: str) -> float | None:
    match = _DURATION.match(text.strip())
    if not match:
        return None
    days, h, m, s = (int(g) if g else 0 for g in match.groups())
    return float(((days * 24 + h) * 60 + m) * 60 + s)


def _num(value) -> float | None:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    return float(value)


def parse_log_line(line: bytes | str) -> LogRecord | None:
    line = line.strip()
    if not line:
        return None
    try:
        import orjson

        raw = orjson.loads(line)
    except ValueError:
        try:
            raw = json.loads(line)  # NaN / Infinity, as Python's json.dumps writes them
        except ValueError:
            return None
    if not isinstance(raw, dict) or not isinstance(raw.get("current_steps"), int):
        return None
    total = raw.get("total_steps")
    tokens = raw.get("total_tokens")
    return LogRecord(
        step=raw["current_steps"], total=total if isinstance(total, int) else None,
        loss=_num(raw.get("loss")), eval_loss=_num(raw.get("eval_loss")), lr=_num(raw.get("lr")),
        epoch=_num(raw.get("epoch")), percentage=_num(raw.get("percentage")),
        elapsed_s=parse_duration(raw.get("elapsed_time")), remaining_s=parse_duration(raw.get("remaining_time")),
        throughput=_num(raw.get("throughput")), total_tokens=tokens if isinstance(tokens, int) else None,
    )


class MetricsTail:
    """New LogRecords appended to a trainer_log.jsonl since the last poll (partial lines wait).

    `start`: the byte offset where this run's lines begin (a resumed run appends to its predecessor's
    file); the lines before it are skipped, unless the file was replaced since (then it all counts).
    A poll reads everything there is, so one poll of a finished run sees its whole history."""

    def __init__(self, path: str | Path, start: int = 0) -> None:
        self.path = Path(path)
        self.start = start
        self._lines = LineTail(self.path)
        self.reset = False  # the last poll found the file truncated or replaced and started over

    def poll(self) -> list[LogRecord]:
        out: list[LogRecord] = []
        self.reset = False
        while True:
            at = self._lines.offset
            lines = self._lines.read_lines()
            if self._lines.reset:
                self.reset, self.start, at = True, 0, 0
            if not lines:
                return out
            for line in lines:
                if at >= self.start:
                    record = parse_log_line(line)
                    if record is not None:
                        out.append(record)
                at += len(line) + 1


@dataclass
class Series:
    """(step, value) points in step order, finite values only (what a chart can draw)."""

    xs: list[float] = field(default_factory=list)
    ys: list[float] = field(default_factory=list)

    def __len__(self) -> int:
        return len(self.xs)

    def add(self, x: float, y: float) -> None:
        """Append; a step at or before the last one replaces the points from there (a resumed run)."""
        if self.xs and x <= self.xs[-1]:
            self.truncate_from(x)
        if math.isfinite(y):
            self.xs.append(x)
            self.ys.append(y)

    def truncate_from(self, x: float) -> None:
        cut = bisect.bisect_left(self.xs, x)
        del self.xs[cut:], self.ys[cut:]

    @property
    def last(self) -> float | None:
        return self.ys[-1] if self.ys else None


class SmoothedSeries(Series):
    """TensorBoard's smoothing: a debiased exponential moving average, kept point by point so a resume can
    cut it anywhere. Non-finite values are skipped, as TensorBoard does."""

    def __init__(self, weight: float = 0.9) -> None:
        super().__init__()
        self.weight = weight
        self._acc: list[float] = []  # the biased EMA after each point

    def add(self, x: float, y: float) -> None:
        if self.xs and x <= self.xs[-1]:
            self.truncate_from(x)
        if not math.isfinite(y):
            return
        prev = self._acc[-1] if self._acc else 0.0
        acc = prev * self.weight + (1 - self.weight) * y
        self._acc.append(acc)
        debias = 1 - self.weight ** len(self._acc) if self.weight != 1 else 1.0
        self.xs.append(x)
        self.ys.append(acc / debias if debias else y)

    def truncate_from(self, x: float) -> None:
        cut = bisect.bisect_left(self.xs, x)
        del self.xs[cut:], self.ys[cut:], self._acc[cut:]


class RateWindow:
    """A rate (steps or tokens per second) from (seconds, count) observations, over a sliding window of
    the observations' own clock (the trainer's elapsed time, tqdm's elapsed time), so a burst of
    buffered output read at once counts at the times it was written.

    The first increase of the count in a segment is never part of a rate: after a resume, HF's progress
    bar jumps from 0 to the checkpoint's step in an instant, and a fresh run's first step carries its
    warm-up. The rate is None (not measurable) until the window spans `min_span` seconds after that."""

    def __init__(self, min_span: float = 10.0, max_span: float = 60.0) -> None:
        self.min_span, self.max_span = min_span, max_span
        self._points: list[tuple[float, float]] = []
        self._start: tuple[float, float] | None = None  # the last observation before the first increase

    def clear(self) -> None:
        self._points.clear()
        self._start = None

    def add(self, seconds: float, count: float) -> None:
        if not (math.isfinite(seconds) and math.isfinite(count)):
            return
        last = self._points[-1] if self._points else self._start
        if last is not None and (seconds < last[0] or count < last[1]):
            self.clear()  # the clock or the count went back: a new segment
        if self._start is None:
            self._start = (seconds, count)
        elif not self._points:
            if count > self._start[1]:
                self._points.append((seconds, count))  # the first increase: the window starts after it
            else:
                self._start = (seconds, count)
        else:
            self._points.append((seconds, count))
            while len(self._points) > 2 and self._points[-1][0] - self._points[1][0] >= self.max_span:
                self._points.pop(0)

    @property
    def rate(self) -> float | None:
        if len(self._points) < 2:
            return None
        (t0, n0), (t1, n1) = self._points[0], self._points[-1]
        if t1 - t0 < self.min_span or n1 <= n0:
            return None
        return (n1 - n0) / (t1 - t0)


# what dpo / kto print in their loss dicts on stdout (TRL's DPOTrainer / KTOTrainer), charted beside the loss
STAGE_METRICS: tuple[str, ...] = ("rewards/chosen", "rewards/rejected", "rewards/margins", "rewards/accuracies",
                                  "kl")


def stage_metrics_text(pairs) -> str:
    """"rewards chosen 0.42 · rejected -0.05 · margin 0.47 · accuracy 60%" for a DPO run ("" for SFT)."""
    from core.i18n import _

    values = dict(pairs)
    if not values:
        return ""
    names = {"rewards/chosen": _("rewards chosen {v}"), "rewards/rejected": _("rejected {v}"),
             "rewards/margins": _("margin {v}"), "kl": _("KL {v}")}
    parts = [names[k].format(v=f"{values[k]:.3g}") for k in names if k in values]
    if "rewards/accuracies" in values:
        parts.append(_("accuracy {v}").format(v=f"{values['rewards/accuracies']:.0%}"))
    return " · ".join(parts)


@dataclass(frozen=True)
class ProgressSnapshot:
    step: int = 0
    total: int | None = None
    loss: float | None = None
    smoothed_loss: float | None = None
    eval_loss: float | None = None
    lr: float | None = None
    epoch: float | None = None
    steps_per_s: float | None = None  # None: not measurable yet (see RateWindow)
    tokens_per_s: float | None = None
    elapsed_s: float | None = None  # all segments of a resumed run together
    eta_s: float | None = None
    resumed_at: tuple[int, ...] = ()
    anomalies: tuple[Anomaly, ...] = ()  # active now, errors first
    stage_metrics: tuple[tuple[str, float], ...] = ()  # dpo / kto: the latest (STAGE_METRICS key, value)

    @property
    def fraction(self) -> float | None:
        return min(1.0, self.step / self.total) if self.total else None


class RunMetrics:
    """Everything known about one run's training numbers, built from LogRecords and the trainer's output."""

    def __init__(self, smoothing: float = 0.9, window: int = 50, context: RunContext | None = None) -> None:
        self.smoothing, self.window, self.context = smoothing, window, context
        self.reset()

    def reset(self) -> None:
        self.loss = Series()
        self.loss_smooth = SmoothedSeries(self.smoothing)
        self.eval_loss = Series()
        self.lr = Series()
        self.steps_per_s = Series()
        self.grad_norm: list[float] = []  # from stdout, in order (it has no step)
        self.stage: dict[str, Series] = {}  # STAGE_METRICS key → its series (dpo / kto runs), from stdout
        self._epochs: list[tuple[float, int]] = []  # (epoch, step) of the loss records
        self.detector = AnomalyDetector(window=self.window, context=self.context)
        self.resumes: list[int] = []
        self.last: LogRecord | None = None
        self.max_step = 0
        self.total: int | None = None
        self._segment_base = 0.0  # elapsed time of the segments before a resume
        self._elapsed = 0.0
        self._log_rate = RateWindow()  # steps/s from trainer_log.jsonl's (elapsed_time, step)
        self._bar_rate = RateWindow()  # steps/s from tqdm's (elapsed, n) on stderr: finer grained
        self._token_rate = RateWindow()  # tokens/s from (elapsed_time, total_tokens)
        self._tqdm: TqdmProgress | None = None

    # ------------------------------------------------------------------ input
    def add_records(self, records: list[LogRecord]) -> list[Anomaly]:
        found: list[Anomaly] = []
        for r in records:
            found += self._add(r)
        return found

    def _add(self, r: LogRecord) -> list[Anomaly]:
        found: list[Anomaly] = []
        if r.elapsed_s is not None and self.last is not None and self.last.elapsed_s is not None:
            restarted = r.elapsed_s + 2 < self.last.elapsed_s
        else:
            restarted = False
        if r.step < self.max_step or restarted:
            if not self.resumes or self.resumes[-1] != r.step:
                self.resumes.append(r.step)
            self._segment_base = self._elapsed
            for window in (self._log_rate, self._bar_rate, self._token_rate):
                window.clear()
            self.detector.forget_after_resume()
            self.max_step = r.step
        if r.total:
            self.total = r.total
        if r.elapsed_s is not None:
            self._elapsed = self._segment_base + r.elapsed_s
        if r.loss is not None:
            self.loss.add(r.step, r.loss)
            self.loss_smooth.add(r.step, r.loss)
            found += self.detector.feed_loss(r.step, r.loss)
            if r.epoch is not None:
                self._epochs.append((r.epoch, r.step))
        if r.eval_loss is not None:
            self.eval_loss.add(r.step, r.eval_loss)
            found += self.detector.feed_eval_loss(r.step, r.eval_loss, r.epoch)
        if r.lr is not None:
            self.lr.add(r.step, r.lr)
        if r.elapsed_s is not None and r.loss is not None:
            found += self._rate(r)
        if r.elapsed_s is not None and r.total_tokens is not None:
            self._token_rate.add(r.elapsed_s, r.total_tokens)
        self.max_step = max(self.max_step, r.step)
        self.last = r
        return found

    def _rate(self, r: LogRecord) -> list[Anomaly]:
        """Steps per second over the last >= 10 s of log (elapsed_time has a 1 s resolution)."""
        self._log_rate.add(r.elapsed_s, r.step)
        rate = self._log_rate.rate
        if rate is None:
            return []
        self.steps_per_s.add(r.step, rate)
        return self.detector.feed_throughput(r.step, rate)

    def add_loss_dicts(self, dicts: list[LossDict]) -> list[Anomaly]:
        found: list[Anomaly] = []
        for d in dicts:
            if d.kind == "train":
                for key in STAGE_METRICS:
                    if key in d.values:
                        step = self._step_of_epoch(d.values.get("epoch"))
                        self.stage.setdefault(key, Series()).add(step, d.values[key])
            if d.kind == "train" and "grad_norm" in d.values:
                value = d.values["grad_norm"]
                self.grad_norm.append(value)
                found += self.detector.feed_grad_norm(self._step_of_epoch(d.values.get("epoch")), value)
        return found

    def _step_of_epoch(self, epoch: float | None) -> int:
        """The step of the latest loss record with this epoch (stdout prints it with 4 significant digits)."""
        if epoch is not None:
            tol = 5e-4 * max(1.0, abs(epoch))
            for e, step in reversed(self._epochs[-2000:]):
                if abs(e - epoch) <= tol:
                    return step
        return self.max_step

    def add_progress(self, bars: list[TqdmProgress], total_hint: int | None = None) -> None:
        total = self.total or total_hint
        for bar in bars:
            if total is None or bar.total == total:
                self._tqdm = bar
                self._bar_rate.add(bar.elapsed_s, bar.n)

    # ------------------------------------------------------------------ output
    def snapshot(self) -> ProgressSnapshot:
        r, bar = self.last, self._tqdm
        step = max(self.last.step if r else 0, bar.n if bar and (self.total in (None, bar.total)) else 0)
        # Rates and the ETA come from this segment's own observations only: tqdm's rate and remaining
        # time, and LLaMA-Factory's remaining_time, count the steps a resume skipped as done in no time.
        rate = self._bar_rate.rate or self._log_rate.rate
        total = self.total or (bar.total if bar else None)
        eta = None
        if total is not None and step >= total:
            eta = 0.0
        elif rate and total:
            eta = (total - step) / rate
        active = sorted(self.detector.active.values(), key=lambda a: (a.severity != "error", a.step))
        return ProgressSnapshot(
            step=step, total=total, loss=self.loss.last,
            smoothed_loss=self.loss_smooth.last, eval_loss=self.eval_loss.last, lr=self.lr.last,
            epoch=r.epoch if r else None, steps_per_s=rate,
            tokens_per_s=self._token_rate.rate,
            elapsed_s=self._elapsed if r is not None and r.elapsed_s is not None else (bar.elapsed_s if bar else None),
            eta_s=eta, resumed_at=tuple(self.resumes), anomalies=tuple(active),
            stage_metrics=tuple((k, self.stage[k].last) for k in STAGE_METRICS
                                if k in self.stage and self.stage[k].last is not None),
        )


class MetricsPoller:
    """Polls a run's trainer_log.jsonl (and, when given, its stdout and stderr) into one RunMetrics."""

    def __init__(self, trainer_log: str | Path, stdout_log: str | Path | None = None,
                 stderr_log: str | Path | None = None, *, smoothing: float = 0.9, log_start: int = 0,
                 context: RunContext | None = None) -> None:
        self.metrics = RunMetrics(smoothing, context=context)
        self.log = MetricsTail(trainer_log, log_start)
        self.stdout = StdoutTail(stdout_log) if stdout_log else None
        self.stderr = StderrTail(stderr_log) if stderr_log else None
        self.new_anomalies: list[Anomaly] = []

    def poll(self) -> bool:
        """Read what is new; True when anything changed."""
        records = self.log.poll()
        if self.log.reset:
            self.metrics.reset()
        found = self.metrics.add_records(records)
        changed = bool(records) or self.log.reset
        if self.stdout is not None:
            dicts = self.stdout.poll()
            found += self.metrics.add_loss_dicts(dicts)
            changed |= bool(dicts)
        if self.stderr is not None:
            bars = self.stderr.poll()
            self.metrics.add_progress(bars, self.stderr.total_steps)
            changed |= bool(bars)
        self.new_anomalies = found
        return changed
