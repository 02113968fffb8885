"""ChatParamsForm: the sampling settings of the Playground's chat — system prompt, temperature, top_p,
max tokens and stop strings — read back as a core.serve.chat.ChatParams. A field that does not parse keeps
its default (the Input's type already refuses letters)."""

from __future__ import annotations

from textual.app import ComposeResult
from textual.containers import Horizontal, Vertical
from textual.widgets import Input

from core.i18n import _
from tui.widgets.titled import titled

DEFAULTS = {"temperature": 0.7, "top_p": 1.0, "max_tokens": 256}


class ChatParamsForm(Vertical):
    # styled in tui/styles/playground.tcss (the one step that shows it)

    def compose(self) -> ComposeResult:
        with Horizontal(id="pg-prompt-row"):
            yield titled(Input(placeholder=_("none"), id="pg-system"), _("system prompt"))
            yield titled(Input(placeholder=_("comma-separated"), id="pg-stop-seq"), _("stop strings"))
        with Horizontal(id="pg-params"):
            yield titled(Input(str(DEFAULTS["temperature"]), id="pg-temperature", type="number"), _("temperature"))
            yield titled(Input(str(DEFAULTS["top_p"]), id="pg-top-p", type="number"), "top_p")
            yield titled(Input(str(DEFAULTS["max_tokens"]), id="pg-max-tokens", type="integer"), _("max tokens"))

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
