"""Watching one run from its files: what `devtune monitor` prints and the Train screen draws.

`RunWatcher.poll()` reads only what is new since the last call (trainer_log.jsonl by offset, the
stdout/stderr logs, gpu.jsonl) and returns a `RunUpdate`. The first poll reads the whole history,
so re-attaching after devtune restarted (or the SSH connection dropped) shows everything.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path

from core.files.tail import LineTail
from core.i18n import _
from core.train.metrics import MetricsPoller, ProgressSnapshot
from core.train.runs import RunRecord, RunStatus, refresh, run_dir
from core.workspace.layout import Workspace

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


class RunWatcher:
    def __init__(self, ws: Workspace, run_id: str) -> None:
        self.ws = ws
        self.dir = run_dir(ws, run_id)
        self.record = refresh(self.dir)
        out = ws.abs(self.record.output_dir) if self.record.output_dir else self.dir
        self.trainer_log = Path(out) / "trainer_log.jsonl"
        self.poller = MetricsPoller(self.trainer_log, self.dir / "stdout.log", self.dir / "stderr.log")
        self._stdout = LineTail(self.dir / "stdout.log")
        self._stderr = LineTail(self.dir / "stderr.log")
        from core.train.gpu.history import GpuHistoryTail

        self._gpu = GpuHistoryTail(self.dir / "gpu.jsonl")
        self._was_active = self.record.active
        self._diagnosed = False

    @property
    def metrics(self):
        return self.poller.metrics

    def poll(self) -> RunUpdate:
        self.record = refresh(self.dir)
        changed = self.poller.poll()
        lines = self._new_lines(self._stdout) + self._new_lines(self._stderr)
        update = RunUpdate(record=self.record, snapshot=self.poller.metrics.snapshot(), metrics_changed=changed,
                           anomalies=list(self.poller.new_anomalies), log_lines=lines,
                           gpu_samples=self._gpu.poll(), gpu_status=self.gpu_status())
        ended = self._was_active and not self.record.active
        update.ended_now = ended
        self._was_active = self.record.active
        if not self.record.active and not self._diagnosed:
            self._diagnosed = True
            update.diagnoses = self.diagnose()
        return update

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

        try:
            return orjson.loads((self.dir / "gpu.status").read_bytes())
        except (OSError, ValueError):
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


def progress_line(snap: ProgressSnapshot) -> str:
    """One human line: step, share, loss, lr, speed, elapsed and ETA."""
    total = snap.total or "?"
    share = f" ({snap.fraction * 100:.1f}%)" if snap.fraction is not None else ""
    parts = [_("step {step}/{total}{share}", step=snap.step, total=total, share=share)]
    if snap.loss is not None:
        parts.append(_("loss {loss:.4f}", loss=snap.loss))
    if snap.lr is not None:
        parts.append(_("lr {lr:.2e}", lr=snap.lr))
    if snap.steps_per_s:
        parts.append(_("{rate:.2f} steps/s", rate=snap.steps_per_s))
    if snap.tokens_per_s:
        parts.append(_("{rate:.0f} tokens/s", rate=snap.tokens_per_s))
    parts.append(_("elapsed {elapsed}", elapsed=format_duration(snap.elapsed_s)))
    parts.append(_("ETA {eta}", eta=format_duration(snap.eta_s)))
    return "  ".join(parts)


def update_json(update: RunUpdate, latest_gpus: list | None = None) -> dict:
    """The `devtune monitor --json` object for one update."""
    s = update.snapshot
    gpus = latest_gpus or []
    return {
        "run": update.record.id,
        "status": update.record.status.value,
        "step": s.step,
        "total": s.total,
        "loss": s.loss,
        "smoothed_loss": s.smoothed_loss,
        "eval_loss": s.eval_loss,
        "lr": s.lr,
        "epoch": s.epoch,
        "throughput": {"steps_per_s": s.steps_per_s, "tokens_per_s": s.tokens_per_s},
        "elapsed_s": s.elapsed_s,
        "eta_s": s.eta_s,
        "anomalies": [a.message for a in s.anomalies],
        "gpu": {
            "count": len(gpus),
            "util_pct": [g.util_pct for g in gpus],
            "vram_used_bytes": [g.vram_used for g in gpus],
            "vram_total_bytes": [g.vram_total for g in gpus],
            "temp_c": [g.temp_c for g in gpus],
            "power_w": [g.power_w for g in gpus],
            "status": (update.gpu_status or {}).get("reason"),
        },
        "exit_code": update.record.exit_code,
        "note": update.record.note,
    }
