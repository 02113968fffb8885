"""A catalog message drawn as styled text: the terms its backticks mark (`llamafactory-cli train`, stage `sft`)
in their own style, without the backticks (core.i18n.backtick_parts; plain-text widgets use without_backticks)."""

from __future__ import annotations

from textual.content import Content

from core.i18n import backtick_parts

TERM_STYLE = "bold"


def with_terms(text: str, style: str = TERM_STYLE) -> Content:
    return Content("").join(Content.styled(piece, style) if term else Content(piece)
                            for piece, term in backtick_parts(text))
