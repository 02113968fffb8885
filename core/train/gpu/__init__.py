"""GPU sampling for the Train step: one GpuSample per GPU per tick from the first backend that works
(amdsmi library, `amd-smi` CLI, `rocm-smi`, NVML) or from a replay of a recorded gpu.jsonl.

    backend, reason = choose_backend()        # (None, "no GPU on this machine (CPU run): ...")
    samples = backend.sample()                # list[GpuSample]
    record_until(run_dir / "gpu.jsonl", until_pid=trainer_pid, status_file=run_dir / "gpu.status")
    history = read_history(run_dir / "gpu.jsonl", max_ticks=120)

Names load lazily (PEP 562), so `python -m core.train.gpu.record` runs cleanly and nothing imports amdsmi
or pynvml until a backend is opened.
"""

from importlib import import_module

_WHERE = {
    "GpuBackend": "backend", "GpuBackendUnavailable": "backend",
    "VramImbalance": "balance", "vram_imbalance": "balance",
    "choose_backend": "choose",
    "GpuHistoryTail": "history", "ReplayBackend": "history", "group_ticks": "history", "open_replay": "history",
    "read_history": "history",
    "GpuRecorder": "record", "record_until": "record",
    "GpuProcess": "sample", "GpuSample": "sample",
}
__all__ = sorted(_WHERE)


def __getattr__(name: str):
    if name in _WHERE:
        return getattr(import_module(f"core.train.gpu.{_WHERE[name]}"), name)
    raise AttributeError(f"module 'core.train.gpu' has no attribute {name!r}")
