"""Which machine the doctor judges: this one, or a recorded one (`devtune doctor --record DIR`) replayed.

`DEVTUNE_DOCTOR_REPLAY=<folder>` makes the wizard's Doctor step (and `devtune doctor` without `--replay`)
judge the recorded machine in that folder: nothing is probed. Snapshot tests and demos use it to show a
GPU box on a laptop. `doctor_events` is the one place that decides, for the wizard and the CLI alike.
"""

from __future__ import annotations

import os
from typing import Callable, Iterator

REPLAY_ENV = "DEVTUNE_DOCTOR_REPLAY"


def replay_folder(explicit: str | None = None) -> str | None:
    """The recorded machine to judge: `explicit` (the CLI's --replay), else $DEVTUNE_DOCTOR_REPLAY, else None."""
    return explicit or os.environ.get(REPLAY_ENV) or None


def doctor_events(workspace, verdicts=None, *, evidence=None, replay: str | None = None,
                  should_stop: Callable[[], bool] | None = None) -> Iterator[object]:
    """core.doctor.runner.iter_doctor on the right machine: the recorded one in `replay_folder(replay)`,
    or this one (probing it; with `evidence`, re-probing only what `verdicts` need)."""
    from core.doctor.evidence import Evidence
    from core.doctor.probes import DoctorContext
    from core.doctor.runner import iter_doctor

    folder = replay_folder(replay)
    if folder is not None:
        return iter_doctor(None, verdicts, evidence=evidence if evidence is not None else Evidence.load(folder),
                           replay=True, should_stop=should_stop)
    return iter_doctor(DoctorContext.for_this_machine(workspace), verdicts, evidence=evidence,
                       should_stop=should_stop)
