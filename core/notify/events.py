"""What a notification says: one `NotifyEvent`, built by core.notify.run_events (a run's end, a stall, an eval)
or by `devtune notify test`, and rendered by core.notify.formats for each platform. `to_dict()` is the event as
the generic JSON target and a command target receive it."""

from __future__ import annotations

import socket
import time
from dataclasses import asdict, dataclass, field

from core.i18n import _

FINISHED = "finished"
FAILED = "failed"
STALLED = "stalled"
EVAL_WORSE = "eval-worse"
TEST = "test"
KINDS = (FINISHED, FAILED, STALLED, EVAL_WORSE)  # what a target can subscribe to (a test goes to every target)
SCHEMA = "devtune.notify/1"


@dataclass
class NotifyEvent:
    kind: str  # finished | failed | stalled | eval-worse | test
    run: str | None = None  # the run id (an eval: the run it evaluated, when known)
    run_kind: str = "train"  # train | export | eval
    workspace: str = ""
    host: str = field(default_factory=socket.gethostname)
    time: float = field(default_factory=time.time)
    config: str | None = None  # the YAML it trained with, workspace-relative
    status: str | None = None
    exit_code: int | None = None
    duration_s: float | None = None
    step: int | None = None
    total_steps: int | None = None
    last_loss: float | None = None
    cause: str | None = None  # failed: the diagnosis's one line; stalled: why it is a stall
    fix: str | None = None  # failed: the diagnosis's fix
    note: str = ""  # how the run ended, in words (run.json's note), or the eval's verdict line
    eval_id: str | None = None

    def to_dict(self) -> dict:
        return {"schema": SCHEMA, **asdict(self)}

    def title(self) -> str:
        what = self.run or self.eval_id or ""
        if self.kind == FINISHED:
            return (_("devtune: export {run} finished", run=what) if self.run_kind == "export"
                    else _("devtune: run {run} finished", run=what))
        if self.kind == FAILED:
            return (_("devtune: export {run} failed", run=what) if self.run_kind == "export"
                    else _("devtune: run {run} failed", run=what))
        if self.kind == STALLED:
            return _("devtune: run {run} has stalled", run=what)
        if self.kind == EVAL_WORSE:
            return _("devtune: eval {id}: the tuned model is worse than its base", id=self.eval_id or what)
        return _("devtune: a test notification from {host}", host=self.host)

    def lines(self) -> list[str]:
        """The body, a fact a line, in the reader's language (the supervisor's)."""
        out = []
        if self.kind == TEST:
            out.append(_("notifications from this workspace arrive here"))
        if self.cause:
            out.append(_("cause: {cause}", cause=self.cause))
        if self.fix:
            out.append(_("fix: {fix}", fix=self.fix))
        if self.note and self.note != self.cause:
            out.append(self.note)
        if self.config:
            out.append(_("config: {config}", config=self.config))
        if self.step is not None:
            out.append(_("step {step} of {total}", step=self.step, total=self.total_steps)
                       if self.total_steps else _("step {step}", step=self.step))
        if self.last_loss is not None:
            out.append(_("last loss: {loss:.4f}", loss=self.last_loss))
        if self.duration_s is not None:
            out.append(_("duration: {duration}", duration=duration_words(self.duration_s)))
        if self.exit_code not in (None, 0):
            out.append(_("exit code: {code}", code=self.exit_code))
        out.append(_("host: {host} · workspace: {path}", host=self.host, path=self.workspace or "-"))
        return out

    def text(self) -> str:
        return "\n".join([self.title(), *self.lines()])


def duration_words(seconds: float) -> str:
    seconds = int(max(0, seconds))
    h, rest = divmod(seconds, 3600)
    m, s = divmod(rest, 60)
    if h:
        return _("{h} h {m:02d} min", h=h, m=m)
    if m:
        return _("{m} min {s:02d} s", m=m, s=s)
    return _("{s} s", s=s)
