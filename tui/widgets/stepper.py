"""The stepper: every step in order with its state (not started / needs attention / done).

Each step is clickable; the keys 1-6, `[` and `]` move between steps (bindings on the App).
"""

from __future__ import annotations

from textual.content import Content
from textual.widgets import Static

from tui.widgets import status_marks



class Stepper(Static):
    DEFAULT_CSS = """
    Stepper {
        dock: top;
        height: 1;
        width: 1fr;
        background: $panel;
        color: $text;
        padding: 0 1;
    }
    """

    def __init__(self, current: str, **kwargs) -> None:
        super().__init__("", **kwargs)
        self.current = current

    def on_mount(self) -> None:
        self.refresh_steps()

    def refresh_steps(self) -> None:
        STEPS = getattr(self.app, "steps", ())

        state = getattr(self.app, "state", None)
        parts: list[Content] = []
        for n, step in enumerate(STEPS, 1):
            status = state.step(step.id).status.value if state is not None else "not_started"
            label = f" {n} {step.title} {status_marks.mark(status)} "
            style = "reverse bold" if step.id == self.current else status_marks.style(status)
            parts.append(Content.styled(label, style).stylize(f"@click=app.goto_step('{step.id}')"))
            if n < len(STEPS):
                parts.append(Content.styled("›", "$text-muted"))
        self.update(Content("").join(parts) if parts else Content("devtune"))
