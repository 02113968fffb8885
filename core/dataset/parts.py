"""The --jobs side of lint: the file cut into parts at line starts, one worker process per part (the
parent scans the first part itself when workers are forked), and the parts' results merged with global
line numbers. Duplicates across parts are found afterwards from the merged fingerprints.

Start-up and merge are the serial part of --jobs N: workers fork (no re-import) where this process has
no other thread, a worker hands its fingerprints back pickled when they are few and on disk when many,
and the merge touches only the findings, notes and stats, never the rows.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

from core.dataset.hotloop import scan_jsonl_part
from core.dataset.scan import PartResult, ScanContext, relocate
from core.dataset.schema import Schema
from core.dataset.stats import StatsAccumulator

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
    pool = _pool(mp, len(parts) - own, seed=None if own else "0")
    with pool:
        pending = [pool.apply_async(scan_jsonl_part, (ctx, a, b, i > 0, None, len(parts)))
                   for i, (a, b) in enumerate(parts) if i or not own]
        tick = (lambda done: progress(LintProgress("scan", done, parts[-1][1]))) if progress else None
        results = [scan_jsonl_part(ctx, parts[0][0], parts[0][1], False, tick)] if own else []
        for job in pending:
            results.append(job.get())
            if progress:
                progress(LintProgress("scan", parts[len(results) - 1][1], parts[-1][1]))
        return results


def _pool(mp, n: int, seed: str | None):
    """A pool whose processes start with PYTHONHASHSEED=seed; the variable is set only while they start."""
    if seed is None:
        return mp.Pool(n)
    saved = os.environ.get("PYTHONHASHSEED")
    os.environ["PYTHONHASHSEED"] = seed
    try:
        return mp.Pool(n)
    finally:
        if saved is None:
            os.environ.pop("PYTHONHASHSEED", None)
        else:
            os.environ["PYTHONHASHSEED"] = saved


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
