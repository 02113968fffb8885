"""DiagnosisBox: what went wrong in a run, with the evidence line and the fix; anomalies while it trains."""

from __future__ import annotations

from textual.content import Content
from textual.widgets import Static

from core.i18n import _


class DiagnosisBox(Static):
    DEFAULT_CSS = """
    DiagnosisBox {
        height: auto;
        max-height: 12;
        padding: 0 1;
        border: round $error;
        display: none;
    }
    DiagnosisBox.-anomaly {
        border: round $warning;
    }
    DiagnosisBox.-visible {
        display: block;
    }
    """

    def show_diagnoses(self, diagnoses: list, note: str = "") -> None:
        """Core Diagnosis objects, most likely first (the first three are shown)."""
        if not diagnoses:
            self.hide()
            return
        parts: list[Content] = []
        if note:
            parts.append(Content.styled(note, "bold"))
        for d in diagnoses[:3]:
            parts.append(Content.styled(f"● {d.title}", "bold $error"))
            for ev in d.evidence[:2]:
                where = f"{ev.file.rsplit('/', 1)[-1]}:{ev.line}" if ev.line else ev.file
                parts.append(Content.styled(f"  {where}: {ev.text[:200]}", "$text-muted"))
            parts.append(Content(f"  {_('Fix')}: {d.fix}"))
            for cmd in d.commands[:2]:
                parts.append(Content.styled(f"    $ {cmd}", "$accent"))
        self.remove_class("-anomaly")
        self.update(Content("\n").join(parts))
        self.add_class("-visible")

    def show_anomalies(self, anomalies: list, stall=None) -> None:
        """Active anomalies of a run that is still training (loss NaN, oscillation, ...), and a stall with
        where its first training process is waiting now (core.train.stalls)."""
        if not anomalies and stall is None:
            self.hide()
            return
        lines = [Content.styled(f"▲ {a.message}", "$error" if a.severity == "error" else "$warning")
                 for a in anomalies[:4]]
        if stall is not None:
            from core.train.stalls import stack_lines

            lines.append(Content.styled("▲ " + _("stalled: {reason}", reason=stall.reason), "$error"))
            shown = list(stall.stacks.items())[:2]  # `devtune monitor RUN` prints every rank's whole stack
            for pid, stack in shown:
                lines.append(Content.styled(_("process {pid} is here now:", pid=pid), "bold"))
                lines += [Content.styled("  " + line, "$text-muted" if line.startswith("Thread ") else "")
                          for line in stack_lines(stack, frames=4 if len(shown) > 1 else 8)]
        self.add_class("-anomaly")
        self.update(Content("\n").join(lines))
        self.add_class("-visible")

    def hide(self) -> None:
        self.remove_class("-visible")
