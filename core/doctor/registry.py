"""Every doctor verdict, in the order a person reads them: the check modules of
core/doctor/checks/ (an explicit tuple there), each verdict in the order its module defines it."""

from __future__ import annotations

from functools import cache

from core.doctor.checks import CHECK_MODULES
from core.doctor.model import CATEGORIES
from core.doctor.verdict import Verdict


@cache
def _verdicts() -> tuple[Verdict, ...]:
    found: list[Verdict] = []
    for module in CHECK_MODULES:
        for obj in vars(module).values():
            v = getattr(obj, "verdict", None)
            if isinstance(v, Verdict) and getattr(obj, "__module__", None) == module.__name__:
                found.append(v)
    ids = [v.id for v in found]
    twice = sorted({i for i in ids if ids.count(i) > 1})
    if twice:
        raise ValueError(f"verdicts defined twice: {', '.join(twice)}")
    order = {c: i for i, c in enumerate(CATEGORIES)}
    return tuple(sorted(found, key=lambda v: order[v.category]))  # stable: definition order within


def all_verdicts() -> list[Verdict]:
    """Every verdict, in category order."""
    return list(_verdicts())


def get_verdict(check_id: str) -> Verdict:
    for v in _verdicts():
        if v.id == check_id:
            return v
    raise KeyError(f"no check {check_id!r}")
