"""Monitoring benchmark (issue 6): prints figures as ratios to baselines measured in the same run.

1. Monitor CPU. One process does what devtune does while a run trains: the GPU recorder on the replay
   backend (8 GPUs, 1 Hz, appending gpu.jsonl), the metrics poller following a growing
   trainer_log.jsonl, stdout.log and stderr.log at 1 Hz (with a snapshot each time), and the TUI's
   GpuHistoryTail following gpu.jsonl. A separate writer process grows the logs (10 steps/s, tqdm on
   stderr) and is not measured. Figure: CPU seconds per wall second of that process, against an idle
   `time.sleep(1)` loop over the same wall time.                      target: <= 3% of one core
   The same loop again with what RunWatcher adds while a run lives (issue 19): the stall check (the last
   rows of trainer_log.jsonl, the mtimes of the logs, the idle-GPU check over the kept ticks; py-spy only
   once a stall is found, which a healthy run never reaches) and the throughput (tokens/s, MFU against the
   catalogue's peak, the advice) of an 8-GPU run's shape. RunWatcher checks stalls every 30 s; here both
   run every second, 30x as often, and the figure is that loop against the current one.
                                                        target: stall detection adds nothing measurable
2. Chart redraw at 100k points: LossChart rebuilding its lines (raster + strips, 120x40) for 100k
   loss, smoothed and learning-rate points plus eval points, cold (never drawn before, as after a
   re-attach) and after one more logged step (the steady state), against an empty chart of the same
   size.                                                               target: <= 20 ms
   (Also printed, for information: re-attaching to a 100k-line trainer_log.jsonl.)
3. train_runtime of a devtune-launched run vs a direct one: added by core.train.runs' benchmark.

    .venv/bin/python bench/monitor.py [--seconds 20] [--runs 15] [--pairs 3]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import math
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PY = sys.executable
REPLAY = ROOT / "tests" / "fixtures" / "gpu" / "replay_h100_x8.jsonl"
RESUME_LOG = ROOT / "tests" / "fixtures" / "logs" / "lf_resume" / "trainer_log.jsonl"

MONITOR = """
import sys, time
from pathlib import Path
from core.train.gpu.history import GpuHistoryTail, group_ticks, open_replay
from core.train.gpu.record import GpuRecorder
from core.train.metrics import MetricsPoller
d, secs = Path(sys.argv[1]), float(sys.argv[2])
checks = len(sys.argv) > 4  # + RunWatcher's stall and throughput checks, every second
recorder = GpuRecorder(open_replay(sys.argv[3]), d / "gpu.jsonl", interval=1.0)
poller = MetricsPoller(d / "trainer_log.jsonl", d / "stdout.log", d / "stderr.log")
gpu_tail = GpuHistoryTail(d / "gpu.jsonl")
# imported by both loops (a watcher has them loaded): the difference is the checks' work, not a bigger heap
from core.train.stalls import check_stall
from core.train.throughput import RunShape, Throughput
from core.train.watch import STALL_TICKS
if checks:
    writer_pid = int(sys.argv[4])
    shape = RunShape(params=8.0e9, method="lora", gpu="h100-80", vendor="nvidia", devices=8, tokens_per_step=32768,
                     settings=(("packing", False), ("flash_attn", "auto")), memory_headroom=0.4, precision="bf16")
    outputs = (d / "stdout.log", d / "stderr.log")
    ticks = []
    check_stall(d / "trainer_log.jsonl", writer_pid, ticks, outputs=outputs, with_stacks=False)  # warm: imports,
    Throughput.from_rates(1000.0, 1.0, shape).to_json()  # the catalogue, the messages: as a watcher has them
print("ready", flush=True)
sys.stdin.readline()
cpu0, t0 = time.process_time(), time.monotonic()
end = t0 + secs
recorder.start(lambda: time.monotonic() >= end)
steps = stalls = 0
while time.monotonic() < end:
    poller.poll()
    samples = gpu_tail.poll()
    snap = poller.metrics.snapshot()
    steps = snap.step
    if checks:
        ticks = (ticks + group_ticks(samples))[-STALL_TICKS:]
        stalls += check_stall(d / "trainer_log.jsonl", writer_pid, ticks, outputs=outputs, with_stacks=False) is not None
        Throughput.of(snap, shape).to_json()
    time.sleep(1.0)
