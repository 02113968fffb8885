"""The verdict registry: each verdict is a pure function of the evidence that returns a Finding;
the registry turns it into a DoctorCheck with its id, title and category.

A verdict names the probes it needs, so the runner can judge it as soon as those have finished
(and re-run just those probes to re-check it).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

from core.doctor.evidence import Evidence
from core.doctor.model import CATEGORIES, FAIL, OK, SKIP, WARN, DoctorCheck
from core.i18n import _


@dataclass(frozen=True)
class Finding:
    status: str
    evidence: str
    fix: str = ""
    reference: str = ""


def ok(evidence: str, fix: str = "", reference: str = "") -> Finding:
    return Finding(OK, evidence, fix, reference)


def warn(evidence: str, fix: str, reference: str = "") -> Finding:
    return Finding(WARN, evidence, fix, reference)


def fail(evidence: str, fix: str, reference: str = "") -> Finding:
    return Finding(FAIL, evidence, fix, reference)


def skip(evidence: str, fix: str = "", reference: str = "") -> Finding:
    return Finding(SKIP, evidence, fix, reference)


@dataclass(frozen=True)
class Verdict:
    id: str
    category: str
    needs: tuple[str, ...]
    title_of: Callable[[], str]  # a function, so the title follows the language chosen at run time
    judge: Callable[[Evidence], Finding]

    @property
    def title(self) -> str:
        return self.title_of()

    def check(self, ev: Evidence) -> DoctorCheck:
        try:
            found = self.judge(ev)
        except Exception as exc:  # a devtune bug must not hide the other checks
            found = Finding(WARN, _("the doctor could not judge this check ({error})",
                                    error=f"{type(exc).__name__}: {exc}"),
                            "devtune doctor --json > doctor.json   # " +
                            _("then report a devtune bug with this file attached"))
        return DoctorCheck(self.id, self.title, self.category, found.status, found.evidence, found.fix,
                           found.reference)


VERDICTS: list[Verdict] = []


def verdict(check_id: str, category: str, needs: tuple[str, ...], title: Callable[[], str]):
    """Register a verdict: `@verdict("access.kfd", "access", ("devices",), lambda: _("..."))`."""
    if category not in CATEGORIES:
        raise ValueError(f"unknown category {category!r}")

    def register(judge: Callable[[Evidence], Finding]) -> Callable[[Evidence], Finding]:
        if any(v.id == check_id for v in VERDICTS):
            raise ValueError(f"verdict {check_id!r} registered twice")
        VERDICTS.append(Verdict(check_id, category, tuple(needs), title, judge))
        return judge

    return register


def all_verdicts() -> list[Verdict]:
    """Every verdict, in category order (importing the verdict modules registers them)."""
    from core.doctor import (access, env_checks, libraries, machine, multigpu, nvidia, rocm,  # noqa: F401
                             serving, system, toolchain, torch_checks)

    order = {c: i for i, c in enumerate(CATEGORIES)}
    return sorted(VERDICTS, key=lambda v: order[v.category])  # stable: registration order within


def get_verdict(check_id: str) -> Verdict:
    for v in all_verdicts():
        if v.id == check_id:
            return v
    raise KeyError(f"no check {check_id!r}")
