"""RunTable: the Train step's list of runs, core.train.run_compare.RunsTable as a DataTable.

One row per run (its status, last loss, best and last eval loss, eval chrF, tokens/s, duration and the
hyperparameters that differ between the runs); a click on a header, or `s`, sorts (core's order: a run without
the value last); Enter or a click shows that run; space marks runs and `m` asks to compare the marked ones
(the cursor's run too when fewer than two are marked).
"""

from __future__ import annotations

from dataclasses import dataclass

from textual.binding import Binding
from textual.message import Message
from textual.widgets import DataTable

from core.i18n import _

MARK = "●"


class RunTable(DataTable):
    DEFAULT_CSS = """
    RunTable {
        height: auto;
        max-height: 7;
        background: $surface;
    }
    """
    BINDINGS = [
        Binding("space", "mark", _("Mark run"), key_display=_("Space"), id="train.mark", tooltip=_("mark or unmark the run to compare it")),
        Binding("m", "compare", _("Compare runs"), id="train.compare",
                tooltip=_("compare the marked runs side by side: curves, parameters, evals")),
        Binding("s", "next_sort", _("Sort runs"), id="train.sort",
                tooltip=_("sort the runs by the next column (a header click sorts by that one)")),
    ]

    @dataclass
    class Picked(Message):
        run_id: str

    @dataclass
    class CompareAsked(Message):
        run_ids: list[str]

    def __init__(self, *, id: str | None = None, classes: str | None = None) -> None:
        super().__init__(cursor_type="row", zebra_stripes=True, id=id, classes=classes)
        self.table = None  # core.train.run_compare.RunsTable
        self.marked: list[str] = []
        self.sort_column: str | None = None
        self.descending = False

    def show(self, table, current: str | None = None) -> None:
        """Show a RunsTable (sorted as it was), the cursor on `current`."""
        self.table = table
        self.marked = [m for m in self.marked if any(r.id == m for r in table.rows)]
        self._fill(current)

    def _rows(self) -> list:
        if self.table is None:
            return []
        if self.sort_column is None:
            return list(self.table.rows)
        return self.table.sorted_by(self.sort_column, self.descending)

    def _fill(self, current: str | None) -> None:
        from core.train.run_compare import column_label

        self.clear(columns=True)
        if self.table is None:
            return
        self.add_column(" ", key="mark", width=1)
        for column in self.table.columns:
            arrow = (" ▼" if self.descending else " ▲") if column == self.sort_column else ""
            self.add_column(column_label(column) + arrow, key=column)
        for row in self._rows():
            self.add_row(MARK if row.id in self.marked else " ", *[row.cell(c) for c in self.table.columns],
                         key=row.id)
        if current is not None and current in self.rows:
            self.move_cursor(row=self.get_row_index(current), animate=False)

    @property
    def current(self) -> str | None:
        if not self.row_count:
            return None
        return self.coordinate_to_cell_key((self.cursor_row, 0)).row_key.value

    def sort_by(self, column: str) -> None:
        """Sort by `column`; the same column again reverses the order."""
        self.descending = not self.descending if column == self.sort_column else False
        self.sort_column = column
        self._fill(self.current)

    def on_data_table_header_selected(self, event: DataTable.HeaderSelected) -> None:
        event.stop()
        if event.column_key.value != "mark":
            self.sort_by(event.column_key.value)

    def on_data_table_row_selected(self, event: DataTable.RowSelected) -> None:
        event.stop()
        self.post_message(self.Picked(event.row_key.value))

    def action_next_sort(self) -> None:
        if self.table is None:
            return
        columns = self.table.columns
        at = columns.index(self.sort_column) + 1 if self.sort_column in columns else 0
        self.sort_by(columns[at % len(columns)])

    def action_mark(self) -> None:
        run_id = self.current
        if run_id is None:
            return
        if run_id in self.marked:
            self.marked.remove(run_id)
        else:
            self.marked.append(run_id)
        self.update_cell(run_id, "mark", MARK if run_id in self.marked else " ")

    def action_compare(self) -> None:
        ids = list(self.marked)
        if len(ids) < 2 and self.current is not None and self.current not in ids:
            ids.append(self.current)
        self.post_message(self.CompareAsked(ids))
