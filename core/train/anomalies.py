"""What is wrong with a training run while it runs, from its numbers alone.

- loss NaN or inf (error), loss exactly 0 (error: LLaMA-Factory users meet it when every label is
  masked, or when NaN gradients are being filtered — #4278, #2916), grad_norm NaN (error);
- over a window of the run's own logged steps, a least-squares trend: the loss rising by more than
  its noise (diverging, warning) or not falling by more than its noise (no_decrease, warning). A
  decrease, however small, that stands out of the step-to-step noise is never called "not falling";
- oscillation: the loss swings up and down by a large share of its level (the guide's MI300X
  symptom, LlamaFactory#7890 — try a lower learning rate, more warmup, bf16);
- throughput collapse: the steps per second fall far below the run's own median (thermal or power
  throttling, another job on the GPU, swapping, a slow disk while saving);
- overfitting: the eval loss (on the held-out set, core.config.eval_loss) has risen since its lowest
  point for at least two evaluations, by more than OVERFIT_MARGIN of it, while the training loss kept
  falling by more than that: the model memorises its rows. The warning names the step of the lowest
  eval loss (where to stop) and what to change (fewer epochs, a lower learning rate, more data).

`AnomalyDetector` is fed point by point (it is cheap enough for a 100k-line log read at re-attach:
the window checks run every few points). `events` holds every anomaly once, at its first step;
`active` holds the window conditions that hold now (they clear when the run recovers).
"""

from __future__ import annotations

import math
from collections import deque
from dataclasses import dataclass
from statistics import median

from core.i18n import _

ERROR, WARNING = "error", "warning"
OVERFIT_MARGIN = 0.03  # the eval loss up, and the training loss down, by more than 3% since the lowest eval loss
TRAIN_LEVEL_POINTS = 5  # the training loss at an evaluation: the mean of the last few logged values
LOSS_FLOOR = 1e-3  # a loss level below this is converged (a DPO loss of 2e-6): its relative swings are noise


@dataclass(frozen=True)
class RunContext:
    """What the advice must agree with: the run's device ("cpu" | "gpu", None: unknown) and its config's
    max_grad_norm (None: unknown). core.train.failure_facts.run_context reads them from the run."""

    device: str | None = None
    max_grad_norm: float | None = None

    def grad_norm_advice(self) -> str:
        if self.max_grad_norm is not None and self.max_grad_norm > 1.0:
            return _("lower max_grad_norm to 1.0 (the config sets {n})", n=people_number(self.max_grad_norm))
        return _("keep max_grad_norm at 1.0")


def people_number(x: float) -> str:
    """A number as a person writes it: 120, 2.5, 0.05 (never 1.2e+02)."""
    if float(x).is_integer() and abs(x) < 1e15:
        return str(int(x))
    return f"{x:.0f}" if abs(x) >= 100 else f"{x:.2f}".rstrip("0").rstrip(".") if abs(x) >= 0.01 else f"{x:.2g}"


@dataclass(frozen=True)
class Anomaly:
    id: str  # loss_nan, loss_inf, loss_zero, grad_norm_nan, no_decrease, diverging, oscillation, throughput_collapse,
    #          overfitting
    step: int
    severity: str
    message: str
    stop_at: int | None = None  # overfitting: the step of the lowest eval loss


@dataclass(frozen=True, slots=True)
class EvalPoint:
    step: int
    loss: float
    train_loss: float | None  # the training loss level when it was measured
    epoch: float | None


