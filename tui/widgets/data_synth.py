"""DataSynth: the Data step's "From documents" view — documents in, reviewed question–answer pairs out.

The person names files or a folder (workspace-relative), sees the chunks, picks the server, starts the
generation and watches its progress, then reviews each pair beside its source chunk: accept (a), reject (x) or
edit (e) it, before Write. The widget only collects choices and shows what it is given; it posts `Requested`
and the screen runs the work (`screens/data.py`, through the step base's background API).
"""

from __future__ import annotations

from dataclasses import dataclass, field

from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Horizontal, Vertical, VerticalScroll
from textual.message import Message
from textual.widgets import Button, DataTable, Input, Select, Static, TextArea

from core.i18n import _
from tui.widgets.status_marks import mark
from tui.widgets.titled import titled

MARKS = {"accepted": mark("ok"), "rejected": mark("fail"), "": ""}  # a reviewer's decision, as every mark reads
KEPT = mark("ok")
WIDE = 130  # columns of the view from which the source chunk sits beside the pairs, not under them
OPTION_IDS = ("synth-concurrency", "synth-max-requests", "synth-max-tokens", "synth-min-grounding")


def chunk_columns() -> tuple[tuple[str, int], ...]:
    """(title, fixed width) of the chunk table's columns; the last one (0) takes the width that is left."""
    return ((_("file"), 12), (_("#"), 3), (_("tokens"), 6), (_("page"), 4), (_("heading"), 20), (_("text"), 0))


def pair_columns() -> tuple[tuple[str, int], ...]:
    return (("", 1), (_("kept"), 4), (_("reason"), 14), (_("grounding"), 9), (_("question"), 0))


def option_fields() -> tuple[tuple[str, str, str], ...]:
    """(id, title, default) of the run's settings, each a field of its own."""
    return (("synth-concurrency", _("concurrency"), "8"), ("synth-max-requests", _("max requests"), ""),
            ("synth-max-tokens", _("max tokens"), ""), ("synth-min-grounding", _("min grounding"), "0.5"))


class ReviewTable(DataTable):
    """The candidate pairs; a / x / e act on the highlighted one."""

    BINDINGS = [
        Binding("a", "decide('accepted')", _("Accept pair"), id="data.synth-accept",
                tooltip=_("keep the highlighted pair, whatever the filters said")),
        Binding("x", "decide('rejected')", _("Reject pair"), id="data.synth-reject",
                tooltip=_("leave the highlighted pair out of the file")),
        Binding("e", "edit", _("Edit pair"), id="data.synth-edit",
                tooltip=_("edit the highlighted question and answer")),
    ]

    @dataclass
    class Decided(Message):
        row: int
        decision: str

    @dataclass
    class EditAsked(Message):
        row: int

    def action_decide(self, decision: str) -> None:
        if self.row_count:
            self.post_message(self.Decided(self.cursor_row, decision))

    def action_edit(self) -> None:
        if self.row_count:
            self.post_message(self.EditAsked(self.cursor_row))


