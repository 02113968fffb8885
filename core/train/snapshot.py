"""What devtune says about a run at one moment: one `RunSnapshot`, built here once per poll.

The Train step and `devtune monitor` (its text and its `--json`) render the same snapshot, so they cannot
disagree: progress and ETA, loss, eval loss and learning rate, the speed (steps/s, tokens/s, MFU and what
would raise it), a preference run's own metrics (rewards chosen / rejected, margin, accuracy, KL), the
anomalies that hold now, a live run's stall, the latest GPU sample per device, and once the run failed, its
diagnoses.

    snap = run_snapshot(ws, run_id)          # core.train.watch: one read of the run's files
    snap.progress_line(), snap.to_json()     # what the screen shows, what `monitor --json` prints

A live run's speed is the metrics' sliding window (the last minute of the trainer's clock); an ended run's is
what its run.json keeps (core.train.throughput.run_throughput: between its first and last logged steps), or,
for a record that kept none, the window's last figure. Advice on going faster is for a run that still goes;
an ended run waits for no speed and no ETA.
"""

from __future__ import annotations

from dataclasses import dataclass, field, fields, replace

from core.i18n import _
from core.train.metrics import ProgressSnapshot, stage_metrics_text
from core.train.runs import RunRecord, RunStatus, status_label
from core.train.throughput import Throughput


def format_duration(seconds: float | None) -> str:
    if seconds is None:
        return "--:--"
    seconds = int(max(0, seconds))
    h, rest = divmod(seconds, 3600)
    m, s = divmod(rest, 60)
    return f"{h}:{m:02d}:{s:02d}"


# what a RunSnapshot reads through from its ProgressSnapshot (core.train.metrics: each defined there once); its
# steps_per_s and tokens_per_s are the snapshot's own (the speed said: an ended run's is its record's)
PROGRESS_FIELDS = frozenset(f.name for f in fields(ProgressSnapshot)) - {"steps_per_s", "tokens_per_s"} | {"fraction"}