assert stalls == 0, "a healthy run was called stalled"
recorder.stop()
print(f"cpu {time.process_time() - cpu0} wall {time.monotonic() - t0} step {steps} ticks {recorder.ticks}", flush=True)
"""

IDLE = """
import sys, time
print("ready", flush=True)
sys.stdin.readline()
cpu0, t0 = time.process_time(), time.monotonic()
end = t0 + float(sys.argv[2])
while time.monotonic() < end:
    time.sleep(1.0)
print(f"cpu {time.process_time() - cpu0} wall {time.monotonic() - t0} step 0 ticks 0", flush=True)
"""

WRITER = """
import json, sys, time
from pathlib import Path
d = Path(sys.argv[1])
total = 1_000_000
step = 0
t0 = time.monotonic()
with open(d / "trainer_log.jsonl", "a") as log, open(d / "stdout.log", "a") as out, open(d / "stderr.log", "a") as err:
    while True:
        step += 1
        el = int(time.monotonic() - t0)
        loss = 2.0 + 1.0 / (1 + step / 500)
        log.write(json.dumps({"current_steps": step, "total_steps": total, "loss": loss, "lr": 1e-4,
                              "epoch": step / 1000, "percentage": round(step / total * 100, 2),
                              "elapsed_time": f"0:{el // 60:02d}:{el % 60:02d}", "remaining_time": "9:00:00"}) + "\\n")
        log.flush()
        out.write(f"{{'loss': '{loss:.4g}', 'grad_norm': '0.55', 'learning_rate': '0.0001', "
                  f"'epoch': '{step / 1000:.4g}'}}\\n")
        out.flush()
        err.write(f"\\r  0%|          | {step}/{total} [00:{el % 60:02d}<9:00:00, 10.00it/s]")
        err.flush()
        time.sleep(0.1)
