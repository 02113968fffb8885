"""`rocm-smi --json` as a backend (older ROCm, or where amd-smi is missing).

One line of JSON: `{"card0": {...}, "card1": {...}, "system": {...}}`, every value a string:
`"GPU use (%)": "7"`, `"VRAM Total Memory (B)": "68702699520"`, `"Temperature (Sensor edge) (C)":
"32.0"` (`(Sensor junction)`, `(Sensor memory)`; 2019-era builds write `(Sensor mem) (c)`),
`"Average Graphics Package Power (W)"` or `"Current Socket Graphics Package Power (W)"` (MI300X,
APUs), `"N/A (Secondary die)"` on the second GCD of an MI250, `"sclk clock speed:": "(800Mhz)"`.
Names: `Device Name` (6.1.2+), else `Card Series` / `Card series`.

rocm-smi is deprecated in favour of amd-smi; its maintainer calls `watch rocm-smi` "a terrible
thing to do", so this backend asks for only what the panel shows, in one call per tick.
"""

from __future__ import annotations

import json
import re
import shutil
import time
from dataclasses import dataclass

from core.i18n import _, said
from core.train.gpu.backend import GpuBackendUnavailable, run_tool
from core.train.gpu.sample import GpuSample, as_int, as_number, pick_temperature

METRIC_ARGV = ["rocm-smi", "--showuse", "--showmeminfo", "vram", "--showtemp", "--showpower", "--showclocks", "--json"]
STATIC_ARGV = ["rocm-smi", "--showproductname", "--showmaxpower", "--showbus", "--json"]
_TEMP = re.compile(r"^Temperature \(Sensor (edge|junction|memory|mem)\) \(c\)$", re.IGNORECASE)
_POWER_KEYS = ("Current Socket Graphics Package Power (W)", "Average Graphics Package Power (W)")
_NAME_KEYS = ("Device Name", "Card Series", "Card series")


@dataclass
class RocmStatic:
    name: str = ""
    power_cap_w: float | None = None
    bdf: str | None = None


def _cards(text: str) -> dict[int, dict[str, str]]:
    start = text.find("{")
    if start < 0:
        raise ValueError(_("no JSON in the output"))
    doc = json.loads(text[start:])
    out = {}
    for key, values in doc.items():
        match = re.fullmatch(r"card(\d+)", key)
        if match and isinstance(values, dict):
            out[int(match.group(1))] = values
    return out


def parse_static(text: str) -> dict[int, RocmStatic]:
    out = {}
    for index, card in _cards(text).items():
        name = next((card[k] for k in _NAME_KEYS if card.get(k) not in (None, "", "N/A")), "")
        bdf = card.get("PCI Bus")
        out[index] = RocmStatic(name=name, power_cap_w=as_number(card.get("Max Graphics Package Power (W)")) or None,
                                bdf=bdf if bdf not in (None, "N/A") else None)
    return out


def parse_metric(text: str, ts: float, static: dict[int, RocmStatic] | None = None) -> list[GpuSample]:
    static = static or {}
    samples = []
    for index, card in sorted(_cards(text).items()):
        temps: dict[str, str] = {}
        for key, value in card.items():
            match = _TEMP.match(key)
            if match:
                sensor_name = match.group(1).lower()
                temps[{"junction": "hotspot", "memory": "mem"}.get(sensor_name, sensor_name)] = value
        temp, sensor = pick_temperature(temps.get("edge"), temps.get("hotspot"), temps.get("mem"))
        power = next((as_number(card[k]) for k in _POWER_KEYS if k in card), None)
        info = static.get(index, RocmStatic())
        name = info.name or next((card[k] for k in _NAME_KEYS if card.get(k) not in (None, "", "N/A")), "")
        cap = info.power_cap_w or as_number(card.get("Max Graphics Package Power (W)"))
        samples.append(GpuSample(
            ts=ts, backend="rocm-smi", index=index, name=name or f"AMD GPU {index}",
            util_pct=as_number(card.get("GPU use (%)")),
            vram_used=as_int(card.get("VRAM Total Used Memory (B)")),
            vram_total=as_int(card.get("VRAM Total Memory (B)")),
            temp_c=temp, temp_sensor=sensor, power_w=power, power_cap_w=cap,
            sclk_mhz=as_int(card.get("sclk clock speed:")), mclk_mhz=as_int(card.get("mclk clock speed:")),
            bdf=info.bdf or card.get("PCI Bus"),
        ))
    return samples


class RocmSmiBackend:
    name = "rocm-smi"

    def __init__(self, static: dict[int, RocmStatic], run=run_tool) -> None:
        self.static = static
        self._run = run

    def sample(self) -> list[GpuSample]:
        return parse_metric(self._run(METRIC_ARGV), time.time(), self.static)

    def close(self) -> None:
        pass


def open_rocm_smi(run=run_tool) -> RocmSmiBackend:
    if run is run_tool and shutil.which("rocm-smi") is None:
        raise GpuBackendUnavailable(said("{tool} not found on PATH", tool="rocm-smi"))
    try:
        static = parse_static(run(STATIC_ARGV))
        backend = RocmSmiBackend(static, run)
        first = backend.sample()
    except ValueError as exc:
        raise GpuBackendUnavailable(said("{command} gave no JSON ({error})", command="rocm-smi", error=exc)) from None
    if not first:
        raise GpuBackendUnavailable(said("{tool} lists no GPU", tool="rocm-smi"))
    return backend