@dataclass(frozen=True)
class RunSnapshot:
    """A run at one moment, computed once (`snapshot_of`); every view of the run is a rendering of it.

    Its training numbers are its `progress` (core.train.metrics.ProgressSnapshot: step, total, loss,
    smoothed_loss, eval_loss, lr, epoch, elapsed_s, eta_s, resumed_at, stage_metrics, anomalies), read through
    by name (`snap.step` is `snap.progress.step`); its ETA there is the one said (None once the run ended
    before its last step)."""

    record: RunRecord
    progress: ProgressSnapshot = field(default_factory=ProgressSnapshot)
    speed: Throughput | None = None  # steps/s, tokens/s, MFU, advice (see the module's docstring)
    stall: object | None = None  # core.train.stalls.Stall while the live run is stalled
    gpus: tuple = ()  # the latest GpuSample per GPU
    gpu_status: dict | None = None  # gpu.status: backend, reason, state
    diagnoses: tuple = ()  # core.train.failures.Diagnosis, once the run failed

    def __getattr__(self, name: str):
        if name in PROGRESS_FIELDS:  # only names not found on the snapshot itself come here
            return getattr(object.__getattribute__(self, "progress"), name)
        raise AttributeError(f"{type(self).__name__} has no attribute {name!r}")

    # ------------------------------------------------------------ facts of the record
    @property
    def run(self) -> str:
        return self.record.id

    @property
    def status(self) -> RunStatus:
        return self.record.status

    @property
    def active(self) -> bool:
        return self.record.active

    @property
    def exit_code(self) -> int | None:
        return self.record.exit_code

    @property
    def note(self) -> str:
        return self.record.note

    @property
    def resume_of(self) -> str | None:
        return self.record.resume_of

    @property
    def steps_per_s(self) -> float | None:
        return self.speed.steps_per_s if self.speed is not None else None

    @property
    def tokens_per_s(self) -> float | None:
        """Measured or estimated (speed.rate.estimated says which)."""
        return self.speed.rate.tokens_per_s if self.speed is not None else None

    # ------------------------------------------------------------ text
    def progress_line(self) -> str:
        """One human line: step, share, loss, lr, speed, elapsed and ETA, then the estimate and MFU (a live
        speed too early to measure says so). The Train step shows it as is."""
        share = f" ({self.fraction * 100:.1f}%)" if self.fraction is not None else ""
        parts = [_("step {step}/{total}{share}", step=self.step, total=self.total or "?", share=share)]
        if self.loss is not None:
            parts.append(_("loss {loss:.4f}", loss=self.loss))
        if self.eval_loss is not None:
            parts.append(_("eval loss {loss:.4f}", loss=self.eval_loss))
        if self.lr is not None:
            parts.append(_("lr {lr:.2e}", lr=self.lr))
        if self.steps_per_s is not None:
            parts.append(_("{rate:.2f} steps/s", rate=self.steps_per_s))
        elif self.active:
            parts.append(_("speed not measurable yet"))
        if self.tokens_per_s is not None and not self.speed.rate.estimated:
            parts.append(_("{rate:.0f} tokens/s", rate=self.tokens_per_s))
        parts.append(_("elapsed {elapsed}", elapsed=format_duration(self.elapsed_s)))
        if self.active and self.record.stop_requested is None:  # a run being stopped waits for no last step
            parts.append(_("ETA {eta}", eta=format_duration(self.eta_s)))
        extra = self.speed.text() if self.speed is not None else ""
        return "  ".join(parts) + (f"  {extra}" if extra else "")

    def stage_text(self) -> str:
        """"rewards chosen 0.42 · rejected -0.05 · margin 0.47 · accuracy 60%" ("" for SFT)."""
        return stage_metrics_text(self.stage_metrics)

    def progress_text(self) -> str:
        """`monitor`'s line: the status, the progress line and a preference run's rewards."""
        stage = self.stage_text()
        return f"[{status_label(self.status)}] {self.progress_line()}" + (f"  {stage}" if stage else "")

    def anomaly_lines(self) -> list[str]:
        lines = [f"! {a.message}" for a in self.anomalies]
        if self.stall is not None:
            lines.append("! " + _("stalled: {reason}", reason=self.stall.reason))
            for pid, stack in self.stall.stacks.items():
                lines.append("  " + _("process {pid} is here now:", pid=pid))
                lines += ["    " + line for line in stack.splitlines()[:40]]
        return lines

    def advice_lines(self) -> list[str]:
        """What would raise the throughput (packing, attention backend, Liger, micro-batch, checkpointing)."""
        return self.speed.advice_lines() if self.speed is not None else []

    def end_lines(self) -> list[str]:
        lines = [f"{self.run}: {status_label(self.status)}" + (f" — {self.note}" if self.note else "")]
        for d in self.diagnoses[:3]:
            lines += ["", d.title, f"  {d.fix}"]
            for ev in d.evidence[:2]:
                where = f"{ev.file}:{ev.line}" if ev.line else ev.file
                lines.append("  " + _("evidence ({where}): {text}", where=where, text=ev.text))
        return lines

    # ------------------------------------------------------------ JSON
    def to_json(self) -> dict:
        gpus = self.gpus
        return {
            "run": self.run,
            "status": self.status.value,
            "step": self.step,
            "total": self.total,
            "loss": self.loss,
            "smoothed_loss": self.smoothed_loss,
            "eval_loss": self.eval_loss,
            "lr": self.lr,
            "epoch": self.epoch,
            "throughput": self.speed.to_json() if self.speed is not None else None,
            "stage_metrics": dict(self.stage_metrics),
            "stall": self.stall.to_dict() if self.stall is not None else None,
            "elapsed_s": self.elapsed_s,
            "eta_s": self.eta_s,
            "anomalies": [{"id": a.id, "step": a.step, "severity": a.severity, "message": a.message,
                           "stop_at": a.stop_at}
                          for a in self.anomalies],
            "gpu": {
                "count": len(gpus),
                "util_pct": [g.util_pct for g in gpus],
                "vram_used_bytes": [g.vram_used for g in gpus],
                "vram_total_bytes": [g.vram_total for g in gpus],
                "temp_c": [g.temp_c for g in gpus],
                "power_w": [g.power_w for g in gpus],
                "status": (self.gpu_status or {}).get("reason"),
            },
            "exit_code": self.exit_code,
            "note": self.note,
            "resume_of": self.resume_of,
            "diagnoses": [{"id": d.id, "title": d.title, "fix": d.fix} for d in self.diagnoses],
        }


def snapshot_of(record: RunRecord, progress: ProgressSnapshot, speed: Throughput | None, *, stall=None,
                gpus=(), gpu_status: dict | None = None, diagnoses=()) -> RunSnapshot:
    """The one place a run's view is made from its record, its metrics' progress and its speed."""
    if record.active and record.stop_requested is None:
        eta = progress.eta_s
    else:  # an ended run waits for nothing: done, or never
        eta = 0.0 if progress.eta_s == 0 else None
        speed = speed.without_advice() if speed is not None else None
    return RunSnapshot(record=record, progress=replace(progress, eta_s=eta), speed=speed, stall=stall,
                       gpus=tuple(gpus), gpu_status=gpu_status, diagnoses=tuple(diagnoses))
