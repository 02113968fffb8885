"""What a doctor check is: a verdict, a pure function of the evidence that returns a Judgement.

    @verdict("access.kfd", "access", ("devices",), lambda: _("..."))
    def kfd(ev: Evidence) -> Judgement: ...

The decorator marks the function with its Verdict (id, category, the probes it needs, its title);
the list of all of them is core/doctor/checks/__init__.py's explicit tuple of check modules, read by
core/doctor/registry.py. A verdict names the probes it needs, so the runner can judge it as soon as
those have finished (and re-run just those probes to re-check it).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

from core.doctor.evidence import Evidence
from core.doctor.model import CATEGORIES, FAIL, OK, SKIP, WARN, DoctorCheck
from core.i18n import _


@dataclass(frozen=True)
class Judgement:
    status: str
    evidence: str
    fix: str = ""
    reference: str = ""


def ok(evidence: str, fix: str = "", reference: str = "") -> Judgement:
    return Judgement(OK, evidence, fix, reference)


def warn(evidence: str, fix: str, reference: str = "") -> Judgement:
    return Judgement(WARN, evidence, fix, reference)


def fail(evidence: str, fix: str, reference: str = "") -> Judgement:
    return Judgement(FAIL, evidence, fix, reference)


def skip(evidence: str, fix: str = "", reference: str = "") -> Judgement:
    return Judgement(SKIP, evidence, fix, reference)


@dataclass(frozen=True)
class Verdict:
    id: str
    category: str
    needs: tuple[str, ...]
    title_of: Callable[[], str]  # a function, so the title follows the language chosen at run time
    judge: Callable[[Evidence], Judgement]

    @property
    def title(self) -> str:
        return self.title_of()

    def check(self, ev: Evidence) -> DoctorCheck:
        try:
            found = self.judge(ev)
        except Exception as exc:  # a devtune bug must not hide the other checks
            found = Judgement(WARN, _("the doctor could not judge this check ({error})",
                                      error=f"{type(exc).__name__}: {exc}"),
                              "devtune doctor --json > doctor.json   # " +
                              _("then report a devtune bug with this file attached"))
        return DoctorCheck(self.id, self.title, self.category, found.status, found.evidence, found.fix,
                           found.reference)


def verdict(check_id: str, category: str, needs: tuple[str, ...], title: Callable[[], str]):
    """Mark a function as a verdict; it stays callable as it was (`fn.verdict` is its Verdict)."""
    if category not in CATEGORIES:
        raise ValueError(f"unknown category {category!r}")

    def mark(judge: Callable[[Evidence], Judgement]) -> Callable[[Evidence], Judgement]:
        judge.verdict = Verdict(check_id, category, tuple(needs), title, judge)
        return judge

    return mark
