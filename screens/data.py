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
from textual.widgets import Button, Select, Static, TabbedContent, TabPane

from core.i18n import _
from screens.base import HUMAN_RATE, Job, StepScreen, UserError, step_binding
from tui.widgets.data_actions import DataActions
from tui.widgets.data_file_tree import DataFileTree
from tui.widgets.data_findings import DataFindings
from tui.widgets.data_histogram import DataHistogram
from tui.widgets.data_synth import DataSynth, ReviewTable
from tui.widgets.row_pager import RowPager

AUTO_LINT_BYTES = 64 << 20  # bigger files are linted when asked (l)
FIRST_PAGE = 60  # rows shown at once on opening; paging reads the rest through the index
TEMPLATES = ("llama3", "qwen", "qwen3_nothink", "chatml", "alpaca", "default", "empty")


class DataScreen(StepScreen):
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
    class SynthOutcome:
        output: Path
        chunks: list
        candidates: list
        progress: object
        model: str

    @dataclass
    class Opened:
        preview: object
        rows: list
        painted: threading.Event  # set after the first page is drawn: the index scan waits for it

    @property
    def INTRO(self) -> str:  # noqa: N802 - StepScreen's attribute, translated when shown
        return _("Pick your data file (o). Lint it (F5 or l), then fix (f), convert (v) and register (g) it: every "
                 "write is previewed first. Findings jump to their row (enter).")

    def __init__(self) -> None:
        super().__init__()
        self.synth: DataScreen.SynthOutcome | None = None  # the last generation: its chunks and candidate pairs
        self.synth_stop = threading.Event()
        self.preview = None
        self.opened_at = 0.0
        self.first_page_seconds: float | None = None

    def compose_body(self) -> ComposeResult:
        with Horizontal(id="data-main"):
            with Vertical(id="data-left"):
                tree = DataFileTree(self.ws.root, id="data-tree")
                tree.border_title = _("workspace")
                yield tree
                yield Static(_("no file open"), id="data-file-info", markup=False)
            with TabbedContent(id="data-tabs", initial="tab-rows"):
                with TabPane(_("Rows"), id="tab-rows"):
                    yield RowPager(id="data-rows")
                    with Horizontal(id="data-prompt-bar"):
                        yield Static(_("the highlighted row as the template renders it"), id="data-prompt-title")
                        yield Select([(t, t) for t in TEMPLATES], value="llama3", allow_blank=False,
                                     id="data-template")
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
                    yield DataSynth(id="data-synth")

    def on_mount(self) -> None:
        template = self.state.settings.get("data.template", "llama3")
        self.template = template if template in TEMPLATES else "llama3"
        self._load_servers()
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
        self.query_one("#data-file-info", Static).update(_("opening {name}…", name=self.path.name))
        self.query_one(DataActions).set_file(Path(self.ws.rel(self.path)))
        self.run_background(self._open, self.path, group="data-open", description=_("Opening the file"),
                            progress=self._opening, done=self._indexed)

    @staticmethod
    def _open(job: Job, path: Path) -> Path:
        from core.data.preview import Preview

        preview = Preview(path)
        rows = preview.first_page(FIRST_PAGE)
        preview.schema  # decided here, not in the UI thread
        painted = threading.Event()
        job.report(DataScreen.Opened(preview, rows, painted))
        painted.wait(timeout=2.0)  # the index scan starts once the first page is on screen
        last = [0.0]

        def progress(done: int, total: int) -> None:
            now = time.monotonic()
            if now - last[0] > HUMAN_RATE:
                last[0] = now
                job.report((done, total))

        preview.build(progress, cancelled=lambda: job.cancelled)
        return path

    def _opening(self, value) -> None:
        if isinstance(value, DataScreen.Opened):
            self._show_first_page(value)
            return
        done, total = value
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
        self._load_servers()
        self.query_one(DataFileTree).reload()
        if self.path is not None and self.path.is_file():
            self.open_file(self.path)

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
        if self.state.settings.get("data.template", "llama3") != template:
            self.app.remember(settings={**self.state.settings, "data.template": template})

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
    def _lint(job: Job, path: Path, ws) -> tuple[Path, object]:
        from core.data.lint import LintOptions, lint_file
        from core.data.parallel_scan import jobs_for
        from core.data.register import refresh_summary

        opts = LintOptions(jobs=jobs_for(path.stat().st_size), start_method="spawn")
        report = lint_file(path, opts)
        refresh_summary(report, path, ws.data_dir, ws.root)
        return path, report

    def _linted(self, result: tuple[Path, object]) -> None:
        path, report = result
        if path == self.path:
            self.report = report

    def watch_report(self, report) -> None:
        self.query_one(DataFindings).show(report.findings if report is not None else [])
        if report is None:
            return
        self.query_one("#data-file-info", Static).update(_(
            "{name}\n{rows:,} rows · {format}\n{encoding} · {layout}\n{e} errors · {w} warnings", name=self.path.name,
            rows=report.rows, format=report.format, encoding=report.encoding, layout=report.layout,
            e=report.errors, w=report.warnings))
        self._show_stats(report)
        if report.errors:
            self.set_status("attention", _("{name}: {n} lint errors", name=self.path.name, n=report.errors))

    def _show_stats(self, report) -> None:
        s = report.stats
        lines = [_("{rows:,} rows can train · tokens ({source}) p50 {p50} · p95 {p95} · max {max}", rows=s.rows,
                   source=s.token_source, p50=s.tokens["p50"], p95=s.tokens["p95"], max=s.tokens["max"]),
                 _("{n:,} rows above cutoff_len {cutoff} ({pct:.1%}) · {d:,} duplicates · {c:,} conflicts",
                   n=s.over_cutoff, cutoff=s.cutoff_len, pct=s.over_cutoff_share, d=s.duplicates, c=s.conflicts),
                 _("languages: {langs}", langs=", ".join(f"{k} {v:.0%}" for k, v in s.languages.items())),
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

    def _jump(self, line: int) -> None:
        if self.preview is None:
            return
        self.query_one("#data-tabs", TabbedContent).active = "tab-rows"
        self.query_one(RowPager).goto(self.preview.position_of_line(line))

    def action_open_tree(self) -> None:
        self.query_one(DataFileTree).focus()

    # ---- fix / convert / register --------------------------------------------------------------
    def action_fix_preview(self) -> None:
        self._request("fix")

    def action_convert_preview(self) -> None:
        self._request("convert")

    def action_register_preview(self) -> None:
        self._request("register")

    def _request(self, action: str) -> None:
        """Show the action's form and preview its result. The focus moves into the form first: otherwise
        hiding the focused row table would hand the focus (and with it the tab) back to the Rows tab."""
        self.query_one("#data-tabs", TabbedContent).active = "tab-actions"
        actions = self.query_one(DataActions)
        actions.query_one(f"#{action}-preview", Button).focus()
        actions.request(action, write=False)

    @on(DataActions.Requested)
    def _requested(self, event: DataActions.Requested) -> None:
        path = self.path
        if path is None:
            self.app.notify(_("open a file first (o)"), timeout=3)
            return
        if event.write and event.action == "fix" and event.yes:
            from tui.widgets.confirm import ConfirmScreen

            question = _("Also apply the fixes that need a confirmation (transcode, rename keys, numbers to text, "
                         "drop empty outputs, mask personal data) and write {out}?", out=event.output)
            self.app.push_screen(ConfirmScreen(question), lambda ok: self._act(event, path) if ok else None)
            return
        self._act(event, path)

    def _act(self, req: DataActions.Requested, path: Path) -> None:
        self.run_background(self._run_action, req, path, self.ws, group="data-act", exclusive=False,
                            description=_("Fix / convert / register"), done=lambda done: self._acted(req, done))

    @staticmethod
    def _run_action(job: Job, req: DataActions.Requested, path: Path, ws):
        from core.data import actions

        return actions.run(req.action, path, write=req.write, output=req.output, yes=req.yes,
                           source_format=req.source_format, name=req.name, holdout=req.holdout, ws_root=ws.root,
                           dataset_dir=ws.data_dir)

    def _acted(self, req: DataActions.Requested, done) -> None:
        self.query_one(DataActions).show_result(done.lines, done.rows, error=done.error)
        if done.error or not req.write:
            return
        if req.action == "register":
            res = done.result
            self.app.remember(dataset_file=self.ws.rel(self.path), dataset_name=res.name)
            self.set_status("done", _("dataset {name}: {rows} rows, {e} errors, {w} warnings", name=res.name,
                                      rows=res.report.rows, e=res.report.errors, w=res.report.warnings))
        else:
            self.query_one(DataFileTree).reload()
            written = Path(done.result.output)
            self.app.notify(_("wrote {path}; it is open now: lint it, then register it", path=self.ws.rel(written)),
                            timeout=6)
            self.open_file(written)


    # ---- from documents ------------------------------------------------------------------------
    def action_from_documents(self) -> None:
        self.query_one("#data-tabs", TabbedContent).active = "tab-synth"
        self.query_one("#synth-sources").focus()

    def action_synth_stop(self) -> None:
        self.synth_stop.set()

    def _load_servers(self) -> None:
        self.run_background(self._live_servers, self.ws, group="data-servers", description=_("Reading the servers"),
                            done=self._servers_loaded)

    @staticmethod
    def _live_servers(job: Job, ws) -> tuple[list[tuple[str, str]], str | None]:
        from core.serve.servers import list_servers

        servers = [(f"{r.id} · {r.served_name}", r.id) for r in list_servers(ws)]
        try:
            active = ws.load_state().active_server
        except Exception:  # a damaged state file must not hide the servers
            active = None
        return servers, active

    def _servers_loaded(self, found) -> None:
        servers, active = found
        self.query_one(DataSynth).set_servers(servers, active)

    @on(DataSynth.Requested)
    def _synth_requested(self, event: DataSynth.Requested) -> None:
        view = self.query_one(DataSynth)
        if event.action == "stop":
            self.action_synth_stop()
            return
        if event.action == "write":
            self._synth_write(event.output)
            return
        if not event.sources:
            view.status(_("name the documents or a folder first"), error=True)
            return
        self.clear_error()
        if event.action == "chunks":
            view.status(_("reading the documents…"))
            self.run_background(self._plan, event.sources, self.ws, group="data-synth-plan",
                                description=_("Reading the documents"), done=self._planned,
                                failed=lambda e: view.status(str(e), error=True))
            return
        if not event.server:
            view.status(_("no server to ask: start one in the Playground step or with `devtune serve MODEL` "
                          "(the base model is fine), then ^r"), error=True)
            return
        if not event.output:
            view.status(_("name the dataset file to write, e.g. data/from_docs.jsonl"), error=True)
            return
        self.synth_stop.clear()
        view.status(_("starting…"))
        self.run_background(self._generate, event.sources, event.output, event.server, self.ws, self.synth_stop,
                            group="data-synth", description=_("Generating pairs"), progress=self._synth_progress,
                            done=self._generated, failed=lambda e: view.status(str(e), error=True))

    @staticmethod
    def _source_paths(sources: str, ws) -> list[Path]:
        import shlex

        try:
            names = shlex.split(sources)
        except ValueError:
            names = sources.split()
        return [p if p.is_absolute() else ws.abs(p) for p in (Path(n).expanduser() for n in names)]

    @staticmethod
    def _plan(job: Job, sources: str, ws):
        from core.data.synth.documents import DocumentError
        from core.data.synth.pipeline import plan_chunks

        try:
            return plan_chunks(DataScreen._source_paths(sources, ws))
        except DocumentError as exc:
            raise UserError(str(exc)) from exc

    def _chunk_rows(self, chunks) -> list[tuple]:
        return [(Path(c.doc).name, c.index, c.tokens, c.page or "", c.heading, c.preview(120)) for c in chunks]

    def _planned(self, plan) -> None:
        view = self.query_one(DataSynth)
        view.show_chunks(self._chunk_rows(plan.chunks))
        view.status(_("{chunks} chunks from {docs} documents; pick the server and Generate", chunks=len(plan.chunks),
                      docs=len(plan.documents)))

    @staticmethod
    def _generate(job: Job, sources: str, output: str, server: str, ws, stop: threading.Event):
        import dataclasses

        from core.data.synth.dataset import collect, review
        from core.data.synth.documents import DocumentError
        from core.data.synth.generate import Generator, SynthError, SynthOptions
        from core.data.synth.journal import Journal, journal_path
        from core.data.synth.pipeline import plan_chunks, resolve_endpoint
        from core.data.synth.prompts import PromptError, workspace_prompts

        try:
            plan = plan_chunks(DataScreen._source_paths(sources, ws))
            job.report(plan)
            endpoint = resolve_endpoint(ws, server=server)
            prompts = workspace_prompts(ws.configs_dir)
        except (DocumentError, SynthError, PromptError) as exc:
            raise UserError(str(exc)) from exc
        out = ws.abs(output)
        options = SynthOptions()
        last = [0.0]

        def progress(p) -> None:
            now = time.monotonic()
            if now - last[0] >= HUMAN_RATE:
                last[0] = now
                job.report(dataclasses.replace(p))

        journal = Journal(journal_path(out))
        try:
            state = Generator(endpoint, prompts, journal, options, progress=progress,
                              cancelled=lambda: job.cancelled or stop.is_set()).run(plan.chunks)
        except SynthError as exc:
            raise UserError(str(exc)) from exc
        candidates = collect(plan.chunks, journal, endpoint.model, prompts, options)
        review(candidates)
        return DataScreen.SynthOutcome(out, plan.chunks, candidates, state, endpoint.model)

    def _synth_progress(self, value) -> None:
        view = self.query_one(DataSynth)
        if hasattr(value, "chunks"):  # the plan, first
            view.show_chunks(self._chunk_rows(value.chunks))
            return
        view.status(value.line())

    def _generated(self, outcome: SynthOutcome) -> None:
        from core.data.synth.filters import DEFAULT_GROUNDING

        self.synth = outcome
        p = outcome.progress
        kept = sum(1 for c in outcome.candidates if c.kept)
        stopped = {"cancelled": _("stopped"), "max-requests": _("request cap reached"),
                   "max-tokens": _("token cap reached")}.get(p.stopped, _("done"))
        self.query_one(DataSynth).status(_(
            "{stopped}: {line}\n{kept} of {n} pairs pass the filters (grounding ≥ {t}); review them (a accept · x "
            "reject · e edit), then Write", stopped=stopped, line=p.line(), kept=kept, n=len(outcome.candidates),
            t=DEFAULT_GROUNDING))
        self._show_pairs()
        self.query_one(ReviewTable).focus()

    def _show_pairs(self) -> None:
        if self.synth is None:
            return
        self.query_one(DataSynth).show_pairs([(c.decision, c.kept, c.reason, c.pair.grounding, c.pair.question,
                                               c.pair.answer, c.chunk.text) for c in self.synth.candidates])

    def on_review_table_decided(self, message: ReviewTable.Decided) -> None:
        if self.synth is None or not 0 <= message.row < len(self.synth.candidates):
            return
        candidate = self.synth.candidates[message.row]
        candidate.decision = "" if candidate.decision == message.decision else message.decision
        self._show_pairs()

    def on_review_table_edit_asked(self, message: ReviewTable.EditAsked) -> None:
        self.query_one(DataSynth).open_edit(message.row)

    def on_data_synth_edited(self, message: DataSynth.Edited) -> None:
        if self.synth is None or not 0 <= message.row < len(self.synth.candidates):
            return
        if not message.question.strip() or not message.answer.strip():
            self.query_one(DataSynth).status(_("an edited pair needs a question and an answer"), error=True)
            return
        self.synth.candidates[message.row].edit(message.question, message.answer)
        self._show_pairs()

    def _synth_write(self, output: str) -> None:
        view = self.query_one(DataSynth)
        if self.synth is None:
            view.status(_("generate the pairs first (Generate)"), error=True)
            return
        out = self.ws.abs(output) if output else self.synth.output
        if not any(c.kept for c in self.synth.candidates):
            view.status(_("no pair is kept: accept some (a) before writing"), error=True)
            return
        if out.exists():
            from tui.widgets.confirm import ConfirmScreen

            self.app.push_screen(ConfirmScreen(_("{path} exists. Replace it with the reviewed pairs?",
                                                 path=self.ws.rel(out))),
                                 lambda ok: self._write_pairs(out, True) if ok else None)
            return
        self._write_pairs(out, False)

    def _write_pairs(self, out: Path, force: bool) -> None:
        self.run_background(self._write_dataset, out, self.synth.candidates, force, group="data-synth-write",
                            description=_("Writing the pairs"), done=self._pairs_written)

    @staticmethod
    def _write_dataset(job: Job, out: Path, candidates: list, force: bool):
        from core.data.synth.dataset import write_dataset

        return write_dataset(out, candidates, force=force)

    def _pairs_written(self, files) -> None:
        self.query_one(DataSynth).status(_("wrote {rows} pairs to {path} ({rejects} with the rest, {prov} with the "
                                           "source of each row)", rows=files.rows, path=self.ws.rel(files.output),
                                           rejects=self.ws.rel(files.rejects), prov=self.ws.rel(files.provenance)))
        self.query_one(DataFileTree).reload()
        self.app.notify(_("wrote {path}; it is open now: lint it, then register it", path=self.ws.rel(files.output)),
                        timeout=6)
        self.open_file(files.output)
