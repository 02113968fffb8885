"""EvalResults: the Playground's Eval tab — base against tuned, as core.eval's EvalReport says it: a verdict line, a
table of every metric on the held-out and the training questions, a bar per metric, set and side, and a pager over
the rows where the tuned model did worse than its base (the question, the reference and both answers)."""

from __future__ import annotations

from textual import on
from textual.app import ComposeResult
from textual.containers import Vertical, VerticalScroll
from textual.content import Content
from textual.widgets import DataTable, Static

from core.i18n import _

BAR = 10


def _flat(text: str, n: int) -> str:
    text = " ".join(text.split())
    return text if len(text) <= n else text[: n - 1] + "…"


def bar_lines(report) -> Content:
    """One line per metric and set: the base's bar beside the tuned model's (judge scores over 5, the rest over 1)."""
    from core.eval.eval_report import SETS, metric_label, set_label
    from core.i18n import display_width, pad_cells

    lines = []
    column = max([10] + [display_width(metric_label(m)) + 1 for m in report.metric_names()])
    for metric in report.metric_names():
        scale = 5.0 if metric == "judge" else 1.0
        for i, name in enumerate(SETS):
            summary = report.sets.get(name)
            shown = pad_cells(metric_label(metric) if i == 0 else "", column) + pad_cells(set_label(name), 9)
            label = Content.styled(shown, "$text-muted")
            parts = [label]
            for side, style in (("base", "$text-muted"), ("tuned", "$accent")):
                value = summary.base.value(metric) if summary and summary.rows and side == "base" else \
                    summary.tuned.value(metric) if summary and summary.rows else None
                filled = 0 if value is None else round(BAR * value / scale)
                parts += [Content(f" {_('base') if side == 'base' else _('tuned')} "),
                          Content.styled("█" * filled, style), Content.styled("░" * (BAR - filled), "$panel-lighten-2"),
                          Content(" -   " if value is None else f" {value:.2f}")]
            lines.append(Content("").join(parts))
    return Content("\n").join(lines)


class EvalResults(Vertical):
    # styled in tui/styles/playground.tcss (the one step that shows it)

    def __init__(self, **kw) -> None:
        super().__init__(**kw)
        self.rows: list = []  # core.eval EvalRows where the tuned model did worse, the biggest loss first

    def compose(self) -> ComposeResult:
        with VerticalScroll(id="pg-eval-top"):
            yield Static(_("F6 asks the held-out and training questions to the tuned model and to its base, and "
                           "scores every answer (`devtune eval`)."), id="pg-eval-summary")
            yield DataTable(id="pg-eval-table", cursor_type="none", zebra_stripes=True)
            yield Static("", id="pg-eval-bars")
        yield DataTable(id="pg-eval-worse", cursor_type="row", zebra_stripes=True)
        yield Static("", id="pg-eval-row")

    def on_mount(self) -> None:
        worse = self.query_one("#pg-eval-worse", DataTable)
        worse.border_title = _("where the tuned model did worse than its base")
        worse.add_columns(_("set"), "chrF", _("question"))

    def start(self, line: str) -> None:
        self.query_one("#pg-eval-summary", Static).update(line)

    def progress(self, lines: list[str]) -> None:
        """The latest of the progress lines a job batched."""
        if lines:
            self.query_one("#pg-eval-summary", Static).update(lines[-1])

    def failed(self, error: str) -> None:
        self.query_one("#pg-eval-summary", Static).update(error)

    def show(self, report, rows: list) -> None:
        """A core.eval EvalReport and its rows (the worse ones are paged)."""
        from core.eval.eval_report import worse_rows

        lines = [report.verdict.line]
        if report.note:
            lines.append(report.note)
        if report.lm_eval or report.lm_eval_error:
            lines += report.harness_lines()
        lines.append(_("eval {id} · base {base} · tuned {tuned} · {folder}", id=report.id, base=report.base.model,
                       tuned=report.tuned.model, folder=report.folder))
        self.query_one("#pg-eval-summary", Static).update("\n".join(lines))
        table = self.query_one("#pg-eval-table", DataTable)
        table.clear(columns=True)
        table.add_columns(*report.header())
        for row in report.table():
            table.add_row(*row)
        self.query_one("#pg-eval-bars", Static).update(bar_lines(report))
        from core.eval.eval_report import set_label

        self.rows = worse_rows(rows)
        worse = self.query_one("#pg-eval-worse", DataTable)
        worse.clear()
        for r in self.rows:
            worse.add_row(set_label(r.set), f"{r.base.chrf:.2f} → {r.tuned.chrf:.2f}", _flat(r.question, 60))
        worse.border_subtitle = str(len(self.rows))
        self._show_row(0)

    def _show_row(self, index: int) -> None:
        detail = self.query_one("#pg-eval-row", Static)
        if not self.rows:
            detail.update(Content.styled(_("no row where the tuned model did worse than its base"), "$text-muted"))
            return
        r = self.rows[min(index, len(self.rows) - 1)]
        detail.update("\n".join([
            _("question: {text}", text=_flat(r.question, 300)), _("reference: {text}", text=_flat(r.reference, 300)),
            _("base: {text}", text=_flat(r.base.error or r.base.answer, 300)),
            _("tuned: {text}", text=_flat(r.tuned.error or r.tuned.answer, 300))]))

    @on(DataTable.RowHighlighted, "#pg-eval-worse")
    def _row_highlighted(self, event: DataTable.RowHighlighted) -> None:
        self._show_row(event.cursor_row)
