"""The --jobs side of lint: the file cut into parts at line starts, one worker process per part (the
parent scans the first part itself when workers are forked), each sending its result back through a
pipe, and the parts' results merged with global line numbers. Duplicates across parts are found
afterwards from the merged fingerprints.

Start-up and merge are the serial part of --jobs N: workers fork (no re-import) where this process has
no other thread, a worker hands its fingerprints back as raw bytes when they are few and on disk when many,
and the merge touches only the findings, notes and stats, never the rows.
"""

from __future__ import annotations

import os
from array import array
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

from core.dataset.hotloop import scan_jsonl_part
from core.dataset.npimport import numpy_or_none
from core.dataset.scan import PartResult, ScanContext, relocate
from core.dataset.schema import Schema
from core.dataset.stats import StatsAccumulator
from core.envvars import env_restored

MIN_PART_BYTES = 4 << 20  # below this a file is scanned in one process whatever --jobs says


@dataclass(frozen=True)
class LintProgress:
    phase: str  # scan | duplicates | near-duplicates | tokens
    done: int
    total: int



def split_parts(path: Path, size: int, jobs: int) -> list[tuple[int, int]]:
    if jobs <= 1 or size < MIN_PART_BYTES * 2:
        return [(0, size)]
    jobs = min(jobs, max(1, size // MIN_PART_BYTES))
    bounds = [0]
    with open(path, "rb") as fh:
        for i in range(1, jobs):
            fh.seek(size * i // jobs)
            fh.readline()
            at = fh.tell()
            if bounds[-1] < at < size:
                bounds.append(at)
    bounds.append(size)
    return [(a, b) for a, b in zip(bounds, bounds[1:]) if b > a]


def _start_method(requested: str | None) -> str:
    import multiprocessing
    import threading

    methods = multiprocessing.get_all_start_methods()
    if requested:
        return requested
    return "fork" if "fork" in methods and threading.active_count() == 1 else "spawn"


def run_parts(ctx: ScanContext, parts: list[tuple[int, int]], start_method: str | None,
              progress: Callable[[LintProgress], None] | None) -> list[PartResult]:
    if len(parts) == 1:
        total = parts[0][1]
        tick = (lambda done: progress(LintProgress("scan", done, total))) if progress else None
        return [scan_jsonl_part(ctx, parts[0][0], parts[0][1], False, tick)]
    import multiprocessing

    method = _start_method(start_method)
    mp = multiprocessing.get_context(method)
    # with fork the workers share this process's str hashes, so it scans the first part itself;
    # with spawn every part goes to a worker started with the same PYTHONHASHSEED
    own = method == "fork"
    if own:  # imported once, here, rather than by this process and each forked worker after the fork
        numpy_or_none()
    workers = _start_workers(mp, ctx, parts[1:] if own else parts, len(parts), seed=None if own else "0")
    try:
        tick = (lambda done: progress(LintProgress("scan", done, parts[-1][1]))) if progress else None
        results = [scan_jsonl_part(ctx, parts[0][0], parts[0][1], False, tick)] if own else []
        for proc, conn, (a, b) in workers:
            results.append(_receive(proc, conn, a, b))
            if progress:
                progress(LintProgress("scan", parts[len(results) - 1][1], parts[-1][1]))
        return results
    finally:
        _stop(workers)


def _start_workers(mp, ctx: ScanContext, todo: list[tuple[int, int]], parts: int, seed: str | None):
    """One process per part, each sending its result back through its own pipe. Plain processes, not a
    Pool: a Pool's shutdown waits for its handler thread's 0.1 s poll, and a worker that dies leaves its
    task unanswered; here the parent reads each pipe and a dead worker is an EOF. PYTHONHASHSEED=seed is
    set only while they start."""
    workers = []
    with env_restored("PYTHONHASHSEED"):
        if seed is not None:
            os.environ["PYTHONHASHSEED"] = seed
        try:
            for a, b in todo:
                receiver, sender = mp.Pipe(duplex=False)
                _widen(receiver)
                proc = mp.Process(target=_scan_worker, args=(sender, ctx, a, b, parts), daemon=True,
                                  name=f"devtune-lint-{a}-{b}")
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


def _scan_worker(conn, ctx: ScanContext, start: int, end: int, parts: int) -> None:
    """Scan one part and send the result: the PartResult pickled without its fingerprint columns, then
    each column as raw bytes (12 MB for 500k rows; pickle would copy each array twice more per side)."""
    try:
        result = scan_jsonl_part(ctx, start, end, True, None, parts)
        columns = [c for fp in _fingerprints(result) for c in fp.take_columns()]
    except BaseException as exc:  # the parent raises it: a worker's error is the lint's error
        import traceback

        conn.send(("error", f"{type(exc).__name__}: {exc}", traceback.format_exc()))
    else:
        conn.send(("ok", result, ""))
        for column in columns:
            conn.send_bytes(memoryview(column).cast("B"))
    finally:
        conn.close()


def _fingerprints(result: PartResult):
    return (result.fingerprints, result.slow_fingerprints)


def _receive(proc, conn, start: int, end: int) -> PartResult:
    try:
        status, value, trace = conn.recv()
        if status == "ok":
            for fp in _fingerprints(value):
                columns = [array("q") for _ in range(3)]
                for column in columns:
                    column.frombytes(conn.recv_bytes())
                fp.put_columns(columns)
    except EOFError:
        proc.join()
        raise RuntimeError(f"the lint worker for bytes {start}-{end} ended without a result (exit code "
                           f"{proc.exitcode}); run again with --jobs 1") from None
    if status != "ok":
        raise RuntimeError(f"the lint worker for bytes {start}-{end} failed: {value}\n{trace}")
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
