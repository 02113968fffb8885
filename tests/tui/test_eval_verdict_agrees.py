"""Is the tuned model worse than its base? One answer, core's (EvalReport.verdict), for every recorded
evaluation of tests/eval_fixture.py: `devtune eval --show`'s exit code, its `--json` verdict, and the
Playground's Eval tab line and step mark (what F6's job hands the screen when it is done) all say it. Each case
is one the front-ends once answered differently (issue 26): a held-out set with 0 rows (the CLI exited 0 on
it), a loss inside the 0.05 band (the Playground marked it for attention), one outside it."""

from __future__ import annotations

import json

import pytest

from cli.main import main
from core.eval.eval_report import load_eval
from core.workspace.layout import Workspace
from core.workspace.step_status import StepStatus
from tests.eval_fixture import VERDICT_CASES, VerdictCase
from tests.tui.helpers import opened, wait_until
from tui.app import DevtuneApp


@pytest.mark.parametrize("case", VERDICT_CASES, ids=lambda c: c.name)
async def test_the_cli_its_json_core_and_the_playground_give_one_verdict(tmp_path, capsys, case: VerdictCase):
    ws = Workspace(tmp_path / "ws").ensure()
    report = case.write(ws)
    verdict = report.verdict
    assert (verdict.outcome, verdict.set) == (case.outcome, case.decided_on)

    code = main(["-w", str(ws.root), "eval", "--show", report.id])
    text = capsys.readouterr().out
    assert code == case.exit_code and verdict.line in text
    assert main(["-w", str(ws.root), "eval", "--show", "--json"]) == case.exit_code  # the latest
    shown = json.loads(capsys.readouterr().out)["verdict"]
    assert shown == verdict.to_json() and shown["ok"] == (case.exit_code == 0)

    ws.update_state(lambda s: setattr(s, "current_step", "playground"))
    app = DevtuneApp(ws, watch_terminal=False)
    async with app.run_test(size=(120, 40)) as pilot:
        screen = await opened(pilot, app)
        await wait_until(pilot, lambda: screen.query_one("#pg-eval-table").row_count > 0)  # the saved eval
        assert verdict.line in str(screen.query_one("#pg-eval-summary").render())
        screen._evaluated(load_eval(ws, report.id))  # what F6's job hands the screen when it is done
        await pilot.pause()
        step = app.state.step("playground")
        assert step.status == (StepStatus.DONE if case.exit_code == 0 else StepStatus.ATTENTION)
        assert step.summary == verdict.mark
