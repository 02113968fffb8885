"""The doctor's data: a check's verdict, the categories, and a whole report."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field

from core.i18n import _

OK, WARN, FAIL, SKIP = "ok", "warn", "fail", "skip"
STATUSES = (OK, WARN, FAIL, SKIP)
STATUS_ORDER = {FAIL: 0, WARN: 1, OK: 2, SKIP: 3}

# Category ids in the order a person reads them: what this machine is, can I reach the GPU,
# is the GPU stack right, is PyTorch right, then libraries, serving, multi-GPU, tools, resources.
CATEGORIES = ("platform", "access", "rocm", "nvidia", "torch", "env", "libraries", "serving",
              "multigpu", "toolchain", "system")


def category_title(category: str) -> str:
    titles = {
        "platform": _("Machine"),
        "access": _("GPU device access"),
        "rocm": _("AMD driver and ROCm"),
        "nvidia": _("NVIDIA driver and CUDA"),
        "torch": _("PyTorch build"),
        "env": _("GPU environment variables"),
        "libraries": _("Training libraries"),
        "serving": _("Serving environment (vLLM)"),
        "multigpu": _("Multi-GPU communication (RCCL / NCCL)"),
        "toolchain": _("Build toolchain"),
        "system": _("Memory, disk and caches"),
    }
    return titles.get(category, category)


def status_label(status: str) -> str:
    return {OK: _("ok"), WARN: _("warning"), FAIL: _("fail"), SKIP: _("not applicable")}.get(status, status)


@dataclass(frozen=True)
class DoctorCheck:
    """One check's verdict: what was looked at, what was seen, and the exact fix."""

    id: str
    title: str
    category: str
    status: str  # ok | warn | fail | skip
    evidence: str  # what was seen, in plain words with the figures
    fix: str = ""  # the exact command(s) or edit; may be several lines; "" when nothing to do
    reference: str = ""  # where the failure and the fix are documented

    def __post_init__(self) -> None:
        if self.status not in STATUSES:
            raise ValueError(f"unknown status {self.status!r}")

    def to_dict(self) -> dict:
        return asdict(self)

    @property
    def needs_action(self) -> bool:
        return self.status in (FAIL, WARN)


@dataclass
class DoctorReport:
    """All checks of one run, in registry order, with what kind of machine it was."""

    checks: list[DoctorCheck] = field(default_factory=list)
    machine: str = "cpu"  # rocm | nvidia | cpu
    machine_summary: str = ""  # one line: "8 x AMD Instinct MI300X (gfx942), ROCm 7.2.1"
    host: str = ""
    created: float = 0.0

    def counts(self) -> dict[str, int]:
        counts = {s: 0 for s in STATUSES}
        for check in self.checks:
            counts[check.status] += 1
        return counts

    @property
    def failed(self) -> bool:
        return any(c.status == FAIL for c in self.checks)

    def summary(self) -> dict:
        counts = self.counts()
        return {**counts, "total": len(self.checks), "machine": self.machine,
                "machine_summary": self.machine_summary, "verdict": self.verdict()}

    def verdict(self) -> str:
        counts = self.counts()
        if counts[FAIL]:
            return _("Fix the failures first (each shows its command), then re-run the doctor.")
        if counts[WARN]:
            return _("Nothing blocks; the warnings are worth a look.")
        return _("Everything checked is in order.")

    def to_dict(self) -> dict:
        return {"checks": [c.to_dict() for c in self.checks], "summary": self.summary()}

    def by_category(self) -> list[tuple[str, list[DoctorCheck]]]:
        groups: dict[str, list[DoctorCheck]] = {}
        for check in self.checks:
            groups.setdefault(check.category, []).append(check)
        return [(cat, groups[cat]) for cat in CATEGORIES if cat in groups] + \
               [(cat, checks) for cat, checks in groups.items() if cat not in CATEGORIES]
