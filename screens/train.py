"""Step 4, Train: start, watch, stop and resume detached runs.

The run itself lives outside devtune (core.train.runs + core.train.supervisor): this screen only reads its
files through core.train.watch, in a worker thread, about once a second. Leaving the step or quitting
devtune leaves the run going; coming back re-attaches and shows the whole history.
"""

from __future__ import annotations

from dataclasses import dataclass

from textual import on, work
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Horizontal
from textual.message import Message
from textual.widgets import Button, Log, ProgressBar, Select, Static
from textual.worker import get_current_worker

from core.i18n import _
from screens.base import StepScreen
from tui.widgets.diagnosis_box import DiagnosisBox
from tui.widgets.gpu_panel import GpuPanel
from tui.widgets.loss_chart import LossChart

POLL_SECONDS = 1.0
LOG_LINES = 400


class TrainScreen(StepScreen):
    STEP_ID = "train"
    INTRO = _("Runs `llamafactory-cli train` on the Config step's YAML as a detached run: it goes on when you "
              "leave this step, quit devtune or lose the SSH connection, and devtune re-attaches to it.")
    DEFAULT_CSS = """
    TrainScreen #train-bar {
        height: 3;
    }
    TrainScreen #train-bar Select {
        width: 1fr;
        min-width: 30;
    }
    TrainScreen #train-bar Button {
        min-width: 10;
        margin-left: 1;
    }
    TrainScreen #train-progress-row {
        height: 1;
    }
    TrainScreen #train-progress-row ProgressBar {
        width: 42;
    }
    TrainScreen #train-progress {
        width: 1fr;
        padding: 0 1;
    }
    TrainScreen #train-status {
        height: auto;
        padding: 0 1;
        color: $text-muted;
    }
    TrainScreen #train-main {
        height: 1fr;
        min-height: 8;
    }
    TrainScreen LossChart {
        width: 3fr;
    }
    TrainScreen GpuPanel {
        width: 2fr;
        min-width: 36;
        border: round $panel;
    }
    TrainScreen #train-log {
        height: 8;
        border: round $panel;
    }
    TrainScreen.-short #train-log {
        height: 5;
    }
    TrainScreen.-narrow GpuPanel {
        display: none;
    }
    TrainScreen.-narrow.-show-gpus GpuPanel {
        display: block;
        width: 1fr;
    }
    TrainScreen.-narrow.-show-gpus LossChart {
        display: none;
    }
    """
    BINDINGS = [
        Binding("s", "start", _("Start run"), id="train.start", tooltip=_("start training with the current config")),
        Binding("x", "stop", _("Stop run"), id="train.stop",
                tooltip=_("stop after the current step; the adapter is saved")),
        Binding("r", "resume", _("Resume run"), id="train.resume",
                tooltip=_("continue a stopped or failed run from its last checkpoint")),
        Binding("d", "diagnose", _("Diagnose"), id="train.diagnose",
                tooltip=_("explain what went wrong in the selected run, with the fix")),
        Binding("f5", "refresh_runs", _("Refresh runs"), key_display="F5", id="train.refresh"),
        Binding("g", "toggle_gpus", _("Chart / GPUs"), id="train.toggle_gpus",
                tooltip=_("on a narrow terminal, show the GPU panels instead of the chart (and back)")),
    ]

    @dataclass
    class RunsListed(Message):
        runs: list
        select: str | None

    @dataclass
    class Polled(Message):
        run_id: str
        update: object  # core.train.watch.RunUpdate
        series: dict  # name -> (xs, ys) references for the chart
        first: bool

    @dataclass
    class Busy(Message):
        text: str

    def __init__(self) -> None:
        super().__init__()
        self.runs: list = []
        self.run_id: str | None = None
        self.record = None
        self.snapshot = None  # the latest core.train.metrics.ProgressSnapshot of the shown run

    def compose_body(self) -> ComposeResult:
        with Horizontal(id="train-bar"):
            yield Select([], prompt=_("no runs yet"), allow_blank=True, id="train-runs")
            yield Button(_("Start"), variant="primary", id="train-start")
            yield Button(_("Stop"), variant="error", id="train-stop")
            yield Button(_("Resume"), id="train-resume")
        with Horizontal(id="train-progress-row"):
            yield ProgressBar(total=None, show_eta=False, show_percentage=True, id="train-bar-progress")
            yield Static("", id="train-progress")
        yield Static("", id="train-status")
        yield DiagnosisBox(id="train-diagnosis")
        with Horizontal(id="train-main"):
            yield LossChart(id="train-chart")
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
    @work(thread=True, exclusive=True, exit_on_error=False, group="train-runs", description=_("Listing runs"))
    def load_runs(self, select: str | None = None) -> None:
        from core.train.runs import list_runs

        runs = [r for r in list_runs(self.ws) if r.kind == "train"]
        self.post_message(self.RunsListed(runs, select))

    @on(RunsListed)
    def _runs_listed(self, event: RunsListed) -> None:
        self.runs = event.runs
        select = self.query_one("#train-runs", Select)
        from core.train.runs import status_label

        options = [(f"{r.id}  [{status_label(r.status)}]", r.id) for r in event.runs]
        wanted = event.select if any(r.id == event.select for r in event.runs) else (
            event.runs[0].id if event.runs else None)
        with select.prevent(Select.Changed):
            select.set_options(options)
            if wanted:
                select.value = wanted
        if wanted and wanted != self.run_id:
            self.attach(wanted)
        elif not event.runs:
            self._show_no_run()
        self._refresh_buttons()

    def _show_no_run(self) -> None:
        from core.config.files import current_config_path

        path = current_config_path(self.ws)
        if self.ws.abs(path).exists():
            text = _("No run yet. Press s (Start) to train with {path}.", path=path)
        else:
            text = _("No training config yet: make one in step 3 (Config), then come back and press s.")
        self.query_one("#train-status", Static).update(text)

    @on(Select.Changed, "#train-runs")
    def _picked(self, event: Select.Changed) -> None:
        if isinstance(event.value, str) and event.value != self.run_id:
            self.attach(event.value)

    # ------------------------------------------------------------ watching
    def attach(self, run_id: str) -> None:
        self.run_id = run_id
        self.query_one(LossChart).empty_text = None
        self.query_one(LossChart).clear()
        self.query_one("#train-log", Log).clear()
        self.query_one(DiagnosisBox).hide()
        self.query_one("#train-progress", Static).update(_("reading the run's history…"))
        self.watch_run(run_id)
        if self.state.active_run != run_id:
            self.app.remember(active_run=run_id)

    @work(thread=True, exclusive=True, exit_on_error=False, group="train-watch", description=_("Watching the run"))
    def watch_run(self, run_id: str) -> None:
        import time

        from core.train.watch import RunWatcher

        worker = get_current_worker()
        watcher = RunWatcher(self.ws, run_id)
        first = True
        while not worker.is_cancelled:
            update = watcher.poll()
            m = watcher.metrics
            series = {"loss": (m.loss.xs, m.loss.ys), "smoothed": (m.loss_smooth.xs, m.loss_smooth.ys),
                      "eval_loss": (m.eval_loss.xs, m.eval_loss.ys), "lr": (m.lr.xs, m.lr.ys),
                      "resumes": list(m.resumes)}
            if first:
                from core.train.gpu.history import read_history

                update.gpu_samples = read_history(watcher.dir / "gpu.jsonl", max_ticks=120)
            self.post_message(self.Polled(run_id, update, series, first))
            first = False
            deadline = time.monotonic() + (POLL_SECONDS if update.record.active else 5 * POLL_SECONDS)
            while time.monotonic() < deadline and not worker.is_cancelled:
                time.sleep(0.1)

    @on(Polled)
    def _polled(self, event: Polled) -> None:
        if event.run_id != self.run_id:
            return
        u = event.update
        self.record = u.record
        self.snapshot = u.snapshot
        self._show_progress(u)
        chart = self.query_one(LossChart)
        if not u.record.active and chart.empty_text is None:
            chart.empty_text = _("no training step was logged in this run")
            if chart.data.empty:
                chart.clear()  # redraw the empty chart with that text
        if u.metrics_changed or event.first:
            s = event.series
            chart.set_data(loss=s["loss"], smoothed=s["smoothed"], eval_loss=s["eval_loss"], lr=s["lr"],
                           resumes=s["resumes"])
        self._show_gpus(u, event.first)
        if u.log_lines:
            self.query_one("#train-log", Log).write_lines(u.log_lines[-LOG_LINES:])
        box = self.query_one(DiagnosisBox)
        if u.diagnoses:
            box.show_diagnoses(u.diagnoses, u.record.note)
        elif u.record.active:
            box.show_anomalies(list(u.snapshot.anomalies))
        if u.ended_now or event.first:
            self._record_outcome(u)
            if u.ended_now:
                self.load_runs(select=u.record.id)
        self._refresh_buttons()

    def _show_progress(self, u) -> None:
        from core.train.runs import status_label
        from core.train.watch import progress_line

        snap = u.snapshot
        bar = self.query_one("#train-bar-progress", ProgressBar)
        if snap.total:
            bar.update(total=snap.total, progress=snap.step)
        self.query_one("#train-progress", Static).update(progress_line(snap))
        r = u.record
        state = status_label(r.status)
        where = f"{r.output_dir or ''}  ·  {r.config or ''}"
        status = _("Run {id}: {state} — {note}", id=r.id, state=state, note=r.note) if r.note else \
            _("Run {id}: {state}", id=r.id, state=state)
        self.query_one("#train-status", Static).update(f"{status}\n{where}")

    def _show_gpus(self, u, first: bool) -> None:
        panel = self.query_one(GpuPanel)
        if panel.live != u.record.active:
            panel.live = u.record.active
            panel.redraw()
        status = u.gpu_status or {}
        if first and u.gpu_samples:
            panel.load_history(u.gpu_samples, status.get("reason"))
        elif u.gpu_samples:
            from core.train.gpu.history import group_ticks

            for tick in group_ticks(u.gpu_samples):
                panel.update_samples(tick, status.get("reason"))
        elif status.get("state") == "no-gpu" and not panel.no_gpu:
            panel.set_no_gpu(status.get("reason", ""))

    def _record_outcome(self, u) -> None:
        status = u.record.status.value
        if status == "finished":
            self.set_status("done", _("run {id} finished", id=u.record.id))
        elif status == "failed":
            note = u.record.note or _("exit code {code}", code=u.record.exit_code)
            self.set_status("attention", _("run {id} failed: {note}", id=u.record.id, note=note))

    def _refresh_buttons(self) -> None:
        active = bool(self.record and self.record.active)
        self.query_one("#train-stop", Button).disabled = not active
        self.query_one("#train-resume", Button).disabled = active or self.record is None
        self.query_one("#train-start", Button).disabled = active

    # ------------------------------------------------------------ actions
    @on(Button.Pressed, "#train-start")
    def action_start(self) -> None:
        if self.record is not None and self.record.active:
            self.app.notify(_("a run is already going; stop it first"), severity="warning")
            return
        self.start_run()

    @work(thread=True, exclusive=True, exit_on_error=False, group="train-act", description=_("Starting the run"))
    def start_run(self) -> None:
        from core.train.launch import LaunchError, launch_training

        try:
            record = launch_training(self.ws)
        except LaunchError as exc:
            self.app.call_from_thread(self.show_error, str(exc))
            return
        self.app.call_from_thread(self.clear_error)
        self.app.call_from_thread(self.app.notify, _("run {id} started", id=record.id))
        self.post_message(self.RunsListed([record] + [r for r in self.runs if r.id != record.id], record.id))

    @on(Button.Pressed, "#train-stop")
    def action_stop(self) -> None:
        if not (self.record and self.record.active):
            return
        from tui.widgets.confirm import ConfirmScreen

        run_id = self.record.id

        def answered(yes: bool | None) -> None:
            if yes:
                self.stop_run(run_id)

        self.app.push_screen(ConfirmScreen(_("Stop run {id}? It stops after the current step and saves the "
                                             "adapter; you can resume it from its last checkpoint.", id=run_id),
                                           yes=_("Stop")), answered)

    @work(thread=True, exclusive=True, exit_on_error=False, group="train-act", description=_("Stopping the run"))
    def stop_run(self, run_id: str) -> None:
        from core.train.runs import status_label, stop_run

        def say(text: str) -> None:
            self.app.call_from_thread(self.app.notify, text)

        final = stop_run(self.ws, run_id, progress=say)
        say(_("run {id}: {status}", id=final.id, status=status_label(final.status)))

    @on(Button.Pressed, "#train-resume")
    def action_resume(self) -> None:
        if self.record is None or self.record.active:
            return
        self.resume_run(self.record.id)

    @work(thread=True, exclusive=True, exit_on_error=False, group="train-act", description=_("Resuming the run"))
    def resume_run(self, run_id: str) -> None:
        from core.train.runs import RunError, resume_run

        try:
            record = resume_run(self.ws, run_id)
        except RunError as exc:
            self.app.call_from_thread(self.show_error, str(exc))
            return
        self.app.call_from_thread(self.clear_error)
        self.post_message(self.RunsListed([record] + self.runs, record.id))

    def action_diagnose(self) -> None:
        if self.run_id:
            self.diagnose_run(self.run_id)

    @work(thread=True, exclusive=True, exit_on_error=False, group="train-diag", description=_("Diagnosing"))
    def diagnose_run(self, run_id: str) -> None:
        from core.train.watch import RunWatcher

        watcher = RunWatcher(self.ws, run_id)
        found = watcher.diagnose()
        box = self.query_one(DiagnosisBox)
        if found:
            self.app.call_from_thread(box.show_diagnoses, found, watcher.record.note)
        else:
            self.app.call_from_thread(self.app.notify, _("nothing wrong found in this run's logs"))

    def action_refresh_runs(self) -> None:
        self.load_runs(select=self.run_id)
