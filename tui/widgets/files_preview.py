"""FilesPreview: tabs of read-only text (the files a step will write, and the command), updated live.

`show(tab_id, text)` replaces a tab's text, keeping the scroll position when the text is unchanged.
"""

from __future__ import annotations

from textual.app import ComposeResult
from textual.containers import Vertical
from textual.widgets import TabbedContent, TabPane, TextArea


class FilesPreview(Vertical):
    # styled in tui/styles/config.tcss (the one step that shows it)

    def __init__(self, tabs: list[tuple[str, str]], **kwargs) -> None:
        """`tabs`: (id, title) per tab."""
        super().__init__(**kwargs)
        self.tab_specs = tabs

    def compose(self) -> ComposeResult:
        with TabbedContent():
            for tab_id, title in self.tab_specs:
                with TabPane(title, id=tab_id):
                    yield TextArea("", read_only=True, soft_wrap=False, show_line_numbers=False,
                                   id=f"{tab_id}-text")

    def activate(self, tab_id: str) -> None:
        self.query_one(TabbedContent).active = tab_id

    def show(self, tab_id: str, text: str) -> None:
        area = self.query_one(f"#{tab_id}-text", TextArea)
        if area.text != text:
            area.load_text(text)

    def text_of(self, tab_id: str) -> str:
        return self.query_one(f"#{tab_id}-text", TextArea).text
