"""Benchmark of `devtune data lint` and of the Data screen's first page, on a generated 1M-row alpaca file.

    .venv/bin/python bench/lint.py [--rows 1000000] [--repeat 5]

The file (~500 MB) is generated into bench/out/ (git-ignored) the first time. Every figure is measured
in its own process, in interleaved rounds, and reported as a ratio to the baseline of the same run:

- baseline: a bare loop of orjson.loads plus key and type checks (reference Part B, method 5)
- lint --jobs 1, lint --jobs 2, lint with the default --jobs (the CPU count)
- peak RSS of each (the largest process, workers included)
- the first preview page: core (open + first page) and on screen (DevtuneApp headless, open → rows shown)

Targets (issues 3 and 14): lint ≤ 1.5× baseline, both in one process (--jobs 1 against the single-process
baseline: the same work per row); --jobs 2 ≥ 1.6× faster than --jobs 1; peak RSS ≤ 150 MB; first page
on screen ≤ 0.5 s. The headline ratios are paired: the median of the ratios within each round, whose
runs are seconds apart (this machine's speed drifts by ±15% over a minute, and a slow spell slows both
runs of a round); the ratio of the medians and of the fastest runs follow. The machine's load averages
(1, 5, 15 minutes, as `uptime` prints them) are printed before and after: other work on a 2-CPU machine
changes the --jobs 2 figure most. The project's modules are byte-compiled before the rounds
(as an installed devtune is), so no round pays for compiling them.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
OUT = HERE / "out"


# ------------------------------------------------------------------ measured in a child process

def measure_baseline(path: str) -> dict:
    import orjson

    t0 = time.perf_counter()
    rows = chars = 0
    with open(path, "rb") as fh:
        for line in fh:
            o = orjson.loads(line)
            if type(o) is not dict:
                continue
            ins, inp, out = o.get("instruction"), o.get("input", ""), o.get("output")
            if type(ins) is not str or type(inp) is not str or type(out) is not str or not out:
                continue
            rows += 1
            chars += len(ins) + len(inp) + len(out)
    return {"seconds": time.perf_counter() - t0, "rows": rows}


def measure_lint(path: str, jobs: int) -> dict:
    t0 = time.perf_counter()
    from core.data.lint import LintOptions, lint_file

    report = lint_file(path, LintOptions(jobs=jobs))
    return {"seconds": time.perf_counter() - t0, "rows": report.rows, "findings": len(report.findings),
            "errors": report.errors, "warnings": report.warnings}


def measure_first_page_core(path: str) -> dict:
    t0 = time.perf_counter()
    from core.data.preview import Preview

    preview = Preview(path)
    rows = preview.first_page(200)
    return {"seconds": time.perf_counter() - t0, "rows": len(rows)}


def measure_first_page_screen(path: str) -> dict:
    import asyncio
    import tempfile

    os.environ["TEXTUAL_ANIMATIONS"] = "none"
    from core.workspace.layout import Workspace
    from screens.data import DataScreen
    from tui.app import DevtuneApp
    from tui.widgets.row_pager import RowPager

    async def run() -> dict:
        with tempfile.TemporaryDirectory() as tmp:
            app = DevtuneApp(Workspace(Path(tmp)).ensure(), watch_terminal=False)
            async with app.run_test(size=(120, 40)) as pilot:
                while not (isinstance(app.screen, DataScreen) and app.screen.is_mounted):
                    await pilot.pause(0.01)  # the first frame is the splash; the step opens after
                await pilot.pause()
                screen = app.screen
                pager = screen.query_one(RowPager)
                t0 = time.perf_counter()
                screen.open_file(Path(path))
                while pager.row_count == 0:
                    await asyncio.sleep(0.005)
                await asyncio.sleep(1 / 60)  # one frame: the rows are painted
                shown = time.perf_counter() - t0
                indexed = not screen.preview.complete
                for w in list(app.workers):
                    w.cancel()
                return {"seconds": shown, "rows": pager.row_count, "index_still_building": indexed}

    return asyncio.run(run())


MEASURES = {"baseline": measure_baseline, "lint": measure_lint, "page-core": measure_first_page_core,
            "page-screen": measure_first_page_screen}


# ------------------------------------------------------------------ the parent

def run_child(kind: str, path: Path, jobs: int = 0) -> dict:
    cmd = [sys.executable, str(Path(__file__).resolve()), "--measure", kind, str(path), "--jobs", str(jobs)]
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, cwd=ROOT)
    out, err = proc.communicate()
    if proc.returncode:
        raise SystemExit(f"{kind} failed:\n{err.decode()[-2000:]}")
    result = json.loads(out.decode().strip().splitlines()[-1])
    result["rss_mb"] = result.get("rss_mb", 0)
    return result


def child_main(kind: str, path: str, jobs: int) -> None:
    import resource

    result = MEASURES[kind](path) if kind != "lint" else measure_lint(path, jobs)
    me, kids = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    result["rss_mb"] = round(max(me.ru_maxrss, kids.ru_maxrss) / 1024, 1)
    result["cpu"] = round(me.ru_utime + me.ru_stime + kids.ru_utime + kids.ru_stime, 2)
    print(json.dumps(result))


def ensure_file(rows: int) -> Path:
    path = OUT / f"alpaca_{rows // 1000}k.jsonl"
    if not path.exists() or path.stat().st_size < rows * 100:
        sys.path.insert(0, str(HERE))
        from gen_alpaca import generate

        print(f"generating {path} ({rows:,} rows)…", file=sys.stderr)
        t0 = time.perf_counter()
        generate(path, rows, 42)
        print(f"  {time.perf_counter() - t0:.0f} s", file=sys.stderr)
    return path


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--rows", type=int, default=1_000_000)
    ap.add_argument("--repeat", type=int, default=5, help="interleaved rounds (the figures are medians over them)")
    ap.add_argument("--file", type=Path, help="use this file instead of the generated one")
    ap.add_argument("--measure", help=argparse.SUPPRESS)
    ap.add_argument("path", nargs="?", help=argparse.SUPPRESS)
    ap.add_argument("--jobs", type=int, default=0, help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.measure:
        sys.path.insert(0, str(ROOT))
        child_main(args.measure, args.path, args.jobs)
        return

    path = args.file or ensure_file(args.rows)
    # byte-compiled first, as an installed devtune runs: a shell with PYTHONDONTWRITEBYTECODE=1 would
    # otherwise have every lint child compile the sources it changed (~35 ms, counted as lint time)
    import compileall

    for pkg in ("core", "tui", "screens"):
        compileall.compile_dir(str(ROOT / pkg), quiet=1)
    cpus = os.cpu_count() or 1
    default_jobs = max(1, min(8, cpus))
    runs = [("baseline", 0), ("lint", 1), ("lint", 2)]
    if default_jobs not in (1, 2):
        runs.append(("lint", default_jobs))
    results: dict[str, list[dict]] = {}
    load_before = os.getloadavg()
    for r in range(args.repeat):
        for kind, jobs in runs:
            name = kind if kind == "baseline" else f"lint --jobs {jobs}"
            res = run_child(kind, path, jobs)
            results.setdefault(name, []).append(res)
            print(f"  round {r + 1}: {name:<16} {res['seconds']:6.2f} s  cpu {res['cpu']:6.2f} s  "
                  f"{res['rss_mb']:6.0f} MB", file=sys.stderr)
    page_errors: dict[str, str] = {}
    for kind in ("page-core", "page-screen"):
        for _ in range(args.repeat):
            try:
                results.setdefault(kind, []).append(run_child(kind, path))
            except SystemExit as exc:  # the lint figures still stand; say what failed
                page_errors[kind] = str(exc).strip().splitlines()[-1][:200]
                results.pop(kind, None)
                break

    med = {k: statistics.median(x["seconds"] for x in v) for k, v in results.items()}
    cpu = {k: statistics.median(x["cpu"] for x in v) for k, v in results.items()}
    rss = {k: max(x["rss_mb"] for x in v) for k, v in results.items()}
    size = path.stat().st_size
    rows = results["baseline"][0]["rows"]
    base = med["baseline"]
    print(f"file: {path} · {rows:,} rows · {size / 1e6:,.0f} MB · {cpus} CPUs · median of {args.repeat} "
          f"interleaved rounds")
    print(f"{'run':<20}{'seconds':>9}{'rows/s':>12}{'MB/s':>8}{'× baseline':>12}{'CPU s':>8}{'CPU ×':>7}"
          f"{'peak RSS':>11}")
    for name in results:
        if name.startswith("page"):
            continue
        s = med[name]
        print(f"{name:<20}{s:>9.2f}{rows / s:>12,.0f}{size / 1e6 / s:>8.0f}{s / base:>12.2f}{cpu[name]:>8.2f}"
              f"{cpu[name] / cpu['baseline']:>7.2f}{rss[name]:>8.0f} MB")
    j1, j2 = med["lint --jobs 1"], med["lint --jobs 2"]
    best = {k: min(x["seconds"] for x in v) for k, v in results.items()}
    load = os.getloadavg()
    def rounds(a: str, b: str) -> list[float]:  # the ratio within each round: neighbours in time
        return [x["seconds"] / y["seconds"] for x, y in zip(results[a], results[b])]

    def paired(a: str, b: str) -> str:
        r = rounds(a, b)
        return f"{statistics.median(r):.2f}× (median of the rounds' ratios: {' '.join(f'{x:.2f}' for x in r)})"

    print(f"--jobs 2 speed-up over --jobs 1: {paired('lint --jobs 1', 'lint --jobs 2')}; "
          f"{j1 / j2:.2f}× (ratio of the medians), "
          f"{best['lint --jobs 1'] / best['lint --jobs 2']:.2f}× (fastest runs)  (target ≥ 1.6×)")
    print(f"load average (1, 5, 15 min): {' '.join(f'{x:.2f}' for x in load_before)} before, "
          f"{' '.join(f'{x:.2f}' for x in load)} after, on {cpus} CPUs")
    print(f"lint --jobs 1 / baseline: {paired('lint --jobs 1', 'baseline')}; {j1 / base:.2f}× (ratio of the "
          f"medians), {best['lint --jobs 1'] / best['baseline']:.2f}× (fastest runs) "
          f"(target ≤ 1.5×); default (--jobs {default_jobs}) / baseline: "
          f"{med[f'lint --jobs {default_jobs}'] / base:.2f}×")
    print(f"peak RSS of lint (largest process): {max(rss[k] for k in rss if k.startswith('lint')):.0f} MB "
          f"(target ≤ 150 MB)")
    if "page-core" in results:
        print(f"first page, core (open + 200 rows): {med['page-core'] * 1000:.0f} ms")
    if "page-screen" in results:
        shown = results["page-screen"]
        print(f"first page on screen (open → rows painted): {med['page-screen'] * 1000:.0f} ms (target ≤ 500 ms); "
              f"index still building then: {all(x['index_still_building'] for x in shown)}")
    for kind, error in page_errors.items():
        print(f"{kind}: not measured, the child failed: {error}")
    findings = results["lint --jobs 1"][0]
    print(f"lint found: {findings['errors']} errors, {findings['warnings']:,} warnings "
          f"({findings['findings']:,} findings)")


if __name__ == "__main__":
    main()
