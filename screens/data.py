"""Step 1, Data: pick a file, preview its rows (as a table and as the prompt the chosen template
renders), lint it (findings jump to their row), fix / convert / register it with a preview before
anything is written, and read its statistics with a length histogram. "From documents" turns manuals,
policies and FAQs (md, txt, html, docx, pdf) into question–answer pairs through a server, reviewed pair by pair
beside their source chunk before the file is written (core/data/synth).

A big file shows its first page at once: the line index is built in a worker while the person reads,
and paging reads only the visible rows. Lint of a big file runs in worker processes, so the UI stays live.
"""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass
from pathlib import Path

from textual import on
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Horizontal, Vertical, VerticalScroll
from textual.reactive import var
from textual.widgets import Select, Static, TabbedContent, TabPane

from core.i18n import _, said_n
from core.settings import Preferences
from screens.base import Coalesce, Job, Progress, StepScreen, step_binding
from screens.data_act import DataActing
from screens.data_opened import OpenedNote
from screens.data_synth import DocumentsPane
from tui.widgets.data_actions import DataActions
from tui.widgets.data_file_tree import DataFileTree
from tui.widgets.data_findings import DataFindings
from tui.widgets.data_histogram import DataHistogram
from tui.widgets.row_pager import RowPager
from tui.widgets.step_guide import StepGuide
from tui.widgets.titled import TitledSelect, titled

AUTO_LINT_BYTES = 64 << 20  # bigger files are linted when asked (l)
FIRST_PAGE = 60  # rows shown at once on opening; paging reads the rest through the index
TEMPLATES = ("llama3", "qwen", "qwen3_nothink", "chatml", "alpaca", "default", "empty")


