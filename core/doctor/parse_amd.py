"""Reading the AMD tools' outputs, in every shape they are printed in.

- `amd-smi static --json`: a bare list (amd-smi < 26, ROCm <= 6.4) or `{"gpu_data": [...]}` (26.x,
  ROCm 7); without access to /dev/kfd a permission banner comes first and every field is "N/A".
- `amd-smi version`: text (24.x: 3 fields, 25.x adds amdgpu, 26.x renames hsmp) or a JSON list.
- `rocm-smi --showproductname ... --json`: one line, `cardN` keys plus `system`, every value a string;
  older builds print "GFX Version": "gfx9010" for gfx90a.
- `rocminfo`: "ROCk module is loaded" / "ROCk module version X is loaded" / "... is NOT loaded",
  then one block per agent (CPUs and GPUs); an integrated GPU's block says "Memory Properties: APU".
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field

from core.i18n import _

NA = ("N/A", "", None)


@dataclass
class AmdGpu:
    index: int
    name: str | None = None  # marketing name: "AMD Instinct MI300X"
    gfx: str | None = None  # "gfx942"
    vram_mb: int | None = None
    bdf: str | None = None
    apu: bool | None = None  # rocminfo's "Memory Properties: APU" (an integrated GPU); None: not said


@dataclass
class AmdSmiStatic:
    gpus: list[AmdGpu] = field(default_factory=list)
    shape: str = ""  # "list" | "gpu_data"
    banner: str = ""  # text printed before the JSON (the permission message)
    driver_version: str | None = None
    error: str = ""

    @property
    def permission_denied(self) -> bool:
        return "Permission" in self.banner and "denied" in self.banner


def _na(value):
    return None if value in NA else value


def split_banner(text: str) -> tuple[str, str]:
    """(text before the JSON, the JSON) — amd-smi prints warnings before its document."""
    for match in re.finditer(r"^[\[{]", text, re.M):
        return text[:match.start()], text[match.start():]
    return text, ""


def parse_amd_smi_static(text: str) -> AmdSmiStatic:
    banner, body = split_banner(text)
    result = AmdSmiStatic(banner=banner.strip())
    if not body:
        result.error = _("no JSON in the output")
        return result
    try:
        data = json.loads(body)
    except ValueError as exc:
        result.error = _("not JSON: {error}", error=exc)
        return result
    if isinstance(data, dict) and "gpu_data" in data:
        entries, result.shape = data["gpu_data"], "gpu_data"
    elif isinstance(data, list):
        entries, result.shape = data, "list"
    else:
        result.error = _("unexpected JSON shape")
        return result
    for n, entry in enumerate(entries):
        if not isinstance(entry, dict):
            continue
        asic = entry.get("asic") if isinstance(entry.get("asic"), dict) else {}
        vram = entry.get("vram") if isinstance(entry.get("vram"), dict) else {}
        size = vram.get("size")
        vram_mb = _na(size.get("value")) if isinstance(size, dict) else _na(size)
        bus = entry.get("bus") if isinstance(entry.get("bus"), dict) else {}
        driver = entry.get("driver") if isinstance(entry.get("driver"), dict) else {}
        result.gpus.append(AmdGpu(
            index=entry.get("gpu", n) if isinstance(entry.get("gpu", n), int) else n,
            name=_na(asic.get("market_name")),
            gfx=normalize_gfx(_na(asic.get("target_graphics_version"))),
            vram_mb=int(vram_mb) if isinstance(vram_mb, (int, float)) else None,
            bdf=_na(bus.get("bdf")),
        ))
        result.driver_version = result.driver_version or _na(driver.get("version"))
    return result


def parse_amd_smi_version(text: str) -> dict[str, str]:
    """{"tool": "24.7.1+8dc45db", "library": ..., "rocm": "6.3.3", "amdgpu": ...} from text or JSON."""
    _banner, body = split_banner(text)
    if body:
        try:
            data = json.loads(body)
            entry = data[0] if isinstance(data, list) and data else data
            if isinstance(entry, dict):
                return {k: v for k, v in {
                    "tool": entry.get("version"), "library": entry.get("amdsmi_library_version"),
                    "rocm": entry.get("rocm_version"), "amdgpu": entry.get("amdgpu_version"),
                }.items() if v not in NA}
        except ValueError:
            pass
    keys = {"amdsmi tool": "tool", "amdsmi library version": "library", "rocm version": "rocm",
            "amdgpu version": "amdgpu"}
    out: dict[str, str] = {}
    for line in text.splitlines():
        if "ROCm version" not in line and "AMDSMI Tool" not in line:
            continue
        for part in line.split("|"):
            key, _sep, value = part.partition(":")
            name = keys.get(key.strip().lower())
            if name and value.strip() not in NA:
                out[name] = value.strip()
    return out


def normalize_gfx(value: str | None) -> str | None:
    """'gfx942:sramecc+:xnack-' -> 'gfx942'; rocm-smi's 'gfx9010' (9.0.10) -> 'gfx90a'."""
    if not value:
        return None
    m = re.search(r"gfx([0-9a-f]+)", str(value).lower())
    if not m:
        return None
    digits = m.group(1)
    major_len = 2 if digits.startswith("1") and len(digits) >= 4 else 1
    major, minor, stepping = digits[:major_len], digits[major_len:major_len + 1], digits[major_len + 1:]
    if stepping.isdigit() and int(stepping) > 9 and len(stepping) == 2:
        stepping = format(int(stepping), "x")
    return f"gfx{major}{minor}{stepping}"


