"""VerifyResults: the Playground's closed-loop check as it comes in — a verdict line above a table of
the training questions asked, each with its chrF score, the expected answer and the model's."""

from __future__ import annotations

from textual.app import ComposeResult
from textual.containers import Vertical
from textual.widgets import DataTable, Static

from core.i18n import _
from tui.widgets import status_marks


def _flat(text: str) -> str:
    return " ".join(text.split())[:60]


class VerifyResults(Vertical):
    DEFAULT_CSS = """
    VerifyResults { height: 1fr; }
    VerifyResults #pg-verify { height: 1fr; }
    VerifyResults #pg-verdict { height: auto; padding: 0 1; }
    """

    def compose(self) -> ComposeResult:
        yield Static(_("F6 asks questions from the training data and scores the answers (chrF)."), id="pg-verdict")
        yield DataTable(id="pg-verify", cursor_type="row", zebra_stripes=True)

    def on_mount(self) -> None:
        self.query_one(DataTable).add_columns("", _("score"), _("question"), _("expected"), _("answer"))

    def start(self) -> None:
        self.query_one(DataTable).clear()
        self.query_one("#pg-verdict", Static).update(_("asking the training questions…"))

    def add_result(self, r) -> None:
        """One core.serve.verify.QuestionResult."""
        self.query_one(DataTable).add_row(status_marks.mark("passed" if r.passed else "failed"), f"{r.score:.2f}",
                                          _flat(r.question), _flat(r.expected), _flat(r.error or r.answer))

    def finish(self, report, error: str | None = None) -> None:
        """The core.serve.verify report, or None with the error that stopped the check."""
        verdict = self.query_one("#pg-verdict", Static)
        if report is None:
            verdict.update(error or "")
        else:
            verdict.update(_("score {score:.2f} — {summary}", score=report.score, summary=report.summary))