class DataScreen(DataActing, StepScreen):
    STEP_ID = "data"
    CSS_PATH = "../tui/styles/data.tcss"
    BINDINGS = [
        step_binding("data", "run", "lint", _("Lint"), tooltip=_("check the file against every rule")),
        Binding("l", "lint", _("Lint"), id="data.lint", show=False),
        step_binding("data", "refresh", "reload", _("Reload files"),
                     tooltip=_("read the workspace's files again, and the open file")),
        Binding("o", "open_tree", _("Files"), id="data.files", tooltip=_("choose a file in the workspace")),
        Binding("f", "fix_preview", _("Fix"), id="data.fix",
                tooltip=_("preview the fixed file; Write in the Fix & register tab writes it")),
        Binding("v", "convert_preview", _("Convert"), id="data.convert",
                tooltip=_("preview the file converted to alpaca JSON Lines")),
        Binding("g", "register_preview", _("Register"), id="data.register",
                tooltip=_("preview the dataset_info.json entry for this file")),
        Binding("t", "next_template", _("Template"), id="data.template",
                tooltip=_("render the preview with the next chat template")),
        Binding("j", "jump", _("Jump to row"), id="data.jump",
                tooltip=_("show the row of the highlighted finding")),
        Binding("k", "keep_value", _("Keep contact"), id="data.keep",
                tooltip=_("the highlighted personal-data finding is the business's own public contact: keep it "
                          "(.devtune/keep.txt), unreported and unmasked")),
        Binding("a", "speaker_roles", _("Speaker roles"), id="data.roles",
                tooltip=_("a chat export: say which speakers answer (agents) and which ask (customers), then preview "
                          "the conversion with those roles")),
        Binding("d", "from_documents", _("From documents"), id="data.documents",
                tooltip=_("generate question–answer pairs from documents through a server")),
        step_binding("data", "stop", "synth_stop", _("Stop generating"),
                     tooltip=_("stop generating pairs (what was answered is kept in the journal)")),
    ]

    # what the screen shows follows these
    path: var[Path | None] = var(None)
    report = var(None)  # the open file's core.data lint report, once linted
    template: var[str] = var("llama3")
    current_row = var(None, always_update=True)  # the highlighted core.data.preview.PreviewRow

    @dataclass
    class Opened:
        preview: object
        rows: list
        painted: threading.Event  # set after the first page is drawn: the index scan waits for it

    @dataclass
    class Indexing(Progress, coalesce=Coalesce.LATEST):
        done: int
        total: int

    @property
    def INTRO(self) -> str:  # noqa: N802 - StepScreen's attribute, translated when shown
        return _("Pick your data file (o): JSON Lines, JSON, CSV, a spreadsheet (.xlsx, .ods) or a chat export "
                 "(WeChat, WeCom, WhatsApp, helpdesk...). Lint it (F5 or l), then fix (f), convert (v) and register "
                 "(g) it: every write is previewed first. Findings jump to their row (enter); a chat export's roles "
                 "are set with a.")

    def __init__(self) -> None:
        super().__init__()
        self._mark_before_lint: tuple[str, str] | None = None  # the step's mark that lint errors replaced
        self.preview = None
        self.opened_at = 0.0
        self.first_page_seconds: float | None = None
        self.roles: tuple[tuple[str, ...], tuple[str, ...]] = ((), ())  # a chat export's speakers as the person said

    def compose_body(self) -> ComposeResult:
        with Horizontal(id="data-main"):
            with Vertical(id="data-left"):
                tree = DataFileTree(self.ws.root, id="data-tree")
                tree.border_title = _("workspace")
                yield tree
                yield Static(_("no file open"), id="data-file-info", markup=False)
                yield OpenedNote(id="data-opened")
            with TabbedContent(id="data-tabs", initial="tab-rows"):
                with TabPane(_("Rows"), id="tab-rows"):
                    yield RowPager(id="data-rows")
                    with Horizontal(id="data-prompt-bar"):
                        yield Static(_("the highlighted row as the template renders it"), id="data-prompt-title")
                        yield titled(TitledSelect([(t, t) for t in TEMPLATES], value="llama3", allow_blank=False,
                                                  id="data-template"), _("template"))
                    with VerticalScroll(id="data-prompt"):
                        yield Static("", id="data-prompt-text", markup=False)
                with TabPane(_("Findings"), id="tab-findings"):
                    yield DataFindings(id="data-findings")
                with TabPane(_("Stats"), id="tab-stats"):
                    with VerticalScroll():
                        yield Static(_("lint the file to see its statistics"), id="data-stats-text", markup=False)
                        yield DataHistogram(id="data-hist-tokens")
                        yield DataHistogram(id="data-hist-output")
                with TabPane(_("Fix & register"), id="tab-actions"):
                    yield DataActions(id="data-actions")
                with TabPane(_("From documents"), id="tab-synth"):
                    yield DocumentsPane(id="data-synth")

    # ---- from documents (screens/data_synth.py's pane does the work) ---------------------------------
    def action_from_documents(self) -> None:
        self.query_one("#data-tabs", TabbedContent).active = "tab-synth"
        self.query_one("#synth-sources").focus()

    def action_synth_stop(self) -> None:
        self.query_one(DocumentsPane).stop()

    def on_tabbed_content_tab_activated(self, event: TabbedContent.TabActivated) -> None:
        if event.pane is not None and event.pane.id == "tab-synth":
            self.query_one(DocumentsPane).load_servers()

    def on_documents_pane_written(self, message: DocumentsPane.Written) -> None:
        self.query_one(DataFileTree).reload()
        self.open_file(message.output)

    def on_screen_resume(self) -> None:
        super().on_screen_resume()
        self.query_one(DocumentsPane).load_servers()  # a server started in another step shows in "From documents"

    def on_mount(self) -> None:
        template = Preferences.of(self.state.settings).data_template
        self.template = template if template in TEMPLATES else "llama3"
        remembered = self.state.dataset_file
        if remembered and self.ws.abs(remembered).is_file():
            self.open_file(self.ws.abs(remembered))
        else:
            self.query_one(DataFileTree).focus()

    # ---- opening ------------------------------------------------------------------------------
    def on_directory_tree_file_selected(self, event: DataFileTree.FileSelected) -> None:
        event.stop()
        self.open_file(Path(event.path))

    def open_file(self, path: Path) -> None:
        self.clear_error()
        self.preview = None
        self.report = None
        self.current_row = None
        self.path = Path(path)
        self.opened_at = time.perf_counter()
        self.first_page_seconds = None
        self.roles = ((), ())
        self.query_one("#data-file-info", Static).update(_("opening {name}…", name=self.path.name))
        self.query_one(OpenedNote).detect(self.path)
        self.query_one(DataActions).set_file(Path(self.ws.rel(self.path)))
        self.run_background(self._open, self.path, group="data-open", description=_("Opening the file"),
                            progress=self._opening, done=self._indexed)

    @staticmethod
    def _open(job: Job, path: Path) -> Path:
        from core.data.opened import pages_rows
        from core.data.preview import Preview

        if not pages_rows(path):  # a workbook: its rows are the convert preview's (OpenedNote.Detected)
            return path

        preview = Preview(path)
        rows = preview.first_page(FIRST_PAGE)
        _schema = preview.schema  # decided here, not in the UI thread
        painted = threading.Event()
        job.report(DataScreen.Opened(preview, rows, painted))
        painted.wait(timeout=2.0)  # the index scan starts once the first page is on screen
        preview.build(lambda done, total: job.report(DataScreen.Indexing(done, total)), cancelled=lambda: job.cancelled)
        return path

    def _opening(self, value) -> None:
        if isinstance(value, DataScreen.Opened):
            self._show_first_page(value)
            return
        done, total = value.done, value.total  # Indexing: only the newest counts
        pager = self.query_one(RowPager)
        pager.refresh_title()
        pct = int(100 * done / total) if total else 100
        pager.border_subtitle = (pager.border_subtitle or "") + f" · {pct}%"

    def _show_first_page(self, opened: Opened) -> None:
        self.preview = opened.preview
        pager = self.query_one(RowPager)
        pager.border_title = str(self.ws.rel(self.path))
        pager.show(opened.preview, opened.rows)
        self.current_row = opened.rows[0] if opened.rows else None  # the cursor's row, also if it did not move
        self.first_page_seconds = time.perf_counter() - self.opened_at
        probe = opened.preview.probe
        self.query_one("#data-file-info", Static).update(_(
            "{name}\n{size:,} bytes · {layout}\n{encoding}\n{reason}", name=self.path.name, size=probe.size,
            layout=probe.layout, encoding=probe.encoding.encoding, reason=probe.encoding.reason))
        self.query_one("#data-tabs", TabbedContent).active = "tab-rows"
        pager.focus()
        self.call_after_refresh(opened.painted.set)

    def _indexed(self, path: Path) -> None:
        self.query_one(RowPager).refresh_title()
        if path.stat().st_size <= AUTO_LINT_BYTES:
            self.action_lint()

    def action_reload(self) -> None:
        self.query_one(DocumentsPane).load_servers()
        self.query_one(DataFileTree).reload()
        if self.path is not None and self.path.is_file():
            self.open_file(self.path)

    # ---- what the file is: a chat export's speakers, a workbook (screens/data_opened.py) ---------------
    def on_opened_note_detected(self, message: OpenedNote.Detected) -> None:
        from core.data.opened import WORKBOOK

        if message.opened.kind == WORKBOOK:
            pager = self.query_one(RowPager)
            pager.clear(columns=True)
            pager.preview, pager.rows_now = None, []
            pager.border_title = str(self.ws.rel(self.path))
            pager.border_subtitle = _("a workbook: its rows are in the convert preview (Fix & register)")
            self._request("convert")

    def action_speaker_roles(self) -> None:
        if not self.query_one(OpenedNote).ask_roles():
            self.app.notify(_("the open file is no chat export: it has no speakers to set roles for"), timeout=3)

    def on_opened_note_roles_chosen(self, message: OpenedNote.RolesChosen) -> None:
        self.roles = (message.agents, message.customers)
        self._request("convert")

    # ---- preview of the prompt -----------------------------------------------------------------
    def on_row_pager_row_chosen(self, message: RowPager.RowChosen) -> None:
        self.current_row = message.row

    @on(Select.Changed, "#data-template")
    def _template_changed(self, event: Select.Changed) -> None:
        self.template = str(event.value)

    def watch_template(self, template: str) -> None:
        select = self.query_one("#data-template", Select)
        if select.value != template:
            select.value = template
        self._render_prompt()
        prefs = Preferences.of(self.state.settings)
        if prefs.data_template != template:
            self.app.remember(settings=prefs.stored(data_template=template))

    def watch_current_row(self, _row) -> None:
        self._render_prompt()

    def _render_prompt(self) -> None:
        from core.data.render import render_row

        box = self.query_one("#data-prompt-text", Static)
        row = self.current_row
        if row is None or self.preview is None:
            box.update("")
            return
        if row.value is None:
            box.update(row.error or "")
            return
        box.update(render_row(row.value, self.preview.schema, self.template))

    def action_next_template(self) -> None:
        self.template = TEMPLATES[(TEMPLATES.index(self.template) + 1) % len(TEMPLATES)]

    # ---- lint --------------------------------------------------------------------------------
    def action_lint(self) -> None:
        if self.path is None:
            self.app.notify(_("open a file first (o)"), timeout=3)
            return
        self.query_one("#data-file-info", Static).update(_("linting {name}…", name=self.path.name))
        self.run_background(self._lint, self.path, self.ws, group="data-lint", description=_("Linting the file"),
                            done=self._linted)

    @staticmethod
    def _lint(job: Job, path: Path, ws):
        from core.data.lint import LintOptions, lint_file
        from core.data.parallel_scan import jobs_for
        from core.data.register import refresh_summary

        from core.config.workspace_cutoff import workspace_cutoff_len

        opts = LintOptions(cutoff_len=workspace_cutoff_len(ws), jobs=jobs_for(path.stat().st_size),
                           start_method="spawn")
        report = lint_file(path, opts)
        refresh_summary(report, path, ws.data_dir, ws.root)
        return report

    def _linted(self, report) -> None:  # core.data.lint.LintReport, of the file it names
        if Path(report.file) == self.path:
            self.report = report

    def watch_report(self, report) -> None:
        self.query_one(DataFindings).show(report.findings if report is not None else [])
        self._say_now(report)
        if report is None:
            return
        from core.data.wording import counted

        self.query_one("#data-file-info", Static).update(_(
            "{name}\n{rows} · {format}\n{encoding} · {layout}\n{errors} · {warnings}", name=self.path.name,
            rows=counted("row", report.rows), format=report.format, encoding=report.encoding, layout=report.layout,
            errors=counted("error", report.errors), warnings=counted("warning", report.warnings)))
        self._show_stats(report)

    def _say_now(self, report) -> None:
        """The status line and the step's mark speak of the open file: its lint errors while it has some; a
        clean file takes them back (the mark the errors replaced, or the registered dataset's own)."""
        guide = self.query_one(StepGuide)
        if report is not None and report.errors:
            text = said_n("{name}: {n} lint error", "{name}: {n} lint errors", report.errors, name=Path(report.file).name)
            saved = self.state.step(self.STEP_ID)
            if self._mark_before_lint is None and saved.status.value != "attention":
                self._mark_before_lint = (saved.status.value, saved.shown_summary())
            guide.show_now("attention", text)
            self.set_status("attention", text)
            return
        guide.show_now(None)
        if report is None or self.state.step(self.STEP_ID).status.value != "attention":
            return
        if self.state.dataset_file and self.ws.abs(self.state.dataset_file).resolve() == Path(report.file).resolve():
            from core.data.register import registered

            self.app.apply_change(registered(self.state.dataset_file, self.state.dataset_name or "", report))
        else:
            status, summary = self._mark_before_lint or ("not_started", "")
            self.set_status(status, summary)
        self._mark_before_lint = None

    def _show_stats(self, report) -> None:
        from core.data.wording import language_shares, token_source_label

        s = report.stats
        lines = [_("{rows:,} rows can train · tokens ({source}) p50 {p50} · p95 {p95} · max {max}", rows=s.rows,
                   source=token_source_label(s.token_source), p50=s.tokens["p50"], p95=s.tokens["p95"],
                   max=s.tokens["max"]),
                 _("{n:,} rows above cutoff_len {cutoff} ({pct:.1%}) · {d:,} duplicates · {c:,} conflicts",
                   n=s.over_cutoff, cutoff=s.cutoff_len, pct=s.over_cutoff_share, d=s.duplicates, c=s.conflicts),
                 _("languages: {langs}", langs=language_shares(s.languages, sep=", ")),
                 ""]
        lines += [f"{name:<12} p50 {p['p50']:>6}  p90 {p['p90']:>6}  p99 {p['p99']:>6}  max {p['max']:>6}"
                  for name, p in s.fields.items()]
        self.query_one("#data-stats-text", Static).update("\n".join(lines))
        self.query_one("#data-hist-tokens", DataHistogram).show(s.token_bins, title=_("tokens per row"),
                                                               cutoff=s.cutoff_len)
        out_field = list(s.length_bins)[-1] if s.length_bins else None
        self.query_one("#data-hist-output", DataHistogram).show(
            s.length_bins.get(out_field, []), title=_("{field} length (characters)", field=out_field or "output"))

    # ---- findings → rows ---------------------------------------------------------------------
    def on_data_findings_jump_to_line(self, message: DataFindings.JumpToLine) -> None:
        self._jump(message.line)

    def action_jump(self) -> None:
        findings = self.query_one(DataFindings)
        if findings.highlighted is not None and findings.highlighted < len(findings.lines):
            self._jump(findings.lines[findings.highlighted])

    def action_keep_value(self) -> None:
        """The highlighted finding's values on the workspace's keep list (core.data.pii_keep), then lint again."""
        from core.data.pii_keep import KEEP_FILE, add_keep

        i = self.query_one(DataFindings).highlighted
        found = self.report.findings[i] if self.report is not None and i is not None and i < len(
            self.report.findings) else None
        if found is None or not found.values:
            self.app.notify(_("highlight a personal-data finding to keep its value (k)"), timeout=3)
            return
        add_keep(self.ws.root, list(found.values))
        self.app.notify(_("kept as the business's own contact details ({file}): {values}", file=str(KEEP_FILE),
                          values=", ".join(found.values)), timeout=4)
        self.action_lint()

    def _jump(self, line: int) -> None:
        if self.preview is None:
            return
        self.query_one("#data-tabs", TabbedContent).active = "tab-rows"
        self.query_one(RowPager).goto(self.preview.position_of_line(line))

    def action_open_tree(self) -> None:
        self.query_one(DataFileTree).focus()
