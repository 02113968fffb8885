"""The Playground's F6 when no server is chosen: the servers the eval of the newest run needs, started by core
(core.eval.servers_needed, as `devtune eval RUN` starts them: the base with the adapter beside it, or the merged
export and the base, merging first), the eval run against them, and what was started stopped again. All of it in
one background job; each thing core does is a line in the Eval tab while it happens."""

from __future__ import annotations

from dataclasses import dataclass

from textual.widgets import TabbedContent

from core.i18n import _
from screens.base import Job
from tui.widgets.eval_results import EvalResults


@dataclass
class EvalWithServers:
    result: object  # core.eval.eval_report.EvalResult
    changes: list  # core.workspace.changes.StateChange: a merge made for it, then the eval's own


def evaluate_with_servers(job: Job, ws) -> EvalWithServers:
    from core.eval.compare import EvalOptions, run_eval
    from core.eval.questions import EvalInputError
    from core.eval.servers_needed import ensure_eval_servers, run_dataset

    with ensure_eval_servers(ws, say=job.report_soon, cancelled=lambda: job.cancelled) as servers:
        dataset = run_dataset(ws, servers.targets.run)
        if not dataset:
            raise EvalInputError(_("no dataset to ask: choose one in the Data step, or train a run on one"))
        result = run_eval(ws, servers.targets, dataset, EvalOptions(), progress=lambda p: job.report_soon(p.line()),
                          cancelled=lambda: job.cancelled)
    return EvalWithServers(result, [*servers.changes, servers.state_change(result.report)])


def start_eval_with_servers(screen) -> None:
    """F6 with no server chosen, on the Playground `screen` (its Eval tab shows the progress and the result)."""
    screen.query_one("#pg-tabs", TabbedContent).active = "pg-tab-eval"
    results = screen.query_one(EvalResults)
    results.start(_("no server chosen: starting the servers the eval of the newest run needs…"))

    def done(outcome: EvalWithServers) -> None:
        for change in outcome.changes[:-1]:
            screen.app.apply_change(change)
        screen._evaluated(outcome.result, outcome.changes[-1])
        screen.load_servers()

    screen.run_background(evaluate_with_servers, screen.ws, group="pg-eval", description=_("Evaluating"),
                          progress=results.progress, done=done, failed=lambda error: results.failed(str(error)))
