"""The Data step's "From documents" pane: `DocumentsPane`, tui/widgets/data_synth.py's view with its own
background work (tui/widgets/background.py): documents read and chunked, pairs generated through a server
(journaled, core/data/synth's `generate_pairs`), reviewed pair by pair beside their source chunk — every decision
saved beside the journal as it is made, and restored when the same documents are generated again — and written.
What the work hands back is typed: the plan (`ChunkPlan`), the generation (`SynthOutcome`), the written files
(`DatasetFiles`), the servers to ask (`ServerChoices`), and its progress as `SynthStarted` / `SynthCounted`
items. The pane says what it wrote with `DocumentsPane.Written`; the step opens that file. Nothing here parses
a file.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from textual.message import Message

from core.data.synth.outcome import SynthOutcome, skipped_lines
from core.i18n import _, _n
from screens.base import Coalesce, Job, Progress, StepScreen, UserError
from tui.widgets.background import BackgroundWork
from tui.widgets.data_synth import DataSynth, ReviewTable

if TYPE_CHECKING:
    from core.data.synth.dataset import DatasetFiles
    from core.data.synth.generate import SynthProgress
    from core.data.synth.pipeline import ChunkPlan

__all__ = ["DocumentsPane", "ServerChoices", "SynthCounted", "SynthOutcome", "SynthSettings", "SynthStarted",
           "synth_settings"]


@dataclass
class ServerChoices:
    """The live servers a generation can ask, as (label, id), and the one the workspace uses."""

    servers: list[tuple[str, str]]
    active: str | None


@dataclass
class SynthStarted(Progress, coalesce=Coalesce.LATEST):
    """The generation has its plan: the chunks it asks about."""

    plan: ChunkPlan


@dataclass
class SynthCounted(Progress, coalesce=Coalesce.LATEST):
    """The generation's counts so far: only the newest is shown."""

    progress: SynthProgress


@dataclass
class SynthSettings:
    options: object  # core.data.synth.generate.SynthOptions
    min_grounding: float


def synth_settings(fields: dict[str, str]) -> SynthSettings:
    """The view's option fields, checked: UserError naming the field and what it takes."""
    from core.data.synth.generate import SynthOptions

    def number(key: str, title: str, *, cast=int, low=1, high=None, blank=None):
        text = fields.get(key, "").strip()
        if not text:
            return blank
        try:
            value = cast(text)
        except ValueError:
            value = None
        if value is None or value < low or (high is not None and value > high):
            raise UserError(_("{field}: {text!r} is not a number from {low} to {high}", field=title, text=text,
                              low=low, high=high if high is not None else "∞"))
        return value

    concurrency = number("concurrency", _("concurrency"), high=256, blank=8)
    options = SynthOptions(concurrency=concurrency, max_requests=number("max-requests", _("max requests")),
                           max_tokens=number("max-tokens", _("max tokens")))
    grounding = number("min-grounding", _("min grounding"), cast=float, low=0, high=1, blank=0.5)
    return SynthSettings(options, grounding)


