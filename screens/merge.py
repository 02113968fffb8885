"""Step 5, Merge: pick a training run, merge its adapter into a full model with
`llamafactory-cli export` (detached: it goes on if devtune quits, and the step re-attaches), follow
its stages and log, then check the merged folder — files, chat template against training's,
and on small models the merged logits against base + adapter — and, when a GGUF type is chosen, convert it
for llama.cpp and Ollama and check the GGUF's template, tokens and answers (core.merge.gguf_check)."""

from __future__ import annotations

from dataclasses import dataclass

from textual import on
from textual.app import ComposeResult
from textual.containers import Horizontal
from textual.reactive import var
from textual.widgets import Button, Checkbox, Input, Label, Log, ProgressBar, Select, Static

from core.i18n import _
from screens.base import Job, StepScreen, UserError, step_binding
from tui.widgets.export_report_view import ExportReportView
from tui.widgets.titled import TitledSelect, titled

POLL_SECONDS = 0.5
GGUF_TYPES = ("q8_0", "f16", "bf16", "q5_k_m", "q4_k_m")  # core.merge.gguf.QUANTS, q8_0 (the default) first


class MergeScreen(StepScreen):
    STEP_ID = "merge"
    BINDINGS = [
        step_binding("merge", "run", "merge", _("Merge the adapter"),
                     tooltip=_("llamafactory-cli export of the chosen run, then the check")),
        step_binding("merge", "check", "check", _("Check the merged folder again")),
        step_binding("merge", "refresh", "reload", _("Reload the runs")),
    ]
    CSS_PATH = "../tui/styles/merge.tcss"

    @dataclass
    class Runs:  # what the step opens on
        runs: list  # the training runs
        chosen: str | None  # the run to merge: the active one, else the newest
        attach: tuple | None  # (run id, plan) of an export still running, to follow
        report: object  # the last export's check, when none is running

    @dataclass
    class Checked:  # the merged folder's check, and the GGUF's when one was asked for
        report: object  # core.merge.export_check.ExportReport
        gguf: object = None  # core.merge.gguf_check.GgufReport

    @dataclass
    class Polled:  # the export followed: its progress and the log lines since the last look
        progress: object  # core.merge.export_progress's ExportProgress
        lines: list[str]

    # what the screen shows follows these
    runs: var[list] = var(list)  # core.train.runs.RunRecord of the training runs, newest first
    plan_text: var[str] = var("")
    report = var(None)  # core.merge.export_check.ExportReport of the last check

    @property
    def INTRO(self) -> str:  # noqa: N802 - StepScreen's attribute, translated when shown
        return _("Merge the run's adapter into its base model (llamafactory-cli export), then check the folder: "
                 "weights, tokenizer, and that its chat template is the one training used. F5 merges, F6 checks.")

    def compose_body(self) -> ComposeResult:
        with Horizontal(id="merge-form"):  # the run on a row of its own: a run id and its state, unwrapped
            yield titled(TitledSelect([], prompt=_("none yet"), id="merge-run", allow_blank=True), _("training run"))
            yield titled(Input(placeholder=_("default: run id"), id="merge-name"), _("export name"))
        with Horizontal(id="merge-options"):
            yield titled(Input("5", placeholder="GB", id="merge-size", type="integer"), _("shard GB"))
            yield Select([(_("device: cpu"), "cpu"), (_("device: auto"), "auto")], value="cpu", allow_blank=False,
                         id="merge-device")
            yield Select([(_("GGUF: none"), "")] + [(f"GGUF: {q}", q) for q in GGUF_TYPES], value="",
                         allow_blank=False, id="merge-gguf")
            yield Checkbox(_("replace"), id="merge-force")
            yield Button(_("Merge"), id="merge-go", variant="primary")
            yield Button(_("Check"), id="merge-check")
        yield Static("", id="merge-plan")
        with Horizontal(id="merge-progress-row"):
            yield ProgressBar(total=1.0, show_eta=False, id="merge-progress")
            yield Label("", id="merge-stage")
        yield ExportReportView(id="merge-report")
        yield Static("", id="merge-gguf-report")
        yield Log(max_lines=400, id="merge-log", auto_scroll=True)

    def on_mount(self) -> None:
        self.query_one(ExportReportView).border_title = _("check")
        self.query_one("#merge-gguf-report", Static).display = False
        self.query_one("#merge-log", Log).border_title = _("export log")
        self.load_runs()

    # ------------------------------------------------------------ runs and plan

    def action_reload(self) -> None:
        self.load_runs()

    def load_runs(self) -> None:
        self.run_background(self._read_runs, self.ws, self.state.active_run, self.state.export_dir,
                            group="merge-runs", description=_("Reading the runs"), done=self._runs_read)

    @staticmethod
    def _read_runs(job: Job, ws, active_run: str | None, export_dir: str | None):
        from core.merge.export import active_export, plan_of_export_run, train_runs
        from core.merge.export_check import load_report

        runs = train_runs(ws)
        chosen = active_run if any(r.id == active_run for r in runs) else (runs[0].id if runs else None)
        running = active_export(ws)
        attach = (running.id, plan_of_export_run(ws, running)) if running is not None else None
        report = load_report(ws, export_dir) if attach is None and export_dir else None
        return MergeScreen.Runs(runs, chosen, attach, report)

    def _runs_read(self, result: Runs) -> None:
        runs, chosen, attach, report = result.runs, result.chosen, result.attach, result.report
        self.runs = runs
        if chosen:
            self.query_one("#merge-run", Select).value = chosen
        if not runs:
            self.plan_text = _("No training run yet: train one in step 4 first.")
        if attach is not None:
            self.query_one(ExportReportView).show_message(_("an export is running: following it"))
            self._follow(*attach)
        elif report is not None:
            self._checked(report)

    def watch_runs(self, runs: list) -> None:
        from core.train.runs import status_label

        self.query_one("#merge-run", Select).set_options([(f"{r.id} · {status_label(r.status)}", r.id) for r in runs])

    def watch_plan_text(self, text: str) -> None:
        self.query_one("#merge-plan", Static).update(text)

    @on(Select.Changed, "#merge-run")
    @on(Input.Changed, "#merge-name")
    def _replan(self) -> None:
        run = self.query_one("#merge-run", Select).value
        if isinstance(run, str):
            self.run_background(self._plan, self.ws, run, self.query_one("#merge-name", Input).value.strip() or None,
                                group="merge-plan", description=_("Planning the merge"),
                                done=lambda text: setattr(self, "plan_text", text))

    @staticmethod
    def _plan(job: Job, ws, run_id: str, name: str | None) -> str:
        from core.merge.export import ExportError, merge_yaml_preview, plan_export
        from core.train.runs import RunError

        try:
            plan = plan_export(ws, run_id, name=name)
        except (ExportError, RunError) as exc:
            return str(exc)
        lines = [_("base {base} + adapter {adapter} → {out}  (template {template}, {kind})", base=plan.base_model,
                   adapter=plan.adapter or "-", out=plan.export_dir, template=plan.template or "-",
                   kind=plan.finetuning_type)]
        lines += ["! " + w for w in plan.warnings]
        lines.append("configs/merge.yaml:  " + "  ".join(merge_yaml_preview(plan).strip().splitlines()))
        return "\n".join(lines)

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
        self.run_background(self._start, self.ws, run, self.query_one("#merge-name", Input).value.strip() or None,
                            size, str(self.query_one("#merge-device", Select).value),
                            self.query_one("#merge-force", Checkbox).value, group="merge", description=_("Merging"),
                            done=lambda started: self._follow(*started), failed=self._failed)

    @staticmethod
    def _start(job: Job, ws, run_id: str, name: str | None, size: int, device: str, force: bool):
        from core.merge.export import plan_export, start_export

        plan = plan_export(ws, run_id, name=name, export_size=size, export_device=device)
        record = start_export(ws, plan, force=force)
        return record.id, plan

    def _follow(self, run_id: str, plan) -> None:
        """Follow the detached export at a human rate; once it ends, check the merged folder."""
        from core.serve.log_follow import LogFollower
        from core.train.runs import run_dir

        directory = run_dir(self.ws, run_id)
        follower = LogFollower([directory / "stdout.log", directory / "stderr.log"])
        ws = self.ws

        def fetch(job: Job):
            from core.merge.export_progress import export_progress

            return MergeScreen.Polled(export_progress(ws, run_id), follower.new_lines())

        def ended(value) -> bool:
            from core.train.runs import RunStatus

            return value.progress.status not in (RunStatus.STARTING.value, RunStatus.RUNNING.value)

        self.poll(fetch, every=POLL_SECONDS, group="merge", description=_("Following the export"),
                  each=self._progressed, until=ended, then=lambda last: self._export_ended(run_id, plan, last.progress))

    def _export_ended(self, run_id: str, plan, progress) -> None:
        quant = self.query_one("#merge-gguf", Select).value
        self.run_background(self._check_export, self.ws, run_id, plan, progress,
                            quant if isinstance(quant, str) and quant else None, group="merge",
                            description=_("Checking the merged folder"), progress=self._checking,
                            done=self._checked, failed=self._failed)

    @staticmethod
    def _check_export(job: Job, ws, run_id: str, plan, progress, quant: str | None = None):
        from core.merge.export_check import check_export
        from core.train.runs import RunStatus, refresh, run_dir

        record = refresh(run_dir(ws, run_id))
        if record.status is not RunStatus.FINISHED:
            from core.merge.export_progress import export_progress

            ended = export_progress(ws, run_id)  # read once more: a failed export's cause and fix
            raise UserError(_("the export failed: {error}", error=ended.failure_text() or record.note))
        report = check_export(ws, plan.export_dir, template=plan.template, base_model=plan.base_model,
                              adapter=plan.adapter, run_id=plan.run_id or None, progress=job.report)
        if quant is None or report.verdict == "error":
            return MergeScreen.Checked(report)
        from core.merge.gguf_check import make_gguf

        gguf = make_gguf(ws, plan.export_dir, quant, template=plan.template, run_id=plan.run_id or None,
                         progress=lambda p: job.report(f"GGUF {p.stage} {p.fraction:.0%}: {p.detail}"),
                         message=job.report)
        return MergeScreen.Checked(report, gguf)

    @on(Button.Pressed, "#merge-check")
    def action_check(self) -> None:
        self.clear_error()
        self.query_one(ExportReportView).show_message(_("checking…"))
        # the export is checked against the run it came from (core decides from the export's record), not
        # against the run picked for the next merge
        self.run_background(self._check_again, self.ws, None, group="merge",
                            description=_("Checking the merged folder"), progress=self._checking,
                            done=self._checked, failed=self._failed)

    @staticmethod
    def _check_again(job: Job, ws, run_id: str | None):
        from core.merge.export_check import check_for_run
        from core.serve.plan import default_model

        return check_for_run(ws, default_model(ws), run_id, progress=job.report)

    # ------------------------------------------------------------ showing

    def _progressed(self, value: Polled) -> None:
        from core.merge.export_progress import stage_label

        progress, lines = value.progress, value.lines
        self.query_one("#merge-progress", ProgressBar).update(progress=progress.fraction)
        self.query_one("#merge-stage", Label).update(f"{stage_label(progress.stage)}: {progress.detail[:100]}")
        if lines:
            self.query_one("#merge-log", Log).write_lines([line[-300:] for line in lines])

    def _checking(self, message: str) -> None:
        from core.merge.export_progress import stage_label

        self.query_one("#merge-progress", ProgressBar).update(progress=1.0)
        self.query_one("#merge-stage", Label).update(f"{stage_label('check')}: {message[:100]}")

    def _checked(self, checked) -> None:
        report = checked.report if isinstance(checked, MergeScreen.Checked) else checked
        self.report = report
        self.app.apply_change(report.state_change())
        self._show_gguf(checked.gguf if isinstance(checked, MergeScreen.Checked) else None)

    def _show_gguf(self, gguf) -> None:
        from textual.content import Content

        from core.merge.export_check import verdict_label
        from tui.widgets import status_marks

        view = self.query_one("#merge-gguf-report", Static)
        view.display = gguf is not None
        if gguf is None:
            return
        lines = [Content.styled(_("GGUF: {path} ({mb:.1f} MB): {verdict}", path=gguf.path, mb=gguf.size_bytes / 1e6,
                                  verdict=verdict_label(gguf.verdict)), "bold")]
        for f in gguf.findings:
            level = f.level if f.level in ("ok", "error") else "warning"
            lines.append(Content.styled(status_marks.mark(level) + " ", status_marks.style(level, bold=True))
                         + Content.styled(f"{f.what}: ", "bold") + Content(f.detail))
            if f.fix:
                lines.append(Content.styled(f"  → {f.fix}", "$text-muted italic"))
        if gguf.modelfile:
            lines.append(Content(_("Modelfile: {path} (ollama create NAME -f {path})", path=gguf.modelfile)))
        view.update(Content("\n").join(lines))

    def watch_report(self, report) -> None:
        from core.merge.export_check import verdict_label

        if report is None:
            return
        self.query_one(ExportReportView).show_report(report)
        self.query_one("#merge-progress", ProgressBar).update(progress=1.0)
        self.query_one("#merge-stage", Label).update(_("checked {dir}: {verdict}", dir=report.export_dir,
                                                       verdict=verdict_label(report.verdict)))

    def _failed(self, error: UserError) -> None:
        self.query_one(ExportReportView).show_message(str(error))
