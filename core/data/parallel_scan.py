"""The --jobs side of lint: the file cut into chunks at line starts, more chunks than workers and
smaller towards the end, scanned by a `concurrent.futures.ProcessPoolExecutor`; the chunks' results are
merged with global line numbers. Duplicates across chunks are found afterwards from the merged
fingerprints (their hashes are the same in every process).

Balance: a worker takes the next chunk when it is free, so on a busy machine, where one process often
runs 10-20% slower than another, the faster one scans more of the small chunks of the tail instead of
waiting for the slower one.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Callable

from core.data.jsonl_scan import scan_jsonl_part
from core.data.lint_progress import LintProgress
from core.data.scan import PartResult, ScanContext, relocate
from core.data.schema import Schema
from core.data.stats import StatsAccumulator

MIN_PART_BYTES = 4 << 20  # below twice this a file is scanned in one process whatever --jobs says
MIN_CHUNK_BYTES = 2 << 20


def plan_spans(path: Path, size: int, jobs: int) -> list[tuple[int, int]]:
    """Byte ranges in file order, each starting at a line start: one range when there is one job or
    the file is small; else guided chunks (each a 1/(2 × workers) share of what is left)."""
    if jobs <= 1 or size < MIN_PART_BYTES * 2:
        return [(0, size)]
    procs = min(jobs, max(1, size // MIN_PART_BYTES))
    cuts, at = [], 0
    while size - at > MIN_CHUNK_BYTES:
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
    return list(zip(bounds, bounds[1:]))


def workers_for(size: int, jobs: int) -> int:
    return min(jobs, max(1, size // MIN_PART_BYTES))


def _start_method(requested: str | None) -> str:
    import multiprocessing
    import threading

    if requested:
        return requested
    methods = multiprocessing.get_all_start_methods()
    return "fork" if "fork" in methods and threading.active_count() == 1 else "spawn"


def _start_resource_tracker() -> None:
    """Start multiprocessing's resource tracker (spawn needs it) with stderr on /dev/null when sys.stderr
    has no real descriptor: the tracker passes sys.stderr.fileno() to its child, and a capture that answers
    -1 (Textual's, in the wizard) made every lint in worker processes fail with "bad value(s) in
    fds_to_keep"."""
    import sys
    from multiprocessing import resource_tracker

    try:
        if sys.stderr.fileno() >= 0:
            return
    except (AttributeError, OSError, ValueError):
        return  # no fileno at all: the tracker skips it by itself
    saved = sys.stderr
    with open(os.devnull, "w") as devnull:
        sys.stderr = devnull
        try:
            resource_tracker.ensure_running()
        finally:
            sys.stderr = saved


def _scan_chunk(ctx: ScanContext, start: int, end: int) -> PartResult:
    return scan_jsonl_part(ctx, start, end, start != 0)


def run_parts(ctx: ScanContext, spans: list[tuple[int, int]], jobs: int, start_method: str | None,
              progress: Callable[[LintProgress], None] | None) -> list[PartResult]:
    """The results of all spans, in file order. A worker's error, or a worker that dies, is the lint's
    error (a RuntimeError naming the byte range)."""
    if len(spans) == 1:
        a, b = spans[0]
        tick = (lambda done: progress(LintProgress("scan", done, b))) if progress else None
        return [scan_jsonl_part(ctx, a, b, False, tick)]
    import multiprocessing
    from concurrent.futures import ProcessPoolExecutor, as_completed
    from concurrent.futures.process import BrokenProcessPool

    from core.data import duplicates

    size = spans[-1][1]
    found: dict[int, PartResult] = {}
    held = done = 0
    method = _start_method(start_method)
    if method != "fork":
        _start_resource_tracker()
    context = multiprocessing.get_context(method)
    with ProcessPoolExecutor(workers_for(size, jobs), mp_context=context) as pool:
        futures = {pool.submit(_scan_chunk, ctx, a, b): n for n, (a, b) in enumerate(spans)}
        processes = list(getattr(pool, "_processes", {}).values())  # for the exit code of one that dies
        try:
            for future in as_completed(futures):
                n = futures[future]
                a, b = spans[n]
                try:
                    result = future.result()
                except BrokenProcessPool:
                    seen = {id(p): p for p in processes + list(getattr(pool, "_processes", {}).values())}
                    for p in seen.values():
                        p.join(1.0)  # reaped, so its exit code is known
                    codes = [p.exitcode for p in seen.values() if p.exitcode]
                    raise RuntimeError(f"the lint worker for bytes {a}-{b} ended without a result (exit code "
                                       f"{codes[0] if codes else 'unknown'}); run again with --jobs 1") from None
                except Exception as exc:
                    raise RuntimeError(f"the lint worker for bytes {a}-{b} failed: {type(exc).__name__}: "
                                       f"{exc}") from exc
                held += len(result.fingerprints)
                if held > duplicates.SPILL_ROWS:  # bounded memory: past the limit they go to disk
                    result.fingerprints.spill()
                found[n] = result
                done += b - a
                if progress:
                    progress(LintProgress("scan", done, size))
        except BaseException:
            for future in futures:
                future.cancel()
            for result in found.values():
                result.fingerprints.discard()
            raise
    return [found[n] for n in range(len(spans))]


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
        merged.kto_tags = [a + b for a, b in zip(merged.kto_tags, r.kto_tags)]
        fps.append(r.fingerprints.shifted(delta) if r.relative else r.fingerprints)
        merged.stats.merge(r.stats)
        for k, (line, off) in r.keys_first.items():
            line = int(line) + delta if r.relative else line  # int: not a LineNo marker in a message
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


PROCESS_LINT_BYTES = 8 << 20  # from this size a lint runs in worker processes


def jobs_for(size: int, requested: int = 0) -> int:
    """How many lint processes for a file of `size` bytes: `requested` when given (the CLI's --jobs), else one
    below PROCESS_LINT_BYTES (starting processes costs more than it saves) and the CPUs, up to 8, above it."""
    if requested > 0:
        return requested
    if size < PROCESS_LINT_BYTES:
        return 1
    return max(1, min(8, os.cpu_count() or 1))
