"""FieldForm: a compact, scrollable form of labelled rows in titled sections, with an error line under
each row (inline validation). It knows nothing about what the fields mean: the screen gives it
`FormRow`s, reads `values()`, and sets `set_errors({key: message})`.

Posts `FieldForm.Changed(key)` when the person changes a field (not when values are set), and keeps in
`edited` the fields the person changed since their values were last set: a screen loading values that
arrive late (a busy machine) leaves those as typed.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from textual.app import ComposeResult
from textual.containers import Horizontal, VerticalScroll
from textual.message import Message
from textual.widgets import Checkbox, Input, Label, Select, Static

from core.i18n import without_backticks


@dataclass
class FormRow:
    key: str
    label: str
    kind: str  # str | int | float | list | bool | choice
    section: str = ""  # a title shown above the first row of each section
    options: list[tuple[str, str]] = field(default_factory=list)  # (label, value) for choice rows
    placeholder: str = ""
    tooltip: str | None = None


def _dom_id(key: str) -> str:
    return "field-" + key.replace(".", "-").replace("_", "-")


class FieldForm(VerticalScroll):
    DEFAULT_CSS = """
    FieldForm {
        height: 1fr;
        padding: 0 1 0 0;
        scrollbar-size-vertical: 1;
    }
    FieldForm > .form-section {
        margin-top: 1;
        color: $accent;
        text-style: bold;
    }
    FieldForm > .form-row {
        height: 1;
    }
    FieldForm > .form-row > Label {
        width: 26;
        padding-right: 1;
        color: $text-muted;
    }
    FieldForm > .form-row > Input, FieldForm > .form-row > Select {
        width: 1fr;
    }
    FieldForm > .form-row > Checkbox {
        border: none;
        height: 1;
        width: 8;
        padding: 0;
        background: transparent;
    }
    FieldForm > .form-row.-invalid > Label {
        color: $error;
        text-style: bold;
    }
    FieldForm > .form-error {
        display: none;
        height: auto;
        color: $error;
        padding: 0 0 0 26;
    }
    FieldForm > .form-error.-visible {
        display: block;
    }
    """

    class Changed(Message):
        def __init__(self, form: "FieldForm", key: str) -> None:
            super().__init__()
            self.form = form
            self.key = key

    def __init__(self, rows: list[FormRow], **kwargs) -> None:
        super().__init__(**kwargs)
        self.rows = rows
        self._by_dom = {_dom_id(r.key): r for r in rows}
        self.edited: set[str] = set()  # keys the person changed since values were last set in them

    def compose(self) -> ComposeResult:
        section = None
        for row in self.rows:
            if row.section and row.section != section:
                section = row.section
                yield Static(section, classes="form-section")
            with Horizontal(classes="form-row", id=f"{_dom_id(row.key)}-row"):
                yield Label(without_backticks(row.label))
                yield self._control(row)
            yield Static("", classes="form-error", id=f"{_dom_id(row.key)}-error")

    def _control(self, row: FormRow):
        dom = _dom_id(row.key)
        if row.kind == "bool":
            box = Checkbox("", id=dom)
            box.tooltip = row.tooltip
            return box
        if row.kind == "choice":
            options = [(without_backticks(label), value) for label, value in row.options]
            select = Select(options, id=dom, compact=True, allow_blank=True, prompt=row.placeholder or "-")
            select.tooltip = row.tooltip
            return select
        kind = {"int": "integer", "float": "number"}.get(row.kind, "text")
        box = Input(placeholder=row.placeholder, id=dom, compact=True, type=kind)
        box.tooltip = row.tooltip
        return box

    # values
    def values(self) -> dict[str, object]:
        out: dict[str, object] = {}
        for dom, row in self._by_dom.items():
            widget = self.query_one(f"#{dom}")
            if isinstance(widget, Checkbox):
                out[row.key] = widget.value
            elif isinstance(widget, Select):
                out[row.key] = "" if widget.is_blank() else str(widget.value)
            else:
                out[row.key] = widget.value
        return out

    def set_values(self, values: dict[str, object]) -> None:
        """Show `values` without posting Changed. Only the Changed messages these assignments post are held
        back (Textual's `prevent`, for this call): what the person types meanwhile still arrives."""
        with self.prevent(Input.Changed, Select.Changed, Checkbox.Changed):
            for key, val in values.items():
                dom = _dom_id(key)
                if dom not in self._by_dom:
                    continue
                self.edited.discard(key)
                widget = self.query_one(f"#{dom}")
                if isinstance(widget, Checkbox):
                    widget.value = bool(val)
                elif isinstance(widget, Select):
                    options = {v for _, v in self._by_dom[dom].options}
                    if val in ("", None) or str(val) not in options:
                        widget.clear()
                    else:
                        widget.value = str(val)
                else:
                    widget.value = "" if val is None else str(val)

    def set_options(self, key: str, options: list[tuple[str, str]]) -> None:
        dom = _dom_id(key)
        row = self._by_dom.get(dom)
        if row is None:
            return
        widget = self.query_one(f"#{dom}", Select)
        current = widget.value
        row.options = options
        with self.prevent(Select.Changed):
            widget.set_options([(without_backticks(label), value) for label, value in options])
            if current != Select.NULL and any(v == current for _, v in options):
                widget.value = current

    def set_placeholder(self, key: str, text: str) -> None:
        dom = _dom_id(key)
        if dom in self._by_dom:
            widget = self.query_one(f"#{dom}")
            if isinstance(widget, Input):
                widget.placeholder = text

    def set_errors(self, errors: dict[str, str]) -> None:
        for dom, row in self._by_dom.items():
            message = errors.get(row.key)
            self.query_one(f"#{dom}-row").set_class(bool(message), "-invalid")
            line = self.query_one(f"#{dom}-error", Static)
            line.update(message or "")
            line.set_class(bool(message), "-visible")

    def focus_field(self, key: str) -> None:
        dom = _dom_id(key)
        if dom in self._by_dom:
            self.query_one(f"#{dom}").focus()

    # events
    def _changed(self, widget_id: str | None) -> None:
        if widget_id not in self._by_dom:
            return
        key = self._by_dom[widget_id].key
        self.edited.add(key)
        self.post_message(self.Changed(self, key))

    def on_input_changed(self, event: Input.Changed) -> None:
        event.stop()
        self._changed(event.input.id)

    def on_select_changed(self, event: Select.Changed) -> None:
        event.stop()
        self._changed(event.select.id)

    def on_checkbox_changed(self, event: Checkbox.Changed) -> None:
        event.stop()
        self._changed(event.checkbox.id)
