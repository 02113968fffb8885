"""`titled(widget, title)`: a field with its label in its top border, so it still says what it is once
filled in (a placeholder disappears with the first character). Every input of the wizard has one, or a
Label beside it (FieldForm)."""

from __future__ import annotations

from typing import TypeVar

W = TypeVar("W")


def titled(widget: W, title: str) -> W:
    widget.border_title = title
    return widget
