"""The --jobs side of lint: the file cut into spans at line starts, scanned by one worker process per
job (the parent scans a span itself when workers are forked), each sending its results back through a
pipe; the spans' results are merged with global line numbers. Duplicates across spans are found
afterwards from the merged fingerprints.

Balance: each process first scans a main span (3/4 of the file shared equally), then takes chunks of
the last quarter in turn, smaller and smaller, from a shared counter. On a busy machine one process
often runs 10-20% slower than the other; with fixed halves the faster one then waits idle for the
slower one, here it scans more of the tail instead.

Start-up and merge are the serial part of --jobs N: workers fork (no re-import) where this process has
no other thread, a worker hands its fingerprints back as raw bytes when they are few and on disk when
many, and the merge touches only the findings, notes and stats, never the rows.
"""

from __future__ import annotations

import os
from array import array
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

from core.data import fingerprints
from core.data.fastblock import c_passes
from core.data.hotloop import scan_jsonl_part
from core.data.npimport import numpy_or_none
from core.data.scan import PartResult, ScanContext, relocate
from core.data.schema import Schema
from core.data.stats import StatsAccumulator
from core.processes.environment import env_restored

MIN_PART_BYTES = 4 << 20  # below this a file is scanned in one process whatever --jobs says
TAIL_SHARE = 4  # the last 1/TAIL_SHARE of the file is handed out in chunks to whichever process is free
MIN_CHUNK_BYTES = 2 << 20


@dataclass(frozen=True)
class LintProgress:
    phase: str  # scan | duplicates | near-duplicates | tokens
    done: int
    total: int


@dataclass(frozen=True)
class Spans:
    """Byte ranges in file order, each starting at a line start: the first `main` are one per process,
    the rest are the tail's chunks."""

    spans: list[tuple[int, int]]
    main: int

    @property
    def tail(self) -> list[tuple[int, int]]:
        return self.spans[self.main:]

    @property
    def size(self) -> int:
        return self.spans[-1][1]


