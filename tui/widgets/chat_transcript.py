"""ChatTranscript: a scrolling chat — the person's questions, the model's answers as they stream in,
and each answer's statistics line (TTFT, tokens, tokens/s) under it.

The screen feeds it coalesced text (a few updates per second), never one token per redraw.
"""

from __future__ import annotations

from textual.containers import VerticalScroll
from textual.content import Content
from textual.widgets import Static


class ChatMessage(Static):
    """One question or answer (styled in tui/styles/playground.tcss, the one step that shows it)."""


class ChatTranscript(VerticalScroll):
    # styled in tui/styles/playground.tcss (the one step that shows it)

    def __init__(self, title: str = "", *, empty: str = "", **kwargs) -> None:
        super().__init__(**kwargs)
        self.border_title = title
        self.empty = empty
        self._answer: ChatMessage | None = None
        self.answers: list[str] = []  # every finished answer, in order (tests and "copy" read them)

    def on_mount(self) -> None:
        if self.empty:
            self.mount(Static(self.empty, classes="chat-empty"))

    def _drop_placeholder(self) -> None:
        for placeholder in self.query(".chat-empty"):
            placeholder.remove()

    def add_question(self, text: str) -> None:
        self._drop_placeholder()
        self.mount(ChatMessage(Content.styled("› ", "bold $accent") + Content(text), classes="-user"))
        self.scroll_end(animate=False)

    def start_answer(self) -> None:
        self._answer = ChatMessage(Content.styled("…", "$text-muted"), classes="-assistant")
        self.mount(self._answer)
        self.scroll_end(animate=False)

    def update_answer(self, text: str) -> None:
        if self._answer is None:
            self.start_answer()
        self._answer.update(Content(text))
        self.scroll_end(animate=False)

    def finish_answer(self, text: str, stats: str) -> None:
        self.update_answer(text)
        self.answers.append(text)
        self._answer = None
        self.mount(Static(stats, classes="chat-stats"))
        self.scroll_end(animate=False)

    def fail_answer(self, message: str) -> None:
        if self._answer is None:
            self.start_answer()
        self._answer.update(Content.styled(message, "$text"))
        self._answer.add_class("-error")
        self._answer = None
        self.scroll_end(animate=False)

    def clear(self) -> None:
        self._answer = None
        self.answers.clear()
        self.remove_children()
        if self.empty:
            self.mount(Static(self.empty, classes="chat-empty"))
