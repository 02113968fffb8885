"""A run's `gpu.jsonl`: reading it back, following it live, and replaying it as a backend.

Each line is one GpuSample (`GpuSample.to_record()`); the samples of one tick share their `ts`. The
recorder (core.train.gpu.record) appends while the trainer lives, so the history survives the TUI being
closed: a re-attaching TUI reads the recent past with `read_history(path, max_ticks=...)`, then
follows new lines with `GpuHistoryTail`. `ReplayBackend` plays a recorded file as if it were GPUs
(tests and the CPU demo use replays of recorded real shapes; the panel says "replay").
"""

from __future__ import annotations

import json
import os
import time
from pathlib import Path

from core.files.tail import LineTail
from core.i18n import _, said
from core.train.gpu.backend import GpuBackendUnavailable
from core.train.gpu.sample import GpuSample


def parse_line(line: bytes | str) -> GpuSample | None:
    line = line.strip()
    if not line:
        return None
    try:
        import orjson

        rec = orjson.loads(line)
    except ValueError:
        return None
    except ImportError:  # pragma: no cover - orjson is a dependency
        rec = json.loads(line)
    if not isinstance(rec, dict):
        return None
    try:
        return GpuSample.from_record(rec)
    except (TypeError, ValueError):
        return None


def group_ticks(samples: list[GpuSample]) -> list[list[GpuSample]]:
    """Consecutive samples with the same `ts` are one tick (an index that does not grow starts a new one)."""
    ticks: list[list[GpuSample]] = []
    for s in samples:
        if ticks and s.ts == ticks[-1][0].ts and s.index > ticks[-1][-1].index:
            ticks[-1].append(s)
        else:
            ticks.append([s])
    return ticks


def read_history(path: str | os.PathLike, max_ticks: int | None = None) -> list[GpuSample]:
    """The samples in a gpu.jsonl (the last `max_ticks` ticks only, read from the end, when given)."""
    path = Path(path)
    try:
        size = path.stat().st_size
    except FileNotFoundError:
        return []
    if max_ticks is None:
        data = path.read_bytes()
        return [s for s in map(parse_line, data.split(b"\n")) if s is not None]
    want = 4096
    while True:
        start = max(0, size - want)
        with open(path, "rb") as fh:
            fh.seek(start)
            data = fh.read(size - start)
        lines = data.split(b"\n")
        if start > 0:
            lines = lines[1:]  # the first line is cut
        samples = [s for s in map(parse_line, lines) if s is not None]
        ticks = group_ticks(samples)
        if len(ticks) > max_ticks or start == 0:
            return [s for tick in ticks[-max_ticks:] for s in tick] if max_ticks else []
        want *= 4


class GpuHistoryTail:
    """New samples appended to a gpu.jsonl since the last poll (for a TUI watching a recorder)."""

    def __init__(self, path: str | os.PathLike) -> None:
        self._lines = LineTail(Path(path))

    @property
    def reset(self) -> bool:
        return self._lines.reset

    def poll(self) -> list[GpuSample]:
        return [s for s in map(parse_line, self._lines.read_lines()) if s is not None]


NODE_STRIDE = 64  # a node's devices are shown as node * 64 + index (Launch allows at most 64 GPUs a node)


def node_files(directory: Path) -> list[tuple[int, Path]]:
    """A Slurm run's per-node recordings, `gpu-node<N>.jsonl` (each node samples its own GPUs)."""
    found = []
    for path in Path(directory).glob("gpu-node*.jsonl"):
        number = path.stem[len("gpu-node"):]
        if number.isdigit():
            found.append((int(number), path))
    return sorted(found)


def _on_node(sample: GpuSample, node: int) -> GpuSample:
    from dataclasses import replace

    return replace(sample, index=node * NODE_STRIDE + sample.index,
                   name=_("node {n} · {name}", n=node, name=sample.name or "GPU"))


def read_run_history(directory: str | os.PathLike, max_ticks: int | None = None) -> list[GpuSample]:
    """A run's GPU history: its gpu.jsonl, and every node's file of a multi-node run (devices renumbered)."""
    directory = Path(directory)
    samples = read_history(directory / "gpu.jsonl", max_ticks)
    for node, path in node_files(directory):
        samples += [_on_node(s, node) for s in read_history(path, max_ticks)]
    return samples


class RunGpuTail:
    """GpuHistoryTail over a run folder: gpu.jsonl, and each `gpu-node<N>.jsonl` as it appears."""

    def __init__(self, directory: str | os.PathLike) -> None:
        self.dir = Path(directory)
        self._local = GpuHistoryTail(self.dir / "gpu.jsonl")
        self._nodes: dict[int, GpuHistoryTail] = {}

    def poll(self) -> list[GpuSample]:
        samples = self._local.poll()
        for node, path in node_files(self.dir):
            tail = self._nodes.setdefault(node, GpuHistoryTail(path))
            samples += [_on_node(s, node) for s in tail.poll()]
        return samples


class ReplayBackend:
    """Plays recorded ticks as if they were live GPUs, one tick per `sample()` call."""

    name = "replay"

    def __init__(self, ticks: list[list[GpuSample]], *, loop: bool = True, source: str = "") -> None:
        self.ticks = ticks
        self.loop = loop
        self.source = source
        self._next = 0

    @property
    def exhausted(self) -> bool:
        return not self.loop and self._next >= len(self.ticks)

    def sample(self) -> list[GpuSample]:
        if not self.ticks or self.exhausted:
            return []
        tick = self.ticks[self._next % len(self.ticks)]
        self._next += 1
        now = time.time()
        out = []
        for s in tick:
            copy = GpuSample.from_record(s.to_record())
            copy.ts, copy.backend = now, self.name
            out.append(copy)
        return out

    def close(self) -> None:
        pass


def open_replay(path: str | os.PathLike, *, loop: bool = True) -> ReplayBackend:
    ticks = group_ticks(read_history(path))
    if not ticks:
        raise GpuBackendUnavailable(said("no GPU samples in {file}", file=str(path)))
    return ReplayBackend(ticks, loop=loop, source=str(path))
