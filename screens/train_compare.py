"""The Train step's comparison of two or more runs, over the step: their loss and eval-loss curves overlaid
(aligned by step, tokens seen or epoch: `b` switches), the hyperparameters that differ, the eval-score diff and the
rows where the tuned models disagree. It shows a core.train.run_compare.RunComparison, the one `devtune runs
compare` prints; switching the axis reads no file again (RunComparison.aligned)."""

from __future__ import annotations

from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Horizontal, VerticalScroll
from textual.screen import Screen
from textual.widgets import DataTable, Footer, Static

from core.i18n import _
from tui.widgets.run_compare import (CompareNotes, RunCompareChart, disagreement_text, eval_rows, fill_table,
                                     param_rows)


class TrainCompareScreen(Screen):
    CSS_PATH = "../tui/styles/train_compare.tcss"
    BINDINGS = [
        Binding("b", "next_align", _("Align by"), id="train_compare.align",
                tooltip=_("align the curves by step, tokens seen or epoch")),
        Binding("escape", "app.pop_screen", _("Back"), id="train_compare.back", tooltip=_("back to the Train step")),
    ]

    def __init__(self, comparison) -> None:
        super().__init__()
        self.comparison = comparison

    def compose(self) -> ComposeResult:
        yield Static("", id="compare-title")
        yield RunCompareChart(id="compare-chart")
        with Horizontal(id="compare-tables"):
            yield DataTable(id="compare-params", cursor_type="none", zebra_stripes=True)
            yield DataTable(id="compare-evals", cursor_type="none", zebra_stripes=True)
        with VerticalScroll(id="compare-rows"):
            yield Static("", id="compare-disagree")
        yield CompareNotes("", id="compare-notes")
        yield Footer()

    def on_mount(self) -> None:
        self.show(self.comparison)

    def show(self, comparison) -> None:
        from core.train.run_compare import align_label

        self.comparison = comparison
        self.query_one("#compare-title", Static).update(
            _("{n} runs side by side · curves by {axis} (b: step, tokens seen, epoch) · Esc: back",
              n=len(comparison.runs), axis=align_label(comparison.align)))
        self.query_one(RunCompareChart).show(comparison)
        params = self.query_one("#compare-params", DataTable)
        if comparison.params:
            fill_table(params, *param_rows(comparison))
        else:
            fill_table(params, [_("hyperparameter")], [[_("the runs' hyperparameters are the same")]])
        evals = self.query_one("#compare-evals", DataTable)
        header, rows = eval_rows(comparison)
        fill_table(evals, header, rows) if rows else fill_table(
            evals, [_("eval scores")], [[_("no eval of two of these runs yet: `devtune eval RUN` makes one")]])
        text = disagreement_text(comparison)
        self.query_one("#compare-rows").display = bool(text)
        self.query_one("#compare-disagree", Static).update(text)
        self.query_one(CompareNotes).update("\n".join(comparison.notes))

    def action_next_align(self) -> None:
        from core.train.run_compare import ALIGNMENTS

        at = ALIGNMENTS.index(self.comparison.align)
        self.show(self.comparison.aligned(ALIGNMENTS[(at + 1) % len(ALIGNMENTS)]))