class DocumentsPane(BackgroundWork, DataSynth):
    """The view, and the work behind it: what the person asks (`DataSynth.Requested`) runs here."""

    @dataclass
    class Written(Message):
        """The reviewed pairs were written to `output` (the step opens it)."""

        output: Path

    def __init__(self, *args, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        self.synth: SynthOutcome | None = None  # the last generation: its chunks and candidate pairs
        self.synth_stop = threading.Event()

    @property
    def ws(self):
        return self.app.ws

    @property
    def synth_running(self) -> bool:
        """A Generate is under way (Write waits for it, Generate is not started twice)."""
        return any(w.group == "data-synth" and w.node is self and not w.is_finished for w in self.workers)

    def stop(self) -> None:
        self.synth_stop.set()

    def on_mount(self) -> None:
        self.load_servers()

    def _clear_step_error(self) -> None:
        if isinstance(self.screen, StepScreen):
            self.screen.clear_error()

    # ---- servers --------------------------------------------------------------------------------
    def load_servers(self) -> None:
        """Read the live servers again (a server started in another step shows here)."""
        self.run_background(self._live_servers, self.ws, group="data-servers", description=_("Reading the servers"),
                            done=self._servers_loaded)

    @staticmethod
    def _live_servers(job: Job, ws) -> ServerChoices:
        from core.serve.servers import list_servers

        servers = [(f"{r.id} · {r.served_name}", r.id) for r in list_servers(ws)]
        try:
            active = ws.load_state().active_server
        except Exception:  # a damaged state file must not hide the servers
            active = None
        return ServerChoices(servers, active)

    def _servers_loaded(self, found: ServerChoices) -> None:
        self.set_servers(found.servers, found.active)

    # ---- what the view asks ---------------------------------------------------------------------
    def on_data_synth_requested(self, event: DataSynth.Requested) -> None:
        event.stop()
        if event.action == "stop":
            self.stop()
            return
        if event.action == "write":
            self._synth_write(event.output)
            return
        if not event.sources:
            self.status(_("name the documents or a folder first"), error=True)
            return
        self._clear_step_error()
        if event.action == "chunks":
            self.status(_("reading the documents…"))
            self.run_background(self._plan, event.sources, self.ws, group="data-synth-plan",
                                description=_("Reading the documents"), done=self._planned,
                                failed=lambda e: self.status(str(e), error=True))
            return
        if self.synth_running:
            text = _("pairs are being generated already: Stop first to start again")
            self.status(text, error=True)
            self.app.notify(text, severity="warning", timeout=6)
            return
        if not event.server:
            self.status(_("no server to ask: start one in the Playground step or with `devtune serve MODEL` "
                          "(the base model is fine), then ^r"), error=True)
            return
        if not event.output:
            self.status(_("name the dataset file to write, e.g. data/from_docs.jsonl"), error=True)
            return
        try:
            settings = synth_settings(event.options)
        except UserError as exc:
            self.status(str(exc), error=True)
            return
        self.synth_stop.clear()
        self.status(_("starting…"))
        self.run_background(self._generate, event.sources, event.output, event.server, settings, self.ws,
                            self.synth_stop, group="data-synth", description=_("Generating pairs"),
                            progress=self._synth_progress, done=self._generated,
                            failed=lambda e: self.status(str(e), error=True))

    @staticmethod
    def _source_paths(sources: str, ws) -> list[Path]:
        import shlex

        try:
            names = shlex.split(sources)
        except ValueError:
            names = sources.split()
        return [p if p.is_absolute() else ws.abs(p) for p in (Path(n).expanduser() for n in names)]

    @staticmethod
    def _plan(job: Job, sources: str, ws) -> ChunkPlan:
        from core.data.synth.pipeline import plan_chunks

        return plan_chunks(DocumentsPane._source_paths(sources, ws))

    @staticmethod
    def _chunk_cells(chunks) -> list[tuple]:
        return [(Path(c.doc).name, c.index, c.tokens, c.page or "", c.heading, c.preview(120)) for c in chunks]

    def _planned(self, plan: ChunkPlan) -> None:
        self.show_chunks(self._chunk_cells(plan.chunks))
        self.status("\n".join([_("{chunks} chunks from {docs} documents; pick the server and Generate",
                                 chunks=len(plan.chunks), docs=len(plan.documents))] + skipped_lines(plan.skipped)))

    # ---- generating -----------------------------------------------------------------------------
    @staticmethod
    def _generate(job: Job, sources: str, output: str, server: str, settings: SynthSettings, ws,
                  stop: threading.Event) -> SynthOutcome:
        """The form as core's request; the generation is core's (`generate_pairs`), then the saved review."""
        import dataclasses

        from core.data.synth.pipeline import SynthRequest, generate_pairs

        request = SynthRequest(DocumentsPane._source_paths(sources, ws), ws.abs(output), settings.options,
                               settings.min_grounding, server=server)
        outcome = generate_pairs(ws, request, started=lambda start: job.report(SynthStarted(start.plan)),
                                 progress=lambda p: job.report(SynthCounted(dataclasses.replace(p))),
                                 cancelled=lambda: job.cancelled or stop.is_set())
        outcome.restore_review()
        return outcome

    def _synth_progress(self, item: SynthStarted | SynthCounted) -> None:
        if isinstance(item, SynthStarted):  # the plan, first
            self.show_chunks(self._chunk_cells(item.plan.chunks))
        elif isinstance(item, SynthCounted):
            self.status(item.progress.line())

    def _generated(self, outcome: SynthOutcome) -> None:
        self.synth = outcome
        p = outcome.progress
        kept = sum(1 for c in outcome.candidates if c.kept)
        stopped = {"cancelled": _("stopped"), "max-requests": _("request cap reached"),
                   "max-tokens": _("token cap reached")}.get(p.stopped, _("done"))
        lines = [_("{stopped}: {line}\n{kept} of {n} pairs pass the filters (grounding ≥ {t}); review them (a accept · "
                   "x reject · e edit), then Write", stopped=stopped, line=p.line(), kept=kept,
                   n=len(outcome.candidates), t=outcome.min_grounding)]
        if outcome.restored:
            lines.append(_n("{n} review decision restored from {path}", "{n} review decisions restored from {path}",
                            outcome.restored, path=self.ws.rel(outcome.reviews.path)))
        if outcome.reviews is not None and outcome.reviews.unreadable:
            lines.append(_("the saved review {path} could not be read ({error}); it is replaced at the next decision",
                           path=self.ws.rel(outcome.reviews.path), error=outcome.reviews.unreadable))
        self.status("\n".join(lines + skipped_lines(outcome.skipped)))
        self._show_pairs()
        self.query_one(ReviewTable).focus()

    # ---- review ---------------------------------------------------------------------------------
    def _show_pairs(self) -> None:
        if self.synth is None:
            return
        self.show_pairs([(c.decision, c.kept, c.reason, c.pair.grounding, c.pair.question,
                                               c.pair.answer, c.chunk.text) for c in self.synth.candidates])

    def _save_review(self) -> None:
        reviews = self.synth.reviews if self.synth is not None else None
        if reviews is None:
            return
        seq, text = reviews.record(self.synth.candidates)
        self.run_background(self._write_review, reviews, seq, text, group="data-synth-review", exclusive=False,
                            description=_("Saving the review"))

    @staticmethod
    def _write_review(job: Job, reviews, seq: int, text: str) -> None:
        try:
            reviews.write(seq, text)
        except OSError as exc:
            raise UserError(_("cannot save the review to {path}: {error}", path=reviews.path,
                              error=exc.strerror or exc)) from exc

    def on_review_table_decided(self, message: ReviewTable.Decided) -> None:
        if self.synth is None or not 0 <= message.row < len(self.synth.candidates):
            return
        candidate = self.synth.candidates[message.row]
        candidate.decision = "" if candidate.decision == message.decision else message.decision
        self._show_pairs()
        self._save_review()

    def on_review_table_edit_asked(self, message: ReviewTable.EditAsked) -> None:
        self.open_edit(message.row)

    def on_data_synth_edited(self, message: DataSynth.Edited) -> None:
        if self.synth is None or not 0 <= message.row < len(self.synth.candidates):
            return
        if not message.question.strip() or not message.answer.strip():
            self.status(_("an edited pair needs a question and an answer"), error=True)
            return
        self.synth.candidates[message.row].edit(message.question, message.answer)
        self._show_pairs()
        self._save_review()

    # ---- writing --------------------------------------------------------------------------------
    def _synth_write(self, output: str) -> None:
        if self.synth_running:  # the pairs on show are the last run's: writing them now would be a surprise
            text = _("pairs are still being generated: wait until they are done (or Stop), review them, then Write")
            self.status(text, error=True)
            self.app.notify(text, severity="warning", timeout=6)  # the progress line soon covers the status
            return
        if self.synth is None:
            self.status(_("generate the pairs first (Generate)"), error=True)
            return
        out = self.ws.abs(output) if output else self.synth.output
        if not any(c.kept for c in self.synth.candidates):
            self.status(_("no pair is kept: accept some (a) before writing"), error=True)
            return
        if out.exists():
            from tui.widgets.confirm import ConfirmScreen

            self.app.push_screen(ConfirmScreen(_("{path} exists. Replace it with the reviewed pairs?",
                                                 path=self.ws.rel(out))),
                                 lambda ok: self._write_pairs(out, True) if ok else None)
            return
        self._write_pairs(out, False)

    def _write_pairs(self, out: Path, force: bool) -> None:
        self.run_background(self._write_dataset, out, self.synth.candidates, force, self.synth.min_grounding,
                            group="data-synth-write", description=_("Writing the pairs"), done=self._pairs_written)

    @staticmethod
    def _write_dataset(job: Job, out: Path, candidates: list, force: bool, min_grounding: float) -> DatasetFiles:
        from core.data.synth.dataset import write_dataset

        return write_dataset(out, candidates, force=force, min_grounding=min_grounding)

    def _pairs_written(self, files: DatasetFiles) -> None:
        self.status(_("wrote {rows} pairs to {path} ({rejects} with the rest, {prov} with the source of each row)",
                      rows=files.rows, path=self.ws.rel(files.output), rejects=self.ws.rel(files.rejects),
                      prov=self.ws.rel(files.provenance)))
        self.app.notify(_("wrote {path}; it is open now: lint it, then register it", path=self.ws.rel(files.output)),
                        timeout=6)
        self.post_message(self.Written(files.output))