def parse_rocm_smi_json(text: str) -> tuple[list[AmdGpu], str | None, str]:
    """(GPUs, driver version, error) from `rocm-smi --showproductname --showdriverversion --json`."""
    _banner, body = split_banner(text)
    try:
        data = json.loads(body) if body else None
    except ValueError as exc:
        return [], None, _("not JSON: {error}", error=exc)
    if not isinstance(data, dict):
        return [], None, _("no JSON in the output")
    gpus = []
    for key in sorted((k for k in data if re.fullmatch(r"card\d+", k)), key=lambda k: int(k[4:])):
        card = data[key] if isinstance(data[key], dict) else {}
        lower = {k.lower(): v for k, v in card.items()}
        name = _na(lower.get("device name")) or _na(lower.get("card series"))
        gpus.append(AmdGpu(index=int(key[4:]), name=name, gfx=normalize_gfx(_na(lower.get("gfx version")))))
    system = data.get("system") if isinstance(data.get("system"), dict) else {}
    return gpus, _na(system.get("Driver version")), ""


@dataclass
class RocmInfo:
    module_loaded: bool | None = None  # None: rocminfo said nothing about it
    module_version: str | None = None
    kfd_error: str | None = None  # "Permission denied", "Invalid argument", ...
    hsa_error: str | None = None  # "HSA_STATUS_ERROR_OUT_OF_RESOURCES"
    member_line: str | None = None  # "root is member of render group"
    gpus: list[AmdGpu] = field(default_factory=list)


def parse_rocminfo(text: str) -> RocmInfo:
    info = RocmInfo()
    m = re.search(r"ROCk module (?:version (\S+) )?is (NOT )?loaded", text)
    if m:
        info.module_loaded = m.group(2) is None
        info.module_version = m.group(1)
    m = re.search(r"Unable to open /dev/kfd read-write: (.+)", text)
    if m:
        info.kfd_error = m.group(1).strip()
    m = re.search(r"(HSA_STATUS_ERROR_\w+)", text)
    if m:
        info.hsa_error = m.group(1)
    m = re.search(r"^(\S+ is member of .+ group)\s*$", text, re.M)
    if m:
        info.member_line = m.group(1)
    blocks = re.split(r"^\*+\s*\nAgent \d+\s*\n\*+\s*$", text, flags=re.M)
    for block in blocks[1:]:
        fields = {}
        for line in block.splitlines():
            key, sep, value = line.strip().partition(":")
            if sep and key and key not in fields:
                fields[key.strip()] = value.strip()
        if fields.get("Device Type") != "GPU":
            continue
        isa = re.search(r"amdgcn-amd-amdhsa--(gfx[0-9a-f]+)", block)
        gfx = normalize_gfx(isa.group(1) if isa else fields.get("Name"))
        props = fields.get("Memory Properties")  # "APU" on an integrated GPU, else empty; older rocminfo: absent
        info.gpus.append(AmdGpu(index=len(info.gpus), name=_na(fields.get("Marketing Name")), gfx=gfx,
                                apu=None if props is None else "APU" in props.split()))
    return info


def parse_hipconfig_version(text: str) -> str | None:
    """'6.4.43482-0f2d60242' (hipconfig --version, torch.version.hip) -> '6.4' (the third number
    is a build number, not ROCm's patch level)."""
    m = re.search(r"(\d+)\.(\d+)", text or "")
    return f"{m.group(1)}.{m.group(2)}" if m else None


def parse_rocm_version_file(text: str | None) -> str | None:
    """'/opt/rocm/.info/version': '6.4.1-120' -> '6.4.1'."""
    if not text:
        return None
    m = re.search(r"\d+\.\d+(?:\.\d+)?", text)
    return m.group(0) if m else None