class DataSynth(VerticalScroll):
    DEFAULT_CSS = """
    DataSynth {
        height: 1fr;
        padding: 0 1;
    }
    DataSynth Horizontal {
        height: auto;
    }
    DataSynth Input, DataSynth SelectCurrent {
        border-title-color: $text-muted;
    }
    DataSynth #synth-sources, DataSynth #synth-server {
        width: 1fr;
    }
    DataSynth #synth-output {
        width: 34;
    }
    DataSynth .synth-option {
        width: 19;
    }
    DataSynth Button {
        margin-left: 1;
        min-width: 10;
        width: auto;
    }
    DataSynth #synth-status {
        height: auto;
        padding: 0 1;
        border: round $panel-lighten-2;
    }
    DataSynth #synth-status.-error {
        border: round $error;
    }
    DataSynth #synth-chunks {
        height: 8;
    }
    DataSynth #synth-review-row {
        layout: vertical;
        height: auto;
    }
    DataSynth #synth-review {
        height: 10;
    }
    DataSynth #synth-source {
        height: 12;
        border: round $panel-lighten-2;
        padding: 0 1;
    }
    DataSynth.-wide #synth-review-row {
        layout: horizontal;
        height: 16;
    }
    DataSynth.-wide #synth-review {
        width: 3fr;
        height: 16;
    }
    DataSynth.-wide #synth-source {
        width: 2fr;
        height: 16;
    }
    DataSynth #synth-edit {
        height: auto;
        display: none;
    }
    DataSynth #synth-edit.-visible {
        display: block;
    }
    DataSynth TextArea {
        height: 5;
    }
    """

    @dataclass
    class Requested(Message):
        action: str  # chunks | generate | stop | write
        sources: str = ""
        output: str = ""
        server: str = ""
        options: dict[str, str] = field(default_factory=dict)  # OPTION_IDS without "synth-" -> text

    @dataclass
    class Edited(Message):
        row: int
        question: str
        answer: str

    def __init__(self, *args, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        self.editing: int | None = None
        self._sources: list[str] = []  # the review rows' source chunk texts, in row order

    def compose(self) -> ComposeResult:
        with Horizontal():
            yield titled(Input(placeholder=_("docs/ or manual.pdf faq.docx (workspace-relative)"), id="synth-sources"),
                         _("documents or folders"))
            yield titled(Input(value="data/from_docs.jsonl", id="synth-output"), _("dataset file to write"))
        with Horizontal():
            yield Select([], prompt=_("no server running"), id="synth-server")
            yield Button(_("Chunks"), id="synth-chunks-button")
            yield Button(_("Generate"), id="synth-generate", variant="primary")
            yield Button(_("Stop"), id="synth-stop")
            yield Button(_("Write"), id="synth-write", variant="success")
        with Horizontal(id="synth-options"):
            for fid, title, default in option_fields():
                yield titled(Input(value=default, placeholder=_("none") if not default else "", id=fid,
                                   classes="synth-option", type="number" if "grounding" in fid else "integer"),
                             title)
        yield Static(_("Name documents, list their chunks, pick a server (`devtune serve` the base model), "
                       "Generate, review, Write."), id="synth-status", markup=False)
        yield titled(DataTable(id="synth-chunks", zebra_stripes=True, cursor_type="row"), _("chunks"))
        with Horizontal(id="synth-review-row"):
            yield titled(ReviewTable(id="synth-review", zebra_stripes=True, cursor_type="row"),
                         _("pairs: a accept · x reject · e edit"))
            with VerticalScroll(id="synth-source"):
                yield Static("", id="synth-source-text", markup=False)
        with Vertical(id="synth-edit"):
            yield titled(TextArea(id="synth-edit-question"), _("question"))
            yield titled(TextArea(id="synth-edit-answer"), _("answer"))
            with Horizontal():
                yield Button(_("Save edit"), id="synth-edit-save", variant="primary")
                yield Button(_("Cancel"), id="synth-edit-cancel")

    def on_mount(self) -> None:
        self.query_one("#synth-source", VerticalScroll).border_title = _("source chunk")
        self.query_one("#synth-server", Select).query_one("SelectCurrent").border_title = _("server")
        self._chunk_rows: list[tuple] = []
        self._columns(self.query_one("#synth-chunks", DataTable), chunk_columns())
        self._columns(self.query_one(ReviewTable), pair_columns())

    def on_resize(self, event) -> None:
        self.set_class(event.size.width >= WIDE, "-wide")
        self.call_after_refresh(self._refit)

    def _refit(self) -> None:
        """The tables' last columns take the width the view has now (their rows drawn again)."""
        self.show_chunks(self._chunk_rows)
        self.show_pairs(getattr(self, "_rows", []))

    def _columns(self, table: DataTable, columns: tuple[tuple[str, int], ...]) -> None:
        table.clear(columns=True)
        fixed = sum(w for _t, w in columns) + 2 * len(columns) + 4  # each cell's padding, the scrollbar
        room = (table.content_size.width or table.size.width) or 80
        for title, width in columns:
            table.add_column(title, width=width or max(12, room - fixed))

    # ---- what the person asks -----------------------------------------------------------------
    def on_button_pressed(self, event: Button.Pressed) -> None:
        bid = event.button.id or ""
        if bid == "synth-edit-save":
            event.stop()
            if self.editing is not None:
                self.post_message(self.Edited(self.editing, self.query_one("#synth-edit-question", TextArea).text,
                                              self.query_one("#synth-edit-answer", TextArea).text))
            self.close_edit()
            return
        if bid == "synth-edit-cancel":
            event.stop()
            self.close_edit()
            return
        action = {"synth-chunks-button": "chunks", "synth-generate": "generate", "synth-stop": "stop",
                  "synth-write": "write"}.get(bid)
        if action:
            event.stop()
            self.request(action)

    def request(self, action: str) -> None:
        server = self.query_one("#synth-server", Select).value
        options = {fid.removeprefix("synth-"): self.query_one(f"#{fid}", Input).value.strip() for fid in OPTION_IDS}
        self.post_message(self.Requested(action, sources=self.query_one("#synth-sources", Input).value.strip(),
                                         output=self.query_one("#synth-output", Input).value.strip(),
                                         server="" if server == Select.NULL else str(server), options=options))

    # ---- what the screen hands back ------------------------------------------------------------
    def set_servers(self, servers: list[tuple[str, str]], active: str | None = None) -> None:
        """(label, id) of the live servers."""
        select = self.query_one("#synth-server", Select)
        chosen = select.value
        select.set_options(servers)
        ids = [sid for _label, sid in servers]
        if ids:  # the person's choice stays while its server does; else the active one, else the first
            select.value = chosen if chosen in ids else active if active in ids else ids[0]

    def status(self, text: str, *, error: bool = False) -> None:
        box = self.query_one("#synth-status", Static)
        box.update(text)
        box.set_class(error, "-error")

    def show_chunks(self, rows: list[tuple[str, int, int, str, str, str]]) -> None:
        """(file, index, tokens, page, heading, text) per chunk."""
        self._chunk_rows = rows
        table = self.query_one("#synth-chunks", DataTable)
        self._columns(table, chunk_columns())
        for row in rows:
            table.add_row(*(str(v) for v in row))

    def show_pairs(self, rows: list[tuple[str, bool, str, float, str, str, str]]) -> None:
        """(decision, kept, reason, grounding, question, answer, source chunk) per candidate."""
        review = self.query_one(ReviewTable)
        cursor = review.cursor_row if review.row_count else 0
        self._columns(review, pair_columns())
        self._rows = rows
        for decision, kept, reason, grounding, question, _answer, _chunk in rows:
            review.add_row(MARKS.get(decision, ""), KEPT if kept else "", reason, f"{grounding:.2f}",
                           _cell(question) or _("(no question)"))
        if rows:
            review.move_cursor(row=min(cursor, len(rows) - 1))
            self._show_source(review.cursor_row)

    def on_data_table_row_highlighted(self, event: DataTable.RowHighlighted) -> None:
        if event.data_table.id == "synth-review":
            self._show_source(event.cursor_row)

    def _show_source(self, row: int) -> None:
        rows = getattr(self, "_rows", [])
        if not 0 <= row < len(rows):
            return
        _decision, _kept, _reason, _g, question, answer, chunk = rows[row]
        self.query_one("#synth-source-text", Static).update(
            _("Q: {question}\n\nA: {answer}\n\n── source ──\n{chunk}", question=question, answer=answer or "-",
              chunk=chunk))

    def open_edit(self, row: int) -> None:
        rows = getattr(self, "_rows", [])
        if not 0 <= row < len(rows):
            return
        self.editing = row
        self.query_one("#synth-edit-question", TextArea).text = rows[row][4]
        self.query_one("#synth-edit-answer", TextArea).text = rows[row][5]
        box = self.query_one("#synth-edit")
        box.add_class("-visible")
        self.query_one("#synth-edit-question", TextArea).focus()
        self.call_after_refresh(box.scroll_visible, animate=False)

    def close_edit(self) -> None:
        self.editing = None
        self.query_one("#synth-edit").remove_class("-visible")
        self.query_one(ReviewTable).focus()


def _cell(text: str, width: int = 120) -> str:
    s = " ".join(text.split())
    return s if len(s) <= width else s[: width - 1] + "…"
