"""Step 4, Train: start, watch, stop and resume detached runs.

The run itself lives outside devtune (core.train.runs + core.train.supervisor): this screen only reads its
files through core.train.watch, polled (StepScreen.poll) about once a second. Leaving the step or quitting
devtune leaves the run going; coming back re-attaches and shows the whole history.
"""

from __future__ import annotations

from dataclasses import dataclass

from textual import on
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Horizontal, Vertical
from textual.reactive import var
from textual.widgets import Button, Log, ProgressBar, Static

from core.i18n import _, _n, said
from screens.base import Job, StepScreen, step_binding
from tui.widgets.diagnosis_box import DiagnosisBox
from tui.widgets.gpu_panel import GpuPanel
from tui.widgets.loss_chart import LossChart
from tui.widgets.run_table import RunTable
from tui.widgets.step_guide import StepGuide
from tui.widgets.titled import titled
from tui.widgets.train_stage_chart import StageChart

POLL_SECONDS = 1.0
LOG_LINES = 400


class TrainScreen(StepScreen):
    STEP_ID = "train"
    INTRO = _("Runs `llamafactory-cli train` on the Config step's YAML as a detached run: it goes on when you "
              "leave this step, quit devtune or lose the SSH connection, and devtune re-attaches to it.")
    CSS_PATH = "../tui/styles/train.tcss"
    BINDINGS = [
        step_binding("train", "run", "start", _("Start run"), tooltip=_("start training with the current config")),
        step_binding("train", "stop", "stop", _("Stop run"),
                     tooltip=_("stop after the current step; the adapter is saved")),
        step_binding("train", "check", "diagnose", _("Diagnose"),
                     tooltip=_("explain what went wrong in the selected run, with the fix")),
        step_binding("train", "refresh", "refresh_runs", _("Reload the runs"), tooltip=_("list the runs again")),
        Binding("r", "resume", _("Resume run"), id="train.resume",
                tooltip=_("continue a stopped or failed run from its last checkpoint")),
        Binding("p", "toggle_gpus", _("Chart / GPUs"), id="train.toggle_gpus",
                tooltip=_("on a narrow terminal, show the GPU panels instead of the chart (and back)")),
    ]

    # what the screen shows follows these
    record = var(None)  # core.train.runs.RunRecord of the shown run, as last read
    runs: var[list] = var(list)  # the ids of the runs listed

    @dataclass
    class Polled:
        run_id: str
        update: object  # core.train.watch.RunUpdate
        series: dict  # name -> (xs, ys) references for the chart
        first: bool

    @dataclass
    class Diagnosed:
        found: list  # core.train.failures' diagnoses of the run's logs
        note: str  # the run's own note

    def __init__(self) -> None:
        super().__init__()
        self.run_id: str | None = None
        self.snapshot = None  # the latest core.train.snapshot.RunSnapshot of the shown run (what monitor prints)

    def compose_body(self) -> ComposeResult:
        with Horizontal(id="train-bar"):
            yield titled(RunTable(id="train-runs"), _("runs (Enter: show · space: mark · m: compare · s: sort)"))
            with Horizontal(id="train-buttons"):
                yield Button(_("Start"), variant="primary", id="train-start")
                yield Button(_("Stop"), variant="error", id="train-stop")
                yield Button(_("Resume"), id="train-resume")
        with Horizontal(id="train-progress-row"):
            yield ProgressBar(total=None, show_eta=False, show_percentage=True, id="train-bar-progress")
            yield Static("", id="train-progress")
        yield Static("", id="train-status")
        yield Static("", id="train-advice")
        yield DiagnosisBox(id="train-diagnosis")
        with Horizontal(id="train-main"):
            with Vertical(id="train-charts"):
                yield LossChart(id="train-chart")
                yield StageChart(id="train-stage-chart")  # dpo / kto: rewards, margin, accuracy over steps
            yield GpuPanel(compact=False, id="train-gpus")
        yield Log(max_lines=LOG_LINES, id="train-log")

    def on_mount(self) -> None:
        self.load_runs(select=self.state.active_run)

    def action_toggle_gpus(self) -> None:
        self.toggle_class("-show-gpus")

    def on_screen_resume(self) -> None:
        super().on_screen_resume()
        self.load_runs(select=self.run_id or self.state.active_run)

    # ------------------------------------------------------------ runs list
    def load_runs(self, select: str | None = None) -> None:
        self.run_background(self._list_runs, self.ws, group="train-runs", description=_("Listing runs"),
                            done=lambda runs: self._show_runs(runs, select))

    @staticmethod
    def _list_runs(job: Job, ws):
        from core.train.run_compare import runs_table

        return runs_table(ws)

    def _show_runs(self, table, select: str | None) -> None:
        """core.train.run_compare.RunsTable: the rows and the columns of what differs between them."""
        self.runs = [r.id for r in table.rows]
        wanted = select if select in self.runs else (self.runs[0] if self.runs else None)
        self.query_one(RunTable).show(table, current=wanted)
        if wanted and wanted != self.run_id:
            self.attach(wanted)
        elif not self.runs:
            self._show_no_run()

    def _show_no_run(self) -> None:
        from core.config.files import current_config_path

        path = current_config_path(self.ws)
        if self.ws.abs(path).exists():
            text = _("No run yet. Press F5 (Start) to train with {path}.", path=path)
        else:
            text = _("No training config yet: make one in step 3 (Config), then come back and press F5.")
        self.query_one("#train-status", Static).update(text)

    @on(RunTable.Picked)
    def _picked(self, event: RunTable.Picked) -> None:
        if event.run_id != self.run_id:
            self.attach(event.run_id)

    @on(RunTable.CompareAsked)
    def _compare(self, event: RunTable.CompareAsked) -> None:
        """Two or more runs side by side (screens/train_compare.py), from core's comparison of them."""
        from screens.train_compare import TrainCompareScreen

        self.run_background(self._comparison, self.ws, event.run_ids, group="train-compare",
                            description=_("Comparing runs"),
                            done=lambda comparison: self.app.push_screen(TrainCompareScreen(comparison)))

    @staticmethod
    def _comparison(job: Job, ws, run_ids: list):
        from core.train.run_compare import compare_runs

        return compare_runs(ws, run_ids)

    # ------------------------------------------------------------ watching
    def attach(self, run_id: str) -> None:
        self.run_id = run_id
        self.query_one(LossChart).empty_text = None
        self.query_one(LossChart).clear()
        self.query_one(StageChart).clear()
        self.query_one("#train-advice", Static).update("")
        self.query_one("#train-log", Log).clear()
        self.query_one(DiagnosisBox).hide()
        self.query_one("#train-progress", Static).update(_("reading the run's history…"))
        ws = self.ws
        watchers: list = []  # the run's core.train.watch.RunWatcher, made (it reads files) in the thread

        def fetch(job: Job) -> TrainScreen.Polled:
            from core.train.watch import RunWatcher

            first = not watchers
            if first:
                watchers.append(RunWatcher(ws, run_id))
            watcher = watchers[0]
            update = watcher.poll()
            m = watcher.metrics
            series = {"loss": (m.loss.xs, m.loss.ys), "smoothed": (m.loss_smooth.xs, m.loss_smooth.ys),
                      "eval_loss": (m.eval_loss.xs, m.eval_loss.ys), "lr": (m.lr.xs, m.lr.ys),
                      "resumes": list(m.resumes), "stage": {k: (v.xs, v.ys) for k, v in m.stage.items()}}
            if first:
                from core.train.gpu.history import read_run_history

                update.gpu_samples = read_run_history(watcher.dir, max_ticks=120)
            return TrainScreen.Polled(run_id, update, series, first)

        self.poll(fetch, every=lambda p: POLL_SECONDS if p.update.record.active else 5 * POLL_SECONDS,
                  group="train-watch", description=_("Watching the run"), each=self._polled)
        if self.state.active_run != run_id:
            self.app.remember(active_run=run_id)

    def _polled(self, event: Polled) -> None:
        if event.run_id != self.run_id:
            return
        u = event.update
        snap = u.snapshot
        self.record = snap.record
        self.snapshot = snap
        self._show_progress(snap)
        self._say_now(snap.record)
        chart = self.query_one(LossChart)
        if not u.record.active and chart.empty_text is None:
            chart.empty_text = _("no training step was logged in this run")
            if chart.data.empty:
                chart.clear()  # redraw the empty chart with that text
        if u.metrics_changed or event.first:
            s = event.series
            chart.set_data(loss=s["loss"], smoothed=s["smoothed"], eval_loss=s["eval_loss"], lr=s["lr"],
                           resumes=s["resumes"])
            if s["stage"]:
                self.query_one(StageChart).set_series(s["stage"], latest=dict(snap.stage_metrics))
        self._show_gpus(u, event.first)
        if u.log_lines:
            self.query_one("#train-log", Log).write_lines(u.log_lines[-LOG_LINES:])
        box = self.query_one(DiagnosisBox)
        if snap.diagnoses:
            if u.ended_now or event.first:  # made once, when the run is first seen ended
                box.show_diagnoses(list(snap.diagnoses), snap.note)
        elif snap.active:
            box.show_anomalies(list(snap.anomalies), stall=snap.stall)
        if u.ended_now or event.first:
            self._record_outcome(u)
            if u.ended_now:
                self.load_runs(select=u.record.id)

    def watch_record(self, record) -> None:
        """The buttons follow the shown run: Stop while it runs, Resume once it stopped."""
        active = bool(record and record.active)
        self.query_one("#train-stop", Button).disabled = not active
        self.query_one("#train-resume", Button).disabled = active or record is None
        self.query_one("#train-start", Button).disabled = active

    def _show_progress(self, snap) -> None:
        """The run's snapshot (core.train.snapshot.RunSnapshot), as `devtune monitor` prints it."""
        from core.train.runs import status_label

        bar = self.query_one("#train-bar-progress", ProgressBar)
        if snap.total:
            bar.update(total=snap.total, progress=snap.step)
        self.query_one("#train-progress", Static).update(snap.progress_line())
        advice = snap.advice_lines()  # what would raise the throughput (a live run's only)
        self.query_one("#train-advice", Static).update("\n".join(advice[:3]))
        self.query_one("#train-advice", Static).display = bool(advice)
        r = snap.record
        state = status_label(r.status)
        where = f"{r.output_dir or ''}  ·  {r.source_config or r.config or ''}"
        if r.launcher == "slurm" and r.job_id:
            where += "  ·  " + _n("Slurm job {job}, {n} node", "Slurm job {job}, {n} nodes", r.nodes, job=r.job_id)
        status = _("Run {id}: {state} — {note}", id=r.id, state=state, note=r.note) if r.note else \
            _("Run {id}: {state}", id=r.id, state=state)
        self.query_one("#train-status", Static).update(f"{status}\n{where}")

    def _show_gpus(self, u, first: bool) -> None:
        panel = self.query_one(GpuPanel)
        if panel.live != u.record.active:
            panel.live = u.record.active
            panel.redraw()
        from core.train.gpu.choose import status_reason

        status = u.snapshot.gpu_status or {}
        if first and u.gpu_samples:
            panel.load_history(u.gpu_samples, status_reason(status))
        elif u.gpu_samples:
            from core.train.gpu.history import group_ticks

            for tick in group_ticks(u.gpu_samples):
                panel.update_samples(tick, status_reason(status))
        elif status.get("state") == "no-gpu" and not panel.no_gpu:
            panel.set_no_gpu(status_reason(status))

    def _say_now(self, record) -> None:
        """The status line speaks of the shown run while it runs (a saved outcome is an older run's)."""
        guide = self.query_one(StepGuide)
        if record.active:
            guide.show_now("running", _("run {id} is running", id=record.id))
        elif guide.now is not None:
            guide.show_now(None)

    def _record_outcome(self, u) -> None:
        status = u.record.status.value
        if status == "finished":
            self.set_status("done", said("run {id} finished", id=u.record.id))
        elif status == "failed":
            note = u.record.note or said("exit code {code}", code=u.record.exit_code)
            self.set_status("attention", said("run {id} failed: {note}", id=u.record.id, note=note))

    # ------------------------------------------------------------ actions
    @on(Button.Pressed, "#train-start")
    def action_start(self) -> None:
        if self.record is not None and self.record.active:
            self.app.notify(_("a run is already going; stop it first"), severity="warning")
            return
        self._start_run(force=False)

    def _start_run(self, *, force: bool) -> None:
        self.run_background(self._start, self.ws, force, group="train-act", description=_("Starting the run"),
                            done=self._started, failed=self._start_refused)

    def _start_refused(self, exc) -> None:
        """Core refused a config whose check has errors: ask, naming them, before training it anyway."""
        from core.train.launch import ConfigHasErrors
        from tui.widgets.confirm import ConfirmScreen

        if isinstance(exc, ConfigHasErrors):
            self.app.push_screen(ConfirmScreen(exc.question, yes=_("Train anyway")),
                                 lambda yes: self._start_run(force=True) if yes else None)

    @staticmethod
    def _start(job: Job, ws, force: bool = False):
        from core.train.launch import launch_training

        return launch_training(ws, force=force)

    def _started(self, record) -> None:
        self.clear_error()
        self.app.notify(_("run {id} started", id=record.id))
        self.load_runs(select=record.id)

    @on(Button.Pressed, "#train-stop")
    def action_stop(self) -> None:
        if not (self.record and self.record.active):
            return
        from tui.widgets.confirm import ConfirmScreen

        run_id = self.record.id

        def answered(yes: bool | None) -> None:
            if yes:
                self.run_background(self._stop, self.ws, run_id, group="train-act",
                                    description=_("Stopping the run"), progress=self.app.notify,
                                    done=self.app.notify)

        self.app.push_screen(ConfirmScreen(_("Stop run {id}? It stops after the current step and saves the "
                                             "adapter; you can resume it from its last checkpoint.", id=run_id),
                                           yes=_("Stop")), answered)

    @staticmethod
    def _stop(job: Job, ws, run_id: str) -> str:
        from core.train.run_control import stop_run
        from core.train.runs import status_label

        final = stop_run(ws, run_id, progress=job.report)
        return _("run {id}: {status}", id=final.id, status=status_label(final.status))

    @on(Button.Pressed, "#train-resume")
    def action_resume(self) -> None:
        if self.record is None or self.record.active:
            return
        self.run_background(self._resume, self.ws, self.record.id, group="train-act",
                            description=_("Resuming the run"), done=self._resumed)

    @staticmethod
    def _resume(job: Job, ws, run_id: str):
        from core.train.run_control import resume_run

        return resume_run(ws, run_id)

    def _resumed(self, record) -> None:
        self.clear_error()
        self.load_runs(select=record.id)

    def action_diagnose(self) -> None:
        if self.run_id:
            self.run_background(self._diagnose, self.ws, self.run_id, group="train-diag",
                                description=_("Diagnosing"), done=self._diagnosed)

    @staticmethod
    def _diagnose(job: Job, ws, run_id: str) -> Diagnosed:
        from core.train.watch import RunWatcher

        watcher = RunWatcher(ws, run_id)
        found = watcher.diagnose()
        return TrainScreen.Diagnosed(found, watcher.record.note)

    def _diagnosed(self, result: Diagnosed) -> None:
        found, note = result.found, result.note
        if found:
            self.query_one(DiagnosisBox).show_diagnoses(found, note)
        else:
            self.app.notify(_("nothing wrong found in this run's logs"))

    def action_refresh_runs(self) -> None:
        self.load_runs(select=self.run_id)
