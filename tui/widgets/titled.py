"""`titled(widget, title)`: a field with its label in its top border, so it still says what it is once
filled in (a placeholder disappears with the first character). Every input of the wizard has one, or a
Label beside it (FieldForm). A Select draws its box on its SelectCurrent: `TitledSelect` puts the title
there."""

from __future__ import annotations

from typing import TypeVar

from textual.widgets import Select
from textual.widgets._select import SelectCurrent

W = TypeVar("W")


def titled(widget: W, title: str) -> W:
    widget.border_title = title
    return widget


class TitledSelect(Select):
    """A Select whose `border_title` shows in the top border of its box, as an Input's does."""

    def on_mount(self) -> None:
        self.query_one(SelectCurrent).border_title = self.border_title
