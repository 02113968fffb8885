"""The parts of the Train step's comparison of runs (screens/train_compare.py), each given a
core.train.run_compare.RunComparison: the loss and eval-loss curves of every run overlaid on one axis
(textual-plotext: a line per run for its loss, dots for its eval loss), and the tables of the hyperparameters that
differ, the eval scores and the rows where the tuned models disagree."""

from __future__ import annotations

from textual.widgets import DataTable, Static
from textual_plotext import PlotextPlot

from core.i18n import _, _n

MARKERS = ("braille", "dot", "x", "+", "*", "o")  # a run's eval points, one marker each
SHOWN_ANSWER = 60


class RunCompareChart(PlotextPlot):
    """Each run's loss as a line and its eval loss as points, on the comparison's axis."""

    DEFAULT_CSS = """
    RunCompareChart {
        height: 1fr;
        min-height: 10;
    }
    """

    def __init__(self, *, id: str | None = None) -> None:
        super().__init__(id=id)
        self.comparison = None
        self.series: dict[str, tuple] = {}  # the label of each drawn series -> (xs, ys): what is drawn

    def show(self, comparison) -> None:
        from core.train.run_compare import align_label

        self.comparison = comparison
        self.series = {}
        plt = self.plt
        plt.clear_data()
        plt.clear_figure()
        for i, run in enumerate(comparison.runs):
            c = comparison.curves[run.id]
            if c["loss"][0]:
                label = _("{run} loss", run=run.id)
                plt.plot(*c["loss"], label=label, marker="braille")
                self.series[label] = c["loss"]
            if c["eval_loss"][0]:
                label = _("{run} eval loss", run=run.id)
                plt.scatter(*c["eval_loss"], label=label, marker=MARKERS[(i + 1) % len(MARKERS)])
                self.series[label] = c["eval_loss"]
        plt.xlabel(align_label(comparison.align))
        plt.title(_("loss by {axis}", axis=align_label(comparison.align)))
        self.refresh()


def param_rows(comparison) -> tuple[list[str], list[list[str]]]:
    """The differing hyperparameters: a row each, a column per run."""
    from core.train.run_compare import format_value

    header = [_("hyperparameter")] + [r.id for r in comparison.runs]
    return header, [[key] + [format_value(v) for v in values.values()]
                    for key, values in comparison.param_diff().items()]


def eval_rows(comparison) -> tuple[list[str], list[list[str]]]:
    from core.eval.eval_report import metric_label
    from core.train.run_compare import format_value

    header = [_("metric")] + [r.id for r in comparison.runs] + [_("spread")]
    return header, [[metric_label(d["metric"])] + [format_value(d["values"].get(r.id)) for r in comparison.runs]
                    + [format_value(d["spread"])] for d in comparison.eval_scores]


def fill_table(table: DataTable, header: list[str], rows: list[list[str]]) -> None:
    table.clear(columns=True)
    table.add_columns(*header)
    for row in rows:
        table.add_row(*row)


def disagreement_text(comparison) -> str:
    """The rows where the tuned models answered differently, each run's answer and its chrF."""
    from core.eval.eval_report import set_label

    if not comparison.disagreements:
        return ""
    lines = [_n("{n} row where the tuned models disagree:", "{n} rows where the tuned models disagree:",
                len(comparison.disagreements))]
    for d in comparison.disagreements:
        lines.append(f"{set_label(d['set'])} · {d['source']}: {_short(d['question'])}")
        for run, a in d["answers"].items():
            lines.append(f"  {run} (chrF {a['chrf']:.2f}): {_short(a['error'] or a['answer'])}")
    return "\n".join(lines)


def _short(text: str) -> str:
    text = " ".join(text.split())
    return text if len(text) <= SHOWN_ANSWER else text[:SHOWN_ANSWER - 1] + "…"


class CompareNotes(Static):
    DEFAULT_CSS = """
    CompareNotes {
        height: auto;
        color: $text-muted;
        padding: 0 1;
    }
    """
