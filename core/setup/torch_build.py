"""Which PyTorch build fits this machine: ROCm (matched to the installed ROCm), NVIDIA (CUDA) or CPU.

Which GPUs the machine trains on is core.setup.machine_kind's decision (an integrated AMD GPU beside an
NVIDIA card makes an NVIDIA machine); this module turns it into a build. Standard library only: the
Makefile runs this with the system Python before any virtual environment exists, and the doctor reuses
the same rules to print the exact fix command.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass
from pathlib import Path

from core.i18n import _

PYTORCH_INDEX = "https://download.pytorch.org/whl"

# PyTorch's ROCm wheel indexes, oldest first, with the newest torch minor each carries (pytorch.org
# "previous versions"); the one list the installer and the doctor choose from. Names are irregular:
# rocm6.2 and rocm6.2.4 both exist. A new index is one line here.
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
    set_aside: tuple[str, ...] = ()  # GPUs seen and not used, each with why (core.setup.machine_kind)


@dataclass(frozen=True)
class TorchChoice:
    kind: str
    index_url: str | None  # None: the default index (PyPI)
    packages: tuple[str, ...]
    reason: str
    refused: bool = False  # no PyTorch wheel fits (reason says why): nothing is installed

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
    """The PyTorch ROCm index for an installed ROCm: the newest index of the same major that is not newer
    than it, else (a ROCm newer than every index of its major: 7.2, 7.14) the newest index of that major.

    PyTorch's ROCm wheels carry their own ROCm user-space libraries (HIP runtime, rocBLAS, MIOpen...): on
    the machine they need the amdgpu kernel driver, which runs user space of the same major. So a
    rocm7.1 wheel is right on ROCm 7.2, and no index of another major is. Returns (index name, newest
    torch minor it carries), e.g. ("rocm6.2.4", "2.6") for ROCm 6.2.4, or None when no index has the
    installed major (ROCm 5.x, or a major PyTorch publishes no index for yet).
    """
    have = parse_version(rocm_version)
    if have is None:
        return None
    same_major = [(need, name, torch_minor) for need, name, torch_minor in ROCM_INDEXES if need[0] == have[0]]
    if not same_major:
        return None
    fitting = [(name, torch_minor) for need, name, torch_minor in same_major if _cmp(need, have) <= 0]
    return fitting[-1] if fitting else (same_major[0][1], same_major[0][2])


def index_note(rocm_version: str) -> str:
    """How the index for `rocm_version` was chosen, said as such (the installer prints it, the doctor shows it)."""
    found = rocm_index_for(rocm_version)
    have = parse_version(rocm_version)
    newest = ROCM_INDEXES[-1][1]
    if have is None:
        return _("the ROCm version is unknown")
    if found is None:
        oldest = ROCM_INDEXES[0]
        if _cmp(have, oldest[0]) < 0:
            return _("ROCm {rocm} is older than every PyTorch ROCm index devtune installs from (the oldest is "
                     "{oldest}): no current torch wheel is built for it; upgrade ROCm to {major}.x or newer",
                     rocm=rocm_version, oldest=oldest[1], major=oldest[0][0])
        return _("ROCm {rocm} on this machine; PyTorch publishes no ROCm {major} index yet (the newest is "
                 "{newest}), and a wheel built for another ROCm major is not made for this driver",
                 rocm=rocm_version, major=have[0], newest=newest)
    name = found[0]
    need = next(v for v, n, _t in ROCM_INDEXES if n == name)
    if _cmp(need, have) == 0 or (len(need) == 2 and need == have[:2]):
        return _("ROCm {rocm} on this machine; PyTorch index {index} matches it", rocm=rocm_version, index=name)
    if _cmp(need, have) > 0:
        return _("ROCm {rocm} on this machine; the oldest PyTorch index for ROCm {major} is {index}; using it "
                 "(its wheels carry their own ROCm libraries)", rocm=rocm_version, major=have[0], index=name)
    newer = [n for v, n, _t in ROCM_INDEXES if v[0] == have[0] and _cmp(v, have) > 0]
    if not newer:
        return _("ROCm {rocm} on this machine; newest PyTorch index is {index}; using it (PyTorch's ROCm "
                 "wheels carry their own ROCm libraries, which the ROCm {major} driver here runs)",
                 rocm=rocm_version, index=name, major=have[0])
    return _("ROCm {rocm} on this machine; {index} is the newest PyTorch index not newer than it",
             rocm=rocm_version, index=name)


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
    """This machine's kind, from what rocminfo and nvidia-smi list (core.setup.machine_kind decides)."""
    from core.setup.machine_kind import probe_this_machine

    rocm = read_rocm_version(Path(os.environ.get("ROCM_PATH", "/opt/rocm")))
    machine = probe_this_machine(rocm)
    return Hardware(machine.kind, rocm if machine.kind == "rocm" else None, ", ".join(machine.evidence),
                    tuple(machine.set_aside))


def choose_torch(hw: Hardware) -> TorchChoice:
    if hw.kind == "rocm":
        packages = ("torch", "torchaudio")
        if parse_version(hw.rocm_version or "") is None:
            newest = ROCM_INDEXES[-1][1]
            return TorchChoice("rocm", f"{PYTORCH_INDEX}/{newest}", packages, _(
                "AMD GPU stack found ({evidence}) but its ROCm version is unknown: using the newest PyTorch "
                "index, {index} (its wheels carry their own ROCm libraries and need a ROCm {major} amdgpu driver). "
                "Check /opt/rocm/.info/version and re-run", evidence=hw.evidence, index=newest,
                major=ROCM_INDEXES[-1][0][0]))
        url = rocm_index_url(hw.rocm_version or "")
        note = index_note(hw.rocm_version or "")
        if url is None:
            return TorchChoice("rocm", None, (), note, refused=True)
        return TorchChoice("rocm", url, packages, _("AMD GPU stack found ({evidence}). {note}",
                                                    evidence=hw.evidence, note=note))
    if hw.kind == "nvidia":
        return TorchChoice("nvidia", None, (CPU_TORCH,), _("{evidence}: the default (CUDA) PyTorch build",
                                                           evidence=hw.evidence))
    return TorchChoice(
        "cpu",
        f"{PYTORCH_INDEX}/cpu",
        (CPU_TORCH,),
        _("no GPU ({evidence}): the CPU build of PyTorch; the tiny-model demo runs here", evidence=hw.evidence),
    )


if __name__ == "__main__":  # pragma: no cover - used by hand and by the doctor's docs
    hw = detect_hardware()
    choice = choose_torch(hw)
    print(f"{choice.kind}: {choice.reason}" + ("" if choice.refused else f"\n  {choice.command()}"))
