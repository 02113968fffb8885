"""Benchmark of `devtune diagnose` on a 100 MB training log, against reading the same file in the same run.

    .venv/bin/python bench/diagnose.py [--mb 100]

The log (bench/out/diagnose_100mb.log, git-ignored) is tqdm progress bars redrawn with \\r, LLaMA-Factory
log lines, a torchrun-prefixed traceback in the middle of the tail and the ChildFailedError summary at the
end: the shape of a real multi-GPU failure after hours of training. Target (issue 19): diagnose <= 2 s.
The baseline is a bare `read()` of the file plus one `bytes.count`, so the ratio says what the rules, the
traceback reader and the ranking cost on top of touching the bytes.
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
OUT = HERE / "out"

TAIL = """[rank1]: Traceback (most recent call last):
[rank1]:   File "/opt/venv/lib/python3.11/site-packages/transformers/trainer.py", line 2300, in _inner_training_loop
[rank1]:     self._load_from_checkpoint(resume_from_checkpoint)
[rank1]: ValueError: Can't find a valid checkpoint at saves/run/checkpoint-640
E1201 10:00:00.000000 1 torch/distributed/elastic/multiprocessing/api.py:1002] failed (exitcode: 1) local_rank: 1
torch.distributed.elastic.multiprocessing.errors.ChildFailedError:
Root Cause (first observed failure):
[0]:
  host      : node7
  rank      : 1 (local_rank: 1)
  exitcode  : 1 (pid: 4242)
============================================================
"""


def make_log(path: Path, mb: int) -> None:
    if path.exists() and path.stat().st_size >= mb << 20:
        return
    OUT.mkdir(exist_ok=True)
    with open(path, "w") as fh:
        step, written = 0, 0
        while written < (mb << 20):
            step += 1
            bars = "".join(f"\r {step % 10000:>5}/10000 [{step // 60:02d}:{step % 60:02d}<1:00:00,  1.{i}it/s]"
                           for i in range(20))
            line = (f"[INFO|2026-12-01 09:{step % 60:02d}:00] llamafactory.train:143 >> step {step}, "
                    f"{{'loss': {2 - step / 1e6:.4f}, 'grad_norm': 0.81, 'learning_rate': 1e-4}}\n{bars}\n")
            fh.write(line)
            written += len(line)
        fh.write(TAIL)


def baseline(path: Path) -> float:
    t0 = time.perf_counter()
    with open(path, "rb") as fh:
        fh.read().count(b"\n")
    return time.perf_counter() - t0


def diagnose(path: Path) -> float:
    t0 = time.perf_counter()
    out = subprocess.run([sys.executable, "-c", "import sys; from core.train.failures import diagnose_files;"
                          "d = diagnose_files([sys.argv[1]], exit_code=1); print(d[0].id)", str(path)],
                         capture_output=True, text=True, cwd=HERE.parent, check=True)
    elapsed = time.perf_counter() - t0
    assert out.stdout.strip() == "checkpoint-invalid", out.stdout
    return elapsed


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--mb", type=int, default=100)
    ap.add_argument("--repeat", type=int, default=3)
    args = ap.parse_args()
    path = OUT / f"diagnose_{args.mb}mb.log"
    make_log(path, args.mb)
    base, diag = [], []
    for _ in range(args.repeat):  # interleaved rounds: this machine's speed drifts
        base.append(baseline(path))
        diag.append(diagnose(path))
    b, d = statistics.median(base), statistics.median(diag)
    print(f"log: {path.stat().st_size / 2**20:.0f} MB")
    print(f"baseline (read + count): {b:.2f} s")
    print(f"devtune diagnose (a process, imports included): {d:.2f} s  = {d / b:.1f}x baseline  (target <= 2 s)")


if __name__ == "__main__":
    main()
