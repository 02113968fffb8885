"""The `amd-smi` command-line tool as a backend, and its JSON read in both shapes.

- `amd-smi metric --usage --mem-usage --power --clock --temperature --json`: per GPU
  `{"gpu": 0, "usage": {"gfx_activity": {"value": 42, "unit": "%"}}, "mem_usage": {"total_vram":
  {"value": 196592, "unit": "MB"}, ...}, "temperature": {"edge": ..., "hotspot": ..., "mem": ...}, ...}`.
  Top level: a bare list before amd-smi 26 (ROCm <= 6.4), `{"gpu_data": [...]}` from 26 (ROCm 7).
  Missing values are "N/A", `{"value": "N/A"}`, or absent. "MB" is MiB (the tool divides bytes by
  1024*1024). MI300X has no edge sensor: edge is "N/A", hotspot is the temperature.
- `amd-smi static --asic --bus --limit --board --json`, read once: the market name, the power cap
  (`limit.socket_power`, or `limit.ppt0.socket_power_limit` from 26.2), the BDF and board serial.
- `amd-smi process --json`: still a bare list in 26.x, `process_list` of `process_info` dicts.
- Without access to /dev/kfd a permission banner is printed before the JSON.

The tool is a Python program that takes a while to start: this backend is the fallback when the
amdsmi library cannot be imported into devtune's environment.
"""

from __future__ import annotations

import json
import shutil
import time
from dataclasses import dataclass
from typing import Any

from core.i18n import _, said
from core.train.gpu.backend import GpuBackendUnavailable, run_tool
from core.train.gpu.sample import (
    MIB,
    GpuProcess,
    GpuSample,
    as_int,
    as_number,
    pick_temperature,
)

METRIC_ARGV = ["amd-smi", "metric", "--usage", "--mem-usage", "--power", "--clock", "--temperature", "--json"]
STATIC_ARGV = ["amd-smi", "static", "--asic", "--bus", "--limit", "--board", "--json"]
PROCESS_ARGV = ["amd-smi", "process", "--json"]
PROCESS_EVERY = 5  # ticks between process-list calls (another tool start)


@dataclass
class StaticInfo:
    name: str = ""
    power_cap_w: float | None = None
    bdf: str | None = None
    serial: str | None = None


def load_tool_json(text: str) -> Any:
    """The JSON document in a tool's stdout, skipping any banner printed before it."""
    lines = text.splitlines()
    for i, line in enumerate(lines):
        if line.lstrip().startswith(("[", "{")):
            return json.loads("\n".join(lines[i:]))
    raise ValueError(_("no JSON in the output"))


def gpu_entries(doc: Any) -> list[dict]:
    """Per-GPU dicts from either top-level shape (bare list, or {"gpu_data": [...]})."""
    if isinstance(doc, dict):
        doc = doc.get("gpu_data", [])
    return [entry for entry in doc if isinstance(entry, dict) and "gpu" in entry] if isinstance(doc, list) else []


def _get(entry: dict, *path: str) -> Any:
    value: Any = entry
    for key in path:
        if not isinstance(value, dict):
            return None
        value = value.get(key)
    return value


def parse_static(text: str) -> dict[int, StaticInfo]:
    out: dict[int, StaticInfo] = {}
    for entry in gpu_entries(load_tool_json(text)):
        name = _get(entry, "asic", "market_name")
        cap = as_number(_get(entry, "limit", "socket_power"))
        if cap is None:
            cap = as_number(_get(entry, "limit", "ppt0", "socket_power_limit"))
        if cap is None:
            cap = as_number(_get(entry, "limit", "max_power"))
        serial = _get(entry, "board", "product_serial")
        bdf = _get(entry, "bus", "bdf")
        out[int(entry["gpu"])] = StaticInfo(
            name=name if isinstance(name, str) and name != "N/A" else "",
            power_cap_w=cap or None,
            bdf=bdf if isinstance(bdf, str) and bdf != "N/A" else None,
            serial=serial if isinstance(serial, str) and serial not in ("N/A", "0", "") else None,
        )
    return out


