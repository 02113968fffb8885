"""Step 2, Doctor: every environment check grouped by category, filling in live as the probes
finish; the selected check's evidence and exact fix; copy the fix (OSC 52), re-run one check or
all of them, save the report as Markdown for a support ticket.

`DEVTUNE_DOCTOR_REPLAY=<folder>` shows a recorded machine (`devtune doctor --record`) instead of
probing this one.
"""

from __future__ import annotations

import os
from dataclasses import dataclass

from textual import on, work
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Horizontal, Vertical
from textual.message import Message
from textual.widgets import Static, Tree
from textual.worker import Worker, WorkerState, get_current_worker

from core.i18n import _
from screens.base import StepScreen
from tui.widgets.check_details import CheckDetails
from tui.widgets.check_tree import CATEGORY_PREFIX, CheckTree

REPLAY_ENV = "DEVTUNE_DOCTOR_REPLAY"


class DoctorScreen(StepScreen):
    STEP_ID = "doctor"
    DEFAULT_CSS = """
    DoctorScreen #doctor-main {
        height: 1fr;
    }
    DoctorScreen #doctor-left {
        width: 1fr;
        min-width: 40;
    }
    DoctorScreen #doctor-summary {
        height: auto;
        padding: 0 1;
        color: $text-muted;
    }
    DoctorScreen CheckDetails {
        width: 1fr;
    }
    """
    BINDINGS = [
        Binding("r", "rerun_check", _("Re-run check"), id="doctor.rerun_check",
                tooltip=_("re-run the selected check (or the selected category) after fixing it")),
        Binding("f5", "rerun_all", _("Re-run all"), key_display="F5", id="doctor.rerun_all",
                tooltip=_("run every probe and check again")),
        Binding("c", "copy_fix", _("Copy fix"), id="doctor.copy_fix",
                tooltip=_("copy the selected check's fix command to the clipboard (OSC 52)")),
        Binding("ctrl+s", "save_report", _("Save report"), id="doctor.save_report",
                tooltip=_("write doctor-report-<time>.md in the workspace, to attach to a support ticket")),
    ]

    @dataclass
    class ProbeProgress(Message):
        name: str
        state: str
        remaining: tuple[str, ...]

    @dataclass
    class CheckReady(Message):
        check: object  # core.doctor.model.DoctorCheck

    @dataclass
    class RunFinished(Message):
        report: object  # core.doctor.model.DoctorReport
        evidence: object  # core.doctor.evidence.Evidence
        whole: bool

    @property
    def INTRO(self) -> str:  # noqa: N802 - StepScreen's attribute, translated when shown
        return _("Every check of this machine for fine-tuning: what was found and the exact command that fixes "
                 "it. Fix what fails, then press r on the check (or F5 for all). ctrl+s saves the report.")

    def __init__(self) -> None:
        super().__init__()
        self.verdicts: list = []  # core.doctor.registry.Verdict, in report order
        self.checks: dict = {}  # check id -> DoctorCheck
        self.report = None
        self.evidence = None
        self.running_all = False
        self.running_some: set[str] = set()
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
    def _doctor_context(self):
        from core.doctor.probes import DoctorContext

        return DoctorContext.for_this_machine(self.ws)

    def action_rerun_all(self) -> None:
        if self.running_all:
            self.app.notify(_("the doctor is already running"), timeout=3)
            return
        self.running_all = True
        tree = self.query_one(CheckTree)
        for check_id in tree.check_ids():
            tree.set_state(check_id, "pending")
        self.checks.clear()
        self.probes_done = set()
        self._show_selected()
        self._summary(_("probing this machine..."))
        self.run_all(os.environ.get(REPLAY_ENV) or None)

    @work(thread=True, exclusive=True, exit_on_error=False, group="doctor", description=_("Running the doctor"))
    def run_all(self, replay_folder: str | None) -> None:
        from core.doctor.evidence import Evidence
        from core.doctor.runner import CheckJudged, DoctorFinished, ProbeFinished, iter_doctor

        worker = get_current_worker()
        if replay_folder:
            events = iter_doctor(None, evidence=Evidence.load(replay_folder), replay=True)
        else:  # stoppable: quitting the app must not wait for vLLM's import to finish
            events = iter_doctor(self._doctor_context(), should_stop=lambda: worker.is_cancelled)
        for event in events:
            if isinstance(event, ProbeFinished):
                self.post_message(self.ProbeProgress(event.name, event.state, event.remaining))
            elif isinstance(event, CheckJudged):
                self.post_message(self.CheckReady(event.check))
            elif isinstance(event, DoctorFinished):
                if not replay_folder:
                    from core.doctor.found_gpus import save_found_gpus

                    save_found_gpus(self.ws.root, event.evidence)  # for the Config step's memory fit
                self.post_message(self.RunFinished(event.report, event.evidence, True))

    def action_rerun_check(self) -> None:
        if self.running_all or self.evidence is None:
            self.app.notify(_("wait for the doctor to finish, then re-run"), timeout=3)
            return
        node = self.query_one(CheckTree).cursor_node
        if node is None or node.data is None:
            return
        tree = self.query_one(CheckTree)
        if node.data.startswith(CATEGORY_PREFIX):
            ids = tree.check_ids(node.data[len(CATEGORY_PREFIX):])
        else:
            ids = [node.data]
        if self.running_some:
            self.app.notify(_("a re-check is already running"), timeout=3)
            return
        self.running_some = set(ids)
        for check_id in ids:
            tree.set_state(check_id, "running")
        self._show_selected()
        self.rerun(ids)

    @work(thread=True, exclusive=True, exit_on_error=False, group="doctor-recheck", description=_("Re-running checks"))
    def rerun(self, check_ids: list[str]) -> None:
        from core.doctor.registry import get_verdict
        from core.doctor.runner import CheckJudged, DoctorFinished, iter_doctor

        worker = get_current_worker()
        verdicts = [get_verdict(i) for i in check_ids]
        replayed = bool(os.environ.get(REPLAY_ENV))
        for event in iter_doctor(None if replayed else self._doctor_context(), verdicts, evidence=self.evidence,
                                 replay=replayed, should_stop=lambda: worker.is_cancelled):
            if isinstance(event, CheckJudged):
                self.post_message(self.CheckReady(event.check))
            elif isinstance(event, DoctorFinished):
                self.post_message(self.RunFinished(event.report, event.evidence, False))

    def on_worker_state_changed(self, event: Worker.StateChanged) -> None:
        super().on_worker_state_changed(event)  # shows the error
        if event.state not in (WorkerState.ERROR, WorkerState.CANCELLED):
            return
        tree = self.query_one(CheckTree)
        if event.worker.group == "doctor":
            self.running_all = False
            self._summary(_("the doctor stopped before the end; F5 runs it again"))
        elif event.worker.group == "doctor-recheck":
            for check_id in self.running_some:
                check = self.checks.get(check_id)
                tree.set_state(check_id, check.status if check else "pending")
            self.running_some = set()
        self._show_selected()

    # ---- results -------------------------------------------------------------------------------
    def on_doctor_screen_probe_progress(self, message: ProbeProgress) -> None:
        if not self.running_all:
            return
        self.probes_done.add(message.name)
        done = len(self.probes_done)
        waiting = ", ".join(message.remaining)
        self._summary(_("probes finished: {done}; still running: {waiting}", done=done, waiting=waiting)
                      if waiting else _("all probes finished"))

    def on_doctor_screen_check_ready(self, message: CheckReady) -> None:
        check = message.check
        self.checks[check.id] = check
        self.query_one(CheckTree).set_state(check.id, check.status, check.title)
        self._show_selected()

    def on_doctor_screen_run_finished(self, message: RunFinished) -> None:
        from core.doctor.report import counts_line
        from core.doctor.runner import build_report

        self.evidence = message.evidence
        if message.whole:
            self.running_all = False
        else:
            self.running_some = set()
        order = [v.id for v in self.verdicts]
        self.report = build_report(self.evidence, [self.checks[i] for i in order if i in self.checks])
        report = self.report
        self._summary(f"{report.machine_summary} — {counts_line(report)}")
        self.set_status("attention" if report.failed else "done",
                        f"{report.machine_summary}: {counts_line(report)}")
        if message.whole:
            self.query_one(CheckTree).collapse_not_applicable()
            first = next((c for c in report.checks if c.status == "fail"), None) or \
                next((c for c in report.checks if c.status == "warn"), None)
            if first is not None:
                self.query_one(CheckTree).select_check(first.id)
        self._show_selected()

    @on(Tree.NodeHighlighted, "#doctor-tree")
    def _highlighted(self, event: Tree.NodeHighlighted) -> None:
        self._show_selected()

    def selected_check_id(self) -> str | None:
        node = self.query_one(CheckTree).cursor_node
        if node is None or node.data is None or node.data.startswith(CATEGORY_PREFIX):
            return None
        return node.data

    def _show_selected(self) -> None:
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

    def _summary(self, text: str) -> None:
        self.query_one("#doctor-summary", Static).update(text)

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
        self.save(self.report, self.evidence)

    @work(thread=True, exclusive=True, exit_on_error=False, group="doctor-save", description=_("Saving the report"))
    def save(self, report, evidence) -> None:
        from core.doctor.report import save_report

        path = save_report(self.ws.root, report, evidence)
        self.app.call_from_thread(self._saved, path)

    def _saved(self, path) -> None:
        self.saved_path = path
        self.app.notify(_("report saved: {path}", path=self.ws.rel(path)), timeout=6)
        self._summary(_("report saved: {path}", path=self.ws.rel(path)))
