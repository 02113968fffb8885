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
from core.train.anomalies import Anomaly, AnomalyDetector
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
    """New LogRecords appended to a trainer_log.jsonl since the last poll (partial lines wait)."""

    def __init__(self, path: str | Path) -> None:
        self.path = Path(path)
        self._lines = LineTail(self.path)

    @property
    def reset(self) -> bool:
        """The last poll found the file truncated or replaced and started over."""
        return self._lines.reset

    def poll(self) -> list[LogRecord]:
        return [r for r in map(parse_log_line, self._lines.read_lines()) if r is not None]


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


@dataclass(frozen=True)
class ProgressSnapshot:
    step: int = 0
    total: int | None = None
    loss: float | None = None
    smoothed_loss: float | None = None
    eval_loss: float | None = None
    lr: float | None = None
    epoch: float | None = None
    steps_per_s: float | None = None
    tokens_per_s: float | None = None
    elapsed_s: float | None = None  # all segments of a resumed run together
    eta_s: float | None = None
    resumed_at: tuple[int, ...] = ()
    anomalies: tuple[Anomaly, ...] = ()  # active now, errors first

    @property
    def fraction(self) -> float | None:
        return min(1.0, self.step / self.total) if self.total else None


class RunMetrics:
    """Everything known about one run's training numbers, built from LogRecords and the trainer's output."""

    def __init__(self, smoothing: float = 0.9, window: int = 50) -> None:
        self.smoothing, self.window = smoothing, window
        self.reset()

    def reset(self) -> None:
        self.loss = Series()
        self.loss_smooth = SmoothedSeries(self.smoothing)
        self.eval_loss = Series()
        self.lr = Series()
        self.steps_per_s = Series()
        self.grad_norm: list[float] = []  # from stdout, in order (it has no step)
        self._epochs: list[tuple[float, int]] = []  # (epoch, step) of the loss records
        self.detector = AnomalyDetector(window=self.window)
        self.resumes: list[int] = []
        self.last: LogRecord | None = None
        self.max_step = 0
        self.total: int | None = None
        self._segment_base = 0.0  # elapsed time of the segments before a resume
        self._elapsed = 0.0
        self._rate_points: list[tuple[float, int]] = []  # (elapsed_s, step) of the current segment
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
            self._rate_points.clear()
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
        if r.lr is not None:
            self.lr.add(r.step, r.lr)
        if r.elapsed_s is not None and r.loss is not None:
            found += self._rate(r)
        self.max_step = max(self.max_step, r.step)
        self.last = r
        return found

    def _rate(self, r: LogRecord) -> list[Anomaly]:
        """Steps per second over the last >= 10 s of log (elapsed_time has a 1 s resolution)."""
        points = self._rate_points
        points.append((r.elapsed_s, r.step))
        while len(points) > 2 and points[-1][0] - points[1][0] >= 10:
            points.pop(0)
        (t0, s0), (t1, s1) = points[0], points[-1]
        if t1 - t0 < 10 or s1 <= s0:
            return []
        rate = (s1 - s0) / (t1 - t0)
        self.steps_per_s.add(r.step, rate)
        return self.detector.feed_throughput(r.step, rate)

    def add_loss_dicts(self, dicts: list[LossDict]) -> list[Anomaly]:
        found: list[Anomaly] = []
        for d in dicts:
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

    # ------------------------------------------------------------------ output
    def snapshot(self) -> ProgressSnapshot:
        r, bar = self.last, self._tqdm
        step = max(self.last.step if r else 0, bar.n if bar and (self.total in (None, bar.total)) else 0)
        rate = bar.rate if bar and bar.rate else (self.steps_per_s.last if self.steps_per_s else None)
        eta = bar.remaining_s if bar and bar.remaining_s is not None and bar.n >= (r.step if r else 0) else None
        if eta is None and r is not None:
            eta = r.remaining_s if r.remaining_s is not None else None
        if eta is None and rate and self.total:
            eta = (self.total - step) / rate
        active = sorted(self.detector.active.values(), key=lambda a: (a.severity != "error", a.step))
        return ProgressSnapshot(
            step=step, total=self.total or (bar.total if bar else None), loss=self.loss.last,
            smoothed_loss=self.loss_smooth.last, eval_loss=self.eval_loss.last, lr=self.lr.last,
            epoch=r.epoch if r else None, steps_per_s=rate,
            tokens_per_s=r.throughput if r and r.throughput is not None else None,
            elapsed_s=self._elapsed if r is not None and r.elapsed_s is not None else (bar.elapsed_s if bar else None),
            eta_s=eta, resumed_at=tuple(self.resumes), anomalies=tuple(active),
        )


class MetricsPoller:
    """Polls a run's trainer_log.jsonl (and, when given, its stdout and stderr) into one RunMetrics."""

    def __init__(self, trainer_log: str | Path, stdout_log: str | Path | None = None,
                 stderr_log: str | Path | None = None, *, smoothing: float = 0.9) -> None:
        self.metrics = RunMetrics(smoothing)
        self.log = MetricsTail(trainer_log)
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
