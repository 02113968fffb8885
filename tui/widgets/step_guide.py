"""StepGuide: one line under the step bar that says what this step found and what to do next.

Hidden until the step has an outcome; then "✓ <what it produced> → next: ] <next step>: <what it is
for>", or "! <what needs attention>". It reads the wizard state; it parses nothing.

What the step shows now comes first: a screen that has something current to say (the open file's lint
errors, the run that is going) says it with `show_now(status, text)` and takes it back with `show_now(None)`;
the saved step record is shown otherwise, said in the reader's language (its summary is kept as data). This widget is the one place that decides the line, so a saved
summary about another file or an older run never stands above what is on the screen."""

from __future__ import annotations

from textual.content import Content
from textual.widgets import Static

from core.i18n import _


class StepGuide(Static):
    DEFAULT_CSS = """
    StepGuide {
        height: auto;
        padding: 0 1;
        display: none;
    }
    StepGuide.-visible {
        display: block;
    }
    """

    def __init__(self, step_id: str, **kwargs) -> None:
        super().__init__("", **kwargs)
        self.step_id = step_id
        self.now: tuple[str, str] | None = None  # (attention | running | done, text) of what is on screen

    def show_now(self, status: str | None, text: str = "") -> None:
        """Say what the step shows now (None: back to the saved record)."""
        self.now = None if status is None else (status, text)
        self.refresh_guide()

    def on_mount(self) -> None:
        self.refresh_guide()

    def refresh_guide(self) -> None:
        state = getattr(self.app, "state", None)
        if state is None:
            return
        if self.now is not None:
            status, text = self.now
            mark, style = {"attention": ("! ", "$warning"), "done": ("✓ ", "$success")}.get(status, ("… ", "$accent"))
            self.update(Content.styled(mark + text, style))
            self.add_class("-visible")
            return
        record = state.step(self.step_id)
        status = record.status.value
        steps = getattr(self.app, "steps", ())
        ids = tuple(s.id for s in steps)
        if status == "done":
            here = ids.index(self.step_id) if self.step_id in ids else -1
            nxt = steps[here + 1] if 0 <= here < len(ids) - 1 else None
            head = Content.styled("✓ " + (record.shown_summary() or _("done")), "$success")
            if nxt is None:
                tail = Content("  " + _("— the journey is complete."))  # what it achieved is the summary: core's
            else:
                tail = Content.styled("  → " + _("next: ] {number} {title}: {blurb}", number=here + 2,
                                                 title=nxt.title, blurb=nxt.blurb), "$text-muted")
            self.update(head + tail)
            self.add_class("-visible")
        elif status == "attention":
            self.update(Content.styled("! " + (record.shown_summary() or _("needs attention")),
                                       "$warning"))
            self.add_class("-visible")
        else:
            self.remove_class("-visible")
