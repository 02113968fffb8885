"""DataActions: fix / convert / register forms for the open file, each with Preview and Write.

It only collects what the person chose and posts `DataActions.Requested`; the screen runs the work and
hands back `show_result(lines, rows)`, which is shown before anything is written.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

from textual.app import ComposeResult
from textual.containers import Horizontal, VerticalScroll
from textual.message import Message
from textual.widgets import Button, Checkbox, DataTable, Input, Select, Static

from core.i18n import _
from tui.widgets.titled import titled

SOURCES = ("auto", "chatlog", "qa", "csv", "sharegpt", "messages", "transcript")


class DataActions(VerticalScroll):
    DEFAULT_CSS = """
    DataActions {
        height: 1fr;
        padding: 0 1;
    }
    DataActions .actions-title {
        margin-top: 1;
        color: $text-muted;
        text-style: bold;
    }
    DataActions Horizontal {
        height: auto;
    }
    DataActions Input {
        width: 1fr;
        min-width: 24;
    }
    DataActions Select {
        width: 22;
    }
    DataActions Button {
        margin-left: 1;
        min-width: 10;
    }
    DataActions Checkbox {
        width: auto;
    }
    DataActions #actions-result {
        margin-top: 1;
        height: auto;
        padding: 0 1;
        border: round $panel-lighten-2;
    }
    DataActions #actions-result.-ok {
        border: round $success;
    }
    DataActions #actions-result.-error {
        border: round $error;
    }
    DataActions #actions-preview {
        height: 12;
        margin-bottom: 1;
    }
    """

    @dataclass
    class Requested(Message):
        action: str  # fix | convert | register
        write: bool  # False: preview only
        output: str = ""
        yes: bool = False
        source_format: str = "auto"
        name: str = ""
        holdout: str = ""  # register: the held-out share or row count ("" = none)

    def compose(self) -> ComposeResult:
        yield Static(_("Fix into a new file (the safe fixes; tick the box for the others)"), classes="actions-title")
        with Horizontal():
            yield titled(Input(placeholder=_("output file"), id="fix-output"), _("fixed file"))
            yield Button(_("Preview"), id="fix-preview")
            yield Button(_("Write"), id="fix-write", variant="primary")
        # on a line of its own: beside the file's name it left that name 6 columns at 120
        yield Checkbox(_("also apply fixes that need a confirmation"), id="fix-yes")
        yield Static(_("Convert to alpaca JSON Lines (chat logs and exports, Q&A text, CSV, spreadsheets, sharegpt, "
                       "messages)"),
                     classes="actions-title")
        with Horizontal():
            yield Select([(_("from: {format}", format=s), s) for s in SOURCES], value="auto", allow_blank=False,
                         id="convert-from")
            yield titled(Input(placeholder=_("output file"), id="convert-output"), _("converted file"))
            yield Button(_("Preview"), id="convert-preview")
            yield Button(_("Write"), id="convert-write", variant="primary")
        yield Static(_("Register in data/dataset_info.json"), classes="actions-title")
        with Horizontal():
            yield titled(Input(placeholder=_("dataset name"), id="register-name"), _("dataset name"))
            yield titled(Input(placeholder=_("none; 0.1 or 20 rows"), id="register-holdout"),
                         _("held-out share (eval)"))
            yield Button(_("Preview"), id="register-preview")
            yield Button(_("Register"), id="register-write", variant="primary")
        yield Static(_("Choose Preview to see the result before anything is written."), id="actions-result",
                     markup=False)
        yield DataTable(id="actions-preview", zebra_stripes=True)

    def set_file(self, path: Path) -> None:
        """Suggest output names and a dataset name for `path`."""
        stem = path.name[:-len(".jsonl")] if path.name.endswith(".jsonl") else path.stem
        base = re.sub(r"_(messy|raw|clean|alpaca)$", "", stem)
        self.query_one("#fix-output", Input).value = str(path.with_name(f"{base}_clean.jsonl"))
        self.query_one("#convert-output", Input).value = str(path.with_name(f"{base}_alpaca.jsonl"))
        self.query_one("#register-name", Input).value = re.sub(r"[^\w.\-]", "_", base) or "dataset"

    def on_button_pressed(self, event: Button.Pressed) -> None:
        action, _sep, mode = (event.button.id or "").partition("-")
        if action not in ("fix", "convert", "register"):
            return
        event.stop()
        self.request(action, write=mode == "write")

    def request(self, action: str, *, write: bool) -> None:
        """Ask for `action` (fix | convert | register) with what the form holds: a preview, or the write."""
        self.post_message(self.Requested(
            action=action, write=write,
            output=self.query_one(f"#{action}-output", Input).value.strip() if action != "register" else "",
            yes=self.query_one("#fix-yes", Checkbox).value,
            source_format=str(self.query_one("#convert-from", Select).value),
            name=self.query_one("#register-name", Input).value.strip(),
            holdout=self.query_one("#register-holdout", Input).value.strip()))

    def show_result(self, lines: list[str], rows: list[dict] | None = None, *, error: bool = False) -> None:
        box = self.query_one("#actions-result", Static)
        box.update("\n".join(lines))
        box.set_class(error, "-error")
        box.set_class(not error and bool(lines), "-ok")
        table = self.query_one("#actions-preview", DataTable)
        table.clear(columns=True)
        if rows:
            keys: list[str] = []
            for r in rows:
                keys += [k for k in r if k not in keys]
            for k in keys:
                table.add_column(k, key=k, width=30 if k != "line" else 6)
            for r in rows:
                table.add_row(*(_cell(r.get(k, "")) for k in keys))


def _cell(v) -> str:
    s = v if isinstance(v, str) else repr(v)
    s = s.replace("\n", "⏎ ")
    return s if len(s) <= 120 else s[:119] + "…"
