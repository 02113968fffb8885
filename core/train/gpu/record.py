"""Recording GPU samples at 1 Hz into a run's gpu.jsonl, outside any TUI.

    python -m core.train.gpu.record --out .devtune/runs/<id>/gpu.jsonl --until-pid <trainer pid>

runs as a small detached sidecar next to training (or as a thread of the run's supervisor, through
`record_until`), so the history survives the TUI being closed and a re-attaching TUI finds it.
Each tick's samples are appended line by line and flushed (never rewritten); a status file next to
it (`gpu.status`, written atomically) says which backend records and why, or that this machine has
no GPU — in which case nothing is recorded and the sidecar ends at once.
"""

from __future__ import annotations

import argparse
import os
import signal
import sys
import threading
import time
from pathlib import Path
from typing import Callable

from core.train.gpu.backend import GpuBackend, GpuBackendUnavailable
from core.train.gpu.sample import GpuSample

MAX_FAILURES = 5  # consecutive failed ticks before the recorder gives up


class GpuRecorder:
    """Samples a backend every `interval` seconds, appends the samples to `out` (None: keep no file, e.g. a
    TUI's live view when no run records) and hands each tick to `on_tick`."""

    def __init__(self, backend: GpuBackend, out: str | os.PathLike | None, *, interval: float = 1.0,
                 on_tick: Callable[[list[GpuSample]], None] | None = None) -> None:
        self.backend = backend
        self.out = Path(out) if out is not None else None
        self.interval = interval
        self.on_tick = on_tick
        self.ticks = 0
        self.failures = 0
        self.last_error: str | None = None
        self._fh = None
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def tick(self) -> list[GpuSample]:
        """One sample of every GPU, appended to the file (and handed to on_tick)."""
        try:
            samples = self.backend.sample()
        except (GpuBackendUnavailable, ValueError, OSError) as exc:
            self.failures += 1
            self.last_error = str(exc)
            return []
        self.failures = 0
        if samples and self.out is not None:
            import orjson

            if self._fh is None:
                self.out.parent.mkdir(parents=True, exist_ok=True)
                self._fh = open(self.out, "ab")
            self._fh.write(b"".join(orjson.dumps(s.to_record()) + b"\n" for s in samples))
            self._fh.flush()
        if samples:
            self.ticks += 1
        if self.on_tick is not None:
            self.on_tick(samples)
        return samples

    def run(self, should_stop: Callable[[], bool] = lambda: False, max_ticks: int | None = None) -> None:
        """Tick on a fixed schedule (no drift) until stopped, should_stop() holds, or the backend keeps failing."""
        start = time.monotonic()
        n = 0
        while not self._stop.is_set() and not should_stop():
            self.tick()
            n += 1
            if self.failures >= MAX_FAILURES or getattr(self.backend, "exhausted", False):
                break
            if max_ticks is not None and n >= max_ticks:
                break
            delay = start + n * self.interval - time.monotonic()
            if delay < 0:  # fell behind (a slow tool): skip the missed ticks instead of bursting
                start = time.monotonic() - n * self.interval
                delay = 0
            self._stop.wait(delay)
        self.close()

    def start(self, should_stop: Callable[[], bool] = lambda: False) -> threading.Thread:
        self._thread = threading.Thread(target=self.run, args=(should_stop,), name="gpu-recorder", daemon=True)
        self._thread.start()
        return self._thread

    def stop(self, timeout: float = 5.0) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout)

    def close(self) -> None:
        if self._fh is not None:
            self._fh.close()
            self._fh = None
        self.backend.close()


def pid_alive(pid: int) -> bool:
    import psutil

    try:
        return psutil.Process(pid).status() != psutil.STATUS_ZOMBIE
    except (psutil.NoSuchProcess, psutil.AccessDenied):
        return False


def _write_status(path: Path | None, **fields) -> None:
    if path is None:
        return
    import orjson

    from core.files.atomic import write_atomic

    try:
        write_atomic(path, orjson.dumps(fields, option=orjson.OPT_INDENT_2) + b"\n")
    except OSError:
        pass


def record_until(out: str | os.PathLike, until_pid: int | None = None, status_file: str | os.PathLike | None = None,
                 *, interval: float = 1.0, backend: GpuBackend | None = None, prefer: str | None = None,
                 stop_event: threading.Event | None = None, max_seconds: float | None = None) -> int:
    """Record until `until_pid` ends (or stop_event is set, or max_seconds pass); returns the ticks recorded."""
    from core.train.gpu.choose import backend_label, choose_backend

    from core.i18n import Said

    status_path = Path(status_file) if status_file else None
    reason = ""
    if backend is None:
        backend, reason = choose_backend(prefer)
    # the reason as data too (choose.status_reason): the panel says it in its reader's language, not this process's
    words = {"reason_words": reason.to_data()} if isinstance(reason, Said) else {}
    started = time.time()
    if backend is None:
        _write_status(status_path, backend=None, reason=reason, **words, state="no-gpu", started=started,
                      ended=started, ticks=0, pid=os.getpid())
        return 0
    name = backend_label(backend.name)
    _write_status(status_path, backend=backend.name, reason=reason or name, **words, state="recording",
                  started=started, ticks=0, pid=os.getpid(), out=str(out))
    deadline = None if max_seconds is None else time.monotonic() + max_seconds
    recorder = GpuRecorder(backend, out, interval=interval)
    if stop_event is not None:
        recorder._stop = stop_event

    def should_stop() -> bool:
        if until_pid is not None and not pid_alive(until_pid):
            return True
        return deadline is not None and time.monotonic() >= deadline

    recorder.run(should_stop)
    _write_status(status_path, backend=backend.name, reason=reason or name, **words,
                  state="failed" if recorder.failures >= MAX_FAILURES else "ended", started=started,
                  ended=time.time(), ticks=recorder.ticks, last_error=recorder.last_error, pid=os.getpid(),
                  out=str(out))
    return recorder.ticks


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m core.train.gpu.record",
                                     description="Record GPU samples at a fixed interval into a gpu.jsonl.")
    parser.add_argument("--out", required=True, help="the gpu.jsonl to append to")
    parser.add_argument("--until-pid", type=int, help="stop when this process ends")
    parser.add_argument("--interval", type=float, default=1.0, help="seconds between ticks (default 1)")
    parser.add_argument("--backend", help="amdsmi, amd-smi, rocm-smi, nvml, none, or replay:PATH (default: auto)")
    parser.add_argument("--status-file", help="where to write the status (default: gpu.status next to --out)")
    parser.add_argument("--max-seconds", type=float, help="stop after this long")
    args = parser.parse_args(argv)
    out = Path(args.out)
    stop = threading.Event()
    for sig in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
        signal.signal(sig, lambda *_: stop.set())
    status = Path(args.status_file) if args.status_file else out.with_name("gpu.status")
    ticks = record_until(out, args.until_pid, status, interval=args.interval, prefer=args.backend,
                         stop_event=stop, max_seconds=args.max_seconds)
    print(f"recorded {ticks} ticks into {out}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