class AnomalyDetector:
    def __init__(self, window: int = 50, oscillation_window: int = 30, check_every: int = 5,
                 context: RunContext | None = None) -> None:
        self.context = context or RunContext()
        self.window = window
        self.oscillation_window = oscillation_window
        self.check_every = check_every
        self.events: list[Anomaly] = []
        self.active: dict[str, Anomaly] = {}
        self._seen: set[str] = set()
        self._losses: deque[float] = deque(maxlen=max(window, oscillation_window))
        self._rates: deque[float] = deque(maxlen=200)
        self._n = 0
        self.evals: list[EvalPoint] = []

    # ------------------------------------------------------------------ feeding
    def feed_loss(self, step: int, value: float) -> list[Anomaly]:
        found: list[Anomaly] = []
        if math.isnan(value):
            found += self._once("loss_nan", step, ERROR, _(
                "loss is NaN at step {step}: training has diverged; lower learning_rate, use bf16 rather than fp16, "
                "{grad_norm}, and resume from the last checkpoint before it", step=step,
                grad_norm=self.context.grad_norm_advice()))
            return found
        if math.isinf(value):
            found += self._once("loss_inf", step, ERROR, _(
                "loss is infinite at step {step}: training has diverged; lower learning_rate or use bf16", step=step))
            return found
        if value == 0.0:
            found += self._once("loss_zero", step, ERROR, _(
                "loss is exactly 0 at step {step}: either every label is masked (check the template and that the "
                "dataset's output field is filled) or NaN gradients are being filtered (lower learning_rate)",
                step=step))
        self._losses.append(value)
        self._n += 1
        if self._n % self.check_every == 0:
            found += self._check_windows(step)
        return found

    def feed_grad_norm(self, step: int, value: float) -> list[Anomaly]:
        if math.isfinite(value):
            return []
        return self._once("grad_norm_nan", step, ERROR, _(
            "grad_norm is {value} at step {step}: the gradients overflowed; lower learning_rate, {grad_norm}, prefer "
            "bf16 to fp16", value="NaN" if math.isnan(value) else "inf", step=step,
            grad_norm=self.context.grad_norm_advice()))

    def feed_throughput(self, step: int, steps_per_s: float) -> list[Anomaly]:
        if not math.isfinite(steps_per_s) or steps_per_s < 0:
            return []
        self._rates.append(steps_per_s)
        if len(self._rates) < 8:
            return []
        earlier = median(list(self._rates)[:-3])
        recent = list(self._rates)[-3:]
        if earlier > 0 and max(recent) < 0.5 * earlier:
            return self._set_active("throughput_collapse", step, WARNING, _(
                "throughput fell from {before} to {now} steps/s at step {step}: look for throttling (temperature, "
                "power cap), another job on the GPUs, or a slow disk", before=_fmt(earlier), now=_fmt(recent[-1]),
                step=step))
        self.active.pop("throughput_collapse", None)
        return []

    def feed_eval_loss(self, step: int, value: float, epoch: float | None = None) -> list[Anomaly]:
        """An eval loss; a step at or before the last one replaces the evaluations from there (a resume)."""
        if not math.isfinite(value):
            return []
        while self.evals and self.evals[-1].step >= step:
            self.evals.pop()
        recent = list(self._losses)[-TRAIN_LEVEL_POINTS:]
        self.evals.append(EvalPoint(step, value, sum(recent) / len(recent) if recent else None, epoch))
        return self._check_overfitting(step)

    def _check_overfitting(self, step: int) -> list[Anomaly]:
        verdict = overfitting(self.evals)
        if verdict is None:
            self.active.pop("overfitting", None)
            return []
        best, last = verdict
        epochs = ""
        if best.epoch is not None:
            epochs = _(" (num_train_epochs {n})", n=people_number(round(max(best.epoch, 0.1), 1)))
        message = _(
            "overfitting: the eval loss rose from {best} at step {best_step} to {now} at step {step} while the training "
            "loss fell from {train_then} to {train_now}; the model is memorising its rows. Stop at step {best_step}, the "
            "lowest eval loss (its checkpoint, if one was saved there), or train again with fewer epochs{epochs}, a "
            "lower learning_rate, or more data", best=_fmt(best.loss), best_step=best.step, now=_fmt(last.loss),
            step=last.step, train_then=_fmt(best.train_loss), train_now=_fmt(last.train_loss), epochs=epochs)
        held = self.active.get("overfitting")
        if held is not None and held.stop_at == best.step:  # still the same verdict: its numbers follow
            self.active["overfitting"] = Anomaly("overfitting", held.step, WARNING, message, best.step)
            return []
        anomaly = Anomaly("overfitting", step, WARNING, message, best.step)
        self.active["overfitting"] = anomaly
        self.events.append(anomaly)
        return [anomaly]

    def forget_after_resume(self) -> None:
        """A resumed run starts its windows afresh (the steps after the checkpoint are redone)."""
        self._losses.clear()
        self._rates.clear()
        self._n = 0
        for key in ("no_decrease", "diverging", "oscillation", "throughput_collapse"):
            self.active.pop(key, None)

    # ------------------------------------------------------------------ windows
    def _check_windows(self, step: int) -> list[Anomaly]:
        found: list[Anomaly] = []
        losses = list(self._losses)
        oscillating = False
        if len(losses) >= self.oscillation_window:
            win = losses[-self.oscillation_window:]
            diffs = [b - a for a, b in zip(win, win[1:])]
            signs = [d > 0 for d in diffs if d != 0]
            changes = sum(1 for a, b in zip(signs, signs[1:]) if a != b) / max(1, len(signs) - 1)
            level = sum(abs(v) for v in win) / len(win)
            swing = sum(abs(d) for d in diffs) / len(diffs) / level if level > 0 else 0.0
            oscillating = changes >= 0.6 and swing >= 0.25 and level >= LOSS_FLOOR  # a converged loss: noise
            if oscillating:
                advice = _("lower learning_rate, add warmup (warmup_ratio 0.1), use bf16")
                if self.context.device == "gpu":
                    advice += "; " + _("on an AMD GPU (MI300X) also check the ROCm/PyTorch versions")
                found += self._set_active("oscillation", step, WARNING, _(
                    "loss oscillates at step {step} (swings of {pct}% of its level): {advice}", step=step,
                    pct=f"{swing * 100:.0f}", advice=advice))
            else:
                self.active.pop("oscillation", None)
        if len(losses) >= self.window:
            trend = loss_trend(losses[-self.window:])
            rising = trend.change > 2 * trend.noise and trend.change > 0.05 * trend.level
            flat = not rising and not oscillating and trend.change > -2 * trend.noise
            if rising:
                found += self._set_active("diverging", step, WARNING, _(
                    "loss is rising over the last {n} logged steps (trend {first} -> {last}): the learning rate is "
                    "too high for this run; lower learning_rate, add warmup (warmup_ratio 0.1), keep max_grad_norm "
                    "at 1.0", n=self.window, first=_fmt(trend.first), last=_fmt(trend.last)))
            else:
                self.active.pop("diverging", None)
            if flat:
                found += self._set_active("no_decrease", step, WARNING, _(
                    "loss has stopped falling over the last {n} logged steps (trend {first} -> {last}, less than "
                    "its step-to-step noise of ±{noise}): check the learning rate (too low, or decayed to 0), the "
                    "data (duplicates, wrong template), or stop: it has converged",
                    n=self.window, first=_fmt(trend.first), last=_fmt(trend.last), noise=_fmt(2 * trend.noise)))
            else:
                self.active.pop("no_decrease", None)
        return found

    def _once(self, key: str, step: int, severity: str, message: str) -> list[Anomaly]:
        if key in self._seen:
            return []
        self._seen.add(key)
        anomaly = Anomaly(key, step, severity, message)
        self.events.append(anomaly)
        self.active[key] = anomaly
        return [anomaly]

    def _set_active(self, key: str, step: int, severity: str, message: str) -> list[Anomaly]:
        if key in self.active:
            return []
        anomaly = Anomaly(key, step, severity, message)
        self.active[key] = anomaly
        self.events.append(anomaly)
        return [anomaly]


