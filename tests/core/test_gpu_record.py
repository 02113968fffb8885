"""Recording into gpu.jsonl (in-process and as the detached sidecar), reading the history back, following
it live, replaying it, and the VRAM balance check."""

import json
import os
import subprocess
import sys
import threading
from pathlib import Path

from core.train.gpu.balance import vram_imbalance
from core.train.gpu.history import GpuHistoryTail, group_ticks, open_replay, read_history
from core.train.gpu.record import GpuRecorder, record_until
from core.train.gpu.sample import GpuSample
from tests.core.test_gpu_parsers import F

ROOT = Path(__file__).resolve().parents[2]
MI300X = F / "replay_mi300x_x8.jsonl"
MI250 = F / "replay_mi250x_2cards_4gcd.jsonl"
H100 = F / "replay_h100_x8.jsonl"


def test_replay_fixtures_have_the_promised_shapes():
    mi300 = group_ticks(read_history(MI300X))
    assert len(mi300) == 20 and all(len(t) == 8 for t in mi300)
    assert {s.temp_sensor for t in mi300 for s in t} == {"hotspot"}
    mi250 = group_ticks(read_history(MI250))
    assert [s.card for s in mi250[0]] == [0, 0, 1, 1] and mi250[0][1].power_w is None
    h100 = group_ticks(read_history(H100))
    assert h100[0][0].name == "NVIDIA H100 80GB HBM3" and h100[0][0].backend == "nvml"


def test_replay_backend_loops_or_ends_and_stamps_the_present():
    backend = open_replay(MI250, loop=False)
    ticks = [backend.sample() for _ in range(21)]
    assert all(len(t) == 4 for t in ticks[:20]) and ticks[20] == [] and backend.exhausted
    assert ticks[0][0].backend == "replay" and ticks[0][0].ts > 1_764_480_000 + 10**6
    looping = open_replay(MI250)
    assert all(len(looping.sample()) == 4 for _ in range(45))


def test_recorder_appends_one_line_per_gpu_per_tick_and_history_survives(tmp_path):
    out = tmp_path / "run" / "gpu.jsonl"
    seen = []
    recorder = GpuRecorder(open_replay(MI300X), out, interval=0.0, on_tick=seen.append)
    recorder.run(max_ticks=5)
    lines = out.read_bytes().splitlines()
    assert len(lines) == 40 and len(seen) == 5
    history = read_history(out)
    assert len(group_ticks(history)) == 5 and history[0].name == "AMD Instinct MI300X"
    # a second recorder (a re-attached run) appends, never rewrites
    GpuRecorder(open_replay(MI300X), out, interval=0.0).run(max_ticks=2)
    assert len(group_ticks(read_history(out))) == 7
    last = read_history(out, max_ticks=3)
    assert len(group_ticks(last)) == 3 and last[-1].ts >= history[-1].ts


def test_read_history_from_the_end_of_a_long_file(tmp_path):
    out = tmp_path / "gpu.jsonl"
    GpuRecorder(open_replay(H100), out, interval=0.0).run(max_ticks=300)
    recent = read_history(out, max_ticks=10)
    assert len(recent) == 80
    everything = read_history(out)
    assert [s.to_record() for s in recent] == [s.to_record() for s in everything[-80:]]
    assert read_history(tmp_path / "absent.jsonl") == [] and read_history(out, max_ticks=0) == []


def test_history_tail_partial_line_junk_and_truncation(tmp_path):
    path = tmp_path / "gpu.jsonl"
    tail = GpuHistoryTail(path)
    assert tail.poll() == []  # not there yet
    rec = GpuSample(ts=1.0, backend="nvml", index=0, util_pct=5.0).to_record()
    line = json.dumps(rec).encode()
    path.write_bytes(line + b"\n" + line[:10])
    assert len(tail.poll()) == 1  # the half-written line waits
    with open(path, "ab") as fh:
        fh.write(line[10:] + b"\nnot json\n")
    got = tail.poll()
    assert len(got) == 1 and got[0].util_pct == 5.0
    path.write_bytes(line + b"\n")  # replaced by a shorter file: start over
    assert len(tail.poll()) == 1 and tail.reset


def test_record_until_stops_when_the_trainer_ends_and_writes_the_status(tmp_path):
    trainer = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(1.5)"])
    out, status = tmp_path / "gpu.jsonl", tmp_path / "gpu.status"
    ticks = record_until(out, trainer.pid, status, interval=0.2, backend=open_replay(MI250))
    trainer.wait()
    assert ticks >= 1 and len(read_history(out)) == 4 * ticks
    info = json.loads(status.read_text())
    assert info["state"] == "ended" and info["backend"] == "replay" and info["ticks"] == ticks


def test_record_until_on_a_machine_without_gpu_records_nothing_and_says_why(tmp_path, monkeypatch):
    monkeypatch.setenv("DEVTUNE_GPU_BACKEND", "none")
    out, status = tmp_path / "gpu.jsonl", tmp_path / "gpu.status"
    assert record_until(out, os.getpid(), status) == 0
    assert not out.exists()
    info = json.loads(status.read_text())
    assert info["state"] == "no-gpu" and info["backend"] is None and "DEVTUNE_GPU_BACKEND" in info["reason"]


def test_record_until_honours_a_stop_event(tmp_path):
    stop = threading.Event()
    thread = threading.Thread(target=record_until, args=(tmp_path / "g.jsonl",),
                              kwargs={"interval": 0.05, "backend": open_replay(H100), "stop_event": stop})
    thread.start()
    stop.set()
    thread.join(5)
    assert not thread.is_alive()


def test_sidecar_entry_point_records_until_the_pid_ends(tmp_path):
    trainer = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(3)"])
    out = tmp_path / "runs" / "r1" / "gpu.jsonl"
    env = {**os.environ, "DEVTUNE_GPU_BACKEND": f"replay:{MI300X}"}
    proc = subprocess.run([sys.executable, "-m", "core.train.gpu.record", "--out", str(out), "--until-pid",
                           str(trainer.pid), "--interval", "0.25"], cwd=ROOT, env=env, capture_output=True,
                          text=True, timeout=60)
    ended = trainer.poll() is not None  # the sidecar ends only once the trainer has
    trainer.kill()
    trainer.wait()
    assert ended and proc.returncode == 0, proc.stderr
    assert "RuntimeWarning" not in proc.stderr
    assert len(group_ticks(read_history(out))) >= 1
    assert json.loads((out.parent / "gpu.status").read_text())["state"] == "ended"


def test_vram_imbalance_warning_across_cards_in_use():
    mi250 = group_ticks(read_history(MI250))[0]
    warning = vram_imbalance(mi250)
    assert warning is not None and warning.high_index == 0 and 0.15 < warning.spread < 0.30
    assert "GPU 0" in warning.message
    assert vram_imbalance(group_ticks(read_history(MI300X))[0]) is None  # balanced
    idle = GpuSample(ts=0, backend="x", index=9, vram_used=0, vram_total=100)
    busy = [GpuSample(ts=0, backend="x", index=i, vram_used=50, vram_total=100) for i in range(2)]
    assert vram_imbalance(busy + [idle]) is None  # an idle card takes no part in the run
    assert vram_imbalance([busy[0]]) is None


def test_recorder_without_a_file_only_hands_ticks_over(tmp_path):
    seen = []
    recorder = GpuRecorder(open_replay(H100), None, interval=0.0, on_tick=seen.append)
    recorder.run(max_ticks=3)
    assert len(seen) == 3 and recorder.ticks == 3 and list(tmp_path.iterdir()) == []
