"""ChatParamsForm: the sampling settings of the Playground's chat — system prompt, temperature, top_p,
max tokens and stop strings — read back as a core.serve.chat.ChatParams. A field that does not parse keeps
its default (the Input's type already refuses letters)."""

from __future__ import annotations

from textual.app import ComposeResult
from textual.containers import Horizontal, Vertical
from textual.widgets import Input

from core.i18n import _

DEFAULTS = {"temperature": 0.7, "top_p": 1.0, "max_tokens": 256}


class ChatParamsForm(Vertical):
    DEFAULT_CSS = """
    ChatParamsForm { height: auto; }
    ChatParamsForm Horizontal { height: auto; }
    ChatParamsForm #pg-system { width: 2fr; }
    ChatParamsForm #pg-stop-seq { width: 1fr; }
    ChatParamsForm #pg-params Input { width: 1fr; max-width: 14; }
    """

    def compose(self) -> ComposeResult:
        with Horizontal(id="pg-prompt-row"):
            yield Input(placeholder=_("system prompt"), id="pg-system")
            yield Input(placeholder=_("stop (comma-separated)"), id="pg-stop-seq")
        with Horizontal(id="pg-params"):
            yield Input(str(DEFAULTS["temperature"]), placeholder=_("temperature"), id="pg-temperature",
                        type="number")
            yield Input(str(DEFAULTS["top_p"]), placeholder="top_p", id="pg-top-p", type="number")
            yield Input(str(DEFAULTS["max_tokens"]), placeholder=_("max tokens"), id="pg-max-tokens",
                        type="integer")

    def params(self):
        from core.serve.chat import ChatParams

        def value(widget_id: str, cast, default):
            try:
                return cast(self.query_one(widget_id, Input).value)
            except ValueError:
                return default

        stops = [s.strip() for s in self.query_one("#pg-stop-seq", Input).value.split(",") if s.strip()]
        return ChatParams(system=self.query_one("#pg-system", Input).value,
                          temperature=value("#pg-temperature", float, DEFAULTS["temperature"]),
                          top_p=value("#pg-top-p", float, DEFAULTS["top_p"]),
                          max_tokens=value("#pg-max-tokens", int, DEFAULTS["max_tokens"]), stop=stops)
