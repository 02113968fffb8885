"""The last step's guide line says what core's eval verdict says, and claims nothing of its own (issue 29,
item 10: "your model answers from its training data" beside "scores like its base on the held-out questions")."""

from core.eval.eval_report import eval_verdict
from tests.core.test_eval import _sets
from tests.tui.helpers import wait_until
from tests.tui.test_app_shell import two_steps  # noqa: F401  (the fixture)
from tui.app import DevtuneApp


async def test_the_journeys_end_follows_the_verdict(workspace, two_steps):  # noqa: F811
    from tui.widgets.step_guide import StepGuide

    verdict = eval_verdict(_sets((0.30, 0.31), (0.30, 0.31)))
    assert verdict.outcome == "same" and verdict.ok
    app = DevtuneApp(workspace, watch_terminal=False)
    async with app.run_test(size=(120, 40)) as pilot:
        await pilot.press("2")
        await wait_until(pilot, lambda: app.current_mode == "second")
        app.screen.set_status("done", verdict.mark)
        guide = app.screen.query_one(StepGuide)
        await wait_until(pilot, lambda: "journey is complete" in str(guide.render()))
        text = str(guide.render())
        assert verdict.mark in text and "answers from its training data" not in text
