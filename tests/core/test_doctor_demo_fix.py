"""The doctor's fix on a machine without a GPU, `devtune demo DIR && devtune DIR`, is right where it is run
(issue 29, item 9): run inside a workspace, `devtune demo ./demo` nested a demo in the person's workspace."""

import shlex
from dataclasses import replace
from pathlib import Path

from core.doctor.checks.machine import judge_machine
from core.doctor.runner import replay

MACHINES = Path(__file__).resolve().parents[1] / "fixtures" / "doctor" / "machines"


def _demo_dirs(fix: str) -> list[str]:
    words = shlex.split(fix.replace("&&", " && "))
    assert words[:2] == ["devtune", "demo"] and words[3:5] == ["&&", "devtune"], fix
    return [words[2], words[5]]


def test_the_demo_is_made_beside_the_workspace_not_inside_it(tmp_path):
    workspace = tmp_path / "kefu"
    workspace.mkdir()
    ev = replay(MACHINES / "cpu-only")[1]
    ev = replace(ev, host={**ev.host, "workspace": str(workspace)})
    found = judge_machine(ev)
    made, opened = _demo_dirs(found.fix)
    assert made == opened and Path(made).is_absolute()  # the same folder, wherever the command is run
    assert not Path(made).is_relative_to(workspace) and Path(made).parent == workspace.parent


def test_without_a_workspace_the_demo_is_made_where_the_doctor_ran():
    ev = replay(MACHINES / "cpu-only")[1]
    ev = replace(ev, host={**ev.host, "workspace": None})
    assert _demo_dirs(judge_machine(ev).fix) == ["./demo", "./demo"]


def test_the_doctor_report_points_to_a_file_of_the_project():
    check = next(c for c in replay(MACHINES / "cpu-only")[0].checks if c.id == "platform.machine")
    assert check.reference == "docs/cpu-stack.md" and (MACHINES.parents[3] / check.reference).is_file()
