"""Which machine the doctor judges: this one, or a recorded one (`devtune doctor --record DIR`) replayed.

`DEVTUNE_DOCTOR_REPLAY=<folder>` makes the wizard's Doctor step (and `devtune doctor` without `--replay`)
judge the recorded machine in that folder: nothing is probed. Snapshot tests and demos use it to show a
GPU box on a laptop. `doctor_events` is the one place that decides, for the wizard and the CLI alike, and
`run_doctor` is the doctor's one run for both: its events, and what a finished run leaves for later steps.
"""

from __future__ import annotations

from typing import Callable, Iterator

REPLAY_ENV = "DEVTUNE_DOCTOR_REPLAY"


def replay_folder(explicit: str | None = None) -> str | None:
    """The recorded machine to judge: `explicit` (the CLI's --replay), else $DEVTUNE_DOCTOR_REPLAY, else None."""
    from core.settings import current

    return explicit or current().doctor_replay


def doctor_events(workspace, verdicts=None, *, evidence=None, replay: str | None = None,
                  should_stop: Callable[[], bool] | None = None) -> Iterator[object]:
    """core.doctor.runner.iter_doctor on the right machine: the recorded one in `replay_folder(replay)`,
    or this one (probing it; with `evidence`, re-probing only what `verdicts` need)."""
    from core.doctor.evidence import Evidence
    from core.doctor.probes import DoctorContext
    from core.doctor.runner import iter_doctor

    folder = replay_folder(replay)
    if folder is not None:
        if evidence is None:
            try:
                evidence = Evidence.load(folder)
            except (OSError, ValueError) as exc:
                from core.errors import BadInput

                raise BadInput(str(exc)) from exc
        return iter_doctor(None, verdicts, evidence=evidence, replay=True, should_stop=should_stop)
    return iter_doctor(DoctorContext.for_this_machine(workspace), verdicts, evidence=evidence,
                       should_stop=should_stop)


def run_doctor(workspace, verdicts=None, *, evidence=None, replay: str | None = None,
               should_stop: Callable[[], bool] | None = None) -> Iterator[object]:
    """`doctor_events`, and once a fresh probe of this machine (not a replay, not a re-check against earlier
    `evidence`) has finished, the GPUs it found saved in the workspace for the Config step's memory fit.
    `workspace` is None where there is no workspace folder (nothing is saved then)."""
    from core.doctor.runner import DoctorFinished

    fresh = evidence is None and replay_folder(replay) is None
    for event in doctor_events(workspace, verdicts, evidence=evidence, replay=replay, should_stop=should_stop):
        if isinstance(event, DoctorFinished) and fresh and workspace is not None:
            from core.doctor.found_gpus import save_found_gpus

            try:
                save_found_gpus(workspace.root, event.evidence)
            except OSError:
                pass  # a read-only workspace: the Config step then estimates without them
        yield event