def plan_spans(path: Path, size: int, jobs: int) -> Spans:
    if jobs <= 1 or size < MIN_PART_BYTES * 2:
        return Spans([(0, size)], 1)
    procs = min(jobs, max(1, size // MIN_PART_BYTES))
    tail_from = size - size // TAIL_SHARE
    cuts = [tail_from * i // procs for i in range(1, procs)] + [tail_from]
    at = tail_from
    while size - at > MIN_CHUNK_BYTES:  # guided: each chunk a share of what is left, the last ones small
        at += max(MIN_CHUNK_BYTES, (size - at) // (2 * procs))
        cuts.append(min(at, size))
    bounds = [0]
    with open(path, "rb") as fh:
        for cut in cuts:
            fh.seek(cut)
            fh.readline()
            line_start = min(fh.tell(), size)
            if bounds[-1] < line_start < size:
                bounds.append(line_start)
    bounds.append(size)
    spans = list(zip(bounds, bounds[1:]))
    return Spans(spans, min(procs, len(spans)))


def _start_method(requested: str | None) -> str:
    import multiprocessing
    import threading

    methods = multiprocessing.get_all_start_methods()
    if requested:
        return requested
    return "fork" if "fork" in methods and threading.active_count() == 1 else "spawn"


def run_parts(ctx: ScanContext, plan: Spans, start_method: str | None,
              progress: Callable[[LintProgress], None] | None) -> list[PartResult]:
    """The results of all spans, in file order."""
    if len(plan.spans) == 1:
        a, b = plan.spans[0]
        tick = (lambda done: progress(LintProgress("scan", done, b))) if progress else None
        return [scan_jsonl_part(ctx, a, b, False, tick)]
    import multiprocessing

    method = _start_method(start_method)
    mp = multiprocessing.get_context(method)
    shared = mp.Array("q", 2)  # [next tail chunk, bytes scanned by all processes]
    # with fork the workers share this process's str hashes, so it scans the first span itself;
    # with spawn every main span goes to a worker started with the same PYTHONHASHSEED
    own = method == "fork"
    if own and c_passes() is None:  # the numpy path: numpy imported once, here, not by each worker
        numpy_or_none()
    mains = list(range(1 if own else 0, plan.main))
    workers = _start_workers(mp, ctx, plan, mains, shared, seed=None if own else "0")
    try:
        found: dict[int, PartResult] = {}
        if own:
            report = (lambda done: progress(LintProgress("scan", done, plan.size))) if progress else None
            found.update(_scan_share(ctx, plan, 0, shared, _Meter(shared, report)))
        for proc, conn, span in workers:
            found.update(_receive(proc, conn, span))
            if progress:
                progress(LintProgress("scan", shared[1], plan.size))
        return [found[i] for i in range(len(plan.spans))]
    finally:
        _stop(workers)


class _Meter:
    """Adds a process's scanned bytes to the shared count (scan_jsonl_part reports bytes done in the
    current span); in the parent, also reports the count to the progress callback."""

    def __init__(self, shared, report: Callable[[int], None] | None = None) -> None:
        self.shared, self.report, self.last = shared, report, 0

    def start(self) -> None:
        self.last = 0

    def __call__(self, done: int) -> None:
        with self.shared.get_lock():
            self.shared[1] += done - self.last
            total = self.shared[1]
        self.last = done
        if self.report:
            self.report(total)


def _scan_share(ctx: ScanContext, plan: Spans, index: int, shared, meter: _Meter) -> list[tuple[int, PartResult]]:
    """Main span `index`, then tail chunks taken in turn until none is left. The parent's span 0 counts
    lines from 1; every other span counts from its own start (merge_parts shifts them)."""
    a, b = plan.spans[index]
    meter.start()
    out = [(index, scan_jsonl_part(ctx, a, b, index != 0, meter))]
    while True:
        with shared.get_lock():
            k = shared[0]
            shared[0] = k + 1
        if k >= len(plan.tail):
            return out
        a, b = plan.tail[k]
        meter.start()
        out.append((plan.main + k, scan_jsonl_part(ctx, a, b, True, meter)))


def _start_workers(mp, ctx: ScanContext, plan: Spans, mains: list[int], shared, seed: str | None):
    """One process per main span, each sending its results back through its own pipe. Plain processes,
    not a Pool: a Pool's shutdown waits for its handler thread's 0.1 s poll, and a worker that dies
    leaves its task unanswered; here the parent reads each pipe and a dead worker is an EOF.
    PYTHONHASHSEED=seed is set only while they start."""
    workers = []
    with env_restored("PYTHONHASHSEED"):
        if seed is not None:
            os.environ["PYTHONHASHSEED"] = seed
        try:
            for index in mains:
                a, b = plan.spans[index]
                receiver, sender = mp.Pipe(duplex=False)
                _widen(receiver)
                proc = mp.Process(target=_scan_worker, args=(sender, ctx, plan, index, shared, len(mains)),
                                  daemon=True, name=f"devtune-lint-{a}-{b}")
                proc.start()
                sender.close()
                workers.append((proc, receiver, (a, b)))
        except BaseException:
            _stop(workers)
            raise
    return workers


def _stop(workers) -> None:
    """Close the pipes, end the workers still running (after an error), reap them all."""
    for proc, conn, _span in workers:
        conn.close()
        if proc.is_alive():
            proc.terminate()
        proc.join()


def _widen(conn) -> None:
    """A 1 MiB pipe instead of 64 KiB (Linux; the largest an unprivileged process may ask for by
    default): a worker's fingerprints (~12 MB for 500k rows) cross it in a dozen reads instead of ~190,
    and a worker that finishes first has its first MiB written before this process reads."""
    try:
        import fcntl

        fcntl.fcntl(conn.fileno(), getattr(fcntl, "F_SETPIPE_SZ", 1031), 1 << 20)
    except (ImportError, OSError, ValueError):
        pass


def _scan_worker(conn, ctx: ScanContext, plan: Spans, index: int, shared, workers: int) -> None:
    """Scan a share and send the results: the (index, PartResult) list pickled without the fingerprint
    columns, then each column as raw bytes (12 MB for 500k rows; pickle would copy each array twice more
    per side). The workers together hand SPILL_AT_END rows over in memory; past its share, a worker
    hands its fingerprints over on disk."""
    try:
        results = _scan_share(ctx, plan, index, shared, _Meter(shared))
        budget = fingerprints.SPILL_AT_END // workers
        columns = []
        for _index, result in results:
            for fp in _fingerprints(result):
                if len(fp) > budget:
                    fp.spill()
                budget -= len(fp)
                columns += fp.take_columns()
    except BaseException as exc:  # the parent raises it: a worker's error is the lint's error
        import traceback

        conn.send(("error", f"{type(exc).__name__}: {exc}", traceback.format_exc()))
    else:
        conn.send(("ok", results, ""))
        for column in columns:
            conn.send_bytes(memoryview(column).cast("B"))
    finally:
        conn.close()


def _fingerprints(result: PartResult):
    return (result.fingerprints, result.slow_fingerprints)


def _receive(proc, conn, span: tuple[int, int]) -> list[tuple[int, PartResult]]:
    try:
        status, value, trace = conn.recv()
        if status == "ok":
            for _index, result in value:
                for fp in _fingerprints(result):
                    columns = [array("q") for _ in range(3)]
                    for column in columns:
                        column.frombytes(conn.recv_bytes())
                    fp.put_columns(columns)
    except EOFError:
        proc.join()
        raise RuntimeError(f"the lint worker for bytes {span[0]}-{span[1]} ended without a result (exit code "
                           f"{proc.exitcode}); run again with --jobs 1") from None
    if status != "ok":
        raise RuntimeError(f"the lint worker for bytes {span[0]}-{span[1]} failed: {value}\n{trace}")
    return value


def merge_parts(results: list[PartResult], schema: Schema) -> tuple[PartResult, list]:
    merged = PartResult(stats=StatsAccumulator(fields=schema.fields))
    fps = []
    delta = 0
    for r in results:
        for f in r.findings:
            if r.relative:
                f.line += delta
                f.message = relocate(f.message, delta)
            merged.findings.append(f)
        merged.rows += r.rows
        merged.good += r.good
        for fp in (r.fingerprints, r.slow_fingerprints):
            fps.append(fp.shifted(delta) if r.relative else fp)
        merged.stats.merge(r.stats)
        for k, (line, off) in r.keys_first.items():
            line = line + delta if r.relative else line
            if k not in merged.keys_first or line < merged.keys_first[k][0]:
                merged.keys_first[k] = (line, off)
        n, m = r.notes, merged.notes
        m.bom = m.bom or n.bom
        m.crlf_lines += n.crlf_lines
        if n.first_crlf_line and not m.first_crlf_line:
            m.first_crlf_line = n.first_crlf_line + delta
        for b in n.blank_lines:
            m.blank(b + delta)
        m.blank_line_count += n.blank_line_count - len(n.blank_lines)
        m.final_newline = n.final_newline
        m.transcoded_lines += n.transcoded_lines
        if n.first_transcoded_line and not m.first_transcoded_line:
            m.first_transcoded_line = n.first_transcoded_line + delta
        m.invalid_lines += n.invalid_lines
        if n.first_invalid_line and not m.first_invalid_line:
            m.first_invalid_line = n.first_invalid_line + delta
        m.array_trailing_comma = m.array_trailing_comma or n.array_trailing_comma
        m.syntax += n.syntax
        delta += r.lines
    merged.lines = merged.notes.lines = merged.notes.last_line = delta
    return merged, fps
