"""GpuSample: one record per GPU per tick, whatever backend produced it.

A sample is what the GPU panel shows and what one line of a run's `gpu.jsonl` holds. Units are fixed
here so no consumer has to know where a number came from: bytes for memory, °C, W, MHz, percent.

Temperature: `temp_c` is the edge sensor when the GPU has one, else the hotspot (= junction), else the
memory sensor, and `temp_sensor` says which ("edge", "hotspot", "mem", or "gpu" for NVIDIA's die
sensor). MI300-family GPUs have no edge sensor: their `temp_c` is the hotspot and the panel says so.

On disk a sample is a compact JSON object (None and empty fields left out), so a long run's history
stays small: `to_record()` / `from_record()`.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

MIB = 1024 * 1024
TEMP_SENSORS = ("edge", "hotspot", "mem", "gpu")


@dataclass(slots=True)
class GpuProcess:
    pid: int
    name: str = "N/A"  # "N/A" when the tool may not tell (amd-smi without root)
    vram_bytes: int | None = None


@dataclass(slots=True)
class GpuSample:
    ts: float  # time.time() of the tick
    backend: str  # "amdsmi", "amd-smi", "rocm-smi", "nvml", "replay"
    index: int  # the device index the tool reports (an MI250 shows two: one per GCD)
    name: str = ""
    util_pct: float | None = None
    vram_used: int | None = None  # bytes
    vram_total: int | None = None  # bytes
    temp_c: float | None = None
    temp_sensor: str | None = None  # one of TEMP_SENSORS
    power_w: float | None = None
    power_cap_w: float | None = None
    sclk_mhz: int | None = None
    mclk_mhz: int | None = None
    processes: list[GpuProcess] | None = None  # None: not known on this tick
    card: int | None = None  # physical card when one card shows several devices (MI250: 2 GCDs)
    bdf: str | None = None

    @property
    def vram_fraction(self) -> float | None:
        if self.vram_used is None or not self.vram_total:
            return None
        return self.vram_used / self.vram_total

    def to_record(self) -> dict[str, Any]:
        """A compact dict for one gpu.jsonl line (None fields left out)."""
        out: dict[str, Any] = {}
        for name in _FIELDS:
            value = getattr(self, name)
            if value is None:
                continue
            if name == "processes":
                value = [_process_record(p) for p in value]
            elif isinstance(value, float):
                value = round(value, 2) if math.isfinite(value) else None
                if value is None:
                    continue
            out[name] = value
        return out

    @classmethod
    def from_record(cls, rec: dict[str, Any]) -> "GpuSample":
        """Tolerant of missing and unknown keys (a newer devtune's gpu.jsonl still reads)."""
        kw = {name: rec[name] for name in _FIELDS if name in rec}
        kw.setdefault("ts", 0.0)
        kw.setdefault("backend", "replay")
        kw.setdefault("index", 0)
        procs = kw.get("processes")
        if procs is not None:
            kw["processes"] = [
                GpuProcess(pid=int(p.get("pid", 0)), name=str(p.get("name", "N/A")), vram_bytes=p.get("vram_bytes"))
                for p in procs if isinstance(p, dict)
            ]
        if kw.get("temp_sensor") not in (None, *TEMP_SENSORS):
            kw["temp_sensor"] = None
        return cls(**kw)


_FIELDS = tuple(GpuSample.__dataclass_fields__)


def _process_record(p: GpuProcess) -> dict[str, Any]:
    rec: dict[str, Any] = {"pid": p.pid, "name": p.name}
    if p.vram_bytes is not None:
        rec["vram_bytes"] = p.vram_bytes
    return rec


def pick_temperature(edge=None, hotspot=None, mem=None) -> tuple[float | None, str | None]:
    """Edge when present, else hotspot (junction), else memory: (value, sensor)."""
    for value, sensor in ((edge, "edge"), (hotspot, "hotspot"), (mem, "mem")):
        number = as_number(value)
        if number is not None:
            return number, sensor
    return None, None


def as_number(value: Any) -> float | None:
    """A finite number from a tool's value: 42, "42", "42.0", {"value": 42, "unit": "W"}, "N/A" -> None.

    Also accepts "(800Mhz)" and "N/A (Secondary die)". Booleans are not numbers here.
    """
    if isinstance(value, dict):
        value = value.get("value")
    if isinstance(value, bool) or value is None:
        return None
    if isinstance(value, (int, float)):
        return float(value) if math.isfinite(value) else None
    if isinstance(value, str):
        text = value.strip().strip("()").lower()
        for suffix in ("mhz", "w", "c", "%", "mb", "b"):
            if text.endswith(suffix):
                text = text[: -len(suffix)].strip()
                break
        try:
            number = float(text)
        except ValueError:
            return None
        return number if math.isfinite(number) else None
    return None


def as_int(value: Any) -> int | None:
    number = as_number(value)
    return None if number is None else int(round(number))

