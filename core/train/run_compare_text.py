"""`devtune runs compare`'s text: the runs' table, the hyperparameters that differ, the losses at shared points of
the chosen axis, the eval-score diff and the rows where the tuned models disagree (core.train.run_compare decides
all of it; this only lays it out in aligned columns)."""

from __future__ import annotations

from core.eval.eval_report import metric_label, set_label
from core.i18n import _, _n, display_width, pad_cells
from core.train.run_compare import COLUMNS, RunComparison, RunsTable, align_label, column_label, format_value

SHOWN_DISAGREEMENTS = 5
ANSWER_CHARS = 100


def aligned(rows: list[list[str]]) -> list[str]:
    """Columns aligned in display cells (a Chinese word takes two per character); numbers right-aligned."""
    widths = [max(display_width(r[i]) for r in rows) for i in range(len(rows[0]))]
    return ["  ".join(pad_cells(cell, w, right=i > 0) for i, (cell, w) in enumerate(zip(r, widths))).rstrip()
            for r in rows]


def table_lines(table: RunsTable) -> list[str]:
    rows = [[column_label(c) for c in table.columns]]
    rows += [[r.cell(c) for c in table.columns] for r in table.rows]
    return aligned(rows)


def comparison_lines(c: RunComparison) -> list[str]:
    ids = [r.id for r in c.runs]
    out = aligned([[column_label(col) for col in COLUMNS]] + [[r.cell(col) for col in COLUMNS] for r in c.runs])
    out.append("")
    if c.params:
        out.append(_("hyperparameters that differ:"))
        out += ["  " + line for line in aligned([[""] + ids] + [[k] + [format_value(v) for v in values.values()]
                                                              for k, values in c.param_diff().items()])]
    else:
        out.append(_("the runs' hyperparameters are the same"))
    if c.at:
        out += ["", _("loss (eval loss) by {axis}:", axis=align_label(c.align))]
        rows = [[align_label(c.align)] + ids]
        for point in c.at:
            rows.append([format_value(point["x"])] + [_loss_cell(point["loss"][run], point["eval_loss"][run])
                                                      for run in ids])
        out += ["  " + line for line in aligned(rows)]
    if c.eval_scores:
        out += ["", _("eval scores of the tuned models:")]
        rows = [[""] + ids + [_("spread")]]
        rows += [[metric_label(d["metric"])] + [format_value(d["values"][run]) for run in ids]
                 + [format_value(d["spread"])] for d in c.eval_scores]
        out += ["  " + line for line in aligned(rows)]
    if c.disagreements:
        out += ["", _n("{n} row where the tuned models disagree:", "{n} rows where the tuned models disagree:",
                         len(c.disagreements))]
        for d in c.disagreements[:SHOWN_DISAGREEMENTS]:
            out.append(f"  {set_label(d['set'])} · {d['source']}: {_short(d['question'])}")
            for run, a in d["answers"].items():
                out.append(f"    {run} (chrF {a['chrf']:.2f}): {_short(a['error'] or a['answer'])}")
    out += [""] + c.notes if c.notes else []
    return out


def _loss_cell(loss: float | None, eval_loss: float | None) -> str:
    text = format_value(loss)
    return f"{text} ({format_value(eval_loss)})" if eval_loss is not None else text


def _short(text: str) -> str:
    text = " ".join(text.split())
    return text if len(text) <= ANSWER_CHARS else text[:ANSWER_CHARS - 1] + "…"
