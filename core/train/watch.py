"""Watching one run from its files: what `devtune monitor` prints and the Train screen draws.

`RunWatcher.poll()` reads only what is new since the last call (trainer_log.jsonl by offset, the
stdout/stderr logs, gpu.jsonl) and returns a `RunUpdate`. The first poll reads the whole history,
so re-attaching after devtune restarted (or the SSH connection dropped) shows everything.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from core.files.tail import LineTail
from core.i18n import _
from core.train.metrics import MetricsPoller, ProgressSnapshot
from core.train.runs import RunRecord, RunStatus, refresh, run_dir, trainer_log_source
from core.workspace.layout import Workspace

STALL_CHECK_SECONDS = 30.0  # a stall is minutes long: checking twice a minute costs nothing while healthy
STALL_TICKS = 120  # GPU ticks kept for the idle-GPU stall (one tick per few seconds)
TQDM_LINE = re.compile(r"^\s*(?:[\w ./-]*:\s*)?\d+%\|")


@dataclass
class RunUpdate:
    record: RunRecord
    snapshot: ProgressSnapshot
    metrics_changed: bool = False
    anomalies: list = field(default_factory=list)  # new anomalies (core.train.anomalies.Anomaly)
    log_lines: list[str] = field(default_factory=list)  # new stdout/stderr lines (tqdm bars left out)
    gpu_samples: list = field(default_factory=list)  # new core.train.gpu.sample.GpuSample
    gpu_status: dict | None = None  # gpu.status: backend, reason, state
    diagnoses: list = field(default_factory=list)  # core.train.failures.Diagnosis, once the run failed
    ended_now: bool = False  # the run ended between the previous poll and this one
    stall: object | None = None  # core.train.stalls.Stall while the live run is stalled
    throughput: object | None = None  # core.train.throughput.Throughput: tokens/s (or an estimate) and MFU


class RunWatcher:
    def __init__(self, ws: Workspace, run_id: str) -> None:
        self.ws = ws
        self.dir = run_dir(ws, run_id)
        self.record = refresh(self.dir)
        self.trainer_log, start = trainer_log_source(self.dir, self.record)
        self.poller = MetricsPoller(self.trainer_log, self.dir / "stdout.log", self.dir / "stderr.log",
                                    log_start=start)
        self._stdout = LineTail(self.dir / "stdout.log")
        self._stderr = LineTail(self.dir / "stderr.log")
        from core.train.gpu.history import RunGpuTail

        self._gpu = RunGpuTail(self.dir)
        self._was_active = self.record.active
        self._ticks: list[list] = []  # the latest GPU ticks, for the idle-GPU stall
        self._stall = None
        self._stall_checked = 0.0
        self._shape = None  # core.train.throughput.RunShape, read once
        self._diagnosed = False
        self._reported: set[tuple[str, int]] = set()  # anomalies already returned as new

    @property
    def metrics(self):
        return self.poller.metrics

    def poll(self) -> RunUpdate:
        self.record = refresh(self.dir)
        source, start = trainer_log_source(self.dir, self.record)
        if source != self.trainer_log:  # the run ended and its lines were frozen: read only those from now on
            self.trainer_log = source
            self.poller = MetricsPoller(source, self.dir / "stdout.log", self.dir / "stderr.log", log_start=start)
        changed = self.poller.poll()
        new = [a for a in self.poller.new_anomalies if (a.id, a.step) not in self._reported]
        self._reported.update((a.id, a.step) for a in new)
        lines = self._new_lines(self._stdout) + self._new_lines(self._stderr)
        update = RunUpdate(record=self.record, snapshot=self.poller.metrics.snapshot(), metrics_changed=changed,
                           anomalies=new, log_lines=lines,
                           gpu_samples=self._gpu.poll(), gpu_status=self.gpu_status())
        update.stall = self._check_stall(update.gpu_samples)
        update.throughput = self._throughput(update.snapshot)
        ended = self._was_active and not self.record.active
        update.ended_now = ended
        self._was_active = self.record.active
        if not self.record.active and not self._diagnosed:
            self._diagnosed = True
            update.diagnoses = self.diagnose()
        return update

    def _check_stall(self, samples: list):
        """A stall of the live run (checked every STALL_CHECK_SECONDS; py-spy runs once per stall)."""
        import time

        from core.train.gpu.history import group_ticks
        from core.train.stalls import check_stall

        if samples:
            self._ticks = (self._ticks + group_ticks(samples))[-STALL_TICKS:]
        if not self.record.active or self.record.trainer is None:
            self._stall = None
            return None
        now = time.time()
        if now - self._stall_checked < STALL_CHECK_SECONDS:
            return self._stall
        self._stall_checked = now
        outputs = (self.dir / "stdout.log", self.dir / "stderr.log")
        pid = self.record.trainer.pid
        found = check_stall(self.trainer_log, pid, self._ticks, outputs=outputs, with_stacks=False)
        if found is None:
            self._stall = None
        elif self._stall is None or (found.kind, found.step) != (self._stall.kind, self._stall.step):
            self._stall = check_stall(self.trainer_log, pid, self._ticks, outputs=outputs)  # with the stacks
        else:
            self._stall.seconds = found.seconds
        return self._stall

    def _throughput(self, snap: ProgressSnapshot):
        from core.train.throughput import Throughput, run_shape

        if self._shape is None:
            self._shape = run_shape(self.ws, self.record.config) or False
        return Throughput.of(snap, self._shape or None)

    def diagnose(self) -> list:
        """Diagnoses of the run's logs (empty when it finished well or was stopped on request)."""
        from core.train.failures import diagnose_run

        if self.record.status is RunStatus.FINISHED:
            return []
        out = self.ws.abs(self.record.output_dir) if self.record.output_dir else None
        return diagnose_run(self.dir, out, exit_code=self.record.exit_code,
                            stop_requested=self.record.stop_requested is not None)

    def gpu_status(self) -> dict | None:
        import orjson

        for name in ("gpu.status", "gpu-node0.status"):  # a Slurm run: the first node's recorder
            try:
                return orjson.loads((self.dir / name).read_bytes())
            except (OSError, ValueError):
                continue
        return None

    @staticmethod
    def _new_lines(tail: LineTail) -> list[str]:
        out = []
        for raw in tail.read_lines():
            for piece in raw.decode("utf-8", errors="replace").split("\r"):
                piece = piece.rstrip()
                if piece and not TQDM_LINE.match(piece):
                    out.append(piece)
        return out


