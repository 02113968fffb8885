"""CheckDetails: one doctor check in full — status, what was seen, the exact fix, the reference."""

from __future__ import annotations

from textual.app import ComposeResult
from textual.containers import VerticalScroll
from textual.widgets import Static

from core.doctor.model import DoctorCheck, category_title, status_label
from core.i18n import _

STATUS_CLASSES = ("-ok", "-warn", "-fail", "-skip", "-pending")


class CheckDetails(VerticalScroll):
    # styled in tui/styles/doctor.tcss (the one step that shows it)

    def compose(self) -> ComposeResult:
        yield Static("", classes="check-details-title", id="check-details-title", markup=False)
        yield Static("", classes="check-details-status", id="check-details-status", markup=False)
        yield Static(_("What was seen"), classes="check-details-heading")
        yield Static("", classes="check-details-text", id="check-details-evidence", markup=False)
        yield Static(_("How to fix"), classes="check-details-heading", id="check-details-fix-heading")
        yield Static("", classes="check-details-fix", id="check-details-fix", markup=False)
        yield Static("", classes="check-details-hint", id="check-details-reference", markup=False)
        yield Static("", classes="check-details-hint", id="check-details-hint", markup=False)

    def show_category(self, category: str, judged: list[DoctorCheck], total: int) -> None:
        """A category node: how its checks stand, the ones needing action first."""
        from core.doctor.model import STATUS_ORDER

        self.remove_class(*STATUS_CLASSES)
        worst = min((c.status for c in judged), key=lambda s: STATUS_ORDER[s], default="pending")
        self.add_class(f"-{worst}")
        self.query_one("#check-details-title", Static).update(category_title(category))
        self.query_one("#check-details-status", Static).update(
            _("{judged} of {total} checks judged", judged=len(judged), total=total))
        lines = [f"{status_label(c.status)}: {c.title}" for c in sorted(judged, key=lambda c: STATUS_ORDER[c.status])]
        self.query_one("#check-details-evidence", Static).update("\n".join(lines))
        self.query_one("#check-details-fix", Static).display = False
        self.query_one("#check-details-fix-heading", Static).display = False
        self.query_one("#check-details-reference", Static).update("")
        self.query_one("#check-details-hint", Static).update(
            _("select a check to see what was seen and its fix; F6 re-runs the whole category"))

    def show_check(self, check: DoctorCheck | None, *, title: str = "", category: str = "",
                   running: bool = False) -> None:
        """Show a judged check, or a check still waiting for its probes (check=None)."""
        self.remove_class(*STATUS_CLASSES)
        fix = self.query_one("#check-details-fix", Static)
        if check is None:
            self.add_class("-pending")
            self.query_one("#check-details-title", Static).update(title)
            self.query_one("#check-details-status", Static).update(
                (_("re-checking...") if running else _("waiting for its probes...")) +
                (f"  ({category_title(category)})" if category else ""))
            self.query_one("#check-details-evidence", Static).update("")
            fix.update("")
            fix.display = False
            self.query_one("#check-details-fix-heading", Static).display = False
            self.query_one("#check-details-reference", Static).update("")
            self.query_one("#check-details-hint", Static).update("")
            return
        self.add_class(f"-{check.status}")
        self.query_one("#check-details-title", Static).update(check.title)
        self.query_one("#check-details-status", Static).update(
            f"{status_label(check.status)} · {category_title(check.category)} · {check.id}")
        self.query_one("#check-details-evidence", Static).update(check.evidence)
        has_fix = bool(check.fix)
        fix.update(check.fix)
        fix.display = has_fix
        self.query_one("#check-details-fix-heading", Static).display = has_fix
        self.query_one("#check-details-reference", Static).update(
            _("Reference: {reference}", reference=check.reference) if check.reference else "")
        self.query_one("#check-details-hint", Static).update(
            _("c copies the fix; F6 re-runs this check after you fixed it") if has_fix else
            _("F6 re-runs this check"))
