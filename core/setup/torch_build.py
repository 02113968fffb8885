"""Which PyTorch build fits this machine: ROCm (matched to the installed ROCm), NVIDIA (CUDA) or CPU.

Standard library only: the Makefile runs this with the system Python before any virtual
environment exists, and the doctor reuses the same rules to print the exact fix command.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path

PYTORCH_INDEX = "https://download.pytorch.org/whl"

# PyTorch's ROCm wheel indexes, oldest first, with the torch releases each carries
# (from pytorch.org "previous versions"). Names are irregular: rocm6.2 and rocm6.2.4 both exist.
ROCM_INDEXES: tuple[tuple[tuple[int, ...], str, str], ...] = (
    ((6, 0), "rocm6.0", "2.3"),
    ((6, 1), "rocm6.1", "2.6"),
    ((6, 2), "rocm6.2", "2.5"),
    ((6, 2, 4), "rocm6.2.4", "2.6"),
    ((6, 3), "rocm6.3", "2.7"),
    ((6, 4), "rocm6.4", "2.9"),
    ((7, 0), "rocm7.0", "2.9"),
    ((7, 1), "rocm7.1", "2.10"),
)

CPU_TORCH = "torch==2.13.0"


@dataclass(frozen=True)
class Hardware:
    """What the machine has, as far as choosing a torch build goes."""

    kind: str  # "rocm" | "nvidia" | "cpu"
    rocm_version: str | None = None
    evidence: str = ""


@dataclass(frozen=True)
class TorchChoice:
    kind: str
    index_url: str | None  # None: the default index (PyPI)
    packages: tuple[str, ...]
    reason: str

    def pip_args(self) -> list[str]:
        args = ["install", *self.packages]
        if self.index_url:
            # --index-url, never --extra-index-url: with both indexes visible pip picks the
            # higher-versioned CUDA wheel from PyPI (comfy-cli#379).
            args += ["--index-url", self.index_url]
        return args

    def command(self) -> str:
        return "pip " + " ".join(self.pip_args())


def parse_version(text: str) -> tuple[int, ...] | None:
    m = re.search(r"(\d+)\.(\d+)(?:\.(\d+))?", text)
    if not m:
        return None
    return tuple(int(g) for g in m.groups() if g is not None)


def rocm_index_for(rocm_version: str) -> tuple[str, str] | None:
    """The newest PyTorch ROCm index whose ROCm is not newer than the installed one.

    Returns (index name, newest torch minor it carries), e.g. ("rocm6.2.4", "2.6") for ROCm 6.2.4,
    or None when the ROCm is older than every index.
    """
    have = parse_version(rocm_version)
    if have is None:
        return None
    best = None
    for need, name, torch_minor in ROCM_INDEXES:
        if _cmp(need, have) <= 0:
            best = (name, torch_minor)
    return best


def _cmp(a: tuple[int, ...], b: tuple[int, ...]) -> int:
    n = max(len(a), len(b))
    a2, b2 = a + (0,) * (n - len(a)), b + (0,) * (n - len(b))
    return (a2 > b2) - (a2 < b2)


def rocm_index_url(rocm_version: str) -> str | None:
    found = rocm_index_for(rocm_version)
    return f"{PYTORCH_INDEX}/{found[0]}" if found else None


def read_rocm_version(root: Path = Path("/opt/rocm")) -> str | None:
    """The installed ROCm version from /opt/rocm/.info/version (e.g. '6.4.1-120')."""
    for candidate in (root / ".info" / "version", root / ".info" / "version-dev"):
        try:
            text = candidate.read_text().strip()
        except OSError:
            continue
        if parse_version(text):
            return text.split("-")[0]
    return None


def detect_hardware() -> Hardware:
    """ROCm when an AMD GPU stack is present, NVIDIA when its driver is, else CPU."""
    rocm = read_rocm_version(Path(os.environ.get("ROCM_PATH", "/opt/rocm")))
    if Path("/dev/kfd").exists() or rocm:
        evidence = []
        if Path("/dev/kfd").exists():
            evidence.append("/dev/kfd present")
        if rocm:
            evidence.append(f"ROCm {rocm} in /opt/rocm/.info/version")
        return Hardware("rocm", rocm, ", ".join(evidence))
    if Path("/proc/driver/nvidia/version").exists() or _nvidia_smi_lists_gpu():
        return Hardware("nvidia", None, "NVIDIA driver present")
    return Hardware("cpu", None, "no /dev/kfd, no /opt/rocm, no NVIDIA driver")


def _nvidia_smi_lists_gpu() -> bool:
    exe = shutil.which("nvidia-smi")
    if not exe:
        return False
    try:
        out = subprocess.run([exe, "-L"], capture_output=True, text=True, timeout=10)
    except (OSError, subprocess.SubprocessError):
        return False
    return out.returncode == 0 and "GPU " in out.stdout


def choose_torch(hw: Hardware) -> TorchChoice:
    if hw.kind == "rocm":
        url = rocm_index_url(hw.rocm_version or "")
        if url is None:
            return TorchChoice(
                "rocm",
                f"{PYTORCH_INDEX}/rocm6.4",
                ("torch", "torchaudio"),
                f"ROCm version unknown ({hw.evidence}); using the rocm6.4 index. "
                "Check /opt/rocm/.info/version and re-run.",
            )
        return TorchChoice(
            "rocm",
            url,
            ("torch", "torchaudio"),
            f"AMD GPU stack found ({hw.evidence}): PyTorch's ROCm index {url.rsplit('/', 1)[1]}, "
            "the newest one not newer than the installed ROCm",
        )
    if hw.kind == "nvidia":
        return TorchChoice("nvidia", None, (CPU_TORCH,), f"{hw.evidence}: the default (CUDA) PyTorch build")
    return TorchChoice(
        "cpu",
        f"{PYTORCH_INDEX}/cpu",
        (CPU_TORCH,),
        f"no GPU ({hw.evidence}): the CPU build of PyTorch; the tiny-model demo runs here",
    )


if __name__ == "__main__":  # pragma: no cover - used by hand and by the doctor's docs
    hw = detect_hardware()
    choice = choose_torch(hw)
    print(f"{choice.kind}: {choice.reason}\n  {choice.command()}")