def format_duration(seconds: float | None) -> str:
    if seconds is None:
        return "--:--"
    seconds = int(max(0, seconds))
    h, rest = divmod(seconds, 3600)
    m, s = divmod(rest, 60)
    return f"{h}:{m:02d}:{s:02d}"


def progress_line(snap: ProgressSnapshot, *, active: bool = True) -> str:
    """One human line: step, share, loss, lr, speed, elapsed and ETA (a speed too early to measure says so)."""
    total = snap.total or "?"
    share = f" ({snap.fraction * 100:.1f}%)" if snap.fraction is not None else ""
    parts = [_("step {step}/{total}{share}", step=snap.step, total=total, share=share)]
    if snap.loss is not None:
        parts.append(_("loss {loss:.4f}", loss=snap.loss))
    if snap.lr is not None:
        parts.append(_("lr {lr:.2e}", lr=snap.lr))
    if snap.steps_per_s is not None:
        parts.append(_("{rate:.2f} steps/s", rate=snap.steps_per_s))
    elif active:
        parts.append(_("speed not measurable yet"))
    if snap.tokens_per_s is not None:
        parts.append(_("{rate:.0f} tokens/s", rate=snap.tokens_per_s))
    parts.append(_("elapsed {elapsed}", elapsed=format_duration(snap.elapsed_s)))
    if active or snap.eta_s:
        parts.append(_("ETA {eta}", eta=format_duration(snap.eta_s)))
    return "  ".join(parts)


@dataclass(frozen=True)
class MonitorReport:
    """What `devtune monitor` reports about a run at one moment, computed once: the text lines and the
    JSON object are both renderings of it, so they say the same things."""

    run: str
    status: RunStatus
    snapshot: ProgressSnapshot
    anomalies: tuple = ()  # the anomalies that hold now (core.train.anomalies.Anomaly), errors first
    gpus: tuple = ()  # the latest GpuSample per GPU
    gpu_status: str | None = None
    exit_code: int | None = None
    note: str = ""
    resume_of: str | None = None
    diagnoses: tuple = ()  # core.train.failures.Diagnosis, once the run failed
    stall: object | None = None  # core.train.stalls.Stall
    throughput: object | None = None  # core.train.throughput.Throughput

    @property
    def active(self) -> bool:
        return self.status in (RunStatus.STARTING, RunStatus.RUNNING)

    def progress_text(self) -> str:
        from core.train.runs import status_label

        extra = self.throughput.text() if self.throughput is not None else ""
        return f"[{status_label(self.status)}] {progress_line(self.snapshot, active=self.active)}" + (
            f"  {extra}" if extra else "")

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
        return self.throughput.advice_lines() if self.throughput is not None else []

    def end_lines(self) -> list[str]:
        from core.train.runs import status_label

        lines = [f"{self.run}: {status_label(self.status)}" + (f" — {self.note}" if self.note else "")]
        for d in self.diagnoses[:3]:
            lines += ["", d.title, f"  {d.fix}"]
            for ev in d.evidence[:2]:
                where = f"{ev.file}:{ev.line}" if ev.line else ev.file
                lines.append("  " + _("evidence ({where}): {text}", where=where, text=ev.text))
        return lines

    def to_json(self) -> dict:
        s, gpus = self.snapshot, self.gpus
        return {
            "run": self.run,
            "status": self.status.value,
            "step": s.step,
            "total": s.total,
            "loss": s.loss,
            "smoothed_loss": s.smoothed_loss,
            "eval_loss": s.eval_loss,
            "lr": s.lr,
            "epoch": s.epoch,
            "throughput": {"steps_per_s": s.steps_per_s, "tokens_per_s": s.tokens_per_s,
                           **(self.throughput.to_json() if self.throughput is not None else {})},
            "stall": self.stall.to_dict() if self.stall is not None else None,
            "elapsed_s": s.elapsed_s,
            "eta_s": s.eta_s,
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
                "status": self.gpu_status,
            },
            "exit_code": self.exit_code,
            "note": self.note,
            "resume_of": self.resume_of,
            "diagnoses": [{"id": d.id, "title": d.title, "fix": d.fix} for d in self.diagnoses],
        }


def monitor_report(update: RunUpdate, latest_gpus: list | None = None, diagnoses: list | None = None) -> MonitorReport:
    record = update.record
    return MonitorReport(
        run=record.id, status=record.status, snapshot=update.snapshot, anomalies=tuple(update.snapshot.anomalies),
        gpus=tuple(latest_gpus or ()), gpu_status=(update.gpu_status or {}).get("reason"),
        exit_code=record.exit_code, note=record.note, resume_of=record.resume_of,
        diagnoses=tuple(update.diagnoses if diagnoses is None else diagnoses), stall=update.stall,
        throughput=update.throughput)


def update_json(update: RunUpdate, latest_gpus: list | None = None) -> dict:
    """The `devtune monitor --json` object for one update."""
    return monitor_report(update, latest_gpus).to_json()