def parse_metric(text: str, ts: float, static: dict[int, StaticInfo] | None = None,
                 backend: str = "amd-smi") -> list[GpuSample]:
    static = static or {}
    samples = []
    for entry in gpu_entries(load_tool_json(text)):
        index = int(entry["gpu"])
        info = static.get(index, StaticInfo())
        temp, sensor = pick_temperature(_get(entry, "temperature", "edge"), _get(entry, "temperature", "hotspot"),
                                        _get(entry, "temperature", "mem"))
        used = as_number(_get(entry, "mem_usage", "used_vram"))
        total = as_number(_get(entry, "mem_usage", "total_vram"))
        samples.append(GpuSample(
            ts=ts, backend=backend, index=index, name=info.name or f"AMD GPU {index}",
            util_pct=as_number(_get(entry, "usage", "gfx_activity")),
            vram_used=None if used is None else int(used * MIB),
            vram_total=None if total is None else int(total * MIB),
            temp_c=temp, temp_sensor=sensor,
            power_w=as_number(_get(entry, "power", "socket_power")),
            power_cap_w=info.power_cap_w,
            sclk_mhz=as_int(_get(entry, "clock", "gfx_0", "clk")),
            mclk_mhz=as_int(_get(entry, "clock", "mem_0", "clk")),
            bdf=info.bdf,
        ))
    assign_cards(samples, {i: s.serial for i, s in static.items()})
    return samples


def parse_process(text: str) -> dict[int, list[GpuProcess]]:
    out: dict[int, list[GpuProcess]] = {}
    for entry in gpu_entries(load_tool_json(text)):
        procs = []
        for item in entry.get("process_list") or []:
            info = item.get("process_info") if isinstance(item, dict) else None
            if not isinstance(info, dict) or as_int(info.get("pid")) is None:
                continue  # "No running processes detected" and the like
            vram = as_int(_get(info, "memory_usage", "vram_mem"))
            name = info.get("name")
            procs.append(GpuProcess(pid=as_int(info["pid"]), name=name if isinstance(name, str) else "N/A",
                                    vram_bytes=vram))
        out[int(entry["gpu"])] = procs
    return out


def assign_cards(samples: list[GpuSample], serials: dict[int, str | None]) -> None:
    """Devices sharing one board serial are one card (an MI250/MI250X shows two GCDs).

    [inference] the board FRU serial is per physical board; both GCDs of an MI250 report it. Unknown
    or unshared serials leave `card` as None.
    """
    by_serial: dict[str, list[int]] = {}
    for index, serial in serials.items():
        if serial:
            by_serial.setdefault(serial, []).append(index)
    shared = sorted(sorted(ix) for ix in by_serial.values() if len(ix) > 1)
    card_of = {index: n for n, group in enumerate(shared) for index in group}
    for s in samples:
        s.card = card_of.get(s.index)


class AmdSmiCliBackend:
    name = "amd-smi"

    def __init__(self, static: dict[int, StaticInfo], run=run_tool) -> None:
        self.static = static
        self._run = run
        self._tick = 0
        self._processes: dict[int, list[GpuProcess]] = {}

    def sample(self) -> list[GpuSample]:
        samples = parse_metric(self._run(METRIC_ARGV), time.time(), self.static)
        if self._tick % PROCESS_EVERY == 0:
            try:
                self._processes = parse_process(self._run(PROCESS_ARGV))
            except (GpuBackendUnavailable, ValueError):
                self._processes = {}
        self._tick += 1
        for s in samples:
            s.processes = self._processes.get(s.index)
        return samples

    def close(self) -> None:
        pass


def open_amd_smi_cli(run=run_tool) -> AmdSmiCliBackend:
    if run is run_tool and shutil.which("amd-smi") is None:
        raise GpuBackendUnavailable(said("{tool} not found on PATH", tool="amd-smi"))
    text = run(STATIC_ARGV)
    if "Permission needed" in text.split("{", 1)[0].split("[", 1)[0]:
        raise GpuBackendUnavailable(said("amd-smi cannot open /dev/kfd (Permission denied): add your user to "
                                      "the render group and log in again"))
    try:
        static = parse_static(text)
    except ValueError as exc:
        raise GpuBackendUnavailable(said("{command} gave no JSON ({error})", command="amd-smi static",
                                      error=exc)) from None
    backend = AmdSmiCliBackend(static, run)
    try:
        first = backend.sample()
    except ValueError as exc:
        raise GpuBackendUnavailable(said("{command} gave no JSON ({error})", command="amd-smi metric",
                                      error=exc)) from None
    if not first:
        raise GpuBackendUnavailable(said("{tool} lists no GPU", tool="amd-smi"))
    return backend
