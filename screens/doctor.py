"""Step 2, Doctor: every environment check grouped by category, filling in live as the probes
finish; the selected check's evidence and exact fix; copy the fix (OSC 52), re-run one check or
all of them, save the report as Markdown for a support ticket.

`DEVTUNE_DOCTOR_REPLAY=<folder>` shows a recorded machine (`devtune doctor --record`) instead of
probing this one (core.doctor.replay).
"""

from __future__ import annotations

from textual import on
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Horizontal, Vertical
from textual.reactive import var
from textual.widgets import Static, Tree
from textual.worker import Worker, WorkerState

from core.i18n import _, said
from screens.base import Job, StepScreen, step_binding
from tui.widgets.check_details import CheckDetails
from tui.widgets.check_tree import CATEGORY_PREFIX, CheckTree


class DoctorScreen(StepScreen):
    STEP_ID = "doctor"
    CSS_PATH = "../tui/styles/doctor.tcss"
    BINDINGS = [
        step_binding("doctor", "run", "rerun_all", _("Run every check"),
                     tooltip=_("run every probe and check again")),
        step_binding("doctor", "check", "rerun_check", _("Re-check"),
                     tooltip=_("re-run the selected check (or the selected category) after fixing it")),
        Binding("c", "copy_fix", _("Copy fix"), id="doctor.copy_fix",
                tooltip=_("copy the selected check's fix command to the clipboard (OSC 52)")),
        step_binding("doctor", "save", "save_report", _("Save report"),
                     tooltip=_("write doctor-report-<time>.md in the workspace, to attach to a support ticket")),
    ]

    # what the screen shows follows these
    checks: var[dict] = var(dict, always_update=True)  # check id -> DoctorCheck judged so far
    selected: var[str | None] = var(None)  # the tree's highlighted node (a check id or "category:<id>")
    summary: var[str] = var("")
    running_all: var[bool] = var(False)  # every check is being run
    running_some: var[frozenset[str]] = var(frozenset)  # the checks being re-run
    report = var(None)  # core.doctor.model.DoctorReport, once a run finished
    evidence = var(None)  # the probes' evidence of the last whole run (re-checks judge against it)

    @property
    def INTRO(self) -> str:  # noqa: N802 - StepScreen's attribute, translated when shown
        return _("Every check of this machine for fine-tuning: what was found and the exact command that fixes "
                 "it. Fix what fails, then press F6 on the check (or F5 for all). ^s saves the report.")

    def __init__(self) -> None:
        super().__init__()
        self.verdicts: list = []  # core.doctor.registry.Verdict, in report order
        self.probes_done: set[str] = set()
        self.saved_path = None

    def compose_body(self) -> ComposeResult:
        with Horizontal(id="doctor-main"):
            with Vertical(id="doctor-left"):
                yield Static("", id="doctor-summary", markup=False)
                yield CheckTree(id="doctor-tree")
            yield CheckDetails(id="doctor-details")

    def on_mount(self) -> None:
        from core.doctor.model import category_title
        from core.doctor.registry import all_verdicts

        tree = self.query_one(CheckTree)
        self.verdicts = all_verdicts()
        tree.plan([(v.id, v.title, v.category, category_title(v.category)) for v in self.verdicts])
        tree.focus()
        tree.select_check(self.verdicts[0].id)
        # start the probes once the tree is on screen: a dozen tools starting at once would delay it
        self.call_after_refresh(self.action_rerun_all)

    # ---- running -------------------------------------------------------------------------------
    def action_rerun_all(self) -> None:
        if self.running_all:
            self.app.notify(_("the doctor is already running"), timeout=3)
            return
        self.running_all = True
        tree = self.query_one(CheckTree)
        for check_id in tree.check_ids():
            tree.set_state(check_id, "pending")
        self.checks = {}
        self.probes_done = set()
        self.summary = _("probing this machine...")
        self.run_background(self._run_doctor, self.ws, None, None, group="doctor",
                            description=_("Running the doctor"), progress=self._doctor_event,
                            done=lambda _r: self._finished(whole=True), failed=lambda _e: self._stopped("doctor"))

    @staticmethod
    def _run_doctor(job: Job, ws, check_ids: list[str] | None, evidence) -> None:
        """Every check (check_ids None) or a re-check of some against `evidence`; each event goes back."""
        from core.doctor.registry import get_verdict
        from core.doctor.replay import run_doctor

        verdicts = [get_verdict(i) for i in check_ids] if check_ids is not None else None
        # stoppable: quitting the app must not wait for vLLM's import to finish
        for event in run_doctor(ws, verdicts, evidence=evidence, should_stop=lambda: job.cancelled):
            job.report(event)

    def action_rerun_check(self) -> None:
        if self.running_all or self.evidence is None:
            self.app.notify(_("wait for the doctor to finish, then re-run"), timeout=3)
            return
        tree = self.query_one(CheckTree)
        node = tree.cursor_node
        if node is None or node.data is None:
            return
        if node.data.startswith(CATEGORY_PREFIX):
            ids = tree.check_ids(node.data[len(CATEGORY_PREFIX):])
        else:
            ids = [node.data]
        if self.running_some:
            self.app.notify(_("a re-check is already running"), timeout=3)
            return
        for check_id in ids:
            tree.set_state(check_id, "running")
        self.running_some = frozenset(ids)
        self.run_background(self._run_doctor, self.ws, ids, self.evidence, group="doctor-recheck",
                            description=_("Re-running checks"), progress=self._doctor_event,
                            done=lambda _r: self._finished(whole=False),
                            failed=lambda _e: self._stopped("doctor-recheck"))

    def on_worker_state_changed(self, event: Worker.StateChanged) -> None:
        super().on_worker_state_changed(event)  # shows the error
        if event.state in (WorkerState.ERROR, WorkerState.CANCELLED):
            self._stopped(event.worker.group)

    def _stopped(self, group: str) -> None:
        """A run that ended before its end (a devtune error in the error box, a crash, or cancelled)."""
        tree = self.query_one(CheckTree)
        if group == "doctor":
            self.running_all = False
            self.summary = _("the doctor stopped before the end; F5 runs it again")
        elif group == "doctor-recheck":
            for check_id in self.running_some:
                check = self.checks.get(check_id)
                tree.set_state(check_id, check.status if check else "pending")
            self.running_some = frozenset()

    # ---- results -------------------------------------------------------------------------------
    def _doctor_event(self, event) -> None:
        from core.doctor.runner import CheckJudged, DoctorFinished, ProbeFinished

        if isinstance(event, ProbeFinished):
            if not self.running_all:
                return
            self.probes_done.add(event.name)
            waiting = ", ".join(event.remaining)
            self.summary = (_("probes finished: {done}; still running: {waiting}", done=len(self.probes_done),
                              waiting=waiting) if waiting else _("all probes finished"))
        elif isinstance(event, CheckJudged):
            check = event.check
            self.query_one(CheckTree).set_state(check.id, check.status, check.title)
            self.checks = {**self.checks, check.id: check}
        elif isinstance(event, DoctorFinished):
            self.evidence = event.evidence

    def _finished(self, whole: bool) -> None:
        from core.doctor.report import counts_line
        from core.doctor.runner import build_report

        if whole:
            self.running_all = False
        else:
            self.running_some = frozenset()
        if self.evidence is None:  # stopped before the end
            return
        order = [v.id for v in self.verdicts]
        self.report = report = build_report(self.evidence, [self.checks[i] for i in order if i in self.checks])
        self.summary = f"{report.machine_summary} — {counts_line(report)}"
        self.set_status("attention" if report.failed else "done",
                        said("{machine}: {counts}", machine=report.machine_summary, counts=counts_line(report)))
        if whole:
            self.query_one(CheckTree).collapse_not_applicable()
            first = next((c for c in report.checks if c.status == "fail"), None) or \
                next((c for c in report.checks if c.status == "warn"), None)
            if first is not None:
                self.query_one(CheckTree).select_check(first.id)
                self.selected = first.id  # now, not when the tree's highlight message arrives

    @on(Tree.NodeHighlighted, "#doctor-tree")
    def _highlighted(self, event: Tree.NodeHighlighted) -> None:
        self.selected = event.node.data

    def watch_selected(self, _selected: str | None) -> None:
        self._show_selected()

    def watch_checks(self, _checks: dict) -> None:
        self._show_selected()

    def watch_running_all(self, _running: bool) -> None:
        self._show_selected()

    def watch_running_some(self, _ids: frozenset[str]) -> None:
        self._show_selected()

    def watch_report(self, _report) -> None:
        self._show_selected()

    def watch_summary(self, text: str) -> None:
        self.query_one("#doctor-summary", Static).update(text)

    def selected_check_id(self) -> str | None:
        node = self.query_one(CheckTree).cursor_node
        if node is None or node.data is None or node.data.startswith(CATEGORY_PREFIX):
            return None
        return node.data

    def _show_selected(self) -> None:
        """The details pane, for the selected node as the checks stand now."""
        details = self.query_one(CheckDetails)
        tree = self.query_one(CheckTree)
        check_id = self.selected_check_id()
        if check_id is None:
            node = tree.cursor_node
            if node is not None and node.data:
                category = node.data[len(CATEGORY_PREFIX):]
                judged = [self.checks[i] for i in tree.check_ids(category) if i in self.checks]
                details.show_category(category, judged, len(tree.check_ids(category)))
            return
        verdict = next((v for v in self.verdicts if v.id == check_id), None)
        if check_id in self.checks and tree.state(check_id) not in ("running", "pending"):
            details.show_check(self.checks[check_id])
        else:
            details.show_check(None, title=verdict.title if verdict else check_id,
                               category=verdict.category if verdict else "",
                               running=tree.state(check_id) == "running")

    # ---- copy and save -------------------------------------------------------------------------
    def action_copy_fix(self) -> None:
        check = self.checks.get(self.selected_check_id() or "")
        if check is None or not check.fix:
            self.app.notify(_("this check has no fix to copy"), timeout=3)
            return
        self.app.copy_to_clipboard(check.fix)
        self.app.notify(_("fix copied to the clipboard"), timeout=3)

    def action_save_report(self) -> None:
        if self.report is None:
            self.app.notify(_("wait for the doctor to finish, then save"), timeout=3)
            return
        self.run_background(self._save, self.ws, self.report, self.evidence, group="doctor-save",
                            description=_("Saving the report"), done=self._saved)

    @staticmethod
    def _save(job: Job, ws, report, evidence):
        from core.doctor.report import save_report

        return save_report(ws.root, report, evidence)

    def _saved(self, path) -> None:
        self.saved_path = path
        self.app.notify(_("report saved: {path}", path=self.ws.rel(path)), timeout=6)
        self.summary = _("report saved: {path}", path=self.ws.rel(path))
