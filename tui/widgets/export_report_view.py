"""ExportReportView: the merged folder's check — one line per finding with its fix, and where the
chat template differs from training's, both texts one above the other."""

from __future__ import annotations

from textual.content import Content
from textual.widgets import Static

from core.i18n import _
from tui.widgets import status_marks



class ExportReportView(Static):
    # styled in tui/styles/merge.tcss (the one step that shows it)

    def __init__(self, **kwargs) -> None:
        super().__init__("", **kwargs)
        self.verdict: str | None = None

    def show_message(self, text: str) -> None:
        self.verdict = None
        self.set_classes([])
        self.update(Content.styled(text, "$text-muted"))

    def show_report(self, report) -> None:
        """`report`: core.merge.export_check.ExportReport."""
        self.verdict = report.verdict
        self.set_class(report.verdict == "error", "-error")
        self.set_class(report.verdict == "warning", "-warning")
        lines: list[Content] = []
        for f in report.findings:
            level = f.level if f.level in ("ok", "error") else "warning"
            lines.append(Content.styled(status_marks.mark(level) + " ", status_marks.style(level, bold=True))
                         + Content.styled(f"{f.what}: ", "bold") + Content(f.detail))
            if f.fix:
                lines.append(Content.styled(f"  → {f.fix}", "$text-muted italic"))
        template = report.template
        if template is not None and template.differences:
            first = template.differences[0]
            lines.append(Content.styled("  " + _("training saw: {text}", text=repr(first["expected"])), "$success"))
            lines.append(Content.styled("  " + _("server sends: {text}", text=repr(first["actual"])), "$error"))
        self.update(Content("\n").join(lines))
