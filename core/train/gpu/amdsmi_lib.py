"""The amdsmi Python library as a backend: the first choice on an AMD machine.

One `amdsmi_init()` and one list of processor handles for the backend's whole life; per tick and
per GPU one `amdsmi_get_gpu_metrics_info(h)` (activity, temperatures, power, clocks in one table)
and one `amdsmi_get_gpu_vram_usage(h)` (MiB; the metrics table has no VRAM). The process list is a
third call, made every few ticks. An MI250(X) has two GCDs: the library returns one handle per GCD.

Importing the binding where the C library is missing prints two lines to *stdout* and raises
KeyError('libamd_smi.so') (not ImportError); a binding that does not match the installed library
raises AttributeError. Both are caught here, with stdout held back so a TUI screen stays clean.
The binding that matches a ROCm install is `pip install /opt/rocm/share/amd_smi`.
"""

from __future__ import annotations

import contextlib
import io
import time
from typing import Any

from core.i18n import said
from core.train.gpu.amd_smi import assign_cards
from core.train.gpu.backend import GpuBackendUnavailable
from core.train.gpu.sample import (
    MIB,
    GpuProcess,
    GpuSample,
    as_int,
    as_number,
    pick_temperature,
)

PROCESS_EVERY = 5


def import_amdsmi():
    """The amdsmi module, or GpuBackendUnavailable saying why (nothing reaches stdout)."""
    held = io.StringIO()
    try:
        with contextlib.redirect_stdout(held):
            import amdsmi
    except ModuleNotFoundError:
        raise GpuBackendUnavailable(said("the amdsmi Python package is not installed "
                                      "(on ROCm: pip install /opt/rocm/share/amd_smi)")) from None
    except (ImportError, OSError, KeyError) as exc:
        printed = held.getvalue().strip().splitlines()
        detail = printed[0] if printed else f"{type(exc).__name__}: {exc}"
        raise GpuBackendUnavailable(said("the amdsmi library cannot load ({detail})", detail=detail[:160])) from None
    except AttributeError as exc:
        raise GpuBackendUnavailable(said("the amdsmi binding does not match the installed library ({detail})",
                                      detail=str(exc)[:160])) from None
    return amdsmi


def _call(fn, *args, default=None):
    try:
        return fn(*args)
    except Exception:  # AmdSmiLibraryException (NOT_SUPPORTED, ...): this value is simply absent
        return default


