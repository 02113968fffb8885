"""Step 5, Merge: pick a training run, merge its adapter into a full model with
`llamafactory-cli export` (detached: it goes on if devtune quits, and the step re-attaches), follow
its stages and log, then check the merged folder — files, chat template against training's,
and on small models the merged logits against base + adapter."""

from __future__ import annotations

import time
from dataclasses import dataclass

from textual import on, work
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Horizontal
from textual.message import Message
from textual.widgets import Button, Checkbox, Input, Label, Log, ProgressBar, Select, Static
from textual.worker import get_current_worker

from core.i18n import _
from screens.base import StepScreen
from tui.widgets.export_report_view import ExportReportView

POLL_SECONDS = 0.5


class MergeScreen(StepScreen):
    STEP_ID = "merge"
    BINDINGS = [
        Binding("f5", "merge", _("Merge the adapter"), id="merge.start"),
        Binding("f6", "check", _("Check the merged folder again"), id="merge.check"),
        Binding("ctrl+r", "reload", _("Reload the runs"), id="merge.reload"),
    ]
    DEFAULT_CSS = """
    MergeScreen #merge-form { height: auto; }
    MergeScreen #merge-form > * { margin-right: 1; }
    MergeScreen #merge-run { width: 3fr; }
    MergeScreen #merge-name { width: 1fr; }
    MergeScreen #merge-size { width: 10; }
    MergeScreen #merge-device { width: 14; }
    MergeScreen #merge-plan { height: auto; max-height: 12; padding: 0 1; color: $text-muted; }
    MergeScreen #merge-progress-row { height: 1; margin: 1 0 0 0; }
    MergeScreen #merge-stage { width: 1fr; padding: 0 1; }
    MergeScreen #merge-log { height: 1fr; min-height: 5; border: round $panel-lighten-2; }
    """

    @dataclass
    class Runs(Message):
        runs: list  # RunRecord, newest first
        chosen: str | None
        running: tuple | None = None  # (export run id, its ExportPlan) when an export is under way

    @dataclass
    class Planned(Message):
        text: str

    @dataclass
    class Progressed(Message):
        stage: str
        fraction: float
        detail: str
        lines: list[str]

    @dataclass
    class Checked(Message):
        report: object  # core.merge.export_check.ExportReport

    @dataclass
    class Failed(Message):
        error: str

    @property
    def INTRO(self) -> str:  # noqa: N802 - StepScreen's attribute, translated when shown
        return _("Merge the run's adapter into its base model (llamafactory-cli export), then check the folder: "
                 "weights, tokenizer, and that its chat template is the one training used. F5 merges, F6 checks.")

    def compose_body(self) -> ComposeResult:
        with Horizontal(id="merge-form"):
            yield Select([], prompt=_("training run"), id="merge-run", allow_blank=True)
            yield Input(placeholder=_("export name (default: the run id)"), id="merge-name")
            yield Input("5", placeholder="GB", id="merge-size", type="integer")
            yield Select([("cpu", "cpu"), ("auto", "auto")], value="cpu", allow_blank=False, id="merge-device")
            yield Checkbox(_("replace"), id="merge-force")
            yield Button(_("Merge"), id="merge-go", variant="primary")
            yield Button(_("Check"), id="merge-check")
        yield Static("", id="merge-plan")
        with Horizontal(id="merge-progress-row"):
            yield ProgressBar(total=1.0, show_eta=False, id="merge-progress")
            yield Label("", id="merge-stage")
        yield ExportReportView(id="merge-report")
        yield Log(max_lines=400, id="merge-log", auto_scroll=True)

    def on_mount(self) -> None:
        self.query_one(ExportReportView).border_title = _("check")
        self.query_one("#merge-log", Log).border_title = _("export log")
        self.load_runs()

    # ------------------------------------------------------------ runs and plan

    def action_reload(self) -> None:
        self.load_runs()

    @work(thread=True, exclusive=True, exit_on_error=False, group="merge-runs", description=_("Reading the runs"))
    def load_runs(self) -> None:
        from core.merge.export import active_export, plan_of_export_run, train_runs
        from core.merge.export_check import load_report

        runs = train_runs(self.ws)
        state = self.state
        chosen = state.active_run if any(r.id == state.active_run for r in runs) else (runs[0].id if runs else None)
        running = active_export(self.ws)
        attach = (running.id, plan_of_export_run(self.ws, running)) if running is not None else None
        self.post_message(self.Runs(runs, chosen, attach))
        if attach is None and state.export_dir:
            report = load_report(self.ws, state.export_dir)
            if report is not None:
                self.post_message(self.Checked(report))

    def on_merge_screen_runs(self, message: Runs) -> None:
        select = self.query_one("#merge-run", Select)
        from core.train.runs import status_label

        select.set_options([(f"{r.id} · {status_label(r.status)}", r.id) for r in message.runs])
        if message.chosen:
            select.value = message.chosen
        if not message.runs:
            self.query_one("#merge-plan", Static).update(_("No training run yet: train one in step 4 first."))
        if message.running is not None:
            self.query_one(ExportReportView).show_message(_("an export is running: following it"))
            self.follow(*message.running)

    @on(Select.Changed, "#merge-run")
    @on(Input.Changed, "#merge-name")
    def _replan(self) -> None:
        run = self.query_one("#merge-run", Select).value
        if isinstance(run, str):
            self.preview_plan(run, self.query_one("#merge-name", Input).value.strip() or None)

    @work(thread=True, exclusive=True, exit_on_error=False, group="merge-plan", description=_("Planning the merge"))
    def preview_plan(self, run_id: str, name: str | None) -> None:
        from core.merge.export import ExportError, merge_yaml_preview, plan_export
        from core.train.runs import RunError

        try:
            plan = plan_export(self.ws, run_id, name=name)
        except (ExportError, RunError) as exc:
            self.post_message(self.Planned(str(exc)))
            return
        lines = [_("base {base} + adapter {adapter} → {out}  (template {template}, {kind})", base=plan.base_model,
                   adapter=plan.adapter or "-", out=plan.export_dir, template=plan.template or "-",
                   kind=plan.finetuning_type)]
        lines += ["! " + w for w in plan.warnings]
        lines.append("configs/merge.yaml:  " + "  ".join(merge_yaml_preview(plan).strip().splitlines()))
        self.post_message(self.Planned("\n".join(lines)))

    def on_merge_screen_planned(self, message: Planned) -> None:
        self.query_one("#merge-plan", Static).update(message.text)

    # ------------------------------------------------------------ merging

    @on(Button.Pressed, "#merge-go")
    def action_merge(self) -> None:
        run = self.query_one("#merge-run", Select).value
        if not isinstance(run, str):
            self.show_error(_("choose a training run first"))
            return
        try:
            size = int(self.query_one("#merge-size", Input).value or 5)
        except ValueError:
            size = 5
        self.clear_error()
        self.query_one("#merge-log", Log).clear()
        self.query_one(ExportReportView).show_message(_("merging…"))
        self.start_merge(run, self.query_one("#merge-name", Input).value.strip() or None, size,
                         str(self.query_one("#merge-device", Select).value),
                         self.query_one("#merge-force", Checkbox).value)

    @work(thread=True, exclusive=True, exit_on_error=False, group="merge", description=_("Merging"))
    def start_merge(self, run_id: str, name: str | None, size: int, device: str, force: bool) -> None:
        from core.merge.export import ExportError, plan_export, start_export
        from core.train.runs import RunError

        try:
            plan = plan_export(self.ws, run_id, name=name, export_size=size, export_device=device)
            record = start_export(self.ws, plan, force=force)
        except (ExportError, RunError) as exc:
            self.post_message(self.Failed(str(exc)))
            return
        self._follow_loop(record.id, plan)

    @work(thread=True, exclusive=True, exit_on_error=False, group="merge", description=_("Following the export"))
    def follow(self, run_id: str, plan) -> None:
        self._follow_loop(run_id, plan)

    def _follow_loop(self, run_id: str, plan) -> None:
        from core.merge.export import export_progress
        from core.serve.log_follow import LogFollower
        from core.train.runs import RunStatus, refresh, run_dir

        worker = get_current_worker()
        directory = run_dir(self.ws, run_id)
        follower = LogFollower([directory / "stdout.log", directory / "stderr.log"])
        while not worker.is_cancelled:
            progress = export_progress(self.ws, run_id)
            self.post_message(self.Progressed(progress.stage, progress.fraction, progress.detail, follower.new_lines()))
            if progress.status not in (RunStatus.STARTING.value, RunStatus.RUNNING.value):
                break
            time.sleep(POLL_SECONDS)
        if worker.is_cancelled:
            return
        record = refresh(directory)
        if record.status is not RunStatus.FINISHED:
            self.post_message(self.Failed(_("the export failed: {error}", error=progress.error or record.note)))
            return
        self._check(plan)

    def _check(self, plan) -> None:
        from core.merge.export_check import check_export

        report = check_export(self.ws, plan.export_dir, template=plan.template, base_model=plan.base_model,
                              adapter=plan.adapter, run_id=plan.run_id or None,
                              progress=lambda m: self.post_message(self.Progressed("check", 1.0, m, [])))
        self.post_message(self.Checked(report))

    @on(Button.Pressed, "#merge-check")
    def action_check(self) -> None:
        self.clear_error()
        self.query_one(ExportReportView).show_message(_("checking…"))
        self.check_again()

    @work(thread=True, exclusive=True, exit_on_error=False, group="merge", description=_("Checking the merged folder"))
    def check_again(self) -> None:
        from core.merge.export import ExportError
        from core.merge.export_check import check_for_run
        from core.train.runs import RunError
        from core.serve.plan import ServePlanError, default_model

        try:
            target = default_model(self.ws)
            run = self.query_one("#merge-run", Select).value
            report = check_for_run(self.ws, target, run if isinstance(run, str) else None,
                                   progress=lambda m: self.post_message(self.Progressed("check", 1.0, m, [])))
        except (ExportError, RunError, ServePlanError) as exc:
            self.post_message(self.Failed(str(exc)))
            return
        self.post_message(self.Checked(report))

    # ------------------------------------------------------------ showing

    def on_merge_screen_progressed(self, message: Progressed) -> None:
        self.query_one("#merge-progress", ProgressBar).update(progress=message.fraction)
        from core.merge.export import stage_label

        self.query_one("#merge-stage", Label).update(f"{stage_label(message.stage)}: {message.detail[:100]}")
        if message.lines:
            self.query_one("#merge-log", Log).write_lines([line[-300:] for line in message.lines])

    def on_merge_screen_checked(self, message: Checked) -> None:
        from core.merge.export_check import verdict_label

        report = message.report
        self.query_one(ExportReportView).show_report(report)
        self.query_one("#merge-progress", ProgressBar).update(progress=1.0)
        self.query_one("#merge-stage", Label).update(_("checked {dir}: {verdict}", dir=report.export_dir,
                                                       verdict=verdict_label(report.verdict)))
        if report.verdict == "error":
            self.set_status("attention", _("{dir}: the check found a problem", dir=report.export_dir))
        else:
            self.set_status("done", _("merged into {dir}", dir=report.export_dir))
        self.app.remember(export_dir=report.export_dir)

    def on_merge_screen_failed(self, message: Failed) -> None:
        self.show_error(message.error)
        self.query_one(ExportReportView).show_message(message.error)
        self.set_status("attention", message.error.splitlines()[0][:120])
