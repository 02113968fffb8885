"""StepFooter: Textual's Footer that never runs a key under the command palette key.

Textual lays the keys out in a row that may overflow; the palette key (`^p`) is docked on the right, over
whatever runs beneath it, and where it cuts a wide character (a Chinese label) that cell is blanked: the zh
Train step read `^p 命  面板`. This footer shows the keys that fit beside the palette key, whole, and hides the
rest (each is still in the command palette and on the help screen, F1), so a label is never cut at all."""

from __future__ import annotations

from textual.widgets import Footer
from textual.widgets._footer import FooterKey


class StepFooter(Footer):
    async def recompose(self) -> None:
        await super().recompose()
        self.call_after_refresh(self.fit_keys)

    def on_resize(self) -> None:
        for key in self.query(FooterKey):
            key.display = True
        self.call_after_refresh(self.fit_keys)

    def fit_keys(self) -> None:
        """Hide, from the first key that would pass the palette key on, every key of the row."""
        keys = [k for k in self.query(FooterKey) if not k.has_class("-command-palette")]
        palette = [k for k in self.query(FooterKey) if k.has_class("-command-palette")]
        room = self.size.width - (palette[0].outer_size.width if palette else 0)
        used, fits = 0, True
        for key in keys:
            used += key.outer_size.width
            fits = fits and used <= room
            if key.display != fits:
                key.display = fits