class AmdSmiLibBackend:
    name = "amdsmi"

    def __init__(self, lib: Any) -> None:
        self.lib = lib
        self.handles = list(lib.amdsmi_get_processor_handles())
        self.names: list[str] = []
        self.caps: list[float | None] = []
        self.bdfs: list[str | None] = []
        serials: dict[int, str | None] = {}
        for i, h in enumerate(self.handles):
            asic = _call(lib.amdsmi_get_gpu_asic_info, h, default={}) or {}
            name = asic.get("market_name")
            self.names.append(name if isinstance(name, str) and name != "N/A" else f"AMD GPU {i}")
            cap = _call(lib.amdsmi_get_power_cap_info, h, default={}) or {}
            cap_uw = as_number(cap.get("power_cap"))
            self.caps.append(cap_uw / 1e6 if cap_uw else None)  # microwatts
            self.bdfs.append(_call(lib.amdsmi_get_gpu_device_bdf, h))
            board = _call(lib.amdsmi_get_gpu_board_info, h, default={}) or {}
            serial = board.get("product_serial")
            serials[i] = serial if isinstance(serial, str) and serial not in ("", "0", "N/A") else None
        self._serials = serials
        self._tick = 0
        self._processes: dict[int, list[GpuProcess]] = {}

    def sample(self) -> list[GpuSample]:
        ts = time.time()
        if self._tick % PROCESS_EVERY == 0:
            self._processes = {i: self._process_list(h) for i, h in enumerate(self.handles)}
        self._tick += 1
        samples = [self._sample_one(i, h, ts) for i, h in enumerate(self.handles)]
        assign_cards(samples, self._serials)
        return samples

    def _sample_one(self, i: int, h, ts: float) -> GpuSample:
        lib = self.lib
        m = _call(lib.amdsmi_get_gpu_metrics_info, h, default=None)
        if m:
            util = as_number(m.get("average_gfx_activity"))
            temp, sensor = pick_temperature(m.get("temperature_edge"), m.get("temperature_hotspot"),
                                            m.get("temperature_mem"))
            power = as_number(m.get("current_socket_power"))
            if power is None:
                power = as_number(m.get("average_socket_power"))
            sclk = as_int(m.get("current_gfxclk")) or as_int(m.get("average_gfxclk_frequency"))
            mclk = as_int(m.get("current_uclk")) or as_int(m.get("average_uclk_frequency"))
        else:  # no gpu_metrics table on this GPU/driver: the separate calls
            activity = _call(lib.amdsmi_get_gpu_activity, h, default={}) or {}
            util = as_number(activity.get("gfx_activity"))
            temps = {}
            for sensor_name in ("EDGE", "HOTSPOT"):
                kind = getattr(lib.AmdSmiTemperatureType, sensor_name, None)
                if kind is not None:
                    temps[sensor_name] = _call(lib.amdsmi_get_temp_metric, h, kind,
                                               lib.AmdSmiTemperatureMetric.CURRENT)
            temp, sensor = pick_temperature(temps.get("EDGE"), temps.get("HOTSPOT"))
            power_info = _call(lib.amdsmi_get_power_info, h, default={}) or {}
            power = (as_number(power_info.get("current_socket_power"))
                     or as_number(power_info.get("average_socket_power")))
            sclk = mclk = None
        vram = _call(lib.amdsmi_get_gpu_vram_usage, h, default={}) or {}
        used, total = as_number(vram.get("vram_used")), as_number(vram.get("vram_total"))
        return GpuSample(
            ts=ts, backend=self.name, index=i, name=self.names[i], util_pct=util,
            vram_used=None if used is None else int(used * MIB), vram_total=None if total is None else int(total * MIB),
            temp_c=temp, temp_sensor=sensor, power_w=power, power_cap_w=self.caps[i],
            sclk_mhz=sclk, mclk_mhz=mclk, processes=self._processes.get(i), bdf=self.bdfs[i],
        )

    def _process_list(self, h) -> list[GpuProcess] | None:
        lib = self.lib
        items = _call(lib.amdsmi_get_gpu_process_list, h)
        if items is None:
            return None
        out = []
        for item in items:
            if not isinstance(item, dict):  # ROCm 6.0/6.1: handles, one more call each
                item = _call(lib.amdsmi_get_gpu_process_info, h, item, default={}) or {}
            pid = as_int(item.get("pid"))
            if pid is None:
                continue
            mem = item.get("memory_usage") or {}
            vram = as_int(mem.get("vram_mem")) if isinstance(mem, dict) else None
            name = item.get("name")
            out.append(GpuProcess(pid=pid, name=name if isinstance(name, str) and name else "N/A", vram_bytes=vram))
        return out

    def close(self) -> None:
        _call(self.lib.amdsmi_shut_down)


def open_amdsmi_lib(lib: Any = None) -> AmdSmiLibBackend:
    lib = lib or import_amdsmi()
    try:
        lib.amdsmi_init()
    except Exception as exc:  # AmdSmiLibraryException: DRIVER_NOT_LOADED, NO_PERM, ...
        raise GpuBackendUnavailable(said("amdsmi_init failed ({detail})", detail=str(exc)[:160])) from None
    try:
        backend = AmdSmiLibBackend(lib)
    except Exception as exc:
        _call(lib.amdsmi_shut_down)
        raise GpuBackendUnavailable(said("amdsmi could not list the GPUs ({detail})", detail=str(exc)[:160])) from None
    if not backend.handles:
        backend.close()
        raise GpuBackendUnavailable(said("{tool} lists no GPU", tool="amdsmi"))
    return backend
