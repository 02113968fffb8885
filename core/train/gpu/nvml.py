"""NVIDIA GPUs through NVML (the `nvidia-ml-py` package, imported as `pynvml`).

One `nvmlInit()` for the backend's life; per tick and per GPU: utilization, memory (bytes),
temperature (the GPU die sensor), power and the enforced limit (mW), SM and memory clocks (MHz), and
the compute processes every few ticks. Where NVML is absent `nvmlInit()` raises
`NVMLError_LibraryNotFound` ("NVML Shared Library Not Found"); without the driver,
`NVMLError_DriverNotLoaded`.
"""

from __future__ import annotations

import time
from typing import Any

from core.i18n import said
from core.train.gpu.backend import GpuBackendUnavailable
from core.train.gpu.sample import GpuProcess, GpuSample

PROCESS_EVERY = 5


def _call(fn, *args, default=None):
    try:
        return fn(*args)
    except Exception:  # NVMLError_NotSupported and friends: the value is absent
        return default


def _text(value) -> str:
    return value.decode() if isinstance(value, bytes) else str(value)


class NvmlBackend:
    name = "nvml"

    def __init__(self, lib: Any) -> None:
        self.lib = lib
        count = lib.nvmlDeviceGetCount()
        self.handles = [lib.nvmlDeviceGetHandleByIndex(i) for i in range(count)]
        self.names = [_text(_call(lib.nvmlDeviceGetName, h, default=f"NVIDIA GPU {i}"))
                      for i, h in enumerate(self.handles)]
        self.bdfs = []
        for h in self.handles:
            pci = _call(lib.nvmlDeviceGetPciInfo, h)
            self.bdfs.append(_text(getattr(pci, "busId", "")) or None if pci is not None else None)
        self._tick = 0
        self._processes: dict[int, list[GpuProcess] | None] = {}

    def sample(self) -> list[GpuSample]:
        lib = self.lib
        ts = time.time()
        if self._tick % PROCESS_EVERY == 0:
            self._processes = {i: self._process_list(h) for i, h in enumerate(self.handles)}
        self._tick += 1
        out = []
        for i, h in enumerate(self.handles):
            util = _call(lib.nvmlDeviceGetUtilizationRates, h)
            mem = _call(lib.nvmlDeviceGetMemoryInfo, h)
            temp = _call(lib.nvmlDeviceGetTemperature, h, lib.NVML_TEMPERATURE_GPU)
            power_mw = _call(lib.nvmlDeviceGetPowerUsage, h)
            cap_mw = _call(lib.nvmlDeviceGetEnforcedPowerLimit, h)
            out.append(GpuSample(
                ts=ts, backend=self.name, index=i, name=self.names[i],
                util_pct=float(util.gpu) if util is not None else None,
                vram_used=int(mem.used) if mem is not None else None,
                vram_total=int(mem.total) if mem is not None else None,
                temp_c=float(temp) if temp is not None else None, temp_sensor="gpu" if temp is not None else None,
                power_w=power_mw / 1000 if power_mw is not None else None,
                power_cap_w=cap_mw / 1000 if cap_mw else None,
                sclk_mhz=_call(lib.nvmlDeviceGetClockInfo, h, lib.NVML_CLOCK_SM),
                mclk_mhz=_call(lib.nvmlDeviceGetClockInfo, h, lib.NVML_CLOCK_MEM),
                processes=self._processes.get(i), bdf=self.bdfs[i],
            ))
        return out

    def _process_list(self, h) -> list[GpuProcess] | None:
        lib = self.lib
        procs = _call(lib.nvmlDeviceGetComputeRunningProcesses, h)
        if procs is None:
            return None
        out = []
        for p in procs:
            name = _call(lib.nvmlSystemGetProcessName, p.pid, default="N/A")
            used = getattr(p, "usedGpuMemory", None)
            out.append(GpuProcess(pid=int(p.pid), name=_text(name), vram_bytes=int(used) if used else None))
        return out

    def close(self) -> None:
        _call(self.lib.nvmlShutdown)


def open_nvml(lib: Any = None) -> NvmlBackend:
    if lib is None:
        try:
            import pynvml as lib
        except ImportError:
            raise GpuBackendUnavailable(said("nvidia-ml-py is not installed")) from None
    try:
        lib.nvmlInit()
    except Exception as exc:  # NVMLError_LibraryNotFound, NVMLError_DriverNotLoaded, ...
        raise GpuBackendUnavailable(said("NVML cannot start: {error}", error=str(exc)[:160] or type(exc).__name__)
                                    ) from None
    try:
        backend = NvmlBackend(lib)
    except Exception as exc:
        _call(lib.nvmlShutdown)
        raise GpuBackendUnavailable(said("NVML cannot start: {error}", error=str(exc)[:160] or type(exc).__name__)
                                    ) from None
    if not backend.handles:
        backend.close()
        raise GpuBackendUnavailable(said("{tool} lists no GPU", tool="NVML"))
    return backend