def _fmt(value: float) -> str:
    return f"{value:.4g}"


def overfitting(evals: list[EvalPoint], margin: float = OVERFIT_MARGIN) -> tuple[EvalPoint, EvalPoint] | None:
    """(the lowest evaluation, the last) when the eval loss has risen since its lowest point for two
    evaluations or more, by more than `margin` of it, while the training loss fell by more than `margin`."""
    if len(evals) < 3:
        return None
    at = min(range(len(evals)), key=lambda i: evals[i].loss)  # the first of equals
    best, last = evals[at], evals[-1]
    if len(evals) - at - 1 < 2 or last.loss - best.loss <= margin * abs(best.loss):
        return None
    if best.train_loss is None or last.train_loss is None or last.train_loss >= best.train_loss * (1 - margin):
        return None
    return best, last


@dataclass(frozen=True)
class LossTrend:
    """A least-squares line through a window of losses: where it starts and ends, its change over the
    window, and the standard error of that change (the noise a change must exceed to be one)."""

    first: float
    last: float
    change: float
    noise: float
    level: float


def loss_trend(values: list[float]) -> LossTrend:
    n = len(values)
    x_mean, y_mean = (n - 1) / 2, sum(values) / n
    sxx = sum((i - x_mean) ** 2 for i in range(n))
    slope = sum((i - x_mean) * (y - y_mean) for i, y in enumerate(values)) / sxx
    residual = sum((y - (y_mean + slope * (i - x_mean))) ** 2 for i, y in enumerate(values))
    spread = math.sqrt(residual / (n - 2)) if n > 2 else 0.0
    span = n - 1
    return LossTrend(first=y_mean - slope * x_mean, last=y_mean + slope * x_mean, change=slope * span,
                     noise=spread / math.sqrt(sxx) * span, level=abs(y_mean))
