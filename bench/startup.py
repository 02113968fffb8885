"""Start-up benchmark (issue 2): prints ratios against baselines measured in the same run.

1. `devtune --help` wall time / `python -c pass` wall time            target <= 3.0
2. the wizard's first paint / a minimal Textual app's first paint       target <= 1.3

First paint = wall time from launching the process until the first screen has been composed and
rendered once (headless driver, same interpreter, same machine, interleaved runs, medians).

    .venv/bin/python bench/startup.py [--runs N] [--workspace DIR]
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PY = sys.executable

MINIMAL_APP = """
from textual.app import App
from textual.widgets import Static, Footer
class Minimal(App):
    def compose(self):
        yield Static("hello")
        yield Footer()
async def done(pilot):
    await pilot.pause()
    pilot.app.exit()
Minimal().run(headless=True, size=(120, 40), auto_pilot=done)
"""

WIZARD_APP = """
import sys
from core.workspace import Workspace
from tui.app import DevtuneApp
async def done(pilot):
    await pilot.pause()
    for _ in range(200):
        if pilot.app.screen.__class__.__name__ not in ("Screen", "_DefaultScreen"):
            break
        await pilot.pause()
    await pilot.pause()
    pilot.app.exit()
DevtuneApp(Workspace.resolve(sys.argv[1]).ensure(), watch_terminal=False).run(headless=True, size=(120, 40), auto_pilot=done)
"""


def timed(argv: list[str]) -> float:
    t0 = time.perf_counter()
    proc = subprocess.run(argv, cwd=ROOT, capture_output=True, text=True)
    elapsed = time.perf_counter() - t0
    if proc.returncode != 0:
        raise SystemExit(f"{argv[:3]} failed:\n{proc.stderr[-2000:]}")
    return elapsed


def measure(pairs: dict[str, list[str]], runs: int) -> dict[str, float]:
    samples: dict[str, list[float]] = {k: [] for k in pairs}
    for argv in pairs.values():  # warm the page cache
        timed(argv)
    for _ in range(runs):
        for name, argv in pairs.items():
            samples[name].append(timed(argv))
    return {k: statistics.median(v) for k, v in samples.items()}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=15)
    parser.add_argument("--workspace", help="workspace for the wizard (default: a fresh demo-like folder)")
    args = parser.parse_args()
    devtune = str(Path(PY).parent / "devtune")

    help_times = measure({"python -c pass": [PY, "-c", "pass"], "devtune --help": [devtune, "--help"]}, args.runs)
    ratio_help = help_times["devtune --help"] / help_times["python -c pass"]

    with tempfile.TemporaryDirectory() as tmp:
        ws = args.workspace or tmp
        paint = measure({"minimal Textual app": [PY, "-c", MINIMAL_APP],
                         "devtune wizard": [PY, "-c", WIZARD_APP, ws]}, max(5, args.runs // 2))
    ratio_paint = paint["devtune wizard"] / paint["minimal Textual app"]

    print("startup benchmark (medians; ratios against baselines measured in this run)")
    for name, t in {**help_times, **paint}.items():
        print(f"  {name:<22} {t * 1000:8.1f} ms")
    print(f"  devtune --help / python -c pass          = {ratio_help:5.2f}x   (target <= 3.0)")
    print(f"  wizard first paint / minimal Textual app = {ratio_paint:5.2f}x   (target <= 1.3)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
