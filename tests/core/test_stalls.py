"""core.train.stalls: a real process made to hang is caught with its Python stack; healthy and loading runs
are left alone; idle GPUs with memory held (recorded sample shapes) are a stall."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from core.train.gpu.sample import GpuSample
from core.train.stalls import (MIN_STALL_SECONDS, check_stall, dump_stack, dump_stacks, gpus_idle_stall, no_step_stall,
                               py_spy, signal_ranks, step_interval, training_processes)

# A tiny trainer that logs three steps as LLaMA-Factory does, then hangs in a "collective" that never returns.
HANGING_TRAINER = r"""
import json, sys, threading, time
log = sys.argv[1]
def all_reduce_that_never_returns():
    threading.Event().wait()
with open(log, "a") as fh:
    for step in (1, 2, 3):
        fh.write(json.dumps({"current_steps": step, "total_steps": 100, "loss": 2.0 / step,
                             "elapsed_time": "0:00:0%d" % step}) + "\n")
        fh.flush()
print("ready", flush=True)
all_reduce_that_never_returns()
"""


def write_log(path: Path, steps: int, every: int) -> None:
    rows = [{"current_steps": s, "total_steps": 100, "loss": 1.0, "elapsed_time": f"0:{s * every // 60:02d}:"
             f"{s * every % 60:02d}"} for s in range(1, steps + 1)]
    rows.insert(1, {"current_steps": 1, "eval_loss": 2.0})  # eval lines do not count as steps
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))


def test_the_step_interval_is_read_from_elapsed_time(tmp_path):
    write_log(tmp_path / "trainer_log.jsonl", 10, 4)
    rows = [json.loads(line) for line in (tmp_path / "trainer_log.jsonl").read_text().splitlines()]
    assert step_interval([r for r in rows if "loss" in r]) == 4


def test_a_healthy_run_and_a_loading_run_are_not_stalled(tmp_path):
    log = tmp_path / "trainer_log.jsonl"
    write_log(log, 10, 4)
    assert no_step_stall(log, now=time.time() + 30) is None  # 30 s since the last step: saving, say
    (tmp_path / "one.jsonl").write_text(json.dumps({"current_steps": 1, "loss": 1.0, "elapsed_time": "0:00:01"}))
    assert no_step_stall(tmp_path / "one.jsonl", now=time.time() + 10_000) is None  # too early to know its pace
    assert no_step_stall(tmp_path / "missing.jsonl") is None


def test_no_new_step_for_long_is_a_stall(tmp_path):
    log = tmp_path / "trainer_log.jsonl"
    write_log(log, 10, 60)  # a step a minute: five minutes is not yet a stall, six is
    assert no_step_stall(log, now=log.stat().st_mtime + 290) is None
    stall = no_step_stall(log, now=log.stat().st_mtime + MIN_STALL_SECONDS + 250)
    assert stall.kind == "no-step" and stall.step == 10 and "step 10" in stall.reason


def _sample(ts: float, util: float, used_gib: float, index: int = 0) -> GpuSample:
    return GpuSample(ts=ts, backend="replay", index=index, name="AMD Instinct MI300X", util_pct=util,
                     vram_used=int(used_gib * 2**30), vram_total=192 * 2**30)


def test_idle_gpus_with_memory_held_are_a_stall():
    now = 10_000.0
    busy = [[_sample(now - 400 + t, 97, 150, i) for i in range(2)] for t in range(0, 100, 10)]
    idle = [[_sample(now - 200 + t, 0, 150, i) for i in range(2)] for t in range(0, 200, 10)]
    stall = gpus_idle_stall(busy + idle, now=now)
    assert stall.kind == "gpus-idle" and stall.seconds == pytest.approx(200)
    released = [[_sample(now - 200 + t, 0, 2, i) for i in range(2)] for t in range(0, 200, 10)]
    assert gpus_idle_stall(busy + released, now=now) is None  # idle and empty: finished or between runs
    assert gpus_idle_stall(busy, now=now - 300) is None


@pytest.mark.skipif(py_spy() is None, reason="py-spy is not installed")
def test_a_real_hung_trainer_is_caught_with_its_stack(tmp_path):
    log = tmp_path / "trainer_log.jsonl"
    proc = subprocess.Popen([sys.executable, "-c", HANGING_TRAINER, str(log)], stdout=subprocess.PIPE, text=True)
    try:
        assert proc.stdout.readline().strip() == "ready"
        assert check_stall(log, proc.pid) is None  # it just logged a step
        stall = check_stall(log, proc.pid, now=time.time() + MIN_STALL_SECONDS + 1)
        assert stall is not None and stall.kind == "no-step" and stall.step == 3
        stack = stall.stacks[proc.pid]
        if "ptrace" not in stack:  # py-spy reads other processes only with ptrace rights (root here, and in CI)
            assert "all_reduce_that_never_returns" in stack, stack
    finally:
        proc.kill()
        proc.wait()


def test_a_process_that_is_gone_says_so():
    proc = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True)
    text = dump_stack(int(proc.stdout))
    assert str(int(proc.stdout)) in text or "py-spy is not installed" in text


def test_no_trainer_no_stall(tmp_path):
    write_log(tmp_path / "trainer_log.jsonl", 5, 1)
    assert check_stall(tmp_path / "trainer_log.jsonl", None, now=time.time() + 10_000) is None
    assert os.path.exists(tmp_path / "trainer_log.jsonl")


@pytest.mark.skipif(py_spy() is None, reason="py-spy is not installed")
def test_monitor_shows_a_live_stall_with_the_stack_in_text_and_json(tmp_path, monkeypatch):
    """A real detached run (devtune's supervisor) whose trainer hangs after three steps."""
    import core.train.stalls as stalls
    import core.train.watch as watch
    from core.train.run_control import stop_run
    from core.train.runs import refresh, run_dir, start_run
    from core.train.watch import RunWatcher, monitor_report
    from core.workspace.layout import Workspace

    from tests.processes import wait

    monkeypatch.setattr(stalls, "MIN_STALL_SECONDS", 1.0)  # minutes in real life; the logic is the same
    monkeypatch.setattr(stalls, "STALL_FACTOR", 1.0)
    monkeypatch.setattr(watch, "STALL_CHECK_SECONDS", 0.0)
    ws = Workspace(tmp_path / "ws").ensure()
    (ws.root / "saves" / "hang").mkdir(parents=True)
    record = start_run(ws, [sys.executable, "-c", HANGING_TRAINER, "saves/hang/trainer_log.jsonl"], env={},
                       label="hang", output_dir="saves/hang")
    try:
        log = ws.root / "saves" / "hang" / "trainer_log.jsonl"
        assert wait(lambda: log.exists() and len(log.read_text().splitlines()) == 3 and
                    refresh(run_dir(ws, record.id)).trainer is not None, timeout=30)
        watcher = RunWatcher(ws, record.id)
        assert watcher.poll().stall is None
        time.sleep(1.5)
        update = watcher.poll()
        assert update.stall is not None and update.stall.step == 3
        report = monitor_report(update)
        js = report.to_json()
        assert js["stall"]["kind"] == "no-step" and js["stall"]["step"] == 3
        assert "tokens_per_s" in js["throughput"]  # a run without a config: no MFU claimed (test_throughput)
        text = "\n".join(report.anomaly_lines())
        assert "stalled" in text
        stack = "\n".join(js["stall"]["stacks"].values())
        if "ptrace" not in stack:
            assert "all_reduce_that_never_returns" in stack and "all_reduce_that_never_returns" in text
    finally:
        stop_run(ws, record.id, graceful_timeout=1, term_timeout=2)


# A rank as LLaMA-Factory's are: a forked data-loader worker (as torch's DataLoader starts them), then a hang in
# the "collective". Started by the real torchrun, it makes launcher -> rank -> worker.
RANK_WITH_A_WORKER = r"""
import multiprocessing, os, sys, threading
def load_batches():
    threading.Event().wait()
def all_reduce_that_never_returns():
    threading.Event().wait()
worker = multiprocessing.get_context("fork").Process(target=load_batches, daemon=True)
worker.start()
open(os.path.join(sys.argv[1], "rank%s-%d" % (os.environ.get("RANK", "0"), worker.pid)), "w").close()
all_reduce_that_never_returns()
"""


@pytest.mark.skipif(py_spy() is None, reason="py-spy is not installed")
def test_launcher_rank_and_worker_the_ranks_are_dumped(tmp_path, uses_torch):
    """Issue 19 audit: only childless Python processes were dumped, so a rank with a data-loader worker was
    never read (its worker was, the hung collective stayed invisible). torchrun -> 2 ranks -> 1 worker each:
    the two ranks are dumped, not torchrun's elastic agent nor the workers."""
    import psutil

    from tests.processes import wait

    script = tmp_path / "rank.py"
    script.write_text(RANK_WITH_A_WORKER)
    torchrun = Path(sys.executable).parent / "torchrun"
    proc = subprocess.Popen([str(torchrun), "--standalone", "--nproc-per-node", "2", str(script), str(tmp_path)],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)
    try:
        assert wait(lambda: len(list(tmp_path.glob("rank*-*"))) == 2, timeout=60), "the ranks did not start"
        workers = {int(p.name.split("-")[1]) for p in tmp_path.glob("rank*-*")}
        ranks = {psutil.Process(w).ppid() for w in workers}
        assert len(ranks) == 2 and not ranks & workers
        assert set(training_processes(proc.pid)) == ranks
        stacks = dump_stacks(sorted(ranks))
        for pid in ranks:
            assert "all_reduce_that_never_returns" in stacks[pid], stacks[pid]
    finally:
        # torchrun starts each rank in a session of its own: killing torchrun's group alone left both ranks
        # and their workers running after the test (seen as leftover rank.py processes)
        tree = psutil.Process(proc.pid).children(recursive=True)
        os.killpg(proc.pid, 9)
        for child in tree:
            try:
                child.kill()
            except psutil.NoSuchProcess:
                pass
        proc.wait()
        psutil.wait_procs(tree, timeout=30)


@pytest.mark.skipif(py_spy() is None, reason="py-spy is not installed")
def test_a_single_process_run_with_a_worker_dumps_the_process_itself(tmp_path):
    proc = subprocess.Popen([sys.executable, "-c", RANK_WITH_A_WORKER, str(tmp_path)])
    try:
        from tests.processes import wait

        assert wait(lambda: list(tmp_path.glob("rank*-*")), timeout=30)
        assert training_processes(proc.pid) == [proc.pid]
        # devtune stop signals the rank, never its worker (SIGABRT would kill a worker: it has no handler)
        import psutil

        worker = int(next(tmp_path.glob("rank*-*")).name.split("-")[1])
        signal_ranks(proc.pid, signal.SIGSTOP)
        assert wait(lambda: psutil.Process(proc.pid).status() == psutil.STATUS_STOPPED, timeout=10)
        assert psutil.Process(worker).status() != psutil.STATUS_STOPPED
        signal_ranks(proc.pid, signal.SIGCONT)
    finally:
        import psutil

        tree = psutil.Process(proc.pid).children(recursive=True)
        for child in tree:
            child.kill()
        proc.kill()
        proc.wait()
        psutil.wait_procs(tree, timeout=30)


# A trainer stuck before its first step: it prints as LLaMA-Factory does at start, then waits in a rendezvous.
HUNG_AT_INIT = r"""
import sys, threading
print("[INFO|2026-12-01] Initializing the process group (nccl), world size 2", file=sys.stderr, flush=True)
def init_process_group_that_never_returns():
    threading.Event().wait()
print("ready", flush=True)
init_process_group_that_never_returns()
"""


def test_a_run_that_never_steps_and_prints_nothing_is_a_startup_stall(tmp_path):
    from core.train.stalls import STARTUP_STALL_SECONDS, startup_stall

    log, err, out = tmp_path / "trainer_log.jsonl", tmp_path / "stderr.log", tmp_path / "stdout.log"
    out.write_text("")
    err.write_text("Loading checkpoint shards:  50%|#####     | 1/2\rLoading checkpoint shards: 100%|##########| 2/2\n")
    t0 = err.stat().st_mtime
    assert startup_stall(log, (out, err), now=t0 + STARTUP_STALL_SECONDS - 5) is None  # still within 10 min
    stall = startup_stall(log, (out, err), now=t0 + STARTUP_STALL_SECONDS + 5)
    assert stall.kind == "startup" and stall.step is None and "2/2" in stall.reason  # the last tqdm state
    log.write_text(json.dumps({"current_steps": 1, "loss": 1.0, "elapsed_time": "0:00:01"}) + "\n")  # one step
    assert startup_stall(log, (out, err), now=time.time() + STARTUP_STALL_SECONDS + 5).step == 1
    write_log(log, 3, 1)  # two steps and more: no_step_stall knows its pace
    assert startup_stall(log, (out, err), now=time.time() + STARTUP_STALL_SECONDS + 5) is None
    assert startup_stall(tmp_path / "none.jsonl", (), now=time.time() + 10_000) is None  # nothing written yet


@pytest.mark.skipif(py_spy() is None, reason="py-spy is not installed")
def test_a_real_trainer_hung_before_its_first_step_is_caught_with_its_stack(tmp_path):
    from core.train.stalls import STARTUP_STALL_SECONDS

    log, out, err = tmp_path / "trainer_log.jsonl", tmp_path / "stdout.log", tmp_path / "stderr.log"
    with open(out, "w") as fo, open(err, "w") as fe:
        proc = subprocess.Popen([sys.executable, "-c", HUNG_AT_INIT], stdout=fo, stderr=fe)
    try:
        from tests.processes import wait

        assert wait(lambda: "ready" in out.read_text(), timeout=30)
        assert check_stall(log, proc.pid, outputs=(out, err)) is None
        stall = check_stall(log, proc.pid, outputs=(out, err), now=time.time() + STARTUP_STALL_SECONDS + 1)
        assert stall is not None and stall.kind == "startup", stall
        assert "its last line: ready" in stall.reason or "Initializing the process group" in stall.reason
        assert "init_process_group_that_never_returns" in stall.stacks[proc.pid], stall.stacks
    finally:
        proc.kill()
        proc.wait()


@pytest.mark.skipif(py_spy() is None, reason="py-spy is not installed")
def test_a_stopped_process_says_so_and_is_still_read(tmp_path):
    """A rank frozen by SIGSTOP (or held by a debugger) cannot be paused by py-spy: it is read as it is, and
    the dump says why it answers the other ranks no more."""
    import signal

    proc = subprocess.Popen([sys.executable, "-c", HANGING_TRAINER, str(tmp_path / "log.jsonl")],
                            stdout=subprocess.PIPE, text=True)
    try:
        assert proc.stdout.readline().strip() == "ready"
        os.kill(proc.pid, signal.SIGSTOP)
        from tests.processes import wait

        assert wait(lambda: open(f"/proc/{proc.pid}/stat").read().split(") ")[1][0] == "T", timeout=10)
        text = dump_stack(proc.pid)
        assert f"process {proc.pid} is stopped" in text and f"kill -CONT {proc.pid}" in text
        assert "all_reduce_that_never_returns" in text, text
    finally:
        proc.kill()
        proc.wait()
