"""Running the doctor: all the needed probes at once, each in its own thread with its own timeout;
each verdict judged as soon as the probes it needs have finished.

`iter_doctor` yields events (a probe finished, a check was judged, all done) so the CLI and the
screen can show checks while the slow probes (vLLM's import, ds_report) are still running. A probe
that overstays its timeout is given up on: its thread is a daemon and is left behind, the doctor
finishes without it. `replay` judges a recorded machine without running anything.
"""

from __future__ import annotations

import queue
import threading
import time
from dataclasses import dataclass
from typing import Callable, Iterable, Iterator

from core.doctor.evidence import Evidence
from core.doctor.model import DoctorCheck, DoctorReport
from core.doctor.probes import PROBES_BY_NAME, DoctorContext, Probe
from core.doctor.registry import all_verdicts
from core.doctor.verdict import Verdict

GRACE_SECONDS = 3.0  # past a probe's own timeout before the runner stops waiting for it
POLL_SECONDS = 0.25  # how often a stoppable run looks at `should_stop`


@dataclass(frozen=True)
class ProbeFinished:
    name: str
    state: str  # done | timeout | error
    remaining: tuple[str, ...]  # probes still running


@dataclass(frozen=True)
class CheckJudged:
    check: DoctorCheck


@dataclass(frozen=True)
class DoctorFinished:
    report: DoctorReport
    evidence: Evidence


def select_verdicts(only: Iterable[str] | None = None, checks: Iterable[str] | None = None) -> list[Verdict]:
    """The verdicts of the given categories and/or check ids (all of them when neither is given)."""
    verdicts = all_verdicts()
    only, checks = set(only or ()), set(checks or ())
    if only or checks:
        verdicts = [v for v in verdicts if v.category in only or v.id in checks]
    return verdicts


def iter_doctor(ctx: DoctorContext | None, verdicts: list[Verdict] | None = None, *,
                evidence: Evidence | None = None, replay: bool = False,
                should_stop: Callable[[], bool] | None = None) -> Iterator[object]:
    """Probe and judge. With `evidence` and `replay=True`, judge it as it is (nothing runs); with
    `evidence` alone, re-run the probes the verdicts need and update it in place (re-check).
    `should_stop` (polled while waiting) ends the run early, without a DoctorFinished."""
    verdicts = verdicts if verdicts is not None else select_verdicts()
    ev = evidence if evidence is not None else Evidence()
    needed = list(dict.fromkeys(name for v in verdicts for name in v.needs))
    pending = list(verdicts)
    judged: dict[str, DoctorCheck] = {}
    finished: set[str] = set()

    def judge_ready() -> Iterator[CheckJudged]:
        for v in list(pending):
            if all(n in finished for n in v.needs):
                pending.remove(v)
                judged[v.id] = v.check(ev)
                yield CheckJudged(judged[v.id])

    if replay:
        finished.update(needed)
    else:
        results: queue.Queue = queue.Queue()
        deadlines = {}
        now = time.monotonic()
        for name in needed:
            probe = PROBES_BY_NAME[name]
            deadlines[name] = now + probe.timeout * ctx.timeout_scale + GRACE_SECONDS
            threading.Thread(target=_run_probe, args=(probe, ctx, results), daemon=True,
                             name=f"doctor-probe-{name}").start()
        running = set(needed)
        while running:
            if should_stop is not None and should_stop():
                return
            wait = max(0.0, min(deadlines[n] for n in running) - time.monotonic())
            if should_stop is not None:
                wait = min(wait, POLL_SECONDS)
            try:
                name, state, part = results.get(timeout=wait)
            except queue.Empty:
                late = [n for n in running if deadlines[n] <= time.monotonic()]
                if not late:
                    continue  # only the poll interval passed
                for name in late:
                    running.discard(name)
                    finished.add(name)
                    ev.probe_state[name] = "timeout"
                    yield ProbeFinished(name, "timeout", tuple(sorted(running)))
                yield from judge_ready()
                continue
            if name not in running:  # it answered after we gave up on it
                continue
            running.discard(name)
            finished.add(name)
            if part:
                ev.update(part)
            ev.probe_state[name] = state
            yield ProbeFinished(name, state, tuple(sorted(running)))
            yield from judge_ready()
    yield from judge_ready()
    order = [v.id for v in verdicts]
    report = build_report(ev, [judged[i] for i in order if i in judged])
    yield DoctorFinished(report, ev)


def _run_probe(probe: Probe, ctx: DoctorContext, results: queue.Queue) -> None:
    try:
        part = probe.run(ctx)
        results.put((probe.name, "done", part))
    except Exception as exc:  # a probe bug: record it, judge with what there is
        results.put((probe.name, "error", {"host": {f"probe_error_{probe.name}": f"{type(exc).__name__}: {exc}"}}))


def build_report(ev: Evidence, checks: list[DoctorCheck]) -> DoctorReport:
    from core.doctor.checks.machine import machine_summary
    from core.doctor.facts import facts

    try:
        kind, summary = facts(ev).kind, machine_summary(ev)
    except Exception:  # never lose the checks over the header line
        kind, summary = "cpu", ""
    return DoctorReport(checks=checks, machine=kind, machine_summary=summary,
                        host=str(ev.host.get("hostname") or ""), created=time.time())


def run_doctor(ctx: DoctorContext | None, verdicts: list[Verdict] | None = None, *,
               evidence: Evidence | None = None, replay: bool = False) -> tuple[DoctorReport, Evidence]:
    """The whole doctor, blocking: (report, evidence)."""
    for event in iter_doctor(ctx, verdicts, evidence=evidence, replay=replay):
        if isinstance(event, DoctorFinished):
            return event.report, event.evidence
    raise RuntimeError("the doctor ended without a report")  # pragma: no cover


def replay(folder, verdicts: list[Verdict] | None = None) -> tuple[DoctorReport, Evidence]:
    """Judge a recorded machine (a fixture folder): nothing on this machine is looked at."""
    return run_doctor(None, verdicts, evidence=Evidence.load(folder), replay=True)
