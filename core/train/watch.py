"""Watching one run from its files: what `devtune monitor` prints and the Train screen draws.

`RunWatcher.poll()` reads only what is new since the last call (trainer_log.jsonl by offset, the
stdout/stderr logs, gpu.jsonl) and returns a `RunUpdate`: the run's `RunSnapshot` (core.train.snapshot,
what both front-ends render) and the new lines and samples the screen's log and charts append. The first
poll reads the whole history, so re-attaching after devtune restarted (or the SSH connection dropped)
shows everything. `run_snapshot(ws, run_id)` is one such read.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from core.files.tail import LineTail
from core.train.metrics import MetricsPoller, ProgressSnapshot
from core.train.runs import RunRecord, refresh, run_dir, trainer_log_source
from core.train.snapshot import RunSnapshot, snapshot_of
from core.workspace.layout import Workspace

STALL_CHECK_SECONDS = 30.0  # a stall is minutes long: checking twice a minute costs nothing while healthy
STALL_TICKS = 120  # GPU ticks kept for the idle-GPU stall (one tick per few seconds)
TQDM_LINE = re.compile(r"^\s*(?:[\w ./-]*:\s*)?\d+%\|")


@dataclass
class RunUpdate:
    snapshot: RunSnapshot  # what is said about the run now: both front-ends render this
    metrics_changed: bool = False
    anomalies: list = field(default_factory=list)  # new anomalies (core.train.anomalies.Anomaly)
    log_lines: list[str] = field(default_factory=list)  # new stdout/stderr lines (tqdm bars left out)
    gpu_samples: list = field(default_factory=list)  # new core.train.gpu.sample.GpuSample
    ended_now: bool = False  # the run ended between the previous poll and this one

    @property
    def record(self) -> RunRecord:
        return self.snapshot.record

    @property
    def stall(self):
        return self.snapshot.stall


class RunWatcher:
    def __init__(self, ws: Workspace, run_id: str) -> None:
        self.ws = ws
        self.dir = run_dir(ws, run_id)
        self.record = refresh(self.dir)
        self.trainer_log, start = trainer_log_source(self.dir, self.record)
        from core.train.failure_facts import run_context

        self.context = run_context(ws, self.record, self.dir)  # the advice agrees with the run's device and config
        self.poller = MetricsPoller(self.trainer_log, self.dir / "stdout.log", self.dir / "stderr.log",
                                    log_start=start, context=self.context)
        self._stdout = LineTail(self.dir / "stdout.log")
        self._stderr = LineTail(self.dir / "stderr.log")
        from core.train.gpu.history import RunGpuTail

        self._gpu = RunGpuTail(self.dir)
        self._was_active = self.record.active
        self._ticks: list[list] = []  # the latest GPU ticks, for the idle-GPU stall (the last: the snapshot's)
        self._stall = None
        self._stall_checked = 0.0
        self._shape = None  # core.train.throughput.RunShape, read once
        self._diagnosed = False
        self._diagnoses: list = []  # once the run ended, its diagnoses (empty when it finished well)
        self._reported: set[tuple[str, int]] = set()  # anomalies already returned as new

    @property
    def metrics(self):
        return self.poller.metrics

    def poll(self) -> RunUpdate:
        from core.train.gpu.history import group_ticks

        self.record = refresh(self.dir)
        source, start = trainer_log_source(self.dir, self.record)
        if source != self.trainer_log:  # the run ended and its lines were frozen: read only those from now on
            self.trainer_log = source
            self.poller = MetricsPoller(source, self.dir / "stdout.log", self.dir / "stderr.log", log_start=start,
                                        context=self.context)
        changed = self.poller.poll()
        new = [a for a in self.poller.new_anomalies if (a.id, a.step) not in self._reported]
        self._reported.update((a.id, a.step) for a in new)
        lines = self._new_lines(self._stdout) + self._new_lines(self._stderr)
        samples = self._gpu.poll()
        ticks = group_ticks(samples) if samples else []
        if ticks:
            self._ticks = (self._ticks + ticks)[-STALL_TICKS:]
        stall = self._check_stall(ticks)
        ended = self._was_active and not self.record.active
        self._was_active = self.record.active
        if not self.record.active and not self._diagnosed:
            self._diagnosed = True
            self._diagnoses = self.diagnose()
        progress = self.poller.metrics.snapshot()
        snapshot = snapshot_of(self.record, progress, self._throughput(progress), stall=stall,
                               gpus=self._ticks[-1] if self._ticks else (), gpu_status=self.gpu_status(),
                               diagnoses=self._diagnoses)
        return RunUpdate(snapshot=snapshot, metrics_changed=changed, anomalies=new, log_lines=lines,
                         gpu_samples=samples, ended_now=ended)

    def _check_stall(self, ticks: list):
        """A stall of the live run (checked every STALL_CHECK_SECONDS; py-spy runs once per stall), from the
        GPU ticks kept (`ticks`: this poll's new ones, already among them)."""
        import time

        from core.train.stalls import check_stall

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
        """An ended run's speed is what its record keeps (over the whole run); a live run's, the window's."""
        from core.train.throughput import Throughput, run_shape

        kept = Throughput.kept(self.record)
        if kept is not None:
            return kept
        if self._shape is None:
            self._shape = run_shape(self.ws, self.record.config) or False
        return Throughput.of(snap, self._shape or None)

    def diagnose(self) -> list:
        """Diagnoses of the run's logs (empty when it finished well or was stopped on request)."""
        from core.train.failures import diagnose_record

        return diagnose_record(self.ws, self.record)

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


def run_snapshot(ws: Workspace, run_id: str) -> RunSnapshot:
    """What devtune says about a run now, from one read of its files (live or ended)."""
    return RunWatcher(ws, run_id).poll().snapshot


def run_speed(ws: Workspace, record: RunRecord):
    """The speed a run's snapshot says (core.train.throughput.Throughput; what monitor and the Train step show),
    for `devtune runs`: what an ended run's record keeps, else one read of its files (a live run's window)."""
    from core.train.throughput import Throughput

    return Throughput.kept(record) or run_snapshot(ws, record.id).speed


def monitor_report(update: RunUpdate) -> RunSnapshot:
    """The snapshot `devtune monitor` renders for one update (the same object the Train step renders)."""
    return update.snapshot
