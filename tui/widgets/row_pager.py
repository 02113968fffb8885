"""RowPager: a DataTable over a window of a file's rows, however many there are.

It holds `WINDOW` rows at a time from a `core.data.preview.Preview`; moving the cursor past either
end of the window slides it (reading those rows with one `os.pread` through the line index), so a
file of a million rows scrolls without ever being loaded. Posts `RowPager.RowChosen` for the
highlighted row.
"""

from __future__ import annotations

from dataclasses import dataclass

from textual.binding import Binding
from textual.message import Message
from textual.widgets import DataTable

from core.i18n import _

WINDOW = 200


class RowPager(DataTable):
    DEFAULT_CSS = """
    RowPager {
        height: 1fr;
        border: round $panel-lighten-2;
        border-title-color: $text-muted;
        border-subtitle-color: $text-muted;
    }
    RowPager:focus {
        border: round $accent;
    }
    """
    BINDINGS = [
        Binding("ctrl+home", "first_row", _("First row"), id="rows.first", show=False),
        Binding("ctrl+end", "last_row", _("Last row"), id="rows.last", show=False),
    ]

    @dataclass
    class RowChosen(Message):
        position: int
        row: object  # core.data.preview.PreviewRow

    def __init__(self, **kwargs) -> None:
        super().__init__(cursor_type="row", zebra_stripes=True, **kwargs)
        self.preview = None
        self.start = 0
        self.rows_now: list = []

    # filling
    def show(self, preview, rows: list, start: int = 0, cursor: int = 0) -> None:
        """Show `rows` (PreviewRows at positions start..) of `preview`."""
        from core.data.preview import columns

        first_time = self.preview is not preview
        self.preview = preview
        if first_time or not self.columns:
            self.clear(columns=True)
            self.add_column(_("line"), key="line", width=7)
            names = columns(preview.schema)
            room = max(40, (self.size.width or 100) - 10 - 3 * len(names))
            widths = [room * 3 // 10, room * 2 // 10, room - room * 3 // 10 - room * 2 // 10]
            for name, width in zip(names, widths):
                self.add_column(name, key=f"c-{name}", width=max(8, width))
        self.clear()
        self.start = start
        self.rows_now = rows
        schema = preview.schema
        for r in rows:
            self.add_row(str(r.line), *r.cells(schema), key=str(r.line))
        if rows:
            self.move_cursor(row=max(0, min(cursor, len(rows) - 1)), animate=False)
        self.refresh_title()

    def refresh_title(self) -> None:
        if self.preview is None:
            return
        total = self.preview.total()
        end = self.start + len(self.rows_now)
        if self.preview.complete:
            self.border_subtitle = _("rows {a}-{b} of {n}", a=self.start + 1 if end else 0, b=end, n=total)
        else:
            self.border_subtitle = _("rows {a}-{b} · indexing… {n} so far", a=self.start + 1 if end else 0, b=end,
                                     n=total)

    def load_window(self, start: int, cursor_at: int) -> None:
        if self.preview is None:
            return
        rows = self.preview.page(max(0, start), WINDOW)
        if rows:
            self.show(self.preview, rows, max(0, start), cursor_at)

    def goto(self, position: int) -> None:
        """Show the row at `position` (a finding's row), a quarter window below the top."""
        start = max(0, position - WINDOW // 4)
        self.load_window(start, position - start)
        self.focus()

    # sliding at the edges
    def _can_slide_down(self) -> bool:
        if self.preview is None:
            return False
        return (self.preview.total() or 0) > self.start + len(self.rows_now)

    def action_cursor_down(self) -> None:
        if self.cursor_row >= self.row_count - 1 and self._can_slide_down():
            self.load_window(self.start + WINDOW // 2, self.cursor_row - WINDOW // 2 + 1)
            return
        super().action_cursor_down()

    def action_cursor_up(self) -> None:
        if self.cursor_row == 0 and self.start > 0:
            new = max(0, self.start - WINDOW // 2)
            self.load_window(new, self.start - new - 1)
            return
        super().action_cursor_up()

    def action_page_down(self) -> None:
        if self.cursor_row >= self.row_count - 1 - self.size.height and self._can_slide_down():
            self.load_window(self.start + WINDOW // 2, max(0, self.cursor_row - WINDOW // 2 + self.size.height))
            return
        super().action_page_down()

    def action_page_up(self) -> None:
        if self.cursor_row < self.size.height and self.start > 0:
            new = max(0, self.start - WINDOW // 2)
            self.load_window(new, max(0, self.cursor_row + (self.start - new) - self.size.height))
            return
        super().action_page_up()

    def action_first_row(self) -> None:
        self.load_window(0, 0)

    def action_last_row(self) -> None:
        total = self.preview.total() if self.preview else 0
        if total:
            self.load_window(max(0, total - WINDOW), WINDOW)

    def on_data_table_row_highlighted(self, event: DataTable.RowHighlighted) -> None:
        event.stop()
        if 0 <= event.cursor_row < len(self.rows_now):
            self.post_message(self.RowChosen(self.start + event.cursor_row, self.rows_now[event.cursor_row]))