"""


def cpu_run(script: str, workdir: Path, seconds: float, *extra: str) -> dict[str, float]:
    proc = subprocess.Popen([PY, "-c", script, str(workdir), str(seconds), str(REPLAY), *extra], cwd=ROOT,
                            stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    assert proc.stdout.readline().strip() == "ready"
    proc.stdin.write("go\n")
    proc.stdin.flush()
    line = proc.stdout.readline().split()
    proc.wait(timeout=60)
    return {line[i]: float(line[i + 1]) for i in range(0, len(line), 2)}


def monitor_cpu(seconds: float, pairs: int) -> tuple[list, list, list]:
    """Idle, the current loop and the loop with the stall and throughput checks, interleaved `pairs` times
    (each sees the same machine state; the writer's log grows all along)."""
    idle, busy, checked = [], [], []
    with tempfile.TemporaryDirectory() as tmp:
        d = Path(tmp)
        writer = subprocess.Popen([PY, "-c", WRITER, str(d)], cwd=ROOT)
        try:
            time.sleep(1.0)
            for k in range(pairs):
                idle.append(cpu_run(IDLE, d, seconds))
                # each run's first poll reads the logs' whole history, which grows: alternate which goes first
                if k % 2:
                    checked.append(cpu_run(MONITOR, d, seconds, str(writer.pid)))
                    busy.append(cpu_run(MONITOR, d, seconds))
                else:
                    busy.append(cpu_run(MONITOR, d, seconds))
                    checked.append(cpu_run(MONITOR, d, seconds, str(writer.pid)))
        finally:
            writer.terminate()
            writer.wait()
    return busy, idle, checked


def check_costs(calls: int = 2000) -> tuple[float, float]:
    """CPU ms of one stall check and one throughput figure, on a 3,000-step trainer_log.jsonl and 120 ticks of
    8 GPUs (what RunWatcher keeps)."""
    from core.train.gpu.history import group_ticks, read_history
    from core.train.stalls import check_stall
    from core.train.throughput import RunShape, Throughput

    template = [json.loads(x) for x in RESUME_LOG.read_text().splitlines() if '"loss"' in x][:100]
    ticks = (group_ticks(read_history(REPLAY)) * 10)[-120:]
    shape = RunShape(params=8.0e9, method="lora", gpu="h100-80", vendor="nvidia", devices=8, tokens_per_step=32768,
                     settings=(("packing", False),), memory_headroom=0.4, precision="bf16")
    with tempfile.TemporaryDirectory() as tmp:
        d = Path(tmp)
        with open(d / "trainer_log.jsonl", "w") as fh:
            for i in range(3000):
                fh.write(json.dumps(dict(template[i % len(template)], current_steps=i + 1)) + "\n")
        for name in ("stdout.log", "stderr.log"):
            (d / name).write_text("x\n")
        outputs = (d / "stdout.log", d / "stderr.log")
        check_stall(d / "trainer_log.jsonl", 1, ticks, outputs=outputs, with_stacks=False)
        t0 = time.process_time()
        for _ in range(calls):
            check_stall(d / "trainer_log.jsonl", 1, ticks, outputs=outputs, with_stacks=False)
        stall = (time.process_time() - t0) / calls * 1000
        Throughput.from_rates(1000.0, 1.0, shape).to_json()
        t0 = time.process_time()
        for _ in range(calls):
            Throughput.from_rates(1000.0, 1.0, shape).to_json()
        return stall, (time.process_time() - t0) / calls * 1000


def chart_data(n: int):
    import random

    rnd = random.Random(0)
    xs = list(range(1, n + 1))
    ys = [2 + 3 * math.exp(-i / (n / 4)) + 0.3 * rnd.random() for i in xs]
    smooth, acc = [], 0.0
    for k, y in enumerate(ys, 1):
        acc = acc * 0.9 + 0.1 * y
        smooth.append(acc / (1 - 0.9 ** k))
    lr = [1e-4 * 0.5 * (1 + math.cos(math.pi * i / n)) for i in xs]
    return {"loss": (xs, ys), "smoothed": (xs, smooth), "eval_loss": (xs[::500], ys[::500]), "lr": (xs, lr)}


async def chart_times(runs: int, n: int) -> dict[str, list[float]]:
    """Wall and CPU seconds of LossChart._build(): cold (100k points never drawn before: re-attaching),
    after one more logged point once the chart has settled (the steady state while training), and an
    empty chart of the same size."""
    from textual.app import App

    from tui.widgets.loss_chart import LossChart

    class Host(App):
        def compose(self):
            yield LossChart()

    app = Host()
    times: dict[str, list[float]] = {k: [] for k in ("cold", "append", "empty", "cold_cpu", "append_cpu", "empty_cpu")}

    def timed(key: str, chart: LossChart) -> None:
        c0, t0 = time.process_time(), time.perf_counter()
        chart._build()
        times[key].append(time.perf_counter() - t0)
        times[key + "_cpu"].append(time.process_time() - c0)

    async with app.run_test(size=(120, 40)) as pilot:
        chart = app.query_one(LossChart)
        await pilot.pause()
        data = chart_data(n)
        for _ in range(runs):  # interleaved, so all three see the same machine state
            chart.clear()
            timed("empty", chart)
            chart.set_data(**data, resumes=[n // 3])
            timed("cold", chart)
            while chart._dirty:  # the redraw ticks that follow finish indexing the series (not timed)
                chart._dirty = False
                chart._build()
            for series in data.values():  # one more logged step
                series[0].append(series[0][-1] + 1)
                series[1].append(series[1][-1] * 0.9999)
            chart.set_data(**data)
            timed("append", chart)
    return times


def reattach_time(lines: int) -> tuple[float, float]:
    """Seconds to load a trainer_log.jsonl of `lines` lines into RunMetrics, and to only read its bytes."""
    from core.train.metrics import MetricsPoller

    template = [json.loads(x) for x in RESUME_LOG.read_text().splitlines() if '"loss"' in x][:100]
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "trainer_log.jsonl"
        with open(path, "w") as fh:
            for i in range(lines):
                rec = dict(template[i % len(template)], current_steps=i + 1, total_steps=lines)
                fh.write(json.dumps(rec) + "\n")
        t0 = time.process_time()
        path.read_bytes().splitlines()
        read = time.process_time() - t0
        t0 = time.process_time()
        poller = MetricsPoller(path)
        while poller.poll():
            pass
        return time.process_time() - t0, read


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=float, default=20.0, help="wall time of each CPU measurement")
    parser.add_argument("--runs", type=int, default=15, help="chart redraws to time")
    parser.add_argument("--pairs", type=int, default=3, help="interleaved idle / monitor / monitor+checks runs")
    parser.add_argument("--points", type=int, default=100_000)
    args = parser.parse_args()

    busies, idles, checks = monitor_cpu(args.seconds, args.pairs)
    busy, idle = busies[-1], idles[-1]
    busy_share = statistics.median(r["cpu"] / r["wall"] for r in busies)
    idle_share = statistics.median(r["cpu"] / r["wall"] for r in idles)
    checked_share = statistics.median(r["cpu"] / r["wall"] for r in checks)
    stall_ms, throughput_ms = check_costs()
    times = asyncio.run(chart_times(args.runs, args.points))
    ms = {k: statistics.median(v) * 1000 for k, v in times.items()}
    load_s, read_s = reattach_time(args.points)

    print("monitoring benchmark (ratios against baselines measured in this run)")
    print(f"  (median of {args.pairs} interleaved runs of {args.seconds:.0f} s each)")
    print(f"  monitor loop   {busy['cpu']:.3f} CPU s in {busy['wall']:.1f} s; {busy_share * 100:.2f}% of one core"
          f"   (8 GPUs x {busy['ticks']:.0f} ticks recorded, log followed to step {busy['step']:.0f})")
    print(f"  idle loop      {idle['cpu']:.3f} CPU s in {idle['wall']:.1f} s; {idle_share * 100:.2f}% of one core")
    print(f"  monitor / idle = {busy_share / max(idle_share, 1e-9):.1f}x;  monitor above idle = "
          f"{(busy_share - idle_share) * 100:.2f}% of one core   (target <= 3%)")
    print(f"  + stall and throughput checks every second {checked_share * 100:.2f}% of one core;  "
          f"/ monitor = {checked_share / max(busy_share, 1e-9):.2f}x, above monitor = "
          f"{(checked_share - busy_share) * 100:+.2f}% of one core, above idle = "
          f"{(checked_share - idle_share) * 100:.2f}%   (RunWatcher checks stalls every 30 s)")
    if args.pairs > 1:
        spread = [(c["cpu"] / c["wall"] - b["cpu"] / b["wall"]) * 100 for b, c in zip(busies, checks)]
        print(f"    checks - monitor, each interleaved pair: {', '.join(f'{x:+.2f}' for x in spread)} % of one core")
    loop_ms = busy_share * 1000  # CPU ms per 1 s iteration of the monitor loop
    watcher = throughput_ms + stall_ms / 30  # RunWatcher: the throughput each poll, a stall check every 30 s
    print(f"  one stall check {stall_ms:.3f} ms CPU, one throughput figure {throughput_ms:.3f} ms CPU, against "
          f"{loop_ms:.2f} ms CPU per second of the monitor loop: at RunWatcher's cadence "
          f"{watcher / max(loop_ms, 1e-9) * 100:.1f}% of the loop, {watcher / 10:.3f}% of one core")
    print(f"  chart redraw, {args.points:,} points, cold      {ms['cold']:7.2f} ms wall, {ms['cold_cpu']:7.2f} ms CPU"
          f"   (target <= 20 ms)")
    print(f"  chart redraw after one more logged step   {ms['append']:7.2f} ms wall, {ms['append_cpu']:7.2f} ms CPU"
          f"   (target <= 20 ms)")
    print(f"  empty chart, same size                    {ms['empty']:7.2f} ms wall, {ms['empty_cpu']:7.2f} ms CPU")
    print(f"  cold / empty = {ms['cold'] / max(ms['empty'], 1e-9):.1f}x,  after a step / empty = "
          f"{ms['append'] / max(ms['empty'], 1e-9):.1f}x (wall)"
          + ("   (wall > CPU: other processes shared the cores)" if ms["cold"] > 1.2 * ms["cold_cpu"] else ""))
    print(f"  re-attach: {args.points:,}-line trainer_log.jsonl into RunMetrics {load_s * 1000:.0f} ms CPU "
          f"(reading its bytes alone: {read_s * 1000:.1f} ms, {load_s / max(read_s, 1e-9):.0f}x)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
