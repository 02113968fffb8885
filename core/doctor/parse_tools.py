"""Reading the other tools' outputs: ds_report, nvidia-smi, id, /proc files."""

from __future__ import annotations

import re
from dataclasses import dataclass, field

ANSI = re.compile(r"\x1b\[[0-9;]*m")


def strip_ansi(text: str) -> str:
    return ANSI.sub("", text)


@dataclass
class DsReport:
    accelerator: str | None = None  # "cuda" (also on ROCm), "cpu", ...
    ninja_ok: bool | None = None
    ops: dict[str, tuple[str, str]] = field(default_factory=dict)  # op -> (installed, compatible)
    warnings: list[str] = field(default_factory=list)
    info: dict[str, str] = field(default_factory=dict)  # "torch version" -> "2.3.1+rocm6.0"

    def compatible(self, op: str) -> bool | None:
        row = self.ops.get(op)
        return None if row is None else row[1] == "OKAY"


def parse_ds_report(text: str) -> DsReport:
    text = strip_ansi(text)
    report = DsReport()
    m = re.search(r"Setting (?:ds_)?accelerator to (\w+)", text)
    if m:
        report.accelerator = m.group(1).lower()
    m = re.search(r"^ninja\s*\.+\s*\[(\w+)\]", text, re.M)
    if m:
        report.ninja_ok = m.group(1) == "OKAY"
    for m in re.finditer(r"^(\w+)\s*\.*\s*\[(\w+)\]\s*\.*\s*\[(\w+)\]\s*$", text, re.M):
        report.ops[m.group(1)] = (m.group(2), m.group(3))
    for m in re.finditer(r"^\s*\[WARNING\]\s*(.+?)\s*$", text, re.M):
        report.warnings.append(m.group(1))
    for m in re.finditer(r"^([a-z][\w ()/.-]*?)\s*\.{3,}\s*(.+?)\s*$", text, re.M):
        key = m.group(1).strip()
        if key not in report.ops and key != "ninja":
            report.info[key] = m.group(2)
    return report


@dataclass
class NvidiaGpu:
    index: int
    name: str
    driver: str | None = None
    memory_mib: int | None = None
    compute_cap: str | None = None


def parse_nvidia_query(text: str) -> list[NvidiaGpu]:
    """`nvidia-smi --query-gpu=index,name,driver_version,memory.total,compute_cap --format=csv,noheader`
    (a header line, when present, is skipped)."""
    gpus = []
    for line in text.splitlines():
        parts = [p.strip() for p in line.split(",")]
        if len(parts) < 2 or not parts[0].isdigit():
            continue
        mem = re.match(r"(\d+)", parts[3]) if len(parts) > 3 else None
        gpus.append(NvidiaGpu(
            index=int(parts[0]), name=parts[1],
            driver=parts[2] if len(parts) > 2 else None,
            memory_mib=int(mem.group(1)) if mem else None,
            compute_cap=parts[4] if len(parts) > 4 and parts[4] not in ("[N/A]", "N/A") else None,
        ))
    return gpus


def parse_nvidia_table(text: str) -> dict[str, str]:
    """The header of plain `nvidia-smi`: driver version and the newest CUDA the driver supports."""
    out = {}
    m = re.search(r"Driver Version:\s*([\d.]+)", text)
    if m:
        out["driver"] = m.group(1)
    m = re.search(r"CUDA Version:\s*([\d.]+)", text)
    if m:
        out["cuda"] = m.group(1)
    return out


def parse_id_groups(text: str) -> list[str] | None:
    """Group names from `id` (`uid=1000(ann) gid=1000(ann) groups=1000(ann),44(video)`) or from
    `id -nG USER` (`ann video render`). None when the text is neither."""
    text = text.strip()
    if not text:
        return None
    if "uid=" in text:
        m = re.search(r"groups=(\S+)", text)
        names = re.findall(r"\d+\(([^)]+)\)", m.group(1)) if m else []
        gid = re.search(r"gid=\d+\(([^)]+)\)", text)
        if gid and gid.group(1) not in names:
            names.insert(0, gid.group(1))
        return names
    return text.split()


def parse_id_user(text: str) -> tuple[int | None, str | None]:
    m = re.search(r"uid=(\d+)\(([^)]+)\)", text)
    return (int(m.group(1)), m.group(2)) if m else (None, None)


def parse_meminfo(text: str | None) -> dict[str, int]:
    """/proc/meminfo in bytes: {"MemTotal": ..., "MemAvailable": ...}."""
    out = {}
    for m in re.finditer(r"^(\w+):\s+(\d+)\s*kB", text or "", re.M):
        out[m.group(1)] = int(m.group(2)) * 1024
    return out


def kernel_args(cmdline: str | None) -> dict[str, str]:
    """/proc/cmdline as {key: value} ("iommu=pt" -> {"iommu": "pt"}; a bare flag -> "")."""
    out = {}
    for token in (cmdline or "").split():
        if token == "--":
            break
        key, _, value = token.partition("=")
        out.setdefault(key, value)
    return out


def parse_version(text: str | None) -> tuple[int, ...] | None:
    """'0.49.1' -> (0, 49, 1); '2.7.1+rocm6.3' -> (2, 7, 1); None when there is no version."""
    m = re.match(r"\s*v?(\d+(?:\.\d+)*)", text or "")
    return tuple(int(x) for x in m.group(1).split(".")) if m else None
